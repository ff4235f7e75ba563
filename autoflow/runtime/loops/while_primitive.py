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
* reverse mode (``jax.grad``, ``jax.vjp``): the first steps' residuals stored
  (``loops.stored``: the forward pass runs up to ``R`` steps linearized, ``R`` at most
  ``checkpoints`` and bounded by ``8 * checkpoints`` carries' worth of residuals, and
  the backward pass transposes the body over them), then, for the steps beyond,
  online checkpointing with a budget of ``checkpoints`` carries. The forward pass
  runs the loop and saves the
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
  as JAX splits its own ``while`` loop (see ``_split_jvp_loop``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import stored
from .batching import Batched
from .. import jax as jx
from ..jax import selfcheck
from ..common.coupling import now
from ..common import events
from ..common.events import plain_now
from ..common.primitives import RunsForItsEffects, inexact, instantiate, quiet_closed, specs


DEFAULT_CHECKPOINTS = 64
lane_note = None  # loops.lane_loop.describe: what `autoflow explain` says of the lanes


def _unread_inputs(jaxpr, avals):
    """``jaxpr`` with inputs of ``avals`` after its own, which it does not read
    (None where a jaxpr cannot be extended so)."""
    try:
        return jaxpr.replace(invars=[*jaxpr.invars, *(jx.Var(a) for a in avals)])
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
            var_of[id(t)] if t is not None else jx.Var(a) for t, a in zip(per_carry, avals))])
    except (AttributeError, TypeError, AssertionError):  # pragma: no cover - another JAX
        return None


def _floats(avals):
    """The positions of the inexact (differentiable) values among ``avals``."""
    return tuple(i for i, a in enumerate(avals) if inexact(a))


def _tangents_of(in_avals):
    """For a loop's ``(cc, bc, x)`` avals: the positions of the inexact values of
    ``bc`` and ``x``, and the avals of their tangents."""
    _, bc_av, x_av = in_avals
    fb, fi = _floats(bc_av), _floats(x_av)
    return (fb, fi, tuple(bc_av[i].to_tangent_aval() for i in fb),
            tuple(x_av[i].to_tangent_aval() for i in fi))


