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

Either lowering is staged as one primitive, ``_Cond``, whose rules for
``vmap``, ``jvp`` and ``grad`` are its own (see its docstring): so the
choice, and the unbatched reads under a batched predicate, survive any order
of ``jit``, ``vmap`` and ``grad``, and gradients are always those of a cond.
On a JAX without user-defined primitives every traced ``if`` is a plain
``lax.cond``.
"""

from __future__ import annotations

import math
import os
import sys
import threading

import numpy as np
import jax
from jax import lax
from jax import numpy as jnp

from ._jax_compat import (checkpoint_internals, control_flow_primitives, current_trace,
                          lowering_internals)

_INTERNALS = lowering_internals()
_HI = checkpoint_internals()
_COND_P = (control_flow_primitives() or (None, None))[1]
if _INTERNALS is None or _HI is None:  # an older JAX: every traced `if` is a lax.cond
    _INTERNALS = None
    _VJPHiPrimitive = object
else:
    api_util, _core, batching, pe, FlatTree = _INTERNALS
    _VJPHiPrimitive, _, _ad_util, _, _ = _HI
    from . import lanes, lowjit

    lowjit.install()  # _Cond staged as a low equation: jax.jit keeps its fast path

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

_local = threading.local()


def loop_gate():
    """The predicate under which a loop staged here runs at all, or None.

    While a branch of a traced ``if`` with an unbatched predicate is traced,
    a loop staged in it (at the branch's own trace level: loops nested in
    that loop run only when it does) gets the branch's predicate, and those
    of the branches around it, in its condition: a select of both branches
    then runs no iteration of the loops of the branch it does not take, so
    branches with loops may be selects (see ``decide``). Where the branch is
    a ``lax.cond``'s, the predicate holds whenever the branch runs.
    """
    gates = getattr(_local, "gates", None)
    if not gates or current_trace() is not gates[-1][0]:
        return None
    out = None
    for _, pred, negate in gates:
        p = jnp.logical_not(pred) if negate else pred
        out = p if out is None else jnp.logical_and(out, p)
    return out


def _gating(fn, pred, negate):
    """``fn`` (a branch thunk), tracing with ``pred`` (or its negation) as the loops' gate."""
    def branch():
        gates = _local.__dict__.setdefault("gates", [])
        gates.append((current_trace(), pred, negate))
        try:
            return fn()
        finally:
            gates.pop()
    return branch


def _in_lanes(fn):
    """``fn`` (a branch thunk of an ``if`` under a batched predicate), tracing with
    no gates for the loops of the ``if``s inside it (see ``loop_gate``)."""
    def branch():
        _local.lanes = getattr(_local, "lanes", 0) + 1
        try:
            return fn()
        finally:
            _local.lanes -= 1
    return branch


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


def _gated_loop(eqn):
    """Is ``eqn`` a loop that runs only where its branch is taken (``loop_gate``)?"""
    if getattr(eqn.params.get("_prim"), "gated", False):
        return True
    if eqn.primitive.name == "while":  # as `autoflow explain` stages it
        from .checkpoint import GATED_CONDS

        cond = eqn.params.get("cond_jaxpr")
        return getattr(cond, "jaxpr", None) in GATED_CONDS
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
        prim = eqn.params.get("_prim")
        if prim is not None:  # one of autoflow's own primitives (runtime/checkpoint.py, _Cond)
            if isinstance(prim, _Cond) and prim.kind == "select" and prim.inner is None:
                total += cost(prim.t.jaxpr) + cost(prim.f.jaxpr)
                continue
            return math.inf  # a kept cond, a loop that always runs
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


def _gated_loops(jaxpr):
    """Does ``jaxpr`` stage a gated loop (``loop_gate``), in a select's branch too?"""
    for eqn in jaxpr.eqns:
        if _gated_loop(eqn):
            return True
        prim = eqn.params.get("_prim")
        if isinstance(prim, _Cond) and prim.kind == "select" and prim.inner is None and (
                _gated_loops(prim.t.jaxpr) or _gated_loops(prim.f.jaxpr)):
            return True
    return False


def _differing(t, f):
    """How many outputs of the branches ``t``, ``f`` may differ (a select each):
    all but those both pass through from the same outer value or constant."""
    def source(closed, v):
        if isinstance(v, _core.Literal):
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


