"""A loop holding a loop, under ``vmap``: one loop whose lanes do not wait.

Plain Python meaning (what the nested loops compute, per lane)::

    while outer_test(x):
        inner = pre(x)                   # the outer body up to the inner loop
        while inner_test(inner):
            inner = inner_body(inner)
        x = post(x, inner)               # the rest of the outer body

Under ``jax.vmap`` with a batched condition, a loop runs while any lane runs.
Nested, every lane waits at each inner loop for the slowest lane's inner loop,
and then at the outer loop for the slowest lane's outer loop: a batch costs the
sum over outer iterations of the longest inner loop of that iteration.

Flattened (``machine``), it is one loop whose state is each lane's place in the
nest: every lane always stands at its own inner loop's test. One step of the
flat loop advances each lane by one step of its own current loop: a lane whose
inner test holds runs the inner body; a lane whose inner test fails runs the
rest of the outer body, the outer test, and the outer body up to the inner loop
again (or leaves the nest). So a batch costs its busiest lane's own steps
(inner iterations plus outer iterations), not the sum of the slowest ones.
Each lane computes exactly what it computes nested, in the same order; only
when each lane waits changes.

Lanes that wait at the end of their inner loop are moved on through the rest
of the outer body (a ``lax.cond`` in the flat step) when the steps they have
waited, each counted as the share of the running lanes that waited in it, add
up to what a move costs in inner iterations (``Nest.move_cost``: operation
counts), or when no lane is left in its inner loop (the lockstep's moment): a
ski-rental rule, so that lanes neither wait long for a straggler nor move on
one at a time. A step where no lane moves costs about one inner iteration.

Measured (``benchmarks/nested_lanes.py``, CPU, batches of 32-64): where inner
loops are long and of very different lengths per lane (sums of geometric draws)
the flat form takes 0.3-0.55x the lockstep's time; where they are short and lanes
hardly wait (a tail sampler with half-normal proposals, the gamma sampler of
``real_algorithms.py``) it takes 1.15-1.2x: a flat step holds more operations than
an inner iteration (the masks, the reductions that decide a move, the ``cond``).
Trip counts are run-time values, so ``lanes="auto"`` (the default) decides in the
compiled program (``machine(auto=True)``, ``_lockstep``): the nest runs in
lockstep, counting how long the running lanes wait at the end of their inner
loops, and goes on flat from the outer iteration in which they have waited
``SWITCH_AT`` moves' worth (the flat machine starts that outer iteration again:
each lane's inner loop gives the same values again). ``lanes="flat"`` flattens
from the start; ``lanes="lockstep"`` never. A nest qualifies where the outer body
holds exactly one data-dependent loop at its top level whose results are used,
and no effect (a print's order across lanes would change), and the rest of the
outer body costs at most ``OUTER_BUDGET`` times the inner body
(``select_or_cond.cost``). ``loops.lane_loop`` calls it when the loop is compiled.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from ..common import counting
from ..cond import select_or_cond
from . import lanes
from .. import jax as jx

# The rest of an outer body may cost this many times its inner body's work
# (select_or_cond.cost) for the nest to be flattened (benchmarks/nested_lanes.py).
OUTER_BUDGET = 4.0


class Nest:
    """The body of an outer loop split around its one inner loop (see the module)."""

    def __init__(self, outer, jaxpr, consts, at):
        eqn = jaxpr.eqns[at]
        self.inner = jx.hijax_prim_of(eqn)
        pre, post = jaxpr.eqns[:at], jaxpr.eqns[at + 1:]
        defined = set(jaxpr.invars)
        for e in pre:
            defined.update(e.outvars)
        live, seen = [], set()
        for v in [*eqn.invars, *(v for e in post for v in e.invars), *jaxpr.outvars]:
            if isinstance(v, jx.Var) and v in defined and v not in seen:
                seen.add(v)
                live.append(v)
        # the inner loop's operands: ("live", index) or ("lit", value)
        index = {v: i for i, v in enumerate(live)}
        self.operands = [("live", index[v]) if isinstance(v, jx.Var) else ("lit", v.val)
                         for v in eqn.invars]
        outs = [jx.Var(v.aval) if jx.is_drop_var(v) else v for v in eqn.outvars]
        self.pre = jaxpr.replace(invars=list(jaxpr.invars), outvars=live, eqns=list(pre),
                                 effects=frozenset())
        self.post = jaxpr.replace(invars=[*live, *outs], outvars=list(jaxpr.outvars),
                                  eqns=list(post), effects=frozenset())
        self.consts = tuple(consts)
        self.outer_cond = outer.cond_jaxpr
        self.sizes = tuple(len(a) for a in self.inner.in_avals)

    def move_cost(self):
        """What moving lanes on costs, in iterations of the inner loop: operations
        of the rest of the outer body and its test over those of the inner body and
        its test (on a CPU a small batch's step costs about its operation count)."""
        outer = _ops(self.pre) + _ops(self.post) + _ops(jx.closed(self.outer_cond).jaxpr)
        inner = _ops(jx.closed(self.inner.body_jaxpr).jaxpr) \
            + _ops(jx.closed(self.inner.cond_jaxpr).jaxpr)
        return max(1.0, outer / max(inner, 1))

    def cost(self):
        """(the rest of the outer body's cost, the inner body's cost)."""
        return (select_or_cond.cost(self.pre) + select_or_cond.cost(self.post),
                select_or_cond.cost(jx.closed(self.inner.body_jaxpr).jaxpr)
                + select_or_cond.cost(jx.closed(self.inner.cond_jaxpr).jaxpr))

    # -- per lane ---------------------------------------------------------------

    def enter(self, bc, x):
        """The outer body up to the inner loop: its live values."""
        return tuple(jx.eval_jaxpr(self.pre, (), *self.consts, *bc, *x))

    def inner_operands(self, live):
        ops = [live[val] if kind == "live" else val for kind, val in self.operands]
        ncc, nbc, _ = self.sizes
        return tuple(ops[:ncc]), tuple(ops[ncc:ncc + nbc]), tuple(ops[ncc + nbc:])

    def leave(self, live, y):
        """The rest of the outer body, from the inner loop's results: new carries."""
        return tuple(jx.eval_jaxpr(self.post, (), *live, *y))


def _ops(jaxpr):
    """The operations of ``jaxpr``, those of the jaxprs in its equations included."""
    total = 0
    for eqn in jaxpr.eqns:
        subs = list(jx.subjaxprs(eqn))
        prim = jx.hijax_prim_of(eqn)
        for name in ("body_jaxpr", "cond_jaxpr"):
            j = getattr(prim, name, None) if prim is not None else None
            if j is not None:
                subs.append(jx.closed(j).jaxpr)
        total += 1 + sum(_ops(j) for j in subs)
    return total


def split(outer):
    """The ``Nest`` of the loop ``outer`` (a ``loops.while_primitive._WhileLoop``), or None
    where its body is not one inner loop between straight-line code."""
    if outer.effects:
        return None
    try:
        jaxpr, consts = jx.consts_as_inputs(jx.closed(outer.body_jaxpr))
        # (an inner loop whose results nothing reads is dead code, which the nested
        # form drops and the flat one would run)
        jaxpr = jx.live_equations(jaxpr)
        at = [i for i, e in enumerate(jaxpr.eqns) if type(jx.hijax_prim_of(e)) is type(outer)]
        if len(at) != 1 or jx.hijax_prim_of(jaxpr.eqns[at[0]]).effects:
            return None
        return Nest(outer, jaxpr, consts, at[0])
    except (AttributeError, TypeError, ValueError, AssertionError, KeyError):  # pragma: no cover
        return None  # (a JAX whose jaxprs differ: the nested form)


def choose(outer):
    """The ``Nest`` to flatten ``outer``'s body into, under a batched condition, or None
    (``lanes="lockstep"``, or no nest that pays: see the module)."""
    if outer.lanes not in ("flat", "auto"):
        return None
    nest = outer.__dict__.get("_nest", False)
    if nest is False:
        nest = split(outer)
        if nest is not None:
            rest, inner = nest.cost()
            if not rest <= OUTER_BUDGET * max(inner, 1.0):
                nest = None
        outer.__dict__["_nest"] = nest
    return nest


# lanes="auto": a nest runs in lockstep until, within one outer iteration, the running
# lanes have waited (each inner step counted as the share of them that waited in it) this
# many times what moving lanes on costs (Nest.move_cost), in inner iterations; then it
# goes on flat. A flat step costs more than a lockstep one (masks, reductions, the `cond`
# that moves lanes on), so short waits stay in lockstep (benchmarks/nested_lanes.py).
SWITCH_AT = 3.0
SWITCH_MIN = 4.0  # (and at least this many inner iterations waited)


def machine(outer, nest, size, cc, bc, carry, batched, needed, in_cc, bc_axes, while_loop,
            auto=False):
    """``outer`` under ``vmap`` (its condition batched) as one flat loop; every
    result batched. ``cc``/``bc`` have their batch axes first where ``in_cc``/
    ``bc_axes`` say; ``carry`` where ``batched`` says (others are unbatched).
    ``auto``: run in lockstep first, flat from the moment lanes wait (``SWITCH_AT``)."""
    x0 = tuple(x if b else jnp.broadcast_to(x, (size,) + jnp.shape(x))
               for x, b in zip(carry, batched))
    cc_axes = tuple(0 if f else None for f in in_cc)
    test = jax.vmap(outer._cond, (cc_axes, 0), 0, axis_size=size)

    def enter(mask, x):
        return lanes.vmap(nest.enter, (bc_axes, 0), 0, size, mask)(bc, x)

    def inner_of(live):
        return jax.vmap(nest.inner_operands, (0,), 0, axis_size=size)(live)

    inner_test = jax.vmap(nest.inner._cond, (0, 0), 0, axis_size=size)

    def pick(mask, new, old):
        return tuple(jnp.where(mask.reshape((size,) + (1,) * (jnp.ndim(n) - 1)), n, o)
                     for n, o in zip(new, old))

    def move(done, go, x, live, y):
        """The lanes ``done`` (at the end of their inner loop) moved on: the rest of the
        outer body, the outer test, the outer body up to the inner loop."""
        xn = lanes.vmap(nest.leave, (0, 0), 0, size, done)(live, y)
        x = pick(done, xn, x)
        go = jnp.where(done, test(cc, x), go)
        again = done & go
        live = pick(again, enter(again, x), live)
        _, _, yn = inner_of(live)
        return go, x, live, pick(again, yn, y)

    go0 = jnp.broadcast_to(test(cc, x0), (size,))
    if needed is not None:
        go0 = go0 & needed
    move_cost = nest.move_cost()
    if auto:
        go0, x0, switched = _lockstep(nest, size, go0, x0, test, enter, inner_of, inner_test,
                                      pick, cc, max(SWITCH_MIN, SWITCH_AT * move_cost),
                                      while_loop, outer.checkpoints)

    def step(state):
        go, x, live, y, idle = state
        icc, ibc, _ = inner_of(live)
        t = inner_test(icc, y)
        stay, done = go & t, go & jnp.logical_not(t)
        y1 = lanes.vmap(nest.inner._body, (0, 0), 0, size, stay)(ibc, y)
        y = pick(stay, y1, y)

        # Lanes that wait are moved on once the steps they waited, as a share of the
        # lanes running, add up to what a move costs (a ski-rental rule), or when no
        # lane is left in its inner loop (the lockstep's moment).
        waiting, running, staying = counting.counts(done, go, stay)
        idle = idle + waiting / jnp.maximum(running, 1.0)
        now = (waiting > 0) & ((idle >= move_cost) | (staying == 0))
        go, x, live, y = lax.cond(now, lambda a: move(done, *a), lambda a: a, (go, x, live, y))
        return go, x, live, y, jnp.where(now, 0.0, idle)

    def flat(go0, x0):
        live0 = enter(go0, x0)
        _, _, y0 = inner_of(live0)
        _, x, _, _, _ = while_loop(lambda s: counting.any_(s[0]), step,
                                   (go0, x0, live0, y0, jnp.float32(0.0)),
                                   checkpoints=outer.checkpoints)
        return tuple(x)

    if auto:
        # (the lockstep may have run the nest to its end: then the flat loop is skipped)
        x = lax.cond(switched, flat, lambda go, x: tuple(x), go0, x0)
    else:
        x = flat(go0, x0)
    return tuple(x), tuple(0 for _ in x)


def _lockstep(nest, size, go, x, test, enter, inner_of, inner_test, pick, cc, switch_at,
              while_loop, checkpoints):
    """The nest in lockstep (every lane waits at its inner loop's end for the others)
    from ``(go, x)``, until its running lanes have waited ``switch_at`` inner iterations
    in one outer iteration: ``(go, x, switched)``, ``(go, x)`` at the start of that outer
    iteration (the flat machine runs it again: each lane's inner loop gives the same
    values again; what is redone is less than what was waited) and ``switched`` true, or
    at the nest's end (no lane running) and ``switched`` false."""

    def outer_step(s):
        go, x, _ = s
        live = enter(go, x)
        icc, ibc, y = inner_of(live)
        stay = go & inner_test(icc, y)
        running, staying = counting.counts(go, stay)
        running = jnp.maximum(running, 1.0)

        def inner_step(t):
            stay, staying, y, idle = t
            # (the running lanes not in their inner loop wait through this step)
            idle = idle + (running - staying) / running
            y = pick(stay, lanes.vmap(nest.inner._body, (0, 0), 0, size, stay)(ibc, y), y)
            stay = stay & inner_test(icc, y)
            return stay, counting.counts(stay)[0], y, idle

        stay, staying, y, _ = while_loop(lambda t: (t[1] > 0) & (t[3] < switch_at), inner_step,
                                         (stay, staying, y, jnp.float32(0.0)),
                                         checkpoints=checkpoints)
        switched = staying > 0
        on = go & jnp.logical_not(switched)
        x = pick(on, lanes.vmap(nest.leave, (0, 0), 0, size, on)(live, y), x)
        return jnp.where(on, test(cc, x), go), x, switched

    go, x, switched = while_loop(lambda s: counting.any_(s[0]) & jnp.logical_not(s[2]), outer_step,
                                 (go, x, jnp.bool_(False)), checkpoints=checkpoints)
    return go, x, switched