class _WhileLoop(Batched, RunsForItsEffects, jx.HiPrimitive):
    """``while cond(carry): carry = body(carry)`` over flat tuples of arrays."""

    stage_low = True  # staged as a low equation (see runtime.jax)
    primitive_name = "while_loop"  # what jax.make_jaxpr and HLO op names call it

    def __call__(self, *args):
        return jx.bind(self, args)

    def __init__(self, cond_jaxpr, body_jaxpr, in_avals, checkpoints, effects, gated=False,
                 lanes="auto", free=frozenset()):
        self.in_avals = in_avals  # (cond consts, body consts, carry): tuples of avals
        self.out_aval = in_avals[2]
        self.params = dict(cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr,
                           checkpoints=checkpoints)
        self.effects = effects
        # gated: its condition holds the branch's predicate (cond.select_or_cond.loop_gate), so
        # in the branch a select does not take it runs no iteration
        self.gated = gated
        # "auto", "lockstep" or "flat": how its lanes run under vmap (loops.lane_loop);
        # every loop made from this one (its JVP, its backward pass) keeps it
        self.lanes = lanes
        # carries (positions) that a lane keeps writing under vmap once it is done, which
        # the body guards by its own test (a buffer written one row a step, a finished
        # lane's rows going to a scratch row): lockstep does not mask them (see
        # Batched.lockstep_step); loops made from this one mask every carry
        self.free = frozenset(free)
        self.source_info = jx.source_here()  # (for an internal error's line)
        super().__init__()

    @property
    def quiet_body(self):
        """The body without its debug callbacks (for the backward pass), traced when
        first needed: a loop that prints or checks and is never reverse-differentiated
        does not pay for it (its first trace would trace the body once more)."""
        quiet = self.__dict__.get("_quiet_body")
        if quiet is None:
            body = self.params["body_jaxpr"]
            quiet = self.__dict__["_quiet_body"] = quiet_closed(body) if self.effects else body
        return quiet

    # -- meaning --------------------------------------------------------------

    def _cond(self, cc, x):
        return jx.eval_jaxpr(self.cond_jaxpr, cc, *x)[0]

    def _body(self, bc, x):
        # (a `jit` in the body runs in place: under vmap the lanes' mask reaches its loops)
        return tuple(jx.eval_inlined(self.body_jaxpr, bc, *x))

    def _recompute(self, bc, x):
        """The body as the backward pass recomputes it (no callbacks)."""
        return tuple(jx.eval_jaxpr(self.quiet_body, bc, *x))

    def quiet(self):
        """This loop without debug callbacks."""
        if not self.effects:
            return self
        return _WhileLoop(quiet_closed(self.cond_jaxpr), self.quiet_body, self.in_avals,
                          self.checkpoints, frozenset(), lanes=self.lanes)

    def expand(self, cc, bc, carry):
        if jx.while_p is not None:
            # The loop's jaxprs as they are, without tracing them again: lowering a
            # nest of loops and ifs then costs one pass over it.
            return tuple(jx.while_p.bind(*cc, *bc, *carry, cond_nconsts=len(cc),
                                       cond_jaxpr=jx.closed(self.cond_jaxpr),
                                       body_nconsts=len(bc), body_jaxpr=jx.closed(self.body_jaxpr)))
        return tuple(lax.while_loop(lambda x: self._cond(cc, x),
                                    lambda x: self._body(bc, x), tuple(carry)))

    def low_form(self, platforms=()):
        """JAX's ``while`` of the loop's jaxprs, for the lowering rule in ``runtime.jax``."""
        if jx.while_p is None:
            return None
        return ("while", dict(cond_nconsts=len(self.in_avals[0]),
                              cond_jaxpr=jx.closed(self.cond_jaxpr),
                              body_nconsts=len(self.in_avals[1]),
                              body_jaxpr=jx.closed(self.body_jaxpr)))

    # -- forward mode -----------------------------------------------------------

    def jvp(self, primals, tangents):
        # The JVP loop carries (primal, tangent) and is one of these loops too
        # (`_JvpLoop`), so that it can be reverse-differentiated in turn
        # (jax.grad of jax.jvp), and split by jax.checkpoint (`_JvpLoop.partial_eval`).
        cc, bc, x = primals
        _, tbc, tx = (instantiate(t, a) for t, a in zip(tangents, self.in_avals))
        fb, fi = _floats(self.in_avals[1]), _floats(self.in_avals[2])
        out = self.jvp_loop()(tuple(cc), tuple(bc) + tuple(tbc[i] for i in fb),
                              tuple(x) + tuple(tx[i] for i in fi))
        nx = len(x)
        ty = [jx.Zero(a.to_tangent_aval()) for a in self.in_avals[2]]
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
        tangents = tuple(instantiate(t, a) for t, a in zip(tangents, self.in_avals))
        return jax.jvp(self.expand, residuals, tangents)[1]

    # -- reverse mode -----------------------------------------------------------

    def loops(self):
        """``while_loop`` for the loops made from this one (they keep its ``lanes``)."""
        return functools.partial(while_loop, lanes=self.lanes)

    def reverse_loops(self):
        """``while_loop`` for the loops of the backward pass: lockstep under ``vmap`` where
        the forward pass's ``lanes`` is ``"auto"`` (the default), and what the user asked
        for otherwise (``lanes="flat"`` flattens a backward nest too). Their trip counts
        are counted by the forward pass; a flat or compacted form of them, compiled beside
        the lockstep one, made ``vmap(grad)`` of a loop compile up to 2x longer (the
        composing fuzzer's seeds 12093 and 12561: 124 and 65 s with it, 61 and 45 s
        without)."""
        return functools.partial(while_loop,
                                 lanes="lockstep" if self.lanes == "auto" else self.lanes)

    @property
    def stored_plan(self):
        """The body's linearization, for the steps whose residuals the forward pass
        stores (``loops.stored``), traced when first needed."""
        plan = self.__dict__.get("_stored_plan")
        if plan is None:
            plan = self.__dict__["_stored_plan"] = stored.plan(
                self._body, self.in_avals[1], self.in_avals[2], self.checkpoints)
        return plan

    def zero_cotangents(self, out_zero):
        """For each inexact carry, in order: is its cotangent zero at every step of the
        backward pass? ``out_zero``: for each carry, whether the cotangent of the loop's
        result is JAX's symbolic zero (nothing after the loop differentiates it). Such a
        carry's cotangent stays zero through the steps where no carry that is
        differentiated reads it (``err`` in ``while err > tol: ...; err =
        jnp.linalg.norm(x_new - x)``: only the test reads it). The steps' pullbacks take
        these as symbolic zeros (``jx.pull_sparse``), and do not multiply them by the
        body's derivatives: a norm's at zero is infinite, and the product NaN, where
        Python, which never differentiates ``err``, gives a finite gradient."""
        fi = _floats(self.in_avals[2])
        zero = {i for i in fi if out_zero[i]}
        if zero:
            reads = self._carries_read()
            changed = True
            while changed:
                changed = False
                for j in fi:
                    if j not in zero and reads[j] & zero:
                        zero -= reads[j]
                        changed = True
        return tuple(i in zero for i in fi)

    def _carries_read(self):
        """For each carry: the inexact carries its next value reads through inexact
        values (the way a cotangent flows back), directly or not."""
        reads = self.__dict__.get("_reads")
        if reads is None:
            jaxpr = jx.closed(self.body_jaxpr).jaxpr
            nbc, nx = len(self.in_avals[1]), len(self.in_avals[2])
            got = [set() for _ in range(nx)]
            for k in _floats(self.in_avals[2]):
                for j, (_, depends) in enumerate(jx.output_sources(jaxpr, (nbc + k,), inexact=True)):
                    if depends:
                        got[j].add(k)
            reads = self.__dict__["_reads"] = tuple(frozenset(r) for r in got)
        return reads

    def vjp_fwd(self, nzs_in, cc, bc, carry):
        out, saved = stored.forward(self._cond, self._body, self.stored_plan, cc, bc,
                                    tuple(carry), self.checkpoints, self.loops())
        return out, (cc, bc, saved)

    def vjp_bwd_retval(self, res, out_ct):
        cc, bc, saved = res
        carry_avals = self.in_avals[2]
        zeros = self.zero_cotangents(tuple(isinstance(t, jx.Zero) for t in out_ct))
        out_ct = instantiate(out_ct, carry_avals)
        ct_bc, ct_carry = stored.backward(self._recompute, self.stored_plan, bc, saved, out_ct,
                                          self.in_avals[1], carry_avals, self.checkpoints,
                                          self.reverse_loops(), zeros)
        def zero(a):
            return jx.Zero(a.to_ct_aval())
        return (tuple(zero(a) for a in self.in_avals[0]), ct_bc, ct_carry)


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

        cond_jaxpr = jax.make_jaxpr(cond)(*specs(cc_av + x_av + tx_av))
        body_jaxpr = jax.make_jaxpr(body)(*specs(bc_av + tb_av + x_av + tx_av))
        effects = frozenset(cond_jaxpr.effects) | frozenset(body_jaxpr.effects)
        super().__init__(cond_jaxpr, body_jaxpr, (cc_av, bc_av + tb_av, x_av + tx_av),
                         primal.checkpoints, effects, lanes=primal.lanes)
        self.primal = primal
        self.sizes = (ncc, nbc, ntb, nx, len(tx_av))

    def partial_eval(self, saveable, unks_in, inst_in, eqn):
        """JAX's ``partial_eval_jaxpr_custom`` rule for this equation (see the class)."""
        ncc, nbc, ntb, nx, ntx = self.sizes
        primal_at = [*range(ncc + nbc), *range(ncc + nbc + ntb, ncc + nbc + ntb + nx)]
        tangent_at = [*range(ncc + nbc, ncc + nbc + ntb),
                      *range(ncc + nbc + ntb + nx, ncc + nbc + ntb + nx + ntx)]
        if any(unks_in[i] for i in primal_at) or not any(unks_in[i] for i in tangent_at):
            return jx.default_partial_eval(saveable, unks_in, inst_in, eqn)
        primal_in = [eqn.invars[i] for i in primal_at]
        known = jx.new_eqn(primal_in, eqn.outvars[:nx], self.primal, self.primal.effects, eqn)
        staged = jx.new_eqn(primal_in + [eqn.invars[i] for i in tangent_at], eqn.outvars[nx:],
                            _LoopTangent(self.primal), frozenset(), eqn)
        flags = [False] * nx + [True] * ntx
        return known, staged, flags, flags, jx.residuals(eqn, inst_in)