def decide(t, f, batched, guard=False):
    """``'select'`` or ``'lax.cond'`` for the traced branches ``t``, ``f`` and why
    (``guard``: the ``if`` a loop's ``break`` or ``return`` guards the rest of
    the body with, see ``operators.if_stmt``)."""
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


def _select(pred, a, b):
    a, b = jnp.asarray(a), jnp.asarray(b)
    if a.dtype != b.dtype:  # only weak types can differ here: promote as NumPy would
        dtype = jnp.result_type(a, b)
        a, b = lax.convert_element_type(a, dtype), lax.convert_element_type(b, dtype)
    if _core.typeof(a).weak_type != _core.typeof(b).weak_type:
        a, b = lax.convert_element_type(a, a.dtype), lax.convert_element_type(b, b.dtype)
    if jnp.ndim(pred) and jnp.ndim(pred) < jnp.ndim(a):  # a batched predicate (B,)
        pred = lax.broadcast_in_dim(pred, jnp.shape(a), tuple(range(jnp.ndim(pred))))
    return lax.select(pred, a, b)


def _pick(pred, t_out, f_out, free=()):
    """The select of the branches' outputs, but for those at the indices ``free``
    (nothing reads them where ``pred`` is false), taken from the true branch."""
    return tuple(a if i in free else _select(pred, a, b)
                 for i, (a, b) in enumerate(zip(t_out, f_out)))


def _eval(closed, args):
    return _core.eval_jaxpr(closed.jaxpr, closed.consts, *args)


def _inexact(aval):
    return jnp.issubdtype(aval.dtype, jnp.inexact)


def _tangent_zeros(aval):
    if _inexact(aval):
        return jnp.zeros(aval.shape, aval.dtype)
    return np.zeros(aval.shape, jax.dtypes.float0)


def _instantiate(tangents, avals):
    return tuple(_tangent_zeros(a) if isinstance(t, _ad_util.Zero) else t
                 for t, a in zip(tangents, avals))


def _vjp(closed, args, ct):
    """Cotangents of ``closed``'s inexact inputs, for ``ct`` on its inexact outputs."""
    fi = [i for i, a in enumerate(closed.in_avals) if _inexact(a)]
    fo = [j for j, a in enumerate(closed.out_avals) if _inexact(a)]

    def f(*xs):
        full = list(args)
        for i, x in zip(fi, xs):
            full[i] = x
        outs = _eval(closed, full)
        return [outs[j] for j in fo]

    _, pull = jax.vjp(f, *[args[i] for i in fi])
    return list(pull([ct[j] for j in fo]))


