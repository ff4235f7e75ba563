"""A ``lax.while_loop`` that ``jax.grad`` can differentiate, with no bound on its trip count.

Plain Python meaning (what ``while_loop`` computes)::

    def while_loop(cond, body, carry):
        while cond(carry):
            carry = body(carry)
        return carry

Staged, it is one JAX primitive (a ``jax.experimental.hijax.VJPHiPrimitive``)
whose rules differ by transformation, chosen by JAX when it transforms it, so it
does not matter where ``jit`` or ``vmap`` sit around it:

* evaluated, lowered or ``jit``-compiled: exactly ``lax.while_loop`` (the
  same compiled program: no cost when nobody differentiates);
* forward mode (``jax.jvp``, ``jax.jacfwd``, ``jax.linearize``): the
  ``lax.while_loop`` JVP (a loop over primal and tangent, itself one of these
  loops, so that ``jax.grad`` of a ``jax.jvp`` works);
* reverse mode (``jax.grad``, ``jax.vjp``): online checkpointing with a budget
  of ``checkpoints`` carries. The forward pass runs the loop and saves the
  carry every ``stride`` steps in at most ``checkpoints // 2`` slots (the trip
  count is not known in advance: when the slots are full, every other save is
  dropped and the stride doubles). The backward pass reverses the steps from
  the last to the first: a short gap above the nearest save is recomputed into
  a sweep buffer and reversed; a long one is cut into parts, saving their ends
  in free slots (as many parts as the free slots allow over the levels of
  cutting the gap needs: ``_split``). Memory grows with ``checkpoints`` (all
  saved carries, the sweep buffer and one scratch carry together), not with
  the trip count ``N``; each step is recomputed about once more per level of
  cutting (1,000 steps: 3.5 evaluations of the body per step in all, forward
  pass included; 10,000: 4; 100,000: 5, with the default 64). The loops of the backward pass are these loops too (``jax.grad`` of
  ``jax.grad``), and recompute the body without its debug callbacks (prints
  and checks ran in the forward pass).
* ``vmap``: the carries that must be batched are (as ``lax.while_loop``
  does); with a batched condition, a loop that runs while any element runs,
  the finished ones keeping their values; itself one of these loops.

* ``jax.checkpoint`` (remat, any policy) around such a loop, under ``jax.grad``:
  remat differentiates what it wraps through the JVP rule and partially
  evaluates the result, which needs the primal results known. The JVP loop
  (``_JvpLoop``) is split there into the primal loop and a tangent loop
  (``_LoopTangent``) whose transpose is the checkpointed backward pass above,
  as JAX splits its own ``while`` loop (see ``_install_remat_rule``).
"""

from __future__ import annotations

import contextlib
import threading
import weakref

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from ._jax_compat import checkpoint_internals, control_flow_primitives, remat_internals

_internals = checkpoint_internals()
# Where JAX has no user-defined primitives (before jax.experimental.hijax), a
# data-dependent loop is a plain lax.while_loop (see `while_loop`).
AVAILABLE = _internals is not None
if AVAILABLE:
    VJPHiPrimitive, _core, _ad_util, _pe, _batching = _internals
    from . import lanes, lowjit

    lowjit.install()  # staged as low equations: jax.jit keeps its fast path
else:  # pragma: no cover - exercised by the old-JAX CI stage
    VJPHiPrimitive, _core, _ad_util, _pe, _batching = object, None, None, None, None
_WHILE_P = (control_flow_primitives() or (None, None))[0] if AVAILABLE else None

DEFAULT_CHECKPOINTS = 64


def _trace(fn, avals):
    """``fn(*carry)`` as a jaxpr taking ``(*consts, *carry)``, and the consts."""
    closed = jax.make_jaxpr(fn)(*[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals])
    jaxpr = _pe.convert_constvars_jaxpr(closed.jaxpr)
    return jaxpr, tuple(closed.consts)


def _unread_inputs(jaxpr, avals):
    """``jaxpr`` with inputs of ``avals`` after its own, which it does not read
    (None where a jaxpr cannot be extended so)."""
    try:
        return jaxpr.replace(invars=[*jaxpr.invars, *(_core.Var(a) for a in avals)])
    except (AttributeError, TypeError, AssertionError):  # pragma: no cover - another JAX
        return None


def _placed_inputs(jaxpr, first, made, avals):
    """``jaxpr`` (inputs: consts and carries, the first ``first``, then the inputs its
    trace made) with an input per added carry after its carries: the one made for
    it or one it does not read, of ``avals`` (None where a jaxpr cannot be given
    other inputs). ``made``: ``(per carry, order)``, the tracer the trace made for
    each added carry (or None), and all it made, in the order it made them (the
    order of the jaxpr's inputs)."""
    per_carry, order = made
    own = jaxpr.invars[first:]
    if len(own) != len(order) or sorted(map(id, order)) != sorted(
            id(t) for t in per_carry if t is not None):  # pragma: no cover
        raise AssertionError("loop body: the inputs made while tracing it are not its carries'")
    var_of = dict(zip(map(id, order), own))  # (in the order the trace made them)
    try:
        return jaxpr.replace(invars=[*jaxpr.invars[:first], *(
            var_of[id(t)] if t is not None else _core.Var(a) for t, a in zip(per_carry, avals))])
    except (AttributeError, TypeError, AssertionError):  # pragma: no cover - another JAX
        return None