class _LoopTangent(jx.HiPrimitive):
    """The tangents of the results of the loop ``loop`` as a (linear) function of
    its operands' tangents: ``(cc, bc, x, tbc, tx) -> ty`` (``tbc``, ``tx``, ``ty``
    for the inexact values only). Evaluated, it runs the JVP loop; transposed
    (``jax.grad`` through ``jax.checkpoint``), it is the checkpointed backward
    pass, which recomputes the loop from ``x``."""

    stage_low = True  # staged as a low equation (see runtime.jax)
    primitive_name = "while_loop_tangent"

    def __call__(self, *args):
        return jx.bind(self, args)

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
        tangents = tuple(instantiate(t, a) for t, a in zip(tangents, self.in_avals))
        return jax.jvp(self.tangent, primals, tangents)

    def transpose(self, out_ct, cc, bc, x, tb_acc, tx_acc):
        loop = self.loop.quiet()
        _, bc_av, x_av = self.loop.in_avals
        ct = [jnp.zeros(a.shape, a.to_tangent_aval().dtype) for a in x_av]
        out_zero = [True for _ in x_av]
        for i, t, a in zip(self.fi, out_ct, self.out_aval):
            ct[i] = jnp.zeros(a.shape, a.dtype) if isinstance(t, jx.Zero) else t
            out_zero[i] = isinstance(t, jx.Zero)
        _, saved = stored.forward(loop._cond, loop._body, loop.stored_plan, tuple(cc), tuple(bc),
                                  tuple(x), loop.checkpoints, loop.loops())
        ct_bc, ct_x = stored.backward(loop._recompute, loop.stored_plan, tuple(bc), saved,
                                      tuple(ct), bc_av, x_av, loop.checkpoints,
                                      loop.reverse_loops(), loop.zero_cotangents(out_zero))
        for accs, grads, at in ((tb_acc, ct_bc, self.fb), (tx_acc, ct_x, self.fi)):
            for acc, i in zip(accs, at):  # (an operand that is not linear: no accumulator)
                if hasattr(acc, "accum") and not isinstance(grads[i], jx.Zero):
                    acc.accum(grads[i])

    def batch(self, axis_data, args, dims):
        out = jax.vmap(self.tangent, in_axes=dims, axis_size=axis_data.size)(*args)
        return out, tuple(0 for _ in out)