class _Cond(_VJPHiPrimitive):
    """A traced ``if`` of two branches (jaxprs taking their operands, no consts),
    as one primitive with a rule per transformation, so that where ``jit``,
    ``vmap`` and ``grad`` sit around it does not matter:

    * evaluated or compiled: a select of both branches (``kind='select'``) or
      a ``lax.cond`` (``kind='cond'``);
    * ``vmap`` (``batch``): the same ``if`` one level up (``inner``: the
      primitive it batches, ``axes``: which operands are batched). With a
      batched predicate it is a select of both branches, run on the operands
      as they are: a matrix the branches only read is not copied per lane
      (JAX's own ``cond`` batching rule broadcasts every operand). Otherwise
      the ``vmap`` of the inner ``if``;
    * ``jax.jvp``/``jax.jacfwd``: JAX's JVP of the form above;
    * ``jax.grad``/``jax.vjp``: the values are the form above; the cotangents
      come from a ``lax.cond`` of the branches' VJPs (one per lane under a
      batched predicate), so the branch not taken never reaches a gradient
      (``sqrt(x) if x > 0 else 0.`` has gradient 0 at 0, as in Python, not the
      ``nan`` of a select's gradient).
    """

    stage_low = True  # see runtime/lowjit.py

    def __init__(self, t, f, kind, in_avals, inner=None, axes=None, size=None, masked=False,
                 free=(), select_on=()):
        self.in_avals = in_avals  # (predicate, true operands, false operands)
        if inner is None:
            self.out_aval = tuple(t.out_avals)
        else:
            self.out_aval = tuple(_unmapped(a, 0, size) for a in inner.out_aval)
        # masked: the last true operand is the mask of the lanes whose results
        # are read (runtime/lanes.py); the loops in the branches run only for them.
        # free: outputs nothing reads where the predicate is false (a loop's guard
        # on the iteration that leaves it): a select takes the true branch's.
        # select_on: the platforms on which a cond-kind `if` is lowered as a select
        # (scalar branches on a GPU, see GPU_SCALAR_SELECT_OUTPUTS).
        self.params = dict(t=t, f=f, kind=kind, inner=inner, axes=axes, size=size,
                           masked=masked, free=tuple(free), select_on=tuple(select_on))
        self.effects = frozenset()
        super().__init__()

    # -- meaning --------------------------------------------------------------

    def _split(self, tc):
        """The true operands without this level's lane mask, and the mask."""
        if self.masked:
            return tuple(tc[:-1]), tc[-1]
        return tuple(tc), None

    def _inner_axes(self):
        dp, dt, df = self.axes
        return (dp, dt[:-1] if self.masked else dt, df)

    def branch(self, which, ops):
        """One branch's outputs on its operands, at this level."""
        if self.inner is None:
            return _eval(self.t if which == "t" else self.f, ops)
        needed = None  # (the mask is among the true operands: the false branch runs unmasked)
        if which == "t":
            ops, needed = self._split(ops)
        axes = self._inner_axes()[1 if which == "t" else 2]
        return tuple(lanes.vmap(lambda o: self.inner.branch(which, o), (axes,), 0, self.size,
                                needed)(tuple(ops)))

    def both(self, pred, tc, fc):
        """The select of both branches' outputs."""
        if self.inner is None:
            return _pick(pred, _eval(self.t, tc), _eval(self.f, fc), self.free)
        tc, needed = self._split(tc)
        if self.axes[0] is not None and jnp.ndim(pred) == 1:
            # A batched predicate: each branch runs for the lanes that take it
            # (its loops only for those), and the select picks per lane.
            _, ta, fa = self._inner_axes()
            take_t, take_f = pred, jnp.logical_not(pred)
            if needed is not None:
                take_t, take_f = take_t & needed, take_f & needed
            t_out = lanes.vmap(lambda o: self.inner.branch("t", o), (ta,), 0, self.size,
                               take_t)(tc)
            f_out = lanes.vmap(lambda o: self.inner.branch("f", o), (fa,), 0, self.size,
                               take_f)(fc)
            return _pick(pred, t_out, f_out, self.free)
        return tuple(lanes.vmap(self.inner.both, self._inner_axes(), 0, self.size, needed)(
            pred, tc, fc))

    def expand(self, pred, tc, fc):
        if self.inner is None:
            if self.kind == "select":
                return self.both(pred, tc, fc)
            branches = self._cond_branches()
            if branches is not None:
                # JAX's cond of the branches' jaxprs as they are (each taking both
                # operand lists), without tracing them again: lowering a nest of
                # loops and ifs then costs one pass over it.
                index = lax.convert_element_type(pred, np.int32)
                return tuple(_COND_P.bind(index, *tc, *fc, branches=branches))
            return tuple(lax.cond(pred, lambda: _eval(self.t, tc), lambda: _eval(self.f, fc)))
        if self.axes[0] is not None:  # a batched predicate: both branches run
            return self.both(pred, tc, fc)
        tc, needed = self._split(tc)
        return tuple(lanes.vmap(self.inner.expand, self._inner_axes(), 0, self.size, needed)(
            pred, tc, fc))

    def low_form(self, platforms=()):
        """What this is in JAX's own terms, for ``lowjit``'s lowering rule when
        compiling for ``platforms``: ``("select", t, f, n, free)``,
        ``("cond", branches)``, or None (then ``expand`` is traced)."""
        if self.inner is not None or tuple(self.in_avals[0].shape) != ():
            return None
        t, f = self.t, self.f
        select = self.kind == "select" or bool(platforms) and all(
            p in self.select_on for p in platforms)
        if select:
            if t.consts or f.consts or t.effects or f.effects or any(
                    (a.shape, a.dtype) != (b.shape, b.dtype)
                    for i, (a, b) in enumerate(zip(t.out_avals, f.out_avals))
                    if i not in self.free):
                return None
            return ("select", t, f, len(self.in_avals[1]), frozenset(self.free))
        branches = self._cond_branches()
        return None if branches is None else ("cond", branches)

    def _cond_branches(self):
        """``(false, true)`` jaxprs taking the true and the false operands, for
        ``cond_p`` (None where JAX's internals differ, or the branches' output
        types differ in more than weak typing)."""
        t, f = self.t, self.f
        if _COND_P is None or t.consts or f.consts or t.effects or f.effects or any(
                (a.shape, a.dtype) != (b.shape, b.dtype)
                for a, b in zip(t.out_avals, f.out_avals)):
            return None
        try:
            invars = [*t.jaxpr.invars, *f.jaxpr.invars]  # each branch ignores the other's
            return (_core.ClosedJaxpr(f.jaxpr.replace(invars=invars), ()),
                    _core.ClosedJaxpr(t.jaxpr.replace(invars=invars), ()))
        except (AttributeError, TypeError):  # pragma: no cover - another JAX
            return None

    # -- forward mode -----------------------------------------------------------

    def jvp(self, primals, tangents):
        pred, tc, fc = primals
        ttc, tfc = (_instantiate(t, a) for t, a in zip(tangents[1:], self.in_avals[1:]))
        out, tout = jax.jvp(lambda tc, fc: self.expand(pred, tc, fc), (tuple(tc), tuple(fc)),
                            (ttc, tfc))
        tout = tuple(t if _inexact(a) else _ad_util.Zero(a.to_tangent_aval())
                     for t, a in zip(tout, self.out_aval))
        return tuple(out), tout

    def lin(self, nzs_in, *primals):
        return self.expand(*primals), primals

    def linearized(self, residuals, *tangents):
        return self.jvp(residuals, tangents)[1]

    # -- reverse mode -----------------------------------------------------------

    def vjp_fwd(self, nzs_in, pred, tc, fc):
        return self.expand(pred, tc, fc), (pred, tc, fc)

    def bwd(self, pred, tc, fc, ct):
        """Cotangents of the inexact operands of each branch (two lists)."""
        if self.inner is None:
            def zeros(avals):
                return [jnp.zeros(a.shape, a.dtype) for a in avals if _inexact(a)]

            return lax.cond(pred,
                            lambda: (_vjp(self.t, tc, ct), zeros(self.in_avals[2])),
                            lambda: (zeros(self.in_avals[1]), _vjp(self.f, fc, ct)))
        tc, _ = self._split(tc)
        gt, gf = jax.vmap(self.inner.bwd, (*self._inner_axes(), 0), 0, axis_size=self.size)(
            pred, tc, fc, ct)
        _, ta, fa = self._inner_axes()
        # an operand shared by every lane gets the sum of the lanes' cotangents
        inexact_axes = [[d for d, a in zip(ax, avals) if _inexact(a)]
                        for ax, avals in ((ta, self.inner.in_avals[1]),
                                          (fa, self.inner.in_avals[2]))]
        return ([g if d is not None else jnp.sum(g, 0) for g, d in zip(gt, inexact_axes[0])],
                [g if d is not None else jnp.sum(g, 0) for g, d in zip(gf, inexact_axes[1])])

    def vjp_bwd_retval(self, res, out_ct):
        pred, tc, fc = res
        ct = tuple(jnp.zeros(a.shape, a.dtype) if isinstance(c, _ad_util.Zero) and _inexact(a)
                   else c for c, a in zip(out_ct, self.out_aval))
        gt, gf = self.bwd(pred, tc, fc, ct)

        def spread(grads, avals):
            grads, out = iter(grads), []
            for a in avals:
                out.append(next(grads) if _inexact(a) else _ad_util.Zero(a.to_ct_aval()))
            return tuple(out)

        return (_ad_util.Zero(self.in_avals[0].to_ct_aval()),
                spread(gt, self.in_avals[1]), spread(gf, self.in_avals[2]))

    # -- vmap -------------------------------------------------------------------

    def batch(self, axis_data, args, dims):
        size = axis_data.size

        def moved(x, d):
            return x if d is None else jnp.moveaxis(jnp.asarray(x), d, 0)

        def axis(d):
            return None if d is None else 0

        pred, tc, fc = args
        dp, dt, df = dims
        args = (moved(pred, dp), tuple(map(moved, tc, dt)), tuple(map(moved, fc, df)))
        axes = (axis(dp), tuple(map(axis, dt)), tuple(map(axis, df)))
        needed = lanes.mask_for(axis_data)  # lanes whose results are read (None: all)
        if needed is not None:
            args = (args[0], args[1] + (needed,), args[2])
            axes = (axes[0], axes[1] + (0,), axes[2])
        in_avals = tuple(_core.typeof(x) for x in args[:1]) + tuple(
            tuple(_core.typeof(x) for x in group) for group in args[1:])
        prim = _Cond(self.t, self.f, self.kind, in_avals, inner=self, axes=axes, size=size,
                     masked=needed is not None, free=self.free)
        return prim(*args), tuple(0 for _ in self.out_aval)