def _closed(jaxpr):
    return jaxpr if isinstance(jaxpr, _core.ClosedJaxpr) else _core.ClosedJaxpr(jaxpr, ())


def _run(jaxpr, consts, carry):
    if isinstance(jaxpr, _core.ClosedJaxpr):
        return _core.jaxpr_as_fun(jaxpr)(*consts, *carry)
    return _core.eval_jaxpr(jaxpr, (), *consts, *carry)


# What the backward pass recomputes must not print again, nor check again: the
# forward pass did. `_quiet` is a loop body with its debug callbacks (autoflow's
# `print`, `assert` and staged `raise` checks, the user's `jax.debug.print`) left out.

def _quiet_eval(jaxpr, consts, args):
    env = {}

    def read(v):
        return v.val if isinstance(v, _core.Literal) else env[v]

    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x
    for e in jaxpr.eqns:
        if e.primitive.name in ("debug_callback", "debug_print"):
            continue
        params = dict(e.params)
        for k, v in params.items():
            if isinstance(v, _core.ClosedJaxpr) and v.effects:
                params[k] = _quiet_closed(v)
            elif isinstance(v, tuple) and v and all(isinstance(j, _core.ClosedJaxpr) for j in v) \
                    and any(j.effects for j in v):
                params[k] = tuple(_quiet_closed(j) for j in v)
            elif isinstance(v, _WhileLoop) and v.effects:
                params[k] = v.quiet()
        bind_params = e.primitive.get_bind_params(params)
        with e.ctx.manager:
            outs = e.primitive.bind(*map(read, e.invars), **bind_params)
        if not e.primitive.multiple_results:
            outs = [outs]
        for v, x in zip(e.outvars, outs):
            env[v] = x
    return [read(v) for v in jaxpr.outvars]


def _quiet_closed(closed):
    """``closed`` (a ClosedJaxpr) without its debug callbacks."""
    jaxpr = closed.jaxpr if isinstance(closed, _core.ClosedJaxpr) else closed
    consts = closed.consts if isinstance(closed, _core.ClosedJaxpr) else ()
    specs = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype,
                                  weak_type=getattr(v.aval, "weak_type", False))
             for v in jaxpr.invars]
    return jax.make_jaxpr(lambda *a: _quiet_eval(jaxpr, consts, a))(*specs)


def _inexact(aval):
    return jnp.issubdtype(aval.dtype, jnp.inexact)


def _zeros_like_aval(aval):
    return jnp.zeros(aval.shape, aval.dtype)


def _floats(avals):
    """The positions of the inexact (differentiable) values among ``avals``."""
    return tuple(i for i, a in enumerate(avals) if _inexact(a))


def _tangents_of(in_avals):
    """For a loop's ``(cc, bc, x)`` avals: the positions of the inexact values of
    ``bc`` and ``x``, and the avals of their tangents."""
    _, bc_av, x_av = in_avals
    fb, fi = _floats(bc_av), _floats(x_av)
    return (fb, fi, tuple(bc_av[i].to_tangent_aval() for i in fb),
            tuple(x_av[i].to_tangent_aval() for i in fi))


def _specs(avals):
    return [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]


def _instantiate(tangents, avals):
    return tuple(jnp.zeros(a.shape, a.to_tangent_aval().dtype) if isinstance(t, _ad_util.Zero)
                 else t for t, a in zip(tangents, avals))