def while_loop(cond_fun, body_fun, init, *, checkpoints=DEFAULT_CHECKPOINTS, added=None,
               gated=False, added_inputs=None, lanes="auto", free=None):
    """``lax.while_loop(cond_fun, body_fun, init)`` (``init`` a pytree of arrays),
    reverse-differentiable with at most ``checkpoints`` saved carries.

    With ``added`` (where ``runtime.jax.primitives()``), returns ``(carry, extra)``: after each
    call of ``body_fun`` while it is traced, ``added()`` gives arrays the body
    computed that are carries too, zeros before the first iteration, and that
    the body's values do not depend on (the loop's first trace found a variable
    it binds: loops.staging.stage_loop). The body's jaxpr then takes them as inputs it does
    not read, instead of the body being traced again. ``added_inputs()``, after
    ``added()``: for each of those arrays, the input of the body's jaxpr made for
    it while the body was traced (a tracer of the body's trace, which the body
    does read: the value the carry has when an iteration starts), or None.
    ``gated``: ``cond_fun`` holds the predicate of the branch the loop is in
    (see ``cond.select_or_cond.loop_gate``). ``lanes``: how the loop's lanes run under
    ``vmap`` (``"auto"``, ``"lockstep"``, ``"flat"``: ``loops.lane_loop``). ``free``: a
    tree like ``init`` of bools, True for the carries that the body writes only where
    ``cond_fun`` holds (elsewhere into a part nothing reads), so that under ``vmap`` a
    finished lane's writes need no masking (``_WhileLoop.free``).
    """
    if not jx.primitives():
        if added is not None:
            raise ValueError("while_loop: `added` needs runtime.jax.primitives()")
        # The test is computed at the end of each iteration and carried: JAX's own
        # lowering of a while whose test has effects (a check in a loop test that calls
        # user code) failed on older JAX ("safe_map() argument 2 is longer"). The test
        # runs as often and in the same order as in the while form.
        def tested_body(c):
            new = body_fun(c[1])
            return jnp.asarray(cond_fun(new), bool).reshape(()), new
        return lax.while_loop(lambda c: c[0], tested_body,
                              (jnp.asarray(cond_fun(init), bool).reshape(()), init))[1]
    plain = plain_now()
    leaves, tree = jax.tree_util.tree_flatten(init)
    # (weakly typed carries stay so: a Python scalar carried through a loop combines
    # with a float16 array as float16, as it does in Python and in lax.while_loop)
    avals = tuple(jx.ShapedArray(jnp.shape(x), jnp.result_type(x),
                                 weak_type=bool(getattr(jx.typeof(x), "weak_type", False)))
                  for x in leaves)
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

    cond_jaxpr, cc = jx.trace_fn(lambda *x: cond_fun(unflat(x)), avals)
    body_jaxpr, bc = jx.trace_fn(body_flat, avals)
    flat = tuple(jnp.asarray(x) for x in leaves)  # (their avals: `avals`)
    n = len(avals)
    more = tuple(jx.ShapedArray(v.aval.shape, v.aval.dtype,
                                weak_type=getattr(v.aval, "weak_type", False))
                 for v in body_jaxpr.outvars[n:])
    if more:
        # The same jaxprs, taking the added carries too: as inputs they do not read, or
        # for the body, the inputs its trace made for them (where JAX's jaxprs cannot
        # be extended so, replayed with them).
        wider = (_placed_inputs(body_jaxpr, len(bc) + n, made, more),
                 _unread_inputs(cond_jaxpr, more))
        if None in wider:  # pragma: no cover - another JAX
            body0, bc0, cond0, cc0 = body_jaxpr, bc, cond_jaxpr, cc
            body_jaxpr, bc = jx.trace_fn(lambda *x: jx.eval_jaxpr(body0, bc0, *x[:n]), avals + more)
            cond_jaxpr, cc = jx.trace_fn(lambda *x: jx.eval_jaxpr(cond0, cc0, *x[:n]), avals + more)
        else:
            body_jaxpr, cond_jaxpr = wider
        avals += more
        flat += tuple(jnp.zeros(a.shape, a.dtype) for a in more)
    effects = frozenset(cond_jaxpr.effects) | frozenset(body_jaxpr.effects)
    in_avals = (tuple(jx.typeof(x) for x in cc), tuple(jx.typeof(x) for x in bc), avals)
    if free is not None and jax.tree_util.tree_structure(free) != tree:
        raise TypeError(f"while_loop: `free` is not shaped like the carry: {tree}")
    at = () if free is None else (k for k, f in enumerate(jax.tree_util.tree_leaves(free)) if f)
    prim = _WhileLoop(cond_jaxpr, body_jaxpr, in_avals, max(4, int(checkpoints)), effects,
                      gated, lanes, at)
    if lane_note is not None:
        events.note("lanes", lane_note(prim))
    if plain or effects and not selfcheck.effects_ok():
        # the `lax.while_loop` it compiles to (explain mode; a loop with effects where
        # JAX cannot lower them in autoflow's primitive)
        out = prim.expand(cc, bc, flat)
        if gated:
            now.gated_conds.add(cond_jaxpr)
    else:
        out = prim(cc, bc, flat)
    if added is None:
        return unflat(out)
    return unflat(out[:n]), tuple(out[n:])


def _split_jvp_loop(saveable, unks_in, inst_in, eqn):
    """``jax.checkpoint``'s partial evaluation of a ``_JvpLoop`` equation (None: another)."""
    prim = jx.hijax_prim_of(eqn)
    if isinstance(prim, _JvpLoop):
        return prim.partial_eval(saveable, unks_in, inst_in, eqn)
    return None


selfcheck.parts["while_loop"] = while_loop

# Staged as low equations (jax.jit keeps its fast path), named for what they are, and
# split by jax.checkpoint: where JAX's private API allows it (runtime.jax).
if jx.install_low_staging():
    jx.name_primitives([_WhileLoop, _JvpLoop, _LoopTangent])
    jx.install_remat_rule(_split_jvp_loop)
