"""The cost rule of a traced ``if``: ``lax.cond`` or a select.

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
  around them. Branches that compute only scalars get a select only when
  they do at most ``SCALAR_SELECT_BUDGET`` operations and differ in at most
  ``SCALAR_SELECT_OUTPUTS`` outputs (a clamp such as ``if abs(d) < 1e-30:
  d = 1e-30``): that fuses with the code around it, 2-18% faster than the
  cond on gammainc, odeint and two of ``benchmarks/programs.py``, where a
  select of two or three flags was 1.45x slower than the cond, and collatz's
  12-operation branches 2-5% slower (``benchmarks/scalar_select.py``);
* **select** also for the ``if not broke:`` that a ``break`` (or a ``return``)
  makes of the rest of a loop body (``guard``), up to ``GUARD_SELECT_BUDGET``
  element operations: it skips its block only in the iteration that leaves
  the loop, so the select runs the block once more per run of the loop, where
  a cond costs a conditional in every iteration (and copies the carries it
  passes through: 0.56-0.86x of the cond's time at 1M element operations,
  never slower at any size measured, ``benchmarks/guard_select.py``). The
  outputs nothing reads once the loop is left (``free``: the loop's other
  carries) are taken from the true branch without a select at all;
* **select** also for branches with loops, when the rest of their work is
  within ``SELECT_BUDGET``: a loop autoflow stages in a branch has the
  branch's predicate in its condition (``loop_gate``), so in the branch the
  select does not take it runs no iteration, as the library versions of
  such code do by hand (``jax.scipy.special.gammainc``'s series and
  continued fraction): gammainc 1.07x -> 1.03x of the library;
* **lax.cond** when a branch skips real work: a loop that always runs (a
  ``lax`` loop of the user's own, a static ``range`` staged as a scan), a
  call to a heavy operation (``solve``, a decomposition, an FFT, a large
  ``dot``), or more elementwise work than ``SELECT_BUDGET``; and always when a
  branch has an effect (``print``/``jax.debug``/callbacks, a staged
  ``raise``), which must happen only on the path taken.

Under ``jax.vmap`` with a batched predicate, ``lax.cond`` is itself turned
into a select of both branches by JAX, and its batching rule broadcasts
every operand to the batch, including the values the branches only read (a
matrix closed over by the branch is copied once per lane). So a batched
predicate always gets a select of the *outputs* (when the branches have no
effects): values the branches only read stay unbatched.

The cost of a branch (``cost``) is the number of elements its equations
produce, with ``dot_general`` counted as multiply-adds, gated loops as
nothing, and other loops and the operations in ``HEAVY`` as infinite.

The rule sees both branches as jaxprs (``cond.primitive.stage_if`` traces them);
the gates below let a loop staged in a branch run only where the branch is
taken, so that branches with loops may be selects too.
"""

from __future__ import annotations

import math

import numpy as np
from jax import numpy as jnp

from .. import jax as jx
from ..common.coupling import now
from ..jax import current_trace


# Elementwise operations (counted as output elements) below which a select of
# both branches beats a ``lax.cond``; measured with benchmarks/select_cost.py.
SELECT_BUDGET = 4096


# The same for branches that compute only scalars, and how many of their outputs
# may differ between the branches (benchmarks/scalar_select.py).
SCALAR_SELECT_BUDGET = 8


SCALAR_SELECT_OUTPUTS = 1


# On a GPU a conditional in a loop body costs more than on a CPU: scalar branches
# that differ in up to this many outputs are a select there (measured on an H200 with
# benchmarks/scalar_select.py --outputs 4: bisection 1.18x -> 0.82x of optimistix,
# first_above_return 1.00x -> 0.71x of hand-written lax; on 2 CPU cores selecting the
# latter's two flags was 1.45x slower). The choice is made when the program is lowered,
# for the platform it is lowered for (``_Cond.low_form``).
GPU_SCALAR_SELECT_OUTPUTS = 4


GPU_PLATFORMS = ("cuda", "rocm")