def _unmapped(aval, d, size):
    if d is None:
        return aval
    return _core.ShapedArray((size,) + tuple(aval.shape), aval.dtype,
                             weak_type=getattr(aval, "weak_type", False))


def _operands(closed):
    """``closed`` (a ClosedJaxpr with consts) as a jaxpr taking its consts as operands."""
    jaxpr = pe.convert_constvars_jaxpr(closed.jaxpr)
    return _core.ClosedJaxpr(jaxpr, ()), list(closed.consts)


def _staged_if(pred, t, f, kind, free=(), select_on=()):
    if _plain_now():  # autoflow explain: what it compiles to
        if kind == "select":
            return list(_pick(pred, _run(t), _run(f), free))
        return lax.cond(pred, lambda: _run(t), lambda: _run(f))
    tj, tc = _operands(t)
    fj, fc = _operands(f)
    from .checkpoint import as_operands

    pred, tc, fc = as_operands([jnp.asarray(pred)]) + (as_operands(tc), as_operands(fc))
    in_avals = (_core.typeof(pred), tuple(_core.typeof(x) for x in tc),
                tuple(_core.typeof(x) for x in fc))
    return list(_Cond(tj, fj, kind, in_avals, free=free if kind == "select" else (),
                      select_on=select_on)(pred, tuple(tc), tuple(fc)))


