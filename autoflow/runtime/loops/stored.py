"""Reverse mode near the forward pass: the first steps' residuals, stored.

Online checkpointing (``loops.checkpointing``) evaluates the body of a loop about
4-5 times per step in all under ``jax.grad`` (the forward pass, the recomputation
of the carries, then a ``jax.vjp`` of the body per step, which evaluates it once
more). A loop that converges in a few dozen steps (a conjugate gradient, a Newton
iteration, an ODE integrator) can instead keep what the backward pass needs, as
``lax.scan`` does:

* the forward pass (``forward``) runs the first ``R`` steps linearized: each
  computes the body's results and its residuals (what ``jax.vjp`` of the body
  keeps for its backward pass) and writes those into a buffer of ``R`` rows;
  if the loop has not ended after ``R`` steps, it goes on from there as the
  checkpointed forward pass (behind a ``lax.cond``: its setup paid only then);
* the backward pass (``backward``) reverses the steps after the first ``R``, if any,
  in rounds of the checkpointed backward pass (``checkpointing.next_round``): each
  recomputes a part of at most ``R`` steps from a saved carry, linearized, into rows
  of its own, then reverses it by the steps' pullbacks over them (or recomputes up to
  a carry it saves in a free slot, to cut a long gap); then the first ``min(N, R)``
  steps by their pullbacks over the stored rows: no stored step is evaluated again.
  A step recomputed costs one linearized step and one pullback, where the
  checkpointed backward pass alone evaluates the body and then ``jax.vjp`` of it
  (the Euler integrator of ``grad_loops.py``: 1,000 steps 2.95 -> 1.79 ms, 10,000
  30.8 -> 21.9 ms; the rounds' rows are ``R`` more rows of temporaries).

Residuals that are constants of the loop (the matrix of a conjugate gradient)
are read from them, not stored; those computed from constants only are kept
once (the last step's). The stored residuals are packed, one buffer row per step
and dtype. ``R`` (``plan``): the most steps whose residuals fit in
``STORED * checkpoints`` carries' worth of memory, at most ``MOST * checkpoints``
steps; none (the checkpointed passes alone, as before) when fewer than ``FEWEST``
fit, as for a loop whose body holds a loop with a large carry. Memory, with the
default 64: the stored rows, the cotangents of the stored steps (below), the
checkpointed passes' 64 carries and, where the loop ran past the stored steps, as many
rows again for the rounds (XLA counts both sets in a program's temporaries).

The cotangent of a matrix the body reads (``A`` in ``A @ p``) is a sum over the
steps of outer products; accumulated step by step it costs as much as the step
itself. The backward loop keeps instead the cotangent each step was given, and
after it (after each round) one transposition of all the steps' pullbacks, batched
over the steps, gives the sum (``_summed``: one product of matrices). Where JAX cannot transpose
the pullbacks (a ``lax.cond`` or a loop in them), the sums are taken step by step.

Both passes are loops of ``loops.while_primitive`` (``loop``), so ``jax.grad`` of
``jax.grad`` works; under ``vmap`` each lane stores its own steps, and its rows are
``free`` carries of those loops (``while_primitive.while_loop``): a lane that is done
writes the scratch row, which nothing reads, instead of every buffer of rows being
masked every step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import checkpointing
from .. import jax as jx
from ..common.primitives import inexact, quiet_closed, specs

STORED = 8  # the residual buffer: at most STORED * checkpoints carries' worth
MOST = 1  # at most MOST * checkpoints stored steps
FEWEST = 8  # fewer stored steps than this: none


class Plan:
    """The body's linearization, traced once: ``jaxpr`` maps ``(*bc, *x)`` to the
    body's results and the leaves of its pullback (``tree``), each of which is
    ``("input", k)`` (the constant ``bc[k]``), ``("const", None)`` (computed from
    constants only) or ``("step", None)`` (stored per step); ``slots``: ``R``."""

    def __init__(self, jaxpr, tree, kinds, avals, slots):
        self.jaxpr, self.tree, self.kinds, self.avals, self.slots = \
            jaxpr, tree, kinds, avals, slots
        self.transposable = None  # (see summed)

    def summed(self, fn, bufs, consts, bc, ct_avals):
        """Can ``fn(bufs, consts, bc, cts)`` (``_summed``) be traced: are the steps'
        pullbacks linear maps JAX can transpose (not so where the body holds a loop of
        autoflow's)? Found once, on abstract values."""
        if self.transposable is None:
            cts = tuple(jax.ShapeDtypeStruct((self.slots, width), dtype)
                        for dtype, width in _widths(_groups(ct_avals)))
            try:
                jax.eval_shape(fn, bufs, consts, bc, cts)
                self.transposable = True
            except Exception:  # noqa: BLE001 - whatever fails: the per-step sums instead
                self.transposable = False
        return self.transposable

    @property
    def quiet(self):
        """``jaxpr`` without its debug callbacks (the backward pass's recomputation)."""
        quiet = self.__dict__.get("_quiet")
        if quiet is None:
            quiet = self.__dict__["_quiet"] = (quiet_closed(self.jaxpr) if self.jaxpr.effects
                                               else self.jaxpr)
        return quiet

    def of_kind(self, kind):
        return tuple(a for a, (k, _) in zip(self.avals, self.kinds) if k == kind)


def _merge(values, at, new):
    values = list(values)
    for i, v in zip(at, new):
        values[i] = v
    return tuple(values)


def _bytes(avals):
    # (an extended dtype, a typed PRNG key's, is no NumPy dtype: it says its own size)
    return sum(int(np.prod(a.shape, dtype=np.int64)) * getattr(a.dtype, "itemsize", 4)
               for a in avals)


def plan(body, bc_avals, x_avals, checkpoints):
    """The ``Plan`` of the loop body ``body(bc, x)`` (``bc`` and ``x`` of these avals)."""
    nbc, nx = len(bc_avals), len(x_avals)
    fb = [i for i, a in enumerate(bc_avals) if inexact(a)]
    fi = [i for i, a in enumerate(x_avals) if inexact(a)]
    made = {}

    def linearized(*a):
        bc, x = a[:nbc], a[nbc:]

        def f(bcf, xf):
            out = body(_merge(bc, fb, bcf), _merge(x, fi, xf))
            return tuple(out[i] for i in fi), tuple(out)

        _, pull, out = jax.vjp(f, tuple(bc[i] for i in fb), tuple(x[i] for i in fi),
                               has_aux=True)
        leaves, made["tree"] = jax.tree_util.tree_flatten(pull)
        return (*out, *leaves)

    try:
        closed = jax.make_jaxpr(linearized)(*specs(bc_avals + x_avals))
    except Exception:  # noqa: BLE001 - a body JAX cannot linearize with its callbacks
        # (the checkpointed backward pass differentiates the body without them)
        return Plan(None, None, (), (), 0)
    kinds = tuple(("input", k) if k is not None and k < nbc else
                  ("step" if depends else "const", None)
                  for k, depends in jx.output_sources(closed, range(nbc, nbc + nx))[nx:])
    avals = tuple(v.aval for v in closed.jaxpr.outvars[nx:])
    result = Plan(closed, made["tree"], kinds, avals, 0)
    step = _bytes(result.of_kind("step"))
    most = MOST * checkpoints
    slots = most if step == 0 else min(most, STORED * checkpoints * _bytes(x_avals) // step)
    result.slots = slots if slots >= FEWEST else 0
    return result


def _zeros(avals, lead=()):
    return tuple(jnp.zeros(lead + tuple(a.shape), a.dtype) for a in avals)


def _groups(avals):
    """The stored residuals packed by dtype (one buffer row per step and dtype: one
    write per step and dtype): ``{dtype: [(position, size, shape)...]}``."""
    groups = {}
    for k, a in enumerate(avals):
        groups.setdefault(a.dtype, []).append(
            (k, int(np.prod(a.shape, dtype=np.int64)), tuple(a.shape)))
    return groups


def _widths(groups):
    """``(dtype, values in a row)`` of each buffer of ``groups`` (``_groups``)."""
    return [(dtype, sum(size for _, size, _ in g)) for dtype, g in groups.items()]


def _pack(groups, values):
    return tuple(jnp.concatenate([jnp.ravel(values[k]) for k, _, _ in g]) if len(g) > 1
                 else jnp.ravel(values[g[0][0]]) for g in groups.values())


def _unpack(groups, rows, count):
    values = [None] * count
    for g, row in zip(groups.values(), rows):
        at = 0
        for k, size, shape in g:
            values[k] = row[at:at + size].reshape(shape)
            at += size
    return values


def _linearized(jaxpr, bc, x, nx):
    """One linearized step: the body's results and its pullback's leaves."""
    out = jx.eval_inlined(jaxpr, tuple(bc), *x)
    return tuple(out[:nx]), out[nx:]


def _rows(plan):
    """Residual buffers of ``plan.slots + 1`` rows (the last: scratch), one per dtype:
    ones where inexact, so that a row no step wrote stays finite through a transposed
    division (``_summed``); zeros elsewhere, so that the trip counts and saved steps of a
    loop in the body read from them under ``vmap``, by a lane whose steps are all
    reversed, are none."""
    return tuple((jnp.ones if jnp.issubdtype(dtype, jnp.inexact) else jnp.zeros)(
        (plan.slots + 1, width), dtype) for dtype, width in _widths(_groups(plan.of_kind("step"))))


def _store(plan, bufs, leaves, row):
    """Write a step's residuals (``leaves``) into row ``row`` of ``bufs``."""
    steps = _pack(_groups(plan.of_kind("step")),
                  [v for v, (k, _) in zip(leaves, plan.kinds) if k == "step"])
    return tuple(lax.dynamic_update_index_in_dim(b, v, row, 0) for b, v in zip(bufs, steps))


def forward(cond, body, plan, cc, bc, carry, checkpoints, loop):
    """Run the loop (``body`` with its effects), the first ``plan.slots`` steps
    linearized, their residuals stored (one row each); if the loop has not ended after
    them, it goes on as the checkpointed forward pass (``checkpointing.forward``, its
    steps counted from there). Returns ``(final carry, saved)``, for ``backward``."""
    if not plan.slots:
        out, saved = checkpointing.forward(cond, body, cc, bc, carry, checkpoints, loop)
        return out, (saved,)
    nx, kinds = len(carry), plan.kinds

    def step(s):
        go, n, x, bufs, consts = s
        y, leaves = _linearized(plan.jaxpr, bc, x, nx)
        # (a lane that is done, under vmap, writes the scratch row: the rows are free)
        bufs = _store(plan, bufs, leaves, jnp.where(go & (n < plan.slots), n, plan.slots))
        consts = tuple(v for v, (k, _) in zip(leaves, kinds) if k == "const")
        go = jnp.asarray(cond(cc, y), bool).reshape(())
        return go, n + 1, y, bufs, consts

    go = jnp.asarray(cond(cc, carry), bool).reshape(())
    s = (go, jnp.int32(0), tuple(carry), _rows(plan), _zeros(plan.of_kind("const")))
    free = (False, False, tuple(False for _ in carry), tuple(True for _ in s[3]),
            tuple(False for _ in s[4]))  # (the rows)
    go, n, x, bufs, consts = loop(lambda s: s[0] & (s[1] < plan.slots), step, s,
                                  checkpoints=checkpoints, free=free)
    # (a lane the loop did not run, under `vmap` (one that does not take the branch the
    # loop is in: `loops.lanes`), keeps the `go` of before it: the continuation below,
    # whose `cond` JAX batches into a select, must not run its loop for that lane)
    go = go & (n > 0)

    def more(x):
        return checkpointing.forward(cond, body, cc, bc, x, checkpoints, loop, go=go)

    def done(x):
        return x, checkpointing.unsaved(x, checkpoints)

    # (a cond: the checkpointed pass's setup is paid where the loop goes on; XLA:CPU runs
    # a program's independent setups concurrently, handing some to its worker threads)
    out, saved = lax.cond(go, more, done, x)
    return out, (saved, n, bufs, consts)


def _pullback(plan, rows, consts, bc):
    """Step ``t``'s pullback, from its row of each stored buffer."""
    step_avals = plan.of_kind("step")
    steps = iter(_unpack(_groups(step_avals), rows, len(step_avals)))
    fixed = iter(consts)
    leaves = [bc[at] if k == "input" else next(fixed) if k == "const" else next(steps)
              for k, at in plan.kinds]
    return jax.tree_util.tree_unflatten(plan.tree, leaves)


def _summed(plan, bufs, consts, bc, cts, ct_avals, fb, zero=()):
    """``sum over t`` of the constants' part of step ``t``'s pullback at ``cts[t]`` (the
    cotangents fed to it), as one transposition of the steps' linear maps batched
    over ``t`` (a cotangent that is a sum of outer products becomes one product of
    matrices). Rows of ``bufs`` that hold no step of the round have zero ``cts``: they
    hold ones (no step wrote them) or another step's residuals, which add nothing
    (or what that step added in its own round, where not finite)."""
    ct_groups = _groups(ct_avals)
    ct_specs = tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in ct_avals)

    def tangents_of_steps(dbc):
        def one(rows):
            def of_step(ct):
                return jx.pull_sparse(_pullback(plan, rows, consts, bc), ct, zero)[0]
            ct, = jax.linear_transpose(of_step, ct_specs)(dbc)
            return _pack(ct_groups, ct)
        return jax.vmap(one)(bufs)

    bc_specs = tuple(jax.ShapeDtypeStruct(jnp.shape(bc[i]), jnp.result_type(bc[i])) for i in fb)
    dbc, = jax.linear_transpose(_pruned(tangents_of_steps, bc_specs), bc_specs)(cts)
    return dbc


def _pruned(fn, *specs):
    """``fn`` run as its jaxpr read for its values (``jx.linear_values``): batching a
    ``cond`` of the steps' pullbacks leaves ``stop_gradient``s in them, which
    ``jax.linear_transpose`` refuses."""
    closed, shape = jax.make_jaxpr(fn, return_shape=True)(*specs)
    jaxpr, consts = jx.consts_as_inputs(closed)
    linear = jx.linear_values(jaxpr)
    if linear is None:  # pragma: no cover - (another JAX: the sums step by step)
        return fn
    tree = jax.tree_util.tree_structure(shape)

    def run(*args):
        return jax.tree_util.tree_unflatten(
            tree, jx.eval_jaxpr(linear, (), *consts, *jax.tree_util.tree_leaves(args)))
    return run


def backward(body, plan, bc, saved, out_ct, bc_avals, carry_avals, checkpoints, loop,
             zero=()):
    """The cotangents of ``(bc, carry)`` from those of the final carry (``body``: the
    body as the checkpointed backward pass recomputes it, without callbacks).

    The steps after the stored ones, if any, are reversed first, in rounds of the
    checkpointed backward pass (``checkpointing.next_round``), each of which
    recomputes from a saved carry, linearized, into rows of its own (a part of at most
    ``plan.slots`` steps, or up to a carry it saves), then reverses that part by the
    steps' pullbacks; then the stored steps, by their pullbacks over the stored rows."""
    if not plan.slots:
        return checkpointing.backward(body, bc, saved[0], out_ct, bc_avals, carry_avals,
                                      checkpoints, loop, zero)
    (buf, pos, after), n, bufs, consts = saved
    rows = plan.slots
    fb = [i for i, a in enumerate(bc_avals) if inexact(a)]
    fi = [i for i, a in enumerate(carry_avals) if inexact(a)]
    ct_avals = tuple(carry_avals[i] for i in fi)
    ct_groups = _groups(ct_avals)
    nx = len(carry_avals)
    # (summed after each part where a constant is a matrix: its per-step cotangents are
    # outer products; vectors and scalars are summed step by step, as cheaply)
    summed = any(len(bc_avals[i].shape) >= 2 for i in fb) and plan.summed(
        lambda *a: _summed(plan, *a, ct_avals, fb, zero), tuple(b[:plan.slots] for b in bufs),
        consts,
        bc, ct_avals)

    def fill(x, p, k, lo, bufs):
        """``k`` steps from the carry ``x`` of step ``p``, step ``j``'s residuals in row
        ``j - lo`` (in the scratch row below ``lo``)."""
        def one(i, c):
            x, bufs = c
            y, leaves = _linearized(plan.quiet, bc, x, nx)
            j = p + i
            return y, _store(plan, bufs, leaves, jnp.where((j >= lo) & (i < k), j - lo, rows))
        return checkpointing.fori(k, one, (x, bufs), checkpoints, loop,
                                  free=(tuple(False for _ in x), tuple(True for _ in bufs)))

    def reverse(t, start, ct, acc, bufs):
        """Steps ``t`` down to ``start``, from rows ``t - start`` down to 0."""
        def back(j, c):
            ct, acc = c
            row = t - start - j
            pull = _pullback(plan, [lax.dynamic_index_in_dim(b, row, 0, keepdims=False)
                                    for b in bufs], consts, bc)
            g_bc, g_x = jx.pull_sparse(pull, ct, zero)
            if summed:  # (the constants' part, for all steps of the round: _summed)
                row = jnp.where(row >= 0, row, rows)  # (a finished lane: the scratch row)
                return tuple(g_x), tuple(lax.dynamic_update_index_in_dim(b, v, row, 0) for b, v
                                         in zip(acc, _pack(ct_groups, ct)))
            return tuple(g_x), tuple(a + g for a, g in zip(acc, g_bc))

        return checkpointing.fori(t - start + 1, back, (ct, acc), checkpoints, loop,
                                  free=(tuple(False for _ in ct), tuple(summed for _ in acc)))

    def ct_rows():
        return tuple(jnp.zeros((rows + 1, width), dtype) for dtype, width in _widths(ct_groups))

    def round_(s):
        """A round after the stored steps (``t`` counted from them): recompute, then
        reverse."""
        t, buf, pos, window, ct, ct_bc = s
        split, slot, free, start, q = checkpointing.next_round(t, pos, after, rows,
                                                               checkpoints)
        p = pos[slot]
        # (none where t < 0: under vmap a lane that is done still runs the round, on
        # saves that hold no state; its loops must run no step)
        idle = split | (t < 0)
        k = jnp.where(t < 0, 0, jnp.clip(jnp.where(split, q, t + 1) - p, 0, after))
        xq, window = fill(tuple(b[slot] for b in buf), p, k,
                          jnp.where(split, after + rows, start), window)
        ct, ct_bc = reversed_(jnp.where(idle, start - 1, t), start, ct, ct_bc, window)
        buf, pos, t = checkpointing.after_round(buf, pos, split, free, q, start, t, xq,
                                                checkpoints)
        return t, buf, pos, window, ct, ct_bc

    def reversed_(t, start, ct, ct_bc, bufs):
        ct, acc = reverse(t, start, ct, ct_rows() if summed else ct_bc, bufs)
        if summed:  # (the scratch rows left out: a finished lane's writes, under vmap)
            dbc = _summed(plan, tuple(b[:rows] for b in bufs), consts, bc,
                          tuple(a[:rows] for a in acc), ct_avals, fb, zero)
            return ct, tuple(a + g for a, g in zip(ct_bc, dbc))
        return ct, acc

    def beyond(a):
        """The steps after the stored ones, reversed by rounds (a cond: their setup
        costs a call even where they reverse no step)."""
        s = (after - 1, buf, pos, _rows(plan)) + a
        *_, ct, ct_bc = loop(lambda s: s[0] >= 0, round_, s, checkpoints=checkpoints)
        return ct, ct_bc

    ct = tuple(out_ct[i] for i in fi)
    ct_bc = tuple(jnp.zeros(bc_avals[i].shape, bc_avals[i].dtype) for i in fb)
    ct, ct_bc = lax.cond(after > 0, beyond, lambda a: a, (ct, ct_bc))
    ct_x, ct_bc = reversed_(n - 1, 0, ct, ct_bc, bufs)
    return (_merge((jx.Zero(a.to_ct_aval()) for a in bc_avals), fb, ct_bc),
            _merge((jx.Zero(a.to_ct_aval()) for a in carry_avals), fi, ct_x))