# The same for the rest of a loop body that a `break` skips (``guard``): the work
# a select adds is one block per run of the loop; the select was never slower
# than the cond up to 8M element operations (benchmarks/guard_select.py), and
# past 16M a conditional's cost is lost in the block's.
GUARD_SELECT_BUDGET = 1 << 24


_LOOPS = frozenset({"while", "scan", "fori_loop"})


HEAVY = frozenset({
    "custom_linear_solve", "lu", "lu_pivots_to_permutation", "triangular_solve", "cholesky",
    "eigh", "eig", "svd", "qr", "householder_product", "schur", "hessenberg", "tridiagonal",
    "tridiagonal_solve", "fft", "conv_general_dilated", "sort", "top_k", "cumsum", "cumprod",
    "cummax", "cummin", "cumlogsumexp", "argsort", "reduce_precision_custom",
    "rng_bit_generator", "random_bits", "threefry2x32", "all_gather", "psum",
})


def loop_gate():
    """The predicate under which a loop staged here runs at all, or None.

    While a branch of a traced ``if`` with an unbatched predicate is traced,
    a loop staged in it (at the branch's own trace level: loops nested in
    that loop run only when it does) gets the branch's predicate, and those
    of the branches around it, in its condition: a select of both branches
    then runs no iteration of the loops of the branch it does not take, so
    branches with loops may be selects (see ``decide``). Where the branch is
    a ``lax.cond``'s, the predicate holds whenever the branch runs. (The gates:
    ``common.coupling.now.gates``.)
    """
    gates = now.gates
    if not gates or current_trace() is not gates[-1][0]:
        return None
    out = None
    for _, pred, negate in gates:
        p = jnp.logical_not(pred) if negate else pred
        out = p if out is None else jnp.logical_and(out, p)
    return out


def gating(fn, pred, negate):
    """``fn`` (a branch thunk), tracing with ``pred`` (or its negation) as the loops' gate."""
    def branch():
        gates = now.gates
        gates.append((current_trace(), pred, negate))
        try:
            return fn()
        finally:
            gates.pop()
    return branch


def in_lanes(fn):
    """``fn`` (a branch thunk of an ``if`` under a batched predicate), tracing with
    no gates for the loops of the ``if``s inside it (see ``loop_gate``)."""
    def branch():
        now.lanes += 1
        try:
            return fn()
        finally:
            now.lanes -= 1
    return branch


def under_lanes() -> bool:
    """Is a branch of an ``if`` under a batched predicate being traced (``in_lanes``)?"""
    return now.lanes > 0


def _size(aval):
    shape = getattr(aval, "shape", ())
    return int(np.prod(shape)) if shape else 1


def _inline_select(prim):
    """Is ``prim`` an ``if`` primitive (``cond.primitive._Cond``) that is a select of its
    branches, computed inline (their work is the select's)?"""
    return (getattr(prim, "primitive_name", None) == "if" and prim.kind == "select"
            and prim.inner is None)


def _gated_loop(eqn):
    """Is ``eqn`` a loop that runs only where its branch is taken (``loop_gate``)?"""
    if getattr(jx.hijax_prim_of(eqn), "gated", False):
        return True
    if eqn.primitive.name == "while":  # as `autoflow explain` stages it
        return jx.while_cond_jaxpr(eqn) in now.gated_conds
    return False


def cost(jaxpr):
    """Estimated work of a jaxpr in element operations (``math.inf``: keep a cond)."""
    total = 0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if _gated_loop(eqn):
            continue  # a loop that runs only where its branch is taken (loop_gate)
        if name in _LOOPS or name in HEAVY:
            return math.inf
        if name == "cond":  # an inner if that kept its cond: it skips work
            return math.inf
        prim = jx.hijax_prim_of(eqn)
        if prim is not None:  # one of autoflow's own primitives (loops.while_primitive, cond.primitive)
            if _inline_select(prim):
                total += cost(prim.t.jaxpr) + cost(prim.f.jaxpr)
                continue
            return math.inf  # a kept cond, a loop that always runs
        subs = list(jx.subjaxprs(eqn))
        if subs:  # pjit, custom_jvp_call, closed_call, remat...: what they contain
            inner = max(cost(j) for j in subs)
            if inner == math.inf:
                return math.inf
            total += inner
            continue
        if name == "dot_general":
            lc = jx.dot_contracting_dims(eqn)
            lhs = eqn.invars[0].aval.shape
            k = int(np.prod([lhs[d] for d in lc])) if lc else 1
            total += _size(eqn.outvars[0].aval) * k
            continue
        total += sum(_size(v.aval) for v in eqn.outvars)
    return total


