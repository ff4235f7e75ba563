"""``vmap`` of a staged loop (``loops.while_primitive._WhileLoop``): its batching rule.

Plain Python meaning (``jax.vmap`` of a loop, each lane on its own)::

    for lane in range(size):
        while cond(x[lane]):
            x[lane] = body(x[lane])

The carries that must be batched are found as ``lax.while_loop`` finds them (over a
probe axis: ``Batched.batched_carries``). With an unbatched condition the loop runs
its body batched; with a batched one it runs while any lane runs, the finished lanes
keeping their values (``_batch_masked``, lockstep), or as ``loops.lane_loop`` schedules
its lanes when it is compiled. The loops it stages are loops of the same kind
(``self.loops()``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from . import lanes
from ..common import counting
from .. import jax as jx

# loops.lane_loop.build, set where it is imported (it subclasses the loop primitive): a
# loop under vmap with a batched condition, its lanes scheduled when it is compiled
lane_loops = None


class Batched:
    """The batching rule of ``_WhileLoop`` (a mixin: it reads the loop's ``_cond``,
    ``_body``, ``loops()``, jaxprs, avals, ``lanes``, ``effects`` and ``checkpoints``)."""

    def batched_carries(self, axis_data, in_cc, in_bc, batched):
        """``(batched, pred_batched)`` under ``vmap`` of ``axis_data``: which carries are
        batched (those batched at the start, and those the body makes batched, to a
        fixed point, as ``lax.while_loop`` does) and whether the condition is.

        Found by batching the body and the condition over a probe axis
        (``jx.probe_axis``): a loop in the body batched over it only says which of its
        results are batched, without building its batched form; batching it for real
        at each round of the fixed point, and each loop in its body at each of its own
        rounds, grew with the nest's depth. Memoized per loop."""
        memo = self.__dict__.setdefault("_batched_carries", {})
        key = (axis_data.size, in_cc, in_bc, batched)
        hit = memo.get(key)
        if hit is not None:
            return hit
        probe, found = jx.probe_axis(axis_data), None
        if probe is not None:
            try:
                found = self._fixed_point(probe, in_cc, in_bc, batched)
            except Exception:  # noqa: BLE001 - (a body that names the real axis: batched for real)
                pass
        if found is None:
            found = self._fixed_point(axis_data, in_cc, in_bc, batched)
        memo[key] = found
        return found

    def _fixed_point(self, axis_data, in_cc, in_bc, batched):
        """``batched_carries`` found by batching over ``axis_data`` itself."""
        cond_closed, body_closed = self.closed_jaxprs
        for _ in range(len(batched) + 1):
            _, out = jx.batch_jaxpr(body_closed, axis_data, in_bc + batched, False)
            new = tuple(a or b for a, b in zip(batched, out))
            if new == batched:
                break
            batched = new
        _, (pred,) = jx.batch_jaxpr(cond_closed, axis_data, in_cc + batched, False)
        return batched, pred

    @property
    def closed_jaxprs(self):
        """``(cond, body)`` as ``ClosedJaxpr``s, made once: JAX caches ``batch_jaxpr`` by
        the jaxpr object, so that a loop batched again with the same batched inputs (a
        loop in a loop's body, batched at each round of the outer loop's search for its
        batched carries) is not traced again. A new object at each call was a miss each
        time: ``vmap(grad)`` of a loop nested three deep traced its bodies' batching
        2,944 times (composing fuzzer, seed 18879)."""
        pair = self.__dict__.get("_closed_jaxprs")
        if pair is None:
            pair = self.__dict__["_closed_jaxprs"] = (jx.closed(self.cond_jaxpr),
                                                      jx.closed(self.body_jaxpr))
        return pair

    def batch(self, axis_data, args, dims):
        size = axis_data.size
        cc, bc, carry = args
        dcc, dbc, dcarry = dims

        def moved(x, d):
            return x if d is None else jnp.moveaxis(jnp.asarray(x), d, 0)

        in_cc = tuple(d is not None for d in dcc)
        in_bc = tuple(d is not None for d in dbc)
        batched, pred_batched = self.batched_carries(axis_data, in_cc, in_bc,
                                                     tuple(d is not None for d in dcarry))
        if jx.is_probe_axis(axis_data):
            # (asked only which results are batched: see batched_carries)
            flags = batched if not pred_batched else \
                tuple(not inv for inv in self.shared_carries(batched)[0])
            outs = tuple(_zeros(((size,) if f else ()) + a.shape, a)
                         for f, a in zip(flags, self.out_aval))
            return outs, tuple(0 if f else None for f in flags)
        cc = tuple(moved(x, d) for x, d in zip(cc, dcc))
        bc = tuple(moved(x, d) for x, d in zip(bc, dbc))
        carry = tuple((jnp.broadcast_to(x, (size,) + jnp.shape(x)) if d is None else moved(x, d))
                      if b else x for x, d, b in zip(carry, dcarry, batched))

        def ax(flags):
            return tuple(0 if f else None for f in flags)
        def vcond(cc, x, running=None):
            # (`running`: the lanes whose loop still runs; only they may print or
            # raise in the test, as only they reach it in Python: `lanes.mask_for`)
            return lanes.vmap(self._cond, (ax(in_cc), ax(batched)),
                              0 if pred_batched else None, size, running)(cc, x)
        vbody = jax.vmap(self._body, (ax(in_bc), ax(batched)), ax(batched), axis_size=size)

        if not pred_batched:
            # (the lane mask is not applied here: it would make shared carries
            # batched, and the enclosing batching rule decided their axes without it)
            out = self.loops()(lambda x: vcond(cc, x), lambda x: vbody(bc, x), carry,
                               checkpoints=self.checkpoints)
            return tuple(out), ax(batched)
        needed = lanes.mask_for(axis_data)  # lanes whose results are read (None: all)
        if lane_loops is not None and self.lanes != "lockstep" and not self.effects:
            # the lanes scheduled when compiled: lockstep, flat, compacted (lane_loop)
            go0 = jnp.broadcast_to(vcond(cc, carry), (size,))
            return lane_loops(self, size, cc, bc, go0 if needed is None else go0 & needed,
                              carry, batched, in_cc, in_bc)
        return self._batch_masked(size, cc, bc, carry, batched, vcond, needed,
                                  ax(in_bc), ax(batched))

    def shared_carries(self, batched):
        """Under ``vmap``, for the carries ``batched``: ``(invariant, shadowed)``, whether
        each carry is a shared one the body passes through unchanged (it stays an
        unbatched output), and the indices of the other shared carries (each lane's
        final value is a batched copy the loop writes: see ``_batch_masked``)."""
        body = self.body_jaxpr.jaxpr if isinstance(self.body_jaxpr, jx.ClosedJaxpr) \
            else self.body_jaxpr
        nbc = len(self.in_avals[1])
        invariant = tuple((not b) and body.outvars[j] is body.invars[nbc + j]
                          for j, b in enumerate(batched))
        return invariant, tuple(j for j, b in enumerate(batched) if not b and not invariant[j])

    def lockstep_step(self, size, vcond, bc_axes, x_axes, batched, shadowed):
        """One step of the loop's ``size`` lanes in lockstep: ``(cc, bc, go, x, shadow) ->
        (go, x, shadow)``; the lanes where ``go`` is False keep their values."""
        def per_lane(go, v):
            return go.reshape((size,) + (1,) * (jnp.ndim(v) - 1))

        def step(cc, bc, go, x, shadow):
            new = lanes.vmap(self._body, (bc_axes, x_axes), x_axes, size, go)(
                held(go, bc, [a == 0 for a in bc_axes]),
                held(go, x, [b and j not in self.free for j, b in enumerate(batched)])
            )  # (a free carry: its own, which the body writes per lane)
            # (a free carry: the body writes it only where the lane runs; see
            # _WhileLoop.free)
            x = tuple(jnp.where(per_lane(go, n), n, o) if b and j not in self.free else n
                      for j, (n, o, b) in enumerate(zip(new, x, batched)))
            shadow = tuple(jnp.where(per_lane(go, s), x[j], s) for j, s in zip(shadowed, shadow))
            return go & vcond(cc, x, go), x, shadow
        return step

    def _batch_masked(self, size, cc, bc, carry, batched, vcond, needed, bc_axes, x_axes):
        """The loop under ``vmap`` with a batched condition: it runs while any
        lane runs, and a lane that has finished keeps its values.

        The lanes still running have all run the same number of steps, so a
        carry the body computes from unbatched values only (a loop counter) is
        the same in all of them: it stays one shared value, which the condition
        and the body read, and each lane's final value is a batched copy the
        loop only writes (``where(running, new, old)``). A per-lane ``running``
        mask is carried, updated once per step by the condition (the loop's own
        condition only reduces it), as equinox/optimistix batch their loops.
        Lanes outside ``needed`` (see ``runtime/loops/lanes.py``) do not run at all,
        and the loops inside the body run only for the lanes still running."""
        invariant, shadowed = self.shared_carries(batched)
        step = self.lockstep_step(size, vcond, bc_axes, x_axes, batched, shadowed)

        def bcond(state):
            return counting.any_(state[0])

        def bbody(state):
            return step(cc, bc, *state)

        shadow0 = tuple(jnp.broadcast_to(carry[j], (size,) + jnp.shape(carry[j]))
                        for j in shadowed)
        go0 = vcond(cc, carry, needed)
        go0 = jnp.broadcast_to(go0 if needed is None else go0 & needed, (size,))
        go, x, shadow = self.loops()(bcond, bbody, (go0, tuple(carry), shadow0),
                                     checkpoints=self.checkpoints)
        out = list(x)
        for j, s in zip(shadowed, shadow):
            out[j] = s
        return tuple(out), tuple(None if invariant[j] else 0 for j in range(len(out)))


