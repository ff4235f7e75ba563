"""How traced control flow is lowered: select or cond, one copy of each loop
body, and no silent unrolling (runtime/cond/select_or_cond.py, runtime/loops/).

Values are checked against eager Python; the lowering choice is checked on
the jaxpr (and the lowered StableHLO for what the compiled program holds).
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow.runtime.cond import select_or_cond
from autoflow.runtime.common.events import plain_loops

from .equivalence import assert_same


def _jaxpr(fn, *args):
    """``fn``'s jaxpr with autoflow's own primitives (a traced ``if``, a
    data-dependent loop) shown as the lax operations they compile to."""
    with plain_loops():
        return jax.make_jaxpr(fn)(*args)


def _hlo(fn, *args):
    return jax.jit(fn).lower(*args).as_text()


def _prims(jaxpr):
    """Every primitive name in a (closed) jaxpr, sub-jaxprs included."""
    out = []
    todo = [jaxpr.jaxpr if hasattr(jaxpr, "jaxpr") else jaxpr]
    while todo:
        j = todo.pop()
        for eqn in j.eqns:
            out.append(eqn.primitive.name)
            for v in eqn.params.values():
                for x in (v if isinstance(v, (tuple, list)) else (v,)):
                    if hasattr(x, "eqns"):
                        todo.append(x)
                    elif hasattr(x, "jaxpr") and hasattr(x.jaxpr, "eqns"):
                        todo.append(x.jaxpr)
    return out


def bisect(f_lo, lo, hi):
    """Bisection of a vector of intervals at once (the branches compute arrays)."""
    for _ in range(20):
        mid = (lo + hi) / 2
        if (mid * mid * mid - f_lo).max() > 0:
            hi = mid
        else:
            lo = mid
    return lo


def bisect_scalar(f_lo, lo, hi):
    for _ in range(20):
        mid = (lo + hi) / 2
        if mid * mid * mid - f_lo > 0:
            hi = mid
        else:
            lo = mid
    return lo


def clip_abs(x, t):
    y = x if x.sum() > t else -x
    if y.sum() > 2 * t:
        y = y - t
        z = 1
    else:
        z = 0
    return y, z


def test_cheap_if_is_a_select():
    conv = autoflow.convert(bisect)
    lo, hi = jnp.zeros(4), jnp.full(4, 2.0)
    jaxpr = _jaxpr(conv, 2.0, lo, hi)
    prims = _prims(jaxpr)
    assert "cond" not in prims and "select_n" in prims
    for target in (0.5, 2.0, 5.0):
        assert_same(jax.jit(conv)(target, lo, hi), bisect(target, lo, hi))


def test_scalar_branches_that_differ_in_two_outputs_keep_a_cond():
    # `hi = mid` / `lo = mid`: two selected scalars cost more than the cond on CPU
    # (benchmarks/scalar_select.py).
    conv = autoflow.convert(bisect_scalar)
    assert "cond" in _prims(_jaxpr(conv, 2.0, 0.0, 2.0))
    assert_same(jax.jit(conv)(2.0, 0.0, 2.0), bisect_scalar(2.0, 0.0, 2.0))


def lentz_clamp(x):
    d = x
    h = 1.0
    for i in range(1, 20):
        d = d * 0.5 - i * 1e-3
        if abs(d) < 1e-3:
            d = 1e-3
        h = h * d + 1.0
    return h


def heavy_scalar(x):
    if x > 0.5:
        y = jnp.sin(x) * jnp.cos(x) + jnp.exp(-x * x) / (1.0 + x * x)
        for _ in autoflow.unroll(range(10)):
            y = y * 1.01 + jnp.tanh(y)
    else:
        y = x
    return y


def test_a_cheap_scalar_clamp_is_a_select():
    # one scalar output, a few operations: a select, which fuses with the loop
    # body around it (gammainc's continued fraction: 1.11x -> 1.05x of the library)
    conv = autoflow.convert(lentz_clamp)
    jaxpr = _jaxpr(conv, 0.7)
    assert "cond" not in _prims(jaxpr) and "select_n" in _prims(jaxpr)
    for x in (0.7, 2e-3, -0.3):
        assert_same(jax.jit(conv)(x), lentz_clamp(x))
    # more than SCALAR_SELECT_BUDGET operations are worth skipping
    conv = autoflow.convert(heavy_scalar)
    assert "cond" in _prims(_jaxpr(conv, 0.7))
    for x in (0.7, 0.2):
        assert_same(jax.jit(conv)(x), heavy_scalar(x))


@pytest.mark.parametrize("s", [-3.0, -0.5, 0.2, 1.5, 9.0])
def test_cheap_if_and_ternary_match_python(s):
    conv = autoflow.convert(clip_abs)
    x = s * jnp.array([1.0, 0.5, 0.25])
    assert "cond" not in _prims(_jaxpr(conv, x, 1.0))
    assert_same(jax.jit(conv)(x, 1.0), clip_abs(x, 1.0))


def with_loop(x, n):
    if x > 0:
        y = x
    else:
        y = x
        while y < n:
            y = y + 1.0
    return y


def with_matmul(x, a):
    if x.sum() > 0:
        y = a @ (a @ x)
    else:
        y = x
    return y


def with_effect(x):
    if x > 0:
        jax.debug.print("positive {}", x)
        y = x + 1
    else:
        y = x - 1
    return y


def count_down(x):
    if x > 0:
        y = x * 2.0
    else:
        y = -x
        while y != 0:  # ends for the whole numbers this branch gets; never for x > 0
            y = y - 1.0
    return y


def nested_loops_in_branches(x, n):
    if x > 0:
        y = x
        for i in range(n):
            if y > 100.0:
                break
            y = y * 1.5
    else:
        y = -x
        while y > 1.0:
            y = y * 0.5
    return y


def test_a_branch_with_a_loop_is_a_select_whose_loop_runs_only_when_taken():
    # The loop's condition holds the branch's predicate (select_or_cond.loop_gate): in the
    # select, the branch not taken runs none of its iterations.
    assert "cond" not in _prims(_jaxpr(autoflow.convert(with_loop), 1.0, 3.0))
    assert "if -> select" in str(autoflow.explain(count_down, "f32"))
    f = autoflow.jit(count_down)
    for x in (3.0, 0.0, -4.0, 0.5):
        assert_same(f(x), count_down(x))
    assert_same(jax.jit(jax.vmap(autoflow.convert(count_down)))(jnp.array([3.0, -4.0, 0.0])),
                jnp.array([count_down(v) for v in (3.0, -4.0, 0.0)]))
    assert_same(jax.grad(autoflow.convert(count_down))(3.0), 2.0)
    g = autoflow.jit(nested_loops_in_branches)
    for x in (2.0, -40.0, 0.5):
        for n in (0, 3, 20):
            assert_same(g(x, n), nested_loops_in_branches(x, n))
    for x in (-2.5, 0.5):
        assert_same(autoflow.jit(with_loop)(x, 3.0), with_loop(x, 3.0))


def test_heavy_work_and_effects_keep_a_cond():
    a = jnp.eye(64) * 0.5
    assert "cond" in _prims(_jaxpr(autoflow.convert(with_matmul), jnp.ones(64), a))
    assert "cond" in _prims(_jaxpr(autoflow.convert(with_effect), 1.0))
    for s in (-1.0, 1.0):
        x = s * jnp.arange(64.0)
        assert_same(autoflow.jit(with_matmul)(x, a), with_matmul(x, a))


def test_cost_rule():
    cheap = _jaxpr(lambda x: x * 2 + 1, jnp.ones(8))
    big = _jaxpr(lambda x: x * 2 + 1, jnp.ones(select_or_cond.SELECT_BUDGET))
    loop = _jaxpr(lambda x: jax.lax.fori_loop(0, 3, lambda i, c: c + 1, x), 1.0)
    dot = _jaxpr(lambda a: a @ a, jnp.ones((32, 32)))
    assert select_or_cond.cost(cheap.jaxpr) == 16
    assert select_or_cond.cost(big.jaxpr) == 2 * select_or_cond.SELECT_BUDGET
    assert select_or_cond.cost(loop.jaxpr) == float("inf")
    assert select_or_cond.cost(dot.jaxpr) == 32 ** 3
    scalar = _jaxpr(lambda x: x * 2 + 1, 1.0)
    assert select_or_cond.decide(scalar, scalar, False)[0] == "select"
    pair = _jaxpr(lambda x: (x * 2 + 1, x - 1), 1.0)
    # two selected scalars: a cond on a CPU, a select where it is compiled for a GPU
    assert select_or_cond.decide(pair, pair, False)[0] == select_or_cond.GPU_SELECT
    five = _jaxpr(lambda x: (x, x, x, x, x), 1.0)  # no operations, five outputs
    assert select_or_cond.decide(five, five, False)[0] == "lax.cond"  # > GPU_SCALAR_SELECT_OUTPUTS
    long = _jaxpr(lambda x: sum(x * k for k in range(20)), 1.0)
    assert select_or_cond.decide(long, scalar, False)[0] == "lax.cond"  # > SCALAR_SELECT_BUDGET operations
    assert select_or_cond.decide(cheap, cheap, False)[0] == "select"
    assert select_or_cond.decide(big, cheap, False)[0] == "lax.cond"
    assert select_or_cond.decide(loop, cheap, False)[0] == "lax.cond"
    # Under vmap with a batched predicate lax.cond would compute both anyway.
    assert select_or_cond.decide(dot, cheap, True)[0] == "select"


def matvec_or_keep(x, a):
    if x[0] > 0:
        y = a @ x
    else:
        y = x * 2
    return y


def test_batched_predicate_never_broadcasts_what_branches_only_read():
    a = jnp.asarray(np.random.default_rng(0).normal(size=(50, 50)), jnp.float32)
    xs = jnp.asarray(np.random.default_rng(1).normal(size=(8, 50)), jnp.float32)
    batched = jax.vmap(autoflow.convert(matvec_or_keep), in_axes=(0, None))
    # No (8, 50, 50) copy of the matrix anywhere (lax.cond's batching rule makes one).
    assert "8x50x50" not in _hlo(batched, xs, a)
    got = jax.jit(batched)(xs, a)
    for i in range(8):
        assert_same(got[i], matvec_or_keep(xs[i], a))


def test_explain_and_check_report_the_choice():
    text = str(autoflow.explain(bisect, "f32", "f32[4]", "f32[4]"))
    assert "if -> select (lax.select)" in text
    text = str(autoflow.explain(with_matmul, "f32[64]", "f32[64,64]"))
    assert "if -> lax.cond" in text
    from autoflow import check
    report = "\n".join(str(f) for f in check.check_source(
        "def g(x):\n    if x > 0:\n        x = x + 1\n    return x\n", "g.py"))
    assert "select" in report


# ---------------------------------------------------------------------------
# 2. one copy of each loop body
# ---------------------------------------------------------------------------

_calls = {"n": 0}


@autoflow.do_not_convert  # (counts traces: a converted helper may not write module state)
def _count():
    _calls["n"] += 1


def running_sum(a):
    total = 0.0
    for i in range(a.shape[0]):
        _count()
        total = total + jnp.sin(a[i])
    return total


def newton(x):
    err = 1e9
    k = 0
    while err > 1e-6:
        _count()
        x = 0.5 * (x + 2.0 / x)
        err = abs(x * x - 2.0)
        k += 1
    return x, k


def test_peeled_for_iteration_is_not_in_the_program():
    a = jnp.linspace(0.0, 1.0, 12)
    f = autoflow.jit(running_sum)
    _calls["n"] = 0
    hlo = f.lower(a).as_text()
    # Traced twice: once as Python (to learn the loop must be staged), once as the body.
    assert _calls["n"] == 2
    assert hlo.count("sine") == 1
    assert_same(f(a), running_sum(a))


def test_peeled_while_iteration_is_not_in_the_program():
    f = autoflow.jit(newton)
    _calls["n"] = 0
    hlo = f.lower(1.0).as_text()
    assert _calls["n"] == 2
    assert hlo.count("divide") == 1
    assert jaxpr_whiles(_jaxpr(autoflow.convert(newton), 1.0)) == 1
    x, k = f(1.0)
    ex, ek = newton(1.0)
    assert_same((x, k), (ex, ek))


def jaxpr_whiles(jaxpr):
    return _prims(jaxpr).count("while")


def traced_from_start(x):
    for i in range(5):
        _count()
        x = x * 1.5 + i
    return x


def test_traced_carries_trace_the_body_once():
    f = autoflow.jit(traced_from_start)
    _calls["n"] = 0
    f.lower(1.0)
    assert _calls["n"] == 1
    assert_same(f(1.0), traced_from_start(1.0))


def appends(a):
    out = []
    total = 0.0
    for i in range(a.shape[0]):
        total = total + a[i]
        out.append(total)
    return out


def test_loops_with_mutable_carries_still_work():
    a = jnp.arange(4.0)
    assert_same(autoflow.jit(appends)(a), appends(a))


# ---------------------------------------------------------------------------
# 3. no silent unrolling
# ---------------------------------------------------------------------------

# The index builds a shape, so the loop needs a concrete `i` and unrolls (a
# table indexed by `i` would stay rolled: see test_vocabulary).

def table_loop(x):
    for i in range(3):
        x = x * 0.5 + jnp.ones(i + 1).sum()
    return x


def table_loop_unrolled(x):
    for i in autoflow.unroll(range(3)):
        x = x * 0.5 + jnp.ones(i + 1).sum()
    return x


def test_unrolled_loop_warns_once_with_site_and_trip_count():
    f = autoflow.jit(table_loop)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = f(2.0)
        f(jnp.ones(3))  # a retrace: no second warning for the same loop
    perf = [w for w in caught if issubclass(w.category, autoflow.PerformanceWarning)]
    assert len(perf) == 1
    assert issubclass(autoflow.PerformanceWarning, autoflow.ConversionWarning)
    text = str(perf[0].message)
    assert "test_lowering.py" in perf[0].filename and "test_lowering.py:" in text
    assert perf[0].lineno == table_loop.__code__.co_firstlineno + 1
    assert "3 copies" in text and "autoflow.unroll" in text
    assert_same(got, table_loop(2.0))


def test_autoflow_unroll_silences_the_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = autoflow.jit(table_loop_unrolled)(2.0)
    assert not [w for w in caught if issubclass(w.category, autoflow.PerformanceWarning)]
    assert_same(got, table_loop_unrolled(2.0))


def sqrt_or_zero(x):
    if x[0] > 0:
        y = jnp.sqrt(x)
        k = 1
    else:
        y = 0.0 * x
        k = 2
    return (y * k).sum()


@pytest.mark.parametrize("s", [0.0, 4.0, -1.0])
def test_select_is_differentiated_like_a_cond(s):
    # A plain select would give 0 * inf = nan at 0: the branch not taken must
    # never reach the gradient, as with Python or lax.cond.
    x = jnp.array([s, 0.0])
    conv = autoflow.convert(sqrt_or_zero)
    assert "cond" not in _prims(_jaxpr(conv, x))
    expected = jax.grad(sqrt_or_zero)(x)
    assert not np.isnan(np.asarray(expected)).any() or s > 0
    assert_same(jax.jit(jax.grad(conv))(x), expected)
    np.testing.assert_array_equal(np.asarray(jax.jacfwd(conv)(x)),
                                  np.asarray(jax.jacfwd(sqrt_or_zero)(x)))
    xs = jnp.array([[0.0, 0.0], [4.0, 1.0], [-1.0, 0.0]])
    assert_same(jax.vmap(jax.grad(conv))(xs), jnp.stack([jax.grad(sqrt_or_zero)(v) for v in xs]))


def matvec_loop(x, a):
    for _ in range(3):
        if x.sum() > 0:  # a matvec: kept as a cond (it skips real work)
            x = jnp.tanh(a @ x)
        else:
            x = x * 2
    return x.sum()


def test_kept_cond_in_a_loop_batches_without_broadcasting():
    # Inside a loop body the `if` is traced before vmap sees it; its cond must
    # still batch without copying the matrix per lane, and differentiate.
    a = jnp.eye(80) * 0.5
    xs = jnp.stack([jnp.linspace(-1, 1, 80), -jnp.linspace(-1, 1, 80) - 1,
                    jnp.linspace(0, 1, 80)])
    conv = autoflow.convert(matvec_loop)
    assert "cond" in _prims(_jaxpr(conv, xs[0], a))
    batched = jax.vmap(conv, in_axes=(0, None))
    assert "3x80x80" not in _hlo(batched, xs, a)
    assert_same(jax.jit(batched)(xs, a), jnp.stack([matvec_loop(x, a) for x in xs]))
    assert_same(jax.vmap(jax.grad(conv), in_axes=(0, None))(xs, a),
                jnp.stack([jax.grad(matvec_loop)(x, a) for x in xs]))
    assert_same(jax.jit(jax.grad(conv))(xs[2], a), jax.grad(matvec_loop)(xs[2], a))


def scalar_if(x):
    if x > 1.0:
        y = jnp.sqrt(x) * 2.0
    else:
        y = x * 3.0
    return y


def scalar_if_in_loop(x):
    i = 0
    while i < 3:
        if x > 1.0:
            x = jnp.sqrt(x) * 2.0
        else:
            x = x * 3.0
        i += 1
    return x


@pytest.mark.parametrize("fn", [scalar_if, scalar_if_in_loop, sqrt_or_zero, matvec_loop],
                         ids=lambda f: f.__name__)
def test_gradient_of_a_vmapped_if(fn):
    # jax.grad outside jax.vmap: the branch outputs are selected per lane and
    # the gradient of each lane is its own branch's (a batched `if` once hit
    # "no transpose rule for stop_gradient" here).
    if fn is sqrt_or_zero:
        xs, extra = jnp.array([[0.0, 0.0], [4.0, 1.0], [-1.0, 0.0]]), ()
    elif fn is matvec_loop:
        xs = jnp.stack([jnp.linspace(-1, 1, 80), -jnp.linspace(-1, 1, 80) - 1])
        extra = (jnp.eye(80) * 0.5,)
    else:
        xs, extra = jnp.array([0.5, 2.0, 3.0, 0.0]), ()
    axes = (0,) + (None,) * len(extra)
    want = jnp.stack([jax.grad(fn)(x, *extra) for x in xs])
    for wrap in (autoflow.convert, autoflow.jit):
        got = jax.grad(lambda xs: jnp.sum(jax.vmap(wrap(fn), axes)(xs, *extra)))(xs)
        assert_same(got, want)
        got = jax.jit(jax.grad(lambda xs: jnp.sum(jax.vmap(wrap(fn), axes)(xs, *extra))))(xs)
        assert_same(got, want)
    if extra:  # the gradient with respect to the matrix every lane reads
        got = jax.grad(lambda a: jnp.sum(jax.vmap(autoflow.convert(fn), (0, None))(xs, a)))(
            *extra)
        want = sum(jax.grad(fn, 1)(x, *extra) for x in xs)
        assert_same(got, want)
