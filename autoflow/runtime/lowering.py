"""Choosing how a traced ``if`` is lowered: ``lax.cond`` or a select.

Plain Python::

    def choose(pred, true_fn, false_fn):
        return true_fn() if pred else false_fn()

A traced ``if`` (or ``a if c else b``) must trace both branches anyway. Once
both are traced we know exactly what each one computes (its jaxpr), and pick
the cheaper lowering:

* **select** (``lax.select`` on the branch outputs, both branches computed
  inline) when both branches are pure, loop-free and cheap and compute arrays:
  a ``lax.cond`` costs a conditional that is larger than a few thousand
  elementwise operations, and it blocks fusion of the branches with the code
  around them. Branches that compute only scalars keep the cond: XLA makes
  one kernel per selected scalar, which costs more than the conditional;
* **lax.cond** when a branch skips real work: a loop, a call to a heavy
  operation (``solve``, a decomposition, an FFT, a large ``dot``), or more
  elementwise work than ``SELECT_BUDGET``; and always when a branch has an
  effect (``print``/``jax.debug``/callbacks, a staged ``raise``), which must
  happen only on the path taken.

Under ``jax.vmap`` with a batched predicate, ``lax.cond`` is itself turned
into a select of both branches by JAX, and its batching rule broadcasts
every operand to the batch, including the values the branches only read (a
matrix closed over by the branch is copied once per lane). So a batched
predicate always gets a select of the *outputs* (when the branches have no
effects): values the branches only read stay unbatched.

The cost of a branch (``cost``) is the number of elements its equations
produce, with ``dot_general`` counted as multiply-adds and loops, and the
operations in ``HEAVY``, as infinite.
"""

from __future__ import annotations

import math
import threading

import numpy as np
import jax
from jax import lax
from jax import numpy as jnp
from jax import custom_batching

from ._jax_compat import lowering_internals

_INTERNALS = lowering_internals()
if _INTERNALS is not None:
    api_util, _core, batching, pe, FlatTree = _INTERNALS

# Elementwise operations (counted as output elements) below which a select of
# both branches beats a ``lax.cond``; measured with benchmarks/select_cost.py.
SELECT_BUDGET = 4096

_LOOPS = frozenset({"while", "scan", "fori_loop"})
HEAVY = frozenset({
    "custom_linear_solve", "lu", "lu_pivots_to_permutation", "triangular_solve", "cholesky",
    "eigh", "eig", "svd", "qr", "householder_product", "schur", "hessenberg", "tridiagonal",
    "tridiagonal_solve", "fft", "conv_general_dilated", "sort", "top_k", "cumsum", "cumprod",
    "cummax", "cummin", "cumlogsumexp", "argsort", "reduce_precision_custom",
    "rng_bit_generator", "random_bits", "threefry2x32", "all_gather", "psum",
})

_local = threading.local()


def last_choice():
    """What the last staged ``if`` on this thread lowered to (for ``explain``)."""
    return getattr(_local, "choice", None)


def _set_choice(choice):
    _local.choice = choice


def _size(aval):
    shape = getattr(aval, "shape", ())
    return int(np.prod(shape)) if shape else 1


def _subjaxprs(eqn):
    for v in eqn.params.values():
        for x in (v if isinstance(v, (tuple, list)) else (v,)):
            if isinstance(x, _core.ClosedJaxpr):
                yield x.jaxpr
            elif isinstance(x, _core.Jaxpr):
                yield x


def cost(jaxpr):
    """Estimated work of a jaxpr in element operations (``math.inf``: keep a cond)."""
    total = 0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in _LOOPS or name in HEAVY:
            return math.inf
        if name == "cond":  # an inner if that kept its cond: it skips work
            return math.inf
        subs = list(_subjaxprs(eqn))
        if subs:  # pjit, custom_jvp_call, closed_call, remat...: what they contain
            inner = max(cost(j) for j in subs)
            if inner == math.inf:
                return math.inf
            total += inner
            continue
        if name == "dot_general":
            (lc, _), _ = eqn.params["dimension_numbers"]
            lhs = eqn.invars[0].aval.shape
            k = int(np.prod([lhs[d] for d in lc])) if lc else 1
            total += _size(eqn.outvars[0].aval) * k
            continue
        total += sum(_size(v.aval) for v in eqn.outvars)
    return total