def held(go, values, batched):
    """``values`` (batched on axis 0 where ``batched``) as a step's body reads them: where
    the step is differentiated, a finished lane's (``go`` False) replaced by a running
    lane's, with no derivative (``_held``). The finished lane's step is computed and
    dropped; on its own values, where the loop's test stopped it (``sqrt`` of a
    negative), the body may have no derivative, and the zero cotangent of the dropped
    step times that is NaN. Not differentiated, the values are read as they are: no
    search for a running lane at every step (it cost the batched bisection of
    ``benchmarks/real_algorithms.py`` 12 -> 32 us a call)."""
    return tuple(_held(go, v) if b and jnp.issubdtype(jnp.result_type(v), jnp.inexact) else v
                 for v, b in zip(values, batched))


@jax.custom_jvp
def _held(go, v):
    return v


@_held.defjvp
def _held_jvp(primals, tangents):
    go, v = primals
    keep = go.reshape(go.shape + (1,) * (v.ndim - go.ndim))
    first = jnp.argmax(go)  # a running lane (a step runs while one does)
    t = tangents[1]
    return jnp.where(keep, v, v[first]), jnp.where(keep, t, jnp.zeros_like(t))


def _zeros(shape, aval):
    """Zeros of ``shape``, of ``aval``'s dtype and weak type."""
    z = jnp.zeros(shape, aval.dtype)
    return jx.convert_weak(z, aval.dtype) if getattr(aval, "weak_type", False) else z