def _gated_loops(jaxpr):
    """Does ``jaxpr`` stage a gated loop (``loop_gate``), in a select's branch too?"""
    for eqn in jaxpr.eqns:
        if _gated_loop(eqn):
            return True
        prim = jx.hijax_prim_of(eqn)
        if _inline_select(prim) and (
                _gated_loops(prim.t.jaxpr) or _gated_loops(prim.f.jaxpr)):
            return True
    return False


def _differing(t, f):
    """How many outputs of the branches ``t``, ``f`` may differ (a select each):
    all but those both pass through from the same outer value or constant."""
    def source(closed, v):
        if isinstance(v, jx.Literal):
            return ("literal", repr(v.val), str(v.aval))
        for var, const in zip(closed.jaxpr.constvars, closed.consts):
            if var is v:
                return ("outer", id(const))
        return None
    n = 0
    for a, b in zip(t.jaxpr.outvars, f.jaxpr.outvars):
        sa = source(t, a)
        if sa is None or sa != source(f, b):
            n += 1
    return n


def _effects(closed):
    return bool(closed.effects) or bool(closed.jaxpr.effects)


def decide(t, f, batched, guard=False):
    """``'select'`` or ``'lax.cond'`` for the traced branches ``t``, ``f`` and why
    (``guard``: the ``if`` a loop's ``break`` or ``return`` guards the rest of
    the body with, see ``cond.statements.if_stmt``)."""
    if _effects(t) or _effects(f):
        return "lax.cond", "a branch has effects"
    if batched:
        return "select", "batched predicate"
    work = cost(t.jaxpr) + cost(f.jaxpr)
    if work == math.inf:
        return "lax.cond", "a branch contains a loop or a heavy operation"
    if guard and work <= GUARD_SELECT_BUDGET:
        # The block it skips runs in every iteration but the one that leaves the
        # loop: as a select it runs once more per run of the loop, where a cond
        # costs its conditional in every iteration and splits the body.
        return "select", (f"the rest of a loop body after a `break` does {work} element "
                          "operations (skipped once, when the loop is left)")
    if _gated_loops(t.jaxpr) or _gated_loops(f.jaxpr):
        # The loops run only in the branch taken: what a cond skips beyond them is
        # the rest of the other branch, and it costs a conditional around loops.
        if work > SELECT_BUDGET:
            return "lax.cond", (f"branches with loops do {work} element operations besides "
                                f"the loops (> {SELECT_BUDGET})")
        return "select", (f"branches with loops do {work} element operations besides them "
                          "(a loop runs only in the branch taken)")
    if all(_size(a) == 1 for a in t.out_avals):
        # Only scalars: a select of a few cheap ones fuses with the code around
        # it, where a cond splits it; more work is worth skipping.
        differ = _differing(t, f)
        if work <= SCALAR_SELECT_BUDGET and differ <= SCALAR_SELECT_OUTPUTS:
            return "select", f"scalar branches do {work} operations"
        if work <= SCALAR_SELECT_BUDGET and differ <= GPU_SCALAR_SELECT_OUTPUTS:
            return GPU_SELECT, (f"scalar branches do {work} operations and differ in {differ} "
                                "outputs: a select when compiled for a GPU")
        return "lax.cond", (f"scalar branches do {work} operations and differ in {differ} "
                            f"outputs (a select: at most {SCALAR_SELECT_BUDGET} and "
                            f"{SCALAR_SELECT_OUTPUTS})")
    if work > SELECT_BUDGET:
        return "lax.cond", f"branches do {work} element operations (> {SELECT_BUDGET})"
    return "select", f"branches do {work} element operations"


# decide's choice for an `if` that is a lax.cond on a CPU and a select on a GPU
GPU_SELECT = "lax.cond (a select on GPU)"