def _effects(closed):
    return bool(closed.effects) or bool(closed.jaxpr.effects)


def _batched(pred):
    """Is the predicate batched by a ``jax.vmap`` visible from here?"""
    for _ in range(8):
        if isinstance(pred, batching.BatchTracer):
            return pred.batch_dim is not None
        inner = getattr(pred, "primal", None)  # jvp: look at the primal
        if inner is None:
            return False
        pred = inner
    return False


def _trace(fn):
    avals = FlatTree.flatten(((), {})).map(_core.typeof)
    dbg = api_util.debug_info("if", fn, (), {})
    closed, _ = pe.trace_to_jaxpr(fn, avals, dbg)
    return closed


def _run(closed):
    return _core.eval_jaxpr(closed.jaxpr, closed.consts)


def decide(t, f, batched):
    """``'select'`` or ``'lax.cond'`` for the traced branches ``t``, ``f`` and why."""
    if _effects(t) or _effects(f):
        return "lax.cond", "a branch has effects"
    if batched:
        return "select", "batched predicate"
    if all(_size(a) == 1 for a in t.out_avals):
        # Only scalars: XLA makes one kernel per selected output, and a cond of
        # scalar branches is cheaper than that (benchmarks/run.py: bisection,
        # first_above_return).
        return "lax.cond", "the branches compute scalars only"
    work = cost(t.jaxpr) + cost(f.jaxpr)
    if work == math.inf:
        return "lax.cond", "a branch contains a loop or a heavy operation"
    if work > SELECT_BUDGET:
        return "lax.cond", f"branches do {work} element operations (> {SELECT_BUDGET})"
    return "select", f"branches do {work} element operations"


def _select(pred, a, b):
    a, b = jnp.asarray(a), jnp.asarray(b)
    if a.dtype != b.dtype:  # only weak types can differ here: promote as NumPy would
        dtype = jnp.result_type(a, b)
        a, b = lax.convert_element_type(a, dtype), lax.convert_element_type(b, dtype)
    if _core.typeof(a).weak_type != _core.typeof(b).weak_type:
        a, b = lax.convert_element_type(a, a.dtype), lax.convert_element_type(b, b.dtype)
    return lax.select(pred, a, b)