def _partial_eval():
    """May JAX partially evaluate this ``if`` with some operands unknown: is it
    in the rule of a ``jax.custom_jvp`` (whose tangents are unknown under
    ``jax.grad``) or of a ``jax.custom_vjp``? A ``lax.cond`` splits into known
    and unknown outputs there; one primitive cannot, and the rule's primal
    outputs must stay known. (The rule may be traced to a jaxpr first, under
    ``jit``, so the trace alone does not tell: the frames of JAX's custom
    derivatives module do.)"""
    from ._jax_compat import current_trace_kind

    if current_trace_kind() == "JaxprTrace":
        return True
    frame = sys._getframe(2)
    for _ in range(200):
        if frame is None:
            return False
        if frame.f_code.co_filename.endswith(_CUSTOM_DERIVATIVES):
            return True
        frame = frame.f_back
    return False


_CUSTOM_DERIVATIVES = os.path.join("jax", "_src", "custom_derivatives.py")


def _plain_now():
    from .checkpoint import plain_now

    return plain_now()


def cond(pred, true_fn, false_fn, guard=False, free=lambda: ()):
    """``lax.cond(pred, true_fn, false_fn)`` for thunks returning lists of arrays,
    or a select of both when that is cheaper (see the module docstring).

    ``guard``: see ``operators.if_stmt``; ``free()`` (called once both branches
    are traced): the indices of the outputs nothing reads where ``pred`` is
    false, which a select then takes from the true branch."""
    if _INTERNALS is None:  # an older JAX (see _jax_compat): always the cond
        _set_choice("lax.cond")
        return lax.cond(pred, true_fn, false_fn)
    batched = _batched(pred)
    if batched or getattr(_local, "lanes", 0):
        # Under a batched predicate, runtime/lanes.py masks the loops of the branches,
        # those of the `if`s inside them too (whose predicates, traced in the branch,
        # do not look batched yet): no gate.
        true_fn, false_fn = _in_lanes(true_fn), _in_lanes(false_fn)
    else:
        true_fn, false_fn = _gating(true_fn, pred, False), _gating(false_fn, pred, True)
    t = _trace(true_fn)
    f = _trace(false_fn)
    choice, why = decide(t, f, batched, guard)
    _set_choice(choice)
    if why == "a branch has effects":
        return lax.cond(pred, lambda: _run(t), lambda: _run(f))
    if _partial_eval():  # JAX's own operations, which partial evaluation can split
        if why == "batched predicate":  # (JAX's cond would stop_gradient the tangents)
            return [_select(pred, a, b) for a, b in zip(_run(t), _run(f))]
        return lax.cond(pred, lambda: _run(t), lambda: _run(f))
    return _staged_if(pred, t, f, "select" if choice == "select" else "cond",
                      free() if guard else (),
                      select_on=GPU_PLATFORMS if choice == GPU_SELECT else ())
