"""A loop under ``vmap`` whose condition is batched: how its lanes are scheduled.

Plain Python meaning (``jax.vmap`` of a loop, each lane on its own)::

    for lane in range(size):
        while cond(x[lane]):
            x[lane] = body(x[lane])

Under ``vmap`` a loop runs while any lane runs, the lanes that have finished
keeping their values (``while_primitive._WhileLoop._batch_masked``: lockstep).
``build`` stages that loop as a ``_LaneLoop``: a ``_WhileLoop`` whose condition and
body are the lockstep's (so that its derivatives are the lockstep's), which also
knows the loop of one lane and the batch, and chooses, when it is compiled or
evaluated, how the lanes run (``_LaneLoop.strategy``):

* ``"lockstep"``: the lockstep loop itself (``lanes="lockstep"``; small batches);
* ``"flat"`` / ``"auto"``: a loop whose body holds one loop, as one flat loop in
  which lanes do not wait (``flat_lanes``), from the start (``lanes="flat"``) or from
  the moment its lanes are seen waiting (``lanes="auto"``);
* ``"compact"`` (``lanes="auto"``, at least ``COMPACT_MIN`` lanes): the lanes still
  running are moved to the front, and each step runs on the smallest of a few
  static prefixes (``buckets``) holding them, chosen by ``lax.switch`` on how many
  run; the full size is the lockstep's step without moving anything. Lanes are
  moved (a partition, the carries and the lanes' loop constants gathered) only when
  the running lanes fit a smaller bucket: at most once per bucket. A step then
  costs about what its running lanes cost.

Under a second ``vmap`` (``_LaneLoop.batch``) the lanes of both are merged into one
``_LaneLoop`` of ``outer * inner`` lanes, so its choice sees them all (a
``lax.switch`` whose index is batched would run every branch).

A loop with effects (prints, checks) never comes here: its lanes stay in lockstep,
so that the effects keep their order.
"""

from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
from jax import lax

from . import batching, flat_lanes, lanes, while_primitive
from .. import jax as jx
from ..common import counting
from ..common.events import plain_now

# Compaction pays where finished lanes dominate a large batch; below this many lanes
# the lockstep's masks cost less than moving lanes (benchmarks/nested_lanes.py).
COMPACT_MIN = 1024
# Each bucket traces the body once more, and compiling grows with them (a Gamma
# sampler's body, 64 x 256 lanes: 10 s lockstep, 44 s with five buckets a quarter of
# the one before and compacted inner loops): three buckets, each a sixteenth of the
# one before, and the loops inside a compacted body run in lockstep.
SHRINK = 16
BUCKET_MIN = 32  # no smaller bucket
MAX_BUCKETS = 3

_local = threading.local()  # .depth: how many compacted bodies are being traced