def _selected(t, f, kind="select"):
    """``g(pred, *consts)``: the select of both branches (``kind='select'``) or
    their ``lax.cond`` (``kind='cond'``), differentiated as a cond.

    Values come from the select (or cond); derivatives from a ``lax.cond`` of
    the branches' derivatives, so the branch not taken never reaches a
    gradient (a select would give ``0 * inf = nan`` for ``sqrt(x) if x > 0
    else 0.`` at 0, where Python and ``lax.cond`` give 0).

    The cond form batches with ``_batch_cond``: JAX's own rule for a cond
    with a batched predicate broadcasts every operand to the batch, including
    the values the branches only read; inside a loop body this ``if`` is
    traced before ``vmap`` sees it, so it cannot choose a select then."""
    nt = len(t.consts)

    def select_values(pred, *consts):
        ta = _core.eval_jaxpr(t.jaxpr, consts[:nt])
        fa = _core.eval_jaxpr(f.jaxpr, consts[nt:])
        return [_select(pred, a, b) for a, b in zip(ta, fa)]

    if kind == "select":
        values = select_values
    else:
        def cond_values(pred, *consts):
            return lax.cond(pred, lambda: _core.eval_jaxpr(t.jaxpr, consts[:nt]),
                            lambda: _core.eval_jaxpr(f.jaxpr, consts[nt:]))

        values = custom_batching.custom_vmap(cond_values)

        @values.def_vmap
        def _batch_cond(axis_size, in_batched, pred, *consts):
            pred_b, *consts_b = in_batched

            def batched(closed, lo, hi):
                axes = [0 if b else None for b in consts_b[lo:hi]]
                fn = lambda *c: _core.eval_jaxpr(closed.jaxpr, c)  # noqa: E731
                if not any(b is not None for b in axes):
                    return lambda: [jnp.broadcast_to(o, (axis_size,) + jnp.shape(o))
                                    for o in fn(*consts[lo:hi])]
                return lambda: jax.vmap(fn, in_axes=axes, axis_size=axis_size)(
                    *consts[lo:hi])

            bt, bf = batched(t, 0, nt), batched(f, nt, len(consts))
            if pred_b:  # both branches run; what they only read stays unbatched
                outs = [_select(_bcast_pred(pred, a), a, b) for a, b in zip(bt(), bf())]
            else:
                outs = lax.cond(pred, bt, bf)
            return outs, [True] * len(outs)

    def derivatives(primals, tangents):
        pred, *consts = primals
        _, *dconsts = tangents

        def branch(closed, lo, hi):
            def run():
                outs, douts = jax.jvp(lambda *c: _core.eval_jaxpr(closed.jaxpr, c),
                                      tuple(consts[lo:hi]), tuple(dconsts[lo:hi]))
                return [jnp.asarray(o) for o in outs], [_as_float(d, o)
                                                        for o, d in zip(outs, douts)]
            return run

        outs, douts = lax.cond(pred, branch(t, 0, nt), branch(f, nt, len(consts)))
        # The primal outputs come from this cond too: a `custom_vmap` primal is not
        # known to JAX's linearization (a custom_jvp rule using this `if` under grad).
        return outs, [_from_float(d, o) for d, o in zip(douts, outs)]

    fn = jax.custom_jvp(values)
    fn.defjvp(derivatives)
    return fn


def _bcast_pred(pred, like):
    """A batched predicate ``(B,)`` shaped to select between ``(B, ...)`` values."""
    return lax.broadcast_in_dim(pred, jnp.shape(like), (0,))


def _as_float(d, o):
    if getattr(d, "dtype", None) == jax.dtypes.float0 or not jnp.issubdtype(
            jnp.asarray(o).dtype, jnp.inexact):
        return jnp.zeros(np.shape(o), jnp.float32)
    return jnp.asarray(d)


def _from_float(d, o):
    """Integer and boolean outputs have float0 tangents (carried as float32 zeros in the cond)."""
    if jnp.issubdtype(o.dtype, jnp.inexact):
        return d
    return np.zeros(o.shape, jax.dtypes.float0)


def cond(pred, true_fn, false_fn):
    """``lax.cond(pred, true_fn, false_fn)`` for thunks returning lists of arrays,
    or a select of both when that is cheaper (see the module docstring)."""
    if _INTERNALS is None:  # an older JAX (see _jax_compat): always the cond
        _set_choice("lax.cond")
        return lax.cond(pred, true_fn, false_fn)
    t = _trace(true_fn)
    f = _trace(false_fn)
    choice, why = decide(t, f, _batched(pred))
    _set_choice(choice)
    if choice == "select":
        return _selected(t, f)(pred, *t.consts, *f.consts)
    if why == "a branch has effects" or not _batchable():
        return lax.cond(pred, lambda: _run(t), lambda: _run(f))
    return _selected(t, f, "cond")(pred, *t.consts, *f.consts)


def _batchable():
    """Use the kept cond's own batching rule (``custom_vmap``) only inside a staged
    branch or loop body, where the ``if`` is traced before ``vmap`` can see a
    batched predicate: elsewhere a plain ``lax.cond`` (JAX's linearization does
    not see through ``custom_vmap``: ``jit(grad(...))`` of a custom_jvp rule that
    branches failed)."""
    from .values import in_staged_block
    return in_staged_block()