class _WhileLoop(VJPHiPrimitive):
    """``while cond(carry): carry = body(carry)`` over flat tuples of arrays."""

    stage_low = True  # see runtime/lowjit.py

    def __init__(self, cond_jaxpr, body_jaxpr, in_avals, checkpoints, effects, gated=False):
        self.in_avals = in_avals  # (cond consts, body consts, carry): tuples of avals
        self.out_aval = in_avals[2]
        self.params = dict(cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr,
                           checkpoints=checkpoints)
        self.effects = effects
        # gated: its condition holds the branch's predicate (lowering.loop_gate), so
        # in the branch a select does not take it runs no iteration
        self.gated = gated
        super().__init__()
        self.quiet_body = _quiet_closed(body_jaxpr) if effects else body_jaxpr

    # -- meaning --------------------------------------------------------------

    def _cond(self, cc, x):
        return _run(self.cond_jaxpr, cc, x)[0]

    def _body(self, bc, x):
        return tuple(_run(self.body_jaxpr, bc, x))

    def _recompute(self, bc, x):
        """The body as the backward pass recomputes it (no callbacks)."""
        return tuple(_run(self.quiet_body, bc, x))

    def quiet(self):
        """This loop without debug callbacks."""
        if not self.effects:
            return self
        return _WhileLoop(_quiet_closed(self.cond_jaxpr), self.quiet_body, self.in_avals,
                          self.checkpoints, frozenset())

    def expand(self, cc, bc, carry):
        if _WHILE_P is not None:
            # The loop's jaxprs as they are, without tracing them again: lowering a
            # nest of loops and ifs then costs one pass over it.
            return tuple(_WHILE_P.bind(*cc, *bc, *carry, cond_nconsts=len(cc),
                                       cond_jaxpr=_closed(self.cond_jaxpr),
                                       body_nconsts=len(bc), body_jaxpr=_closed(self.body_jaxpr)))
        return tuple(lax.while_loop(lambda x: self._cond(cc, x),
                                    lambda x: self._body(bc, x), tuple(carry)))

    def low_form(self, platforms=()):
        """JAX's ``while`` of the loop's jaxprs, for ``lowjit``'s lowering rule."""
        if _WHILE_P is None:
            return None
        return ("while", dict(cond_nconsts=len(self.in_avals[0]),
                              cond_jaxpr=_closed(self.cond_jaxpr),
                              body_nconsts=len(self.in_avals[1]),
                              body_jaxpr=_closed(self.body_jaxpr)))

    # -- forward mode -----------------------------------------------------------

    def jvp(self, primals, tangents):
        # The JVP loop carries (primal, tangent) and is one of these loops too
        # (`_JvpLoop`), so that it can be reverse-differentiated in turn
        # (jax.grad of jax.jvp), and split by jax.checkpoint (`_JvpLoop.partial_eval`).
        cc, bc, x = primals
        _, tbc, tx = (_instantiate(t, a) for t, a in zip(tangents, self.in_avals))
        fb, fi = _floats(self.in_avals[1]), _floats(self.in_avals[2])
        out = self.jvp_loop()(tuple(cc), tuple(bc) + tuple(tbc[i] for i in fb),
                              tuple(x) + tuple(tx[i] for i in fi))
        nx = len(x)
        ty = [_ad_util.Zero(a.to_tangent_aval()) for a in self.in_avals[2]]
        for i, t in zip(fi, out[nx:]):
            ty[i] = t
        return tuple(out[:nx]), tuple(ty)

    def jvp_loop(self):
        """The loop over (primal, tangent) that computes this loop's JVP."""
        loop = self.__dict__.get("_jvp")
        if loop is None:
            loop = self.__dict__["_jvp"] = _JvpLoop(self)
        return loop

    def lin(self, nzs_in, *primals):
        return self.expand(*primals), primals

    def linearized(self, residuals, *tangents):
        tangents = tuple(_instantiate(t, a) for t, a in zip(tangents, self.in_avals))
        return jax.jvp(self.expand, residuals, tangents)[1]

    # -- reverse mode -----------------------------------------------------------

    def vjp_fwd(self, nzs_in, cc, bc, carry):
        out, saved = _forward(self._cond, self._body, cc, bc, tuple(carry), self.checkpoints)
        return out, (cc, bc, saved)

    def vjp_bwd_retval(self, res, out_ct):
        cc, bc, saved = res
        carry_avals = self.in_avals[2]
        out_ct = _instantiate(out_ct, carry_avals)
        ct_bc, ct_carry = _backward(self._recompute, bc, saved, out_ct, self.in_avals[1],
                                    carry_avals, self.checkpoints)
        def zero(a):
            return _ad_util.Zero(a.to_ct_aval())
        return (tuple(zero(a) for a in self.in_avals[0]), ct_bc, ct_carry)

    # -- vmap -------------------------------------------------------------------

    def batch(self, axis_data, args, dims):
        size = axis_data.size
        cc, bc, carry = args
        dcc, dbc, dcarry = dims

        def moved(x, d):
            return x if d is None else jnp.moveaxis(jnp.asarray(x), d, 0)

        def closed(j):
            return j if isinstance(j, _core.ClosedJaxpr) else _core.ClosedJaxpr(j, ())

        in_cc = tuple(d is not None for d in dcc)
        in_bc = tuple(d is not None for d in dbc)
        batched = tuple(d is not None for d in dcarry)
        # Which carries are batched: those batched at the start, and those the
        # body makes batched (to a fixed point), as lax.while_loop does.
        for _ in range(len(batched) + 1):
            _, out = _batching.batch_jaxpr(closed(self.body_jaxpr), axis_data,
                                           in_bc + batched, False)
            new = tuple(a or b for a, b in zip(batched, out))
            if new == batched:
                break
            batched = new
        _, (pred_batched,) = _batching.batch_jaxpr(closed(self.cond_jaxpr), axis_data,
                                                   in_cc + batched, False)
        cc = tuple(moved(x, d) for x, d in zip(cc, dcc))
        bc = tuple(moved(x, d) for x, d in zip(bc, dbc))
        carry = tuple((jnp.broadcast_to(x, (size,) + jnp.shape(x)) if d is None else moved(x, d))
                      if b else x for x, d, b in zip(carry, dcarry, batched))

        def ax(flags):
            return tuple(0 if f else None for f in flags)
        vcond = jax.vmap(self._cond, (ax(in_cc), ax(batched)), 0 if pred_batched else None,
                         axis_size=size)
        vbody = jax.vmap(self._body, (ax(in_bc), ax(batched)), ax(batched), axis_size=size)

        if not pred_batched:
            # (the lane mask is not applied here: it would make shared carries
            # batched, and the enclosing batching rule decided their axes without it)
            out = while_loop(lambda x: vcond(cc, x), lambda x: vbody(bc, x), carry,
                             checkpoints=self.checkpoints)
            return tuple(out), ax(batched)
        needed = lanes.mask_for(axis_data)  # lanes whose results are read (None: all)
        return self._batch_masked(size, cc, bc, carry, batched, vcond, needed,
                                  ax(in_bc), ax(batched))

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
        Lanes outside ``needed`` (see ``runtime/lanes.py``) do not run at all,
        and the loops inside the body run only for the lanes still running."""
        body = self.body_jaxpr.jaxpr if isinstance(self.body_jaxpr, _core.ClosedJaxpr) \
            else self.body_jaxpr
        nbc = len(self.in_avals[1])
        # shared carries the body passes through unchanged stay unbatched outputs
        invariant = tuple((not b) and body.outvars[j] is body.invars[nbc + j]
                          for j, b in enumerate(batched))
        shadowed = tuple(j for j, b in enumerate(batched) if not b and not invariant[j])

        def per_lane(go, n):
            return go.reshape((size,) + (1,) * (jnp.ndim(n) - 1))

        def bcond(state):
            return jnp.any(state[0])

        def bbody(state):
            go, x, shadow = state
            new = lanes.vmap(self._body, (bc_axes, x_axes), x_axes, size, go)(bc, x)
            x = tuple(jnp.where(per_lane(go, n), n, o) if b else n
                      for n, o, b in zip(new, x, batched))
            shadow = tuple(jnp.where(per_lane(go, s), x[j], s) for j, s in zip(shadowed, shadow))
            return go & vcond(cc, x), x, shadow

        shadow0 = tuple(jnp.broadcast_to(carry[j], (size,) + jnp.shape(carry[j]))
                        for j in shadowed)
        go0 = vcond(cc, carry)
        go0 = jnp.broadcast_to(go0 if needed is None else go0 & needed, (size,))
        go, x, shadow = while_loop(bcond, bbody, (go0, tuple(carry), shadow0),
                                   checkpoints=self.checkpoints)
        out = list(x)
        for j, s in zip(shadowed, shadow):
            out[j] = s
        return tuple(out), tuple(None if invariant[j] else 0 for j in range(len(out)))


class _JvpLoop(_WhileLoop):
    """The JVP of the loop ``primal``: one loop over ``(carry, tangents)``.

    Operands: ``(cc, bc + tbc, x + tx)``, where ``tbc`` and ``tx`` are the
    tangents of the inexact values of ``bc`` and ``x``; results ``y + ty``.
    Evaluated, it is that loop (the ``lax.while_loop`` JVP); reverse-mode
    differentiated, it is checkpointed like any other of these loops.

    ``jax.checkpoint`` (remat) partially evaluates the JVP of what it wraps,
    with the primal values known and the tangents unknown, and needs the
    primal results known: ``partial_eval`` splits the equation into the
    primal loop (known) and a ``_LoopTangent`` (staged, linear in the tangents,
    transposed by this module's checkpointed backward pass), as JAX splits
    its own ``while`` loop's JVP."""

    def __init__(self, primal):
        cc_av, bc_av, x_av = primal.in_avals
        fb, fi, tb_av, tx_av = _tangents_of(primal.in_avals)
        ncc, nbc, ntb, nx = len(cc_av), len(bc_av), len(tb_av), len(x_av)

        def cond(*a):  # (*cc, *x, *tx)
            return primal._cond(a[:ncc], a[ncc:ncc + nx])

        def body(*a):  # (*bc, *tbc, *x, *tx)
            bc, tb = a[:nbc], a[nbc:nbc + ntb]
            x, tx = a[nbc + ntb:nbc + ntb + nx], a[nbc + ntb + nx:]
            tb_all = [np.zeros(np.shape(v), jax.dtypes.float0) for v in bc]
            tx_all = [np.zeros(np.shape(v), jax.dtypes.float0) for v in x]
            for i, t in zip(fb, tb):
                tb_all[i] = t
            for i, t in zip(fi, tx):
                tx_all[i] = t
            y, ty = jax.jvp(primal._body, (tuple(bc), tuple(x)), (tuple(tb_all), tuple(tx_all)))
            return (*y, *(ty[i] for i in fi))

        cond_jaxpr = jax.make_jaxpr(cond)(*_specs(cc_av + x_av + tx_av))
        body_jaxpr = jax.make_jaxpr(body)(*_specs(bc_av + tb_av + x_av + tx_av))
        effects = frozenset(cond_jaxpr.effects) | frozenset(body_jaxpr.effects)
        super().__init__(cond_jaxpr, body_jaxpr, (cc_av, bc_av + tb_av, x_av + tx_av),
                         primal.checkpoints, effects)
        self.primal = primal
        self.sizes = (ncc, nbc, ntb, nx, len(tx_av))

    def partial_eval(self, saveable, unks_in, inst_in, eqn):
        """JAX's ``partial_eval_jaxpr_custom`` rule for this equation (see the class)."""
        p, pe, _ = _remat
        ncc, nbc, ntb, nx, ntx = self.sizes
        primal_at = [*range(ncc + nbc), *range(ncc + nbc + ntb, ncc + nbc + ntb + nx)]
        tangent_at = [*range(ncc + nbc, ncc + nbc + ntb),
                      *range(ncc + nbc + ntb + nx, ncc + nbc + ntb + nx + ntx)]
        if any(unks_in[i] for i in primal_at) or not any(unks_in[i] for i in tangent_at):
            return _default_partial_eval(saveable, unks_in, inst_in, eqn)
        primal_in = [eqn.invars[i] for i in primal_at]
        known = pe.new_jaxpr_eqn(primal_in, eqn.outvars[:nx], p, dict(_prim=self.primal),
                                 self.primal.effects, eqn.source_info, eqn.ctx)
        staged = pe.new_jaxpr_eqn(primal_in + [eqn.invars[i] for i in tangent_at],
                                  eqn.outvars[nx:], p, dict(_prim=_LoopTangent(self.primal)),
                                  frozenset(), eqn.source_info, eqn.ctx)
        flags = [False] * nx + [True] * ntx
        return known, staged, flags, flags, _residuals(eqn, inst_in)


class _LoopTangent(VJPHiPrimitive):
    """The tangents of the results of the loop ``loop`` as a (linear) function of
    its operands' tangents: ``(cc, bc, x, tbc, tx) -> ty`` (``tbc``, ``tx``, ``ty``
    for the inexact values only). Evaluated, it runs the JVP loop; transposed
    (``jax.grad`` through ``jax.checkpoint``), it is the checkpointed backward
    pass, which recomputes the loop from ``x``."""

    stage_low = True  # see runtime/lowjit.py

    def __init__(self, loop):
        cc_av, bc_av, x_av = loop.in_avals
        self.fb, self.fi, tb_av, tx_av = _tangents_of(loop.in_avals)
        self.in_avals = (cc_av, bc_av, x_av, tb_av, tx_av)
        self.out_aval = tx_av
        self.params = dict(loop=loop)
        super().__init__()

    def _operands(self, cc, bc, x, tb, tx):
        return tuple(cc), tuple(bc) + tuple(tb), tuple(x) + tuple(tx)

    def tangent(self, cc, bc, x, tb, tx):
        """The same, with this module's loops (differentiable in turn)."""
        return tuple(self.loop.jvp_loop()(*self._operands(cc, bc, x, tb, tx))[len(x):])

    def expand(self, cc, bc, x, tb, tx):
        return tuple(self.loop.jvp_loop().expand(*self._operands(cc, bc, x, tb, tx))[len(x):])

    def jvp(self, primals, tangents):
        tangents = tuple(_instantiate(t, a) for t, a in zip(tangents, self.in_avals))
        return jax.jvp(self.tangent, primals, tangents)

    def transpose(self, out_ct, cc, bc, x, tb_acc, tx_acc):
        loop = self.loop.quiet()
        _, bc_av, x_av = self.loop.in_avals
        ct = [jnp.zeros(a.shape, a.to_tangent_aval().dtype) for a in x_av]
        for i, t, a in zip(self.fi, out_ct, self.out_aval):
            ct[i] = jnp.zeros(a.shape, a.dtype) if isinstance(t, _ad_util.Zero) else t
        _, saved = _forward(loop._cond, loop._body, tuple(cc), tuple(bc), tuple(x),
                            loop.checkpoints)
        ct_bc, ct_x = _backward(loop._recompute, tuple(bc), saved, tuple(ct), bc_av, x_av,
                                loop.checkpoints)
        for accs, grads, at in ((tb_acc, ct_bc, self.fb), (tx_acc, ct_x, self.fi)):
            for acc, i in zip(accs, at):  # (an operand that is not linear: no accumulator)
                if hasattr(acc, "accum") and not isinstance(grads[i], _ad_util.Zero):
                    acc.accum(grads[i])

    def batch(self, axis_data, args, dims):
        out = jax.vmap(self.tangent, in_axes=dims, axis_size=axis_data.size)(*args)
        return out, tuple(0 for _ in out)


def _has_effects(effects):
    quiet = tuple(getattr(_core, n) for n in ("NamedAxisEffect", "InternalMutableArrayEffect")
                  if hasattr(_core, n))
    return any(not isinstance(e, quiet) for e in effects)


def _residuals(eqn, inst_in):
    """The operands of ``eqn`` a staged equation reads from the known side."""
    core = _remat[2]
    return [v for v, inst in zip(eqn.invars, inst_in) if type(v) is core.Var and not inst]


def _default_partial_eval(saveable, unks_in, inst_in, eqn):
    """What JAX's ``partial_eval_jaxpr_custom`` does with an equation of a
    primitive that has no rule (an offloading policy keeps the value instead)."""
    pe = _remat[1]
    n = len(eqn.outvars)
    res = _residuals(eqn, inst_in)
    if any(unks_in):
        return None, eqn, [True] * n, [True] * n, res
    policy = pe.ensure_enum(saveable(eqn.primitive, *[v.aval for v in eqn.invars],
                                     **eqn.params))
    if _has_effects(eqn.effects) or not isinstance(policy, pe.RecomputeType):
        return eqn, None, [False] * n, [False] * n, []
    return eqn, eqn, [False] * n, [True] * n, res


def _install_remat_rule():
    """Give ``call_hi_primitive`` a ``partial_eval_jaxpr_custom`` rule (JAX has
    none) that sends a ``_JvpLoop`` equation to its own rule and does what JAX
    does without a rule for every other equation (other libraries' primitives)."""
    p, pe, _ = _remat
    rules = pe.partial_eval_jaxpr_custom_rules
    previous = rules.get(p)
    if getattr(previous, "autoflow", False):
        return

    def rule(saveable, unks_in, inst_in, eqn):
        prim = eqn.params.get("_prim")
        if isinstance(prim, _JvpLoop):
            return prim.partial_eval(saveable, unks_in, inst_in, eqn)
        if previous is not None:
            return previous(saveable, unks_in, inst_in, eqn)
        return _default_partial_eval(saveable, unks_in, inst_in, eqn)

    rule.autoflow = True
    rules[p] = rule


_remat = remat_internals() if AVAILABLE else None
if _remat is not None:
    _install_remat_rule()


_plain = threading.local()


@contextlib.contextmanager
def plain_loops():
    """Stage ``while_loop`` as the ``lax.while_loop`` it compiles to, and a
    traced ``if`` as its ``lax.cond`` or select (``lowering._Cond``), for
    ``autoflow explain``, which shows people the jaxpr."""
    before = getattr(_plain, "on", False)
    _plain.on = True
    try:
        yield
    finally:
        _plain.on = before


def as_operands(values):
    """``values``, with the constants passed through an optimization barrier
    when staged where autoflow's primitives stay "high" (``lowjit`` not
    installed): a constant operand of a user-defined primitive is a jaxpr
    literal, and JAX's lowering of high primitives (``to_lojax``) can forward a
    literal's raw value into a later equation, which then fails to lower.

    Where they stage as low equations (``lowjit.installed()``), they are
    lowered by ``lowjit``'s rule and never pass through ``to_lojax``, so the
    constants stay literals: XLA then sees them as constants, and folds what
    is computed from them. (Behind the barrier, the batched bisection of
    ``benchmarks/real_algorithms.py`` compiled to 1125 flops, over the 1000
    below which XLA's CPU client runs a program on the calling thread: 2.1x
    the time of optimistix's; without it, 978 flops and 0.94x.)"""
    from . import lowjit
    from ._jax_compat import is_constant, tracing

    values = tuple(values)
    if lowjit.installed():
        return values
    const = [i for i, v in enumerate(values) if is_constant(v)]
    if not const or not tracing():
        return values
    barred = lax.optimization_barrier(tuple(jnp.asarray(values[i]) for i in const))
    out = list(values)
    for i, v in zip(const, barred):
        out[i] = v
    return tuple(out)


def plain_now() -> bool:
    """Inside ``plain_loops()``?"""
    return getattr(_plain, "on", False)


# The condition jaxprs of gated loops staged as plain ``while`` equations
# (``plain_loops``, for ``autoflow explain``), so that ``lowering.cost`` tells
# them from other loops as it does for this module's primitive.
GATED_CONDS = weakref.WeakSet()


def while_loop(cond_fun, body_fun, init, *, checkpoints=DEFAULT_CHECKPOINTS, added=None,
               gated=False, added_inputs=None):
    """``lax.while_loop(cond_fun, body_fun, init)`` (``init`` a pytree of arrays),
    reverse-differentiable with at most ``checkpoints`` saved carries.

    With ``added`` (where ``AVAILABLE``), returns ``(carry, extra)``: after each
    call of ``body_fun`` while it is traced, ``added()`` gives arrays the body
    computed that are carries too, zeros before the first iteration, and that
    the body's values do not depend on (the loop's first trace found a variable
    it binds: staging.loop). The body's jaxpr then takes them as inputs it does
    not read, instead of the body being traced again. ``added_inputs()``, after
    ``added()``: for each of those arrays, the input of the body's jaxpr made for
    it while the body was traced (a tracer of the body's trace, which the body
    does read: the value the carry has when an iteration starts), or None.
    ``gated``: ``cond_fun`` holds the predicate of the branch the loop is in
    (see ``lowering.loop_gate``).
    """
    if not AVAILABLE:
        if added is not None:
            raise ValueError("while_loop: `added` needs AVAILABLE")
        return lax.while_loop(cond_fun, body_fun, init)
    plain = getattr(_plain, "on", False)
    leaves, tree = jax.tree_util.tree_flatten(init)
    avals = tuple(_core.ShapedArray(jnp.shape(x), jnp.result_type(x)) for x in leaves)
    def unflat(x):
        return jax.tree_util.tree_unflatten(tree, list(x))

    made = [(), ()]  # the inputs the body's trace made (see _placed_inputs)

    def body_flat(*x):
        out, out_tree = jax.tree_util.tree_flatten(body_fun(unflat(x)))
        if out_tree != tree:
            raise TypeError(f"while_loop body changed the carry's structure: {tree} -> "
                            f"{out_tree}")
        if added is None:
            return tuple(out)
        extra = tuple(added())
        made[:] = added_inputs() if added_inputs is not None else ([None] * len(extra), [])
        return tuple(out) + extra

    cond_jaxpr, cc = _trace(lambda *x: cond_fun(unflat(x)), avals)
    body_jaxpr, bc = _trace(body_flat, avals)
    flat = tuple(lax.convert_element_type(x, a.dtype) for x, a in zip(leaves, avals))
    n = len(avals)
    more = tuple(_core.ShapedArray(v.aval.shape, v.aval.dtype)
                 for v in body_jaxpr.outvars[n:])
    if more:
        # The same jaxprs, taking the added carries too: as inputs they do not read, or
        # for the body, the inputs its trace made for them (where JAX's jaxprs cannot
        # be extended so, replayed with them).
        wider = (_placed_inputs(body_jaxpr, len(bc) + n, made, more),
                 _unread_inputs(cond_jaxpr, more))
        if None in wider:  # pragma: no cover - another JAX
            body0, bc0, cond0, cc0 = body_jaxpr, bc, cond_jaxpr, cc
            body_jaxpr, bc = _trace(lambda *x: _run(body0, bc0, x[:n]), avals + more)
            cond_jaxpr, cc = _trace(lambda *x: _run(cond0, cc0, x[:n]), avals + more)
        else:
            body_jaxpr, cond_jaxpr = wider
        avals += more
        flat += tuple(jnp.zeros(a.shape, a.dtype) for a in more)
    effects = frozenset(cond_jaxpr.effects) | frozenset(body_jaxpr.effects)
    in_avals = (tuple(_core.typeof(x) for x in cc), tuple(_core.typeof(x) for x in bc), avals)
    if not plain:
        cc, bc, flat = (as_operands(v) for v in (cc, bc, flat))
    prim = _WhileLoop(cond_jaxpr, body_jaxpr, in_avals, max(4, int(checkpoints)), effects,
                      gated)
    if plain:  # the `lax.while_loop` it compiles to
        out = prim.expand(cc, bc, flat)
        if gated:
            GATED_CONDS.add(cond_jaxpr)
    else:
        out = prim(cc, bc, flat)
    if added is None:
        return unflat(out)
    return unflat(out[:n]), tuple(out[n:])


# ---------------------------------------------------------------------------
# the checkpointed forward and backward passes
# ---------------------------------------------------------------------------

def _slots(carry, k):
    return tuple(jnp.zeros((k,) + jnp.shape(x), jnp.result_type(x)) for x in carry)


def _write(buf, slot, x):
    return tuple(lax.dynamic_update_index_in_dim(b, v, slot, 0) for b, v in zip(buf, x))


def _layout(checkpoints):
    """How a budget of ``checkpoints`` carries is spent: ``(slots, forward, sweep)``:
    ``slots`` saved carries (at most ``forward`` of them by the forward pass, the
    rest by the backward pass's splits), a sweep buffer of ``sweep`` carries and
    one scratch slot: ``slots + sweep + 1 == checkpoints`` (from 8 on)."""
    sweep = min(64, max(2, checkpoints // 3))
    slots = max(2, checkpoints - sweep - 1)
    forward = max(2, min(slots, checkpoints // 2) // 2 * 2)
    return slots, forward, sweep


def _forward(cond, body, cc, bc, carry, checkpoints):
    """Run the loop, saving the carry before step ``n`` whenever ``n`` is a
    multiple of ``stride``, in at most ``checkpoints // 2`` slots: when they are
    full, the saves at odd multiples of ``stride`` are dropped and ``stride``
    doubles. Saved carries never move: ``pos[i]`` is the step whose carry slot
    ``i`` holds (-1: free); the last slot is scratch, written when nothing is
    saved, so that every step writes unconditionally (in place).
    Returns ``(final carry, (slots, pos, n))``."""
    size, half, _ = _layout(checkpoints)

    def step(s):
        x, n, buf, pos, count, stride = s
        save = n % stride == 0
        thin = save & (count == half)
        pos = jnp.where(thin & (pos >= 0) & ((pos // stride) % 2 == 1), -1, pos)
        count = jnp.where(thin, half // 2, count)
        stride = jnp.where(thin, stride * 2, stride)
        free = jnp.argmax(pos[:size] < 0).astype(jnp.int32)
        slot = jnp.where(save, free, size)
        buf = _write(buf, slot, x)
        pos = pos.at[slot].set(jnp.where(save, n, -1))
        return body(bc, x), n + 1, buf, pos, count + save, stride

    pos = jnp.full((size + 1,), -1, jnp.int32)
    s = (carry, jnp.int32(0), _slots(carry, size + 1), pos, jnp.int32(0), jnp.int32(1))
    x, n, buf, pos, _, _ = while_loop(lambda s: cond(cc, s[0]), step, s,
                                      checkpoints=checkpoints)
    return x, (buf, pos, n)


def _fori(n, fn, init, checkpoints):
    """``lax.fori_loop(0, n, fn, init)`` for a traced ``n``, as a ``while_loop``
    of this module: the passes of a gradient are differentiable in turn
    (``jax.grad`` of ``jax.grad``)."""
    _, out = while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, fn(c[0], c[1])),
                        (jnp.int32(0), init), checkpoints=checkpoints)
    return out


def _advance(body, bc, x, k, checkpoints):
    return _fori(k, lambda i, x: body(bc, x), x, checkpoints)


def _split(gap, nfree, sweep, slots):
    """How many parts ``m + 1`` to cut a gap of ``gap`` steps into (``m`` saves),
    with ``nfree`` free slots, so that the parts end up shorter than ``sweep``:
    cutting into ``b`` parts at each of ``L = ceil(log_b((gap + 1) / sweep))``
    levels uses ``(b - 1) L`` slots at most and recomputes each step about
    ``L (b - 1) / b`` times; the ``b`` with the fewest recomputations among those
    whose slots are free (``b = 2``, bisection, when none fits)."""
    b = jnp.arange(2, slots + 2, dtype=jnp.float32)
    ratio = jnp.maximum((gap + 1).astype(jnp.float32) / sweep, 1.0)
    levels = jnp.maximum(1.0, jnp.ceil(jnp.log(ratio) / jnp.log(b) - 1e-4))
    fits = (b - 1) * levels <= nfree
    cost = jnp.where(fits, levels * (b - 1) / b, jnp.inf)
    m = jnp.argmin(cost).astype(jnp.int32) + 1
    return jnp.where(jnp.any(fits), m, 1)


def _backward(body, bc, saved, out_ct, bc_avals, carry_avals, checkpoints):
    """Reverse steps ``n-1 .. 0``, from the last to the first.

    Each round looks at the gap between the step ``t`` to reverse next and the
    nearest saved carry ``p <= t``. A gap shorter than the sweep buffer
    (``checkpoints // 3`` carries, at most 64) is swept: its carries are recomputed into
    the buffer, then reversed one by one. A longer gap is split: the carry
    ``step`` steps above ``p`` is saved in a free slot, ``step`` being the length
    of the first of the ``m + 1`` equal parts the gap would be cut into, where
    ``m`` (``_split``) spends the free slots best over the levels of splitting
    the gap needs (bisection when slots are scarce, more parts when they are
    not). The next round sees the same gap less ``step`` above the new save, so
    the gap is cut into its parts by one pass over it. With no free slot left,
    the last ``sweep`` steps before ``t`` are recomputed from ``p`` and swept.
    """
    buf, pos, n = saved
    size, _, sweep_len = _layout(checkpoints)
    fi = [i for i, a in enumerate(carry_avals) if _inexact(a)]
    fb = [i for i, a in enumerate(bc_avals) if _inexact(a)]

    def step_vjp(x, ct, ct_bc):
        def f(bcf, xf):
            bc2 = list(bc)
            for i, v in zip(fb, bcf):
                bc2[i] = v
            x2 = list(x)
            for i, v in zip(fi, xf):
                x2[i] = v
            out = body(tuple(bc2), tuple(x2))
            return tuple(out[i] for i in fi)

        _, pull = jax.vjp(f, tuple(bc[i] for i in fb), tuple(x[i] for i in fi))
        g_bc, g_x = pull(ct)
        return g_x, tuple(a + b for a, b in zip(ct_bc, g_bc))

    def sweep(args):
        x0, length, ct, ct_bc = args

        def fill(j, c):
            x, sb = c
            return body(bc, x), _write(sb, j, x)

        _, sb = _fori(length, fill, (x0, _slots(x0, sweep_len)), checkpoints)

        def back(j, c):
            x = tuple(b[length - 1 - j] for b in sb)
            return step_vjp(x, *c)

        return _fori(length, back, (ct, ct_bc), checkpoints)

    def loop_body(s):
        t, buf, pos, ct, ct_bc = s
        live = pos[:size]
        below = jnp.where((live >= 0) & (live <= t), live, -1)
        slot_p = jnp.argmax(below).astype(jnp.int32)
        gap = t - below[slot_p]
        free = jnp.argmax(live < 0).astype(jnp.int32)
        nfree = jnp.sum(live < 0).astype(jnp.int32)
        split = (gap >= sweep_len) & (nfree > 0)
        # a short gap sweeps from the lowest save within reach instead, so that
        # one round reverses up to `sweep_len` steps
        reach = jnp.where((live >= 0) & (live >= t - (sweep_len - 1)) & (live <= t), live,
                          size + n)
        slot_p = jnp.where(gap < sweep_len, jnp.argmin(reach).astype(jnp.int32), slot_p)
        p = pos[slot_p]
        xp = tuple(b[slot_p] for b in buf)
        start = jnp.where(gap < sweep_len, p, t - (sweep_len - 1))
        m = _split(gap, nfree, sweep_len, size)
        q = jnp.where(split, t - gap + (gap + 1 + m) // (m + 1), start)
        xq = _advance(body, bc, xp, q - p, checkpoints)
        ct, ct_bc = lax.cond(split, lambda a: a[2:],
                             sweep, (xq, t - q + 1, ct, ct_bc))
        # a midpoint is saved; the saves a sweep covered are freed
        slot = jnp.where(split, free, size)
        buf = _write(buf, slot, xq)
        pos = pos.at[slot].set(jnp.where(split, q, -1))
        pos = jnp.where(~split & (pos >= start) & (pos <= t), -1, pos)
        return jnp.where(split, t, q - 1), buf, pos, ct, ct_bc

    ct0 = tuple(out_ct[i] for i in fi)
    ct_bc0 = tuple(jnp.zeros(bc_avals[i].shape, bc_avals[i].dtype) for i in fb)
    s = (n - 1, buf, pos, ct0, ct_bc0)
    _, _, _, ct, ct_bc = while_loop(lambda s: s[0] >= 0, loop_body, s, checkpoints=checkpoints)
    ct_carry = [_ad_util.Zero(a.to_ct_aval()) for a in carry_avals]
    for i, v in zip(fi, ct):
        ct_carry[i] = v
    ct_bcs = [_ad_util.Zero(a.to_ct_aval()) for a in bc_avals]
    for i, v in zip(fb, ct_bc):
        ct_bcs[i] = v
    return tuple(ct_bcs), tuple(ct_carry)