def buckets(size):
    """The static sizes the running lanes are run in, largest (``size``) first."""
    out = [size]
    while len(out) < MAX_BUCKETS and -(-out[-1] // SHRINK) >= BUCKET_MIN:
        out.append(-(-out[-1] // SHRINK))
    return tuple(out)


def _aval(x):
    return jx.ShapedArray(jnp.shape(x), jnp.result_type(x),
                          weak_type=bool(getattr(jx.typeof(x), "weak_type", False)))


def _axes(flags):
    return tuple(0 if f else None for f in flags)


class _LaneLoop(while_primitive._WhileLoop):
    """The lockstep loop of ``loop`` over ``size`` lanes (see the module). Operands:
    ``(cond consts, body consts + cc + bc, (go, x, shadow))``; ``go`` the lanes running
    (their condition and "needed" mask already applied), ``x`` the carries (lanes first
    where ``batched``), ``shadow`` the lanes' copies of the shared carries the body
    changes."""

    def __init__(self, loop, size, flags, cond_jaxpr, body_jaxpr, in_avals, nconsts,
                 inside=False):
        super().__init__(cond_jaxpr, body_jaxpr, in_avals, loop.checkpoints, frozenset(),
                         lanes=loop.lanes)
        self.inside = inside  # (made in a compacted body: lockstep)
        self.loop, self.size, self.flags, self.nconsts = loop, size, flags, nconsts
        in_cc, in_bc, batched, shadowed = flags
        self.in_cc, self.in_bc, self.batched, self.shadowed = in_cc, in_bc, batched, shadowed

    def strategy(self):
        """How the lanes run when compiled: see the module."""
        if self.inside:
            return "lockstep"
        if self.lanes == "auto" and self.size >= COMPACT_MIN:
            return "compact"
        if flat_lanes.choose(self.loop) is not None:
            return self.lanes
        return "lockstep"

    def _split(self, bc_op):
        nb, ncc = self.nconsts, len(self.in_cc)
        return tuple(bc_op[nb:nb + ncc]), tuple(bc_op[nb + ncc:])

    def low_form(self, platforms=()):
        return super().low_form(platforms) if self.strategy() == "lockstep" else None

    def expand(self, cc_op, bc_op, state):
        how = self.strategy()
        if how == "lockstep":
            return super().expand(cc_op, bc_op, state)
        cc, bc = self._split(bc_op)
        go, x, shadow = state[0], tuple(state[1:1 + len(self.batched)]), \
            tuple(state[1 + len(self.batched):])
        if how == "compact":
            return _compacted(self, cc, bc, go, x, shadow)
        nest = flat_lanes.choose(self.loop)
        out, _ = flat_lanes.machine(self.loop, nest, self.size, cc, bc, x, self.batched, go,
                                    self.in_cc, _axes(self.in_bc), self.loops(),
                                    auto=how == "auto")
        return self._results(out, x)

    def _results(self, per_lane, x):
        """The loop's results from each lane's final carries ``per_lane`` (all batched)."""
        xs = tuple(n if b else o for n, o, b in zip(per_lane, x, self.batched))
        return (jnp.zeros((self.size,), bool), *xs, *(per_lane[j] for j in self.shadowed))

    def batch(self, axis_data, args, dims):
        """Under another ``vmap`` of ``m`` lanes: one ``_LaneLoop`` of ``m * size`` lanes."""
        cc_op, bc_op, state = args
        dcc_op, dbc_op, dstate = dims
        nb = self.nconsts
        if any(d is not None for d in (*dcc_op, *dbc_op[:nb])):
            return super().batch(axis_data, args, dims)  # pragma: no cover - (not made so)
        m, n = axis_data.size, self.size
        cc, bc = self._split(bc_op)
        dcc, dbc = self._split(dbc_op)
        nx = len(self.batched)
        go, x = state[0], state[1:1 + nx]
        dgo, dx = dstate[0], dstate[1:1 + nx]

        def merge(a, d, lane):
            if d is None and not lane:
                return a, False
            a = jnp.broadcast_to(a, (m,) + jnp.shape(a)) if d is None else jnp.moveaxis(a, d, 0)
            if not lane:
                a = jnp.broadcast_to(a[:, None], (m, n) + a.shape[1:])
            return a.reshape((m * n,) + a.shape[2:]), True

        cc2 = [merge(a, d, f) for a, d, f in zip(cc, dcc, self.in_cc)]
        bc2 = [merge(a, d, f) for a, d, f in zip(bc, dbc, self.in_bc)]
        x2 = [merge(a, d, f) for a, d, f in zip(x, dx, self.batched)]
        flags = tuple(f for _, f in x2)
        if self.loop.batched_carries(axis_data, tuple(f for _, f in cc2),
                                     tuple(f for _, f in bc2), flags)[0] != flags:
            # A carry the lanes share (`acc = acc * x`, `x` the same for this level's
            # lanes) that the merged lanes do not (`x` batched one level up): not one
            # loop of `m * size` lanes; this loop batched as a loop, one level up.
            return super().batch(axis_data, args, dims)
        go2, _ = merge(go, dgo, True)
        needed = lanes.mask_for(axis_data)
        if needed is not None:
            go2 = go2 & jnp.repeat(needed, n)
        out, odims = build(self.loop, m * n, tuple(a for a, _ in cc2), tuple(a for a, _ in bc2),
                           go2, tuple(a for a, _ in x2), tuple(f for _, f in x2),
                           tuple(f for _, f in cc2), tuple(f for _, f in bc2))

        def lanes_of(j):
            o = out[j] if odims[j] is not None else jnp.broadcast_to(
                out[j], (m * n,) + jnp.shape(out[j]))
            return o.reshape((m, n) + o.shape[1:])

        xs = [lanes_of(j) if b else a for j, (a, b) in enumerate(zip(x, self.batched))]
        xd = [0 if b else d for d, b in zip(dx, self.batched)]
        results = (jnp.zeros((n,), bool), *xs, *(lanes_of(j) for j in self.shadowed))
        return results, (None, *xd, *(0 for _ in self.shadowed))


def build(loop, size, cc, bc, go0, carry, batched, in_cc, in_bc):
    """``loop`` under ``vmap`` with a batched condition, as a ``_LaneLoop``: ``(results,
    their batch axes)``, as ``_WhileLoop._batch_masked`` gives them. ``go0``: the lanes
    that run (their condition holds, and their results are needed)."""
    invariant, shadowed = loop.shared_carries(batched)
    bc_axes, x_axes, cc_axes = _axes(in_bc), _axes(batched), _axes(in_cc)
    def vcond(cc, x, running=None):  # (no effects here: running is not needed)
        return jax.vmap(loop._cond, (cc_axes, x_axes), 0, axis_size=size)(cc, x)
    lockstep = loop.lockstep_step(size, vcond, bc_axes, x_axes, batched, shadowed)
    ncc, nx = len(cc), len(carry)

    def cond(go, *_):
        return counting.any_(go)

    def step(*a):  # (*cc, *bc, go, *x, *shadow)
        c, b, go = a[:ncc], a[ncc:ncc + len(bc)], a[ncc + len(bc)]
        x = a[ncc + len(bc) + 1:ncc + len(bc) + 1 + nx]
        go, x, shadow = lockstep(c, b, go, x, a[ncc + len(bc) + 1 + nx:])
        return (go, *x, *shadow)

    shadow0 = tuple(jnp.broadcast_to(carry[j], (size,) + jnp.shape(carry[j])) for j in shadowed)
    state = (jnp.broadcast_to(go0, (size,)), *carry, *shadow0)
    avals = tuple(_aval(v) for v in state)
    cond_jaxpr, ccx = jx.trace_fn(cond, avals)
    body_jaxpr, bcx = jx.trace_fn(step, tuple(_aval(v) for v in (*cc, *bc)) + avals)
    bc_op = (*bcx, *cc, *bc)
    in_avals = (tuple(jx.typeof(v) for v in ccx), tuple(jx.typeof(v) for v in bc_op), avals)
    prim = _LaneLoop(loop, size, (tuple(in_cc), tuple(in_bc), tuple(batched), shadowed),
                     cond_jaxpr, body_jaxpr, in_avals, len(bcx),
                     inside=getattr(_local, "depth", 0) > 0)
    operands = (tuple(ccx), bc_op, tuple(jnp.asarray(v) for v in state))
    out = prim.expand(*operands) if plain_now() else prim(*operands)
    x = list(out[1:1 + nx])
    for j, s in zip(shadowed, out[1 + nx:]):
        x[j] = s
    return tuple(x), tuple(None if invariant[j] else 0 for j in range(nx))


def _compacted(prim, cc, bc, go, x, shadow):
    """The loop ``prim`` with its running lanes moved to the front (see the module)."""
    loop, size = prim.loop, prim.size
    sizes = buckets(size)
    batched, shadowed = prim.batched, prim.shadowed
    bc_axes, x_axes, cc_axes = _axes(prim.in_bc), _axes(batched), _axes(prim.in_cc)
    # what moves with the lanes: batched carries, shadows, the lanes' loop constants
    xb = tuple(v for v, b in zip(x, batched) if b)
    xs = tuple(v for v, b in zip(x, batched) if not b)
    ccb = tuple(v for v, f in zip(cc, prim.in_cc) if f)
    bcb = tuple(v for v, f in zip(bc, prim.in_bc) if f)

    def assemble(values, lane_part, flags):
        it = iter(lane_part)
        return tuple(next(it) if f else v for v, f in zip(values, flags))

    def branch(width):
        def run(ops):
            go, xb, xs, shadow, ccb, bcb = ops

            def cut(a):
                return a if width == size else a[:width]

            def put(a, part):
                return part if width == size else a.at[:width].set(part)

            g = cut(go)
            xl = assemble(_merge_shared(batched, xs), tuple(map(cut, xb)), batched)
            c = assemble(cc, tuple(map(cut, ccb)), prim.in_cc)
            b = assemble(bc, tuple(map(cut, bcb)), prim.in_bc)
            _local.depth = getattr(_local, "depth", 0) + 1
            try:
                new = lanes.vmap(loop._body, (bc_axes, x_axes), x_axes, width, g)(b, xl)
            finally:
                _local.depth -= 1

            def lane(v):
                return g.reshape((width,) + (1,) * (jnp.ndim(v) - 1))
            xl = tuple(jnp.where(lane(v), v, o) if f else v
                       for v, o, f in zip(new, xl, batched))
            sh = tuple(jnp.where(lane(s), xl[j], s)
                       for j, s in zip(shadowed, map(cut, shadow)))
            g = g & jax.vmap(loop._cond, (cc_axes, x_axes), 0, axis_size=width)(c, xl)
            nb = tuple(v for v, f in zip(xl, batched) if f)
            return (put(go, g), tuple(map(put, xb, nb)),
                    tuple(v for v, f in zip(xl, batched) if not f),
                    tuple(map(put, shadow, sh)))
        return run

    branches = [branch(w) for w in sizes]
    widths = jnp.asarray(sizes, jnp.int32)

    def repartition(s):
        k, perm, count, go, xb, shadow, ccb, bcb = s
        # the running lanes first, each part in its order (a stable partition)
        on = go.astype(jnp.int32)
        place = jnp.where(go, jnp.cumsum(on) - 1, count + jnp.cumsum(1 - on) - 1)
        order = jnp.zeros((size,), jnp.int32).at[place].set(jnp.arange(size, dtype=jnp.int32))

        def take(a):
            return jnp.take(a, order, axis=0)
        k = counting.count(widths >= count) - 1
        return (k, take(perm), count, take(go), tuple(map(take, xb)), tuple(map(take, shadow)),
                tuple(map(take, ccb)), tuple(map(take, bcb)))

    def step(s):
        k, perm, count, go, xb, xs, shadow, ccb, bcb = s
        go, xb, xs, shadow = lax.switch(k, branches, (go, xb, xs, shadow, ccb, bcb))
        count = counting.count(go)
        smaller = jnp.take(widths, jnp.minimum(k + 1, len(sizes) - 1))
        fits = (k + 1 < len(sizes)) & (count <= smaller) & (count > 0)
        k, perm, count, go, xb, shadow, ccb, bcb = lax.cond(
            fits, repartition, lambda s: s, (k, perm, count, go, xb, shadow, ccb, bcb))
        return k, perm, count, go, xb, xs, shadow, ccb, bcb

    count0 = counting.count(go)
    init = (jnp.int32(0), jnp.arange(size, dtype=jnp.int32), count0, go, xb, xs, shadow, ccb, bcb)
    _, perm, _, go, xb, xs, shadow, _, _ = lax.while_loop(lambda s: s[2] > 0, step, init)

    def back(a):  # (lane perm[i] is at i)
        return jnp.zeros_like(a).at[perm].set(a)
    xb, shadow = tuple(map(back, xb)), tuple(map(back, shadow))
    x = assemble(_merge_shared(batched, xs), xb, batched)
    return (jnp.zeros((size,), bool), *x, *shadow)


def _merge_shared(batched, xs):
    """``xs`` (the shared carries) placed among placeholders for the batched ones."""
    it = iter(xs)
    return tuple(None if b else next(it) for b in batched)


def describe(loop):
    """How the lanes of ``loop`` (a ``_WhileLoop``) may run under ``vmap``, for
    ``autoflow explain`` (its condition may or may not be batched: "may")."""
    if loop.lanes == "lockstep":
        return "lockstep (lanes=\"lockstep\")"
    if loop.effects:
        return "lockstep (it prints, checks or calls back: the lanes keep their order)"
    body = jx.closed(loop.body_jaxpr).jaxpr
    loops = [e for e in body.eqns if e.primitive is jx.while_p
             or isinstance(jx.hijax_prim_of(e), while_primitive._WhileLoop)]
    compact = f"compacted from {COMPACT_MIN} lanes (nested vmaps together)"
    if len(loops) == 1:  # (a nest, where flat_lanes.split and its cost rule allow)
        if loop.lanes == "flat":
            return "may run flat (a loop holding a loop, lanes=\"flat\")"
        return f"a loop holding a loop: lockstep, flat once lanes wait; {compact}"
    return "lockstep" if loop.lanes == "flat" else f"lockstep; {compact}"


batching.lane_loops = build  # (batching cannot import this module)
while_primitive.lane_note = describe

if jx.install_low_staging():
    jx.name_primitives([_LaneLoop])
