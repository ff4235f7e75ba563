"""Loops under ``jax.vmap`` (loops.while_primitive._WhileLoop.batch, cond.primitive._Cond,
runtime/loops/lanes.py) and autoflow's primitives as low equations (runtime/jax/).

Every value is checked against Python run lane by lane on concrete values.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np

import autoflow
from autoflow.runtime import jax as jx


def bisect_count(lo, hi):
    """A bisection whose per-lane step count depends on the lane; returns the
    count too (a loop counter read after the loop)."""
    steps = 0
    for i in range(100):
        if hi - lo < 1e-3 * (1 + lo):
            break
        mid = (lo + hi) / 2
        if mid * mid > 2.0 + lo:
            hi = mid
        else:
            lo = mid
        steps = i + 1
    return lo, steps, i


def branch_loops(a, x):
    """An ``if`` with a batched condition whose branches hold loops of
    different lengths (a series and a continued-fraction-like recurrence)."""
    if x > a:
        h = x
        for i in range(1, 200):
            h_new = h - 0.5 * (h - a) / (i + 1)
            if abs(h_new - h) < 1e-4:
                break
            h = h_new
        return h, i
    total = 0.0
    term = 1.0
    for k in range(300):
        term = term * x / (a + k + 1)
        total = total + term
        if term < 1e-6 * total:
            break
    return total, k


def nested_loops(n, x):
    """An outer loop whose lanes stop at different steps, with an inner loop."""
    acc = 0.0
    j = 0
    while j < n:
        m = 0
        y = x + j
        while y > 1.0:
            y = y / 2.0
            m += 1
        acc = acc + y + m
        j += 1
    return acc, j


def never_ends_when_untaken(x):
    """The loop in the true branch never ends for the lanes that do not take
    it (x <= 0): under vmap, only the lanes that take the branch may run it."""
    if x > 0:
        i = 0.0
        while x * i < 10.0:
            i = i + 1.0
        return i
    return -x


def _lanes(fn, *arrays):
    """Python on concrete values, lane by lane, stacked."""
    outs = [fn(*(float(a[k]) if a.dtype.kind == "f" else int(a[k]) for a in arrays))
            for k in range(arrays[0].shape[0])]
    return tuple(np.asarray(v) for v in zip(*outs))


def _close(got, want):
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)


LO = np.linspace(0.0, 1.3, 7).astype(np.float32)
HI = np.linspace(2.0, 9.0, 7).astype(np.float32)


def test_batched_break_counter_per_lane():
    conv = autoflow.convert(bisect_count)
    want = _lanes(bisect_count, LO, HI)
    assert len(set(want[1].tolist())) > 1  # the lanes stop at different steps
    for fn in (jax.vmap(conv), jax.jit(jax.vmap(conv))):
        _close(fn(jnp.asarray(LO), jnp.asarray(HI)), want)


def test_batched_loop_keeps_counter_unbatched():
    """The loop index feeds only unbatched values: it stays one scalar carry
    (the per-lane count after the loop is a copy the loop only writes)."""
    jaxpr = jax.make_jaxpr(jax.vmap(autoflow.convert(bisect_count)))(jnp.asarray(LO),
                                                                     jnp.asarray(HI))
    text = str(jaxpr)
    assert "while_loop[" in text
    loop = next(e for e in jaxpr.jaxpr.eqns if e.primitive.name == "while_loop")
    carry_avals = loop.params["_prim"].in_avals[2]
    assert any(a.shape == () and a.dtype == jnp.int32 for a in carry_avals), carry_avals


def test_if_with_loops_under_vmap():
    a = np.linspace(0.5, 6.0, 9).astype(np.float32)
    x = np.linspace(0.2, 9.0, 9)[::-1].astype(np.float32)
    want = _lanes(branch_loops, a, x)
    assert 0 < int(np.sum(x > a)) < len(x)  # both branches are taken
    conv = autoflow.convert(branch_loops)
    for fn in (jax.vmap(conv), jax.jit(jax.vmap(conv))):
        _close(fn(jnp.asarray(a), jnp.asarray(x)), want)


def test_nested_loops_under_vmap():
    n = np.array([0, 1, 3, 5, 2], np.int32)
    x = np.array([7.0, 0.5, 33.0, 2.0, 1000.0], np.float32)
    want = _lanes(nested_loops, n, x)
    conv = autoflow.convert(nested_loops)
    for fn in (jax.vmap(conv), jax.jit(jax.vmap(conv))):
        _close(fn(jnp.asarray(n), jnp.asarray(x)), want)


def test_vmap_of_vmap_and_grad_through_masked_loops():
    a = np.linspace(0.5, 6.0, 6).astype(np.float32)
    x = np.linspace(0.2, 9.0, 6)[::-1].astype(np.float32)
    conv = autoflow.convert(branch_loops)

    def value(a, x):
        return conv(a, x)[0]

    got = jax.jit(jax.vmap(jax.vmap(value)))(jnp.asarray(a).reshape(2, 3),
                                               jnp.asarray(x).reshape(2, 3))
    want = _lanes(branch_loops, a, x)[0].reshape(2, 3)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    # derivatives per lane: vmap of grad equals grad lane by lane
    g = jax.jit(jax.vmap(jax.grad(value, argnums=1)))(jnp.asarray(a), jnp.asarray(x))
    for k in range(len(a)):
        want_k = jax.grad(value, argnums=1)(jnp.float32(a[k]), jnp.float32(x[k]))
        np.testing.assert_allclose(np.asarray(g[k]), np.asarray(want_k), rtol=1e-4, atol=1e-5)


def test_untaken_branch_loop_does_not_run_for_its_lanes():
    """Python never runs the loop for x <= 0; a select of both branches would
    run it for those lanes forever. Run in a subprocess with a time limit."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    script = textwrap.dedent("""
        import jax, jax.numpy as jnp, numpy as np, autoflow
        from tests.test_vmap_loops import never_ends_when_untaken as f
        x = jnp.asarray([2.0, -1.0, 0.5, 0.0], jnp.float32)
        print(np.asarray(jax.jit(jax.vmap(autoflow.convert(f)))(x)).tolist())
    """)
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, cwd=root, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = [float(v) for v in out.stdout.strip().splitlines()[-1].strip("[]").split(",")]
    assert got == [never_ends_when_untaken(v) for v in (2.0, -1.0, 0.5, 0.0)]


def test_primitives_are_low_equations():
    """A jitted converted function with a staged loop and a staged `if` has a
    low jaxpr (jax.jit keeps its C++ fast path), and the equations are still
    autoflow's primitives (their vmap and grad rules apply)."""
    if not jx.install_low_staging():  # pragma: no cover - a JAX without hijax internals
        return
    conv = autoflow.convert(bisect_count)
    jaxpr = jax.make_jaxpr(conv)(jnp.float32(0.0), jnp.float32(3.0))
    assert not jaxpr.jaxpr.is_high
    assert any(e.primitive.name == "while_loop" for e in jaxpr.jaxpr.eqns)
    # jax.jit's C++ dispatch cache is shared by every jitted function in the
    # process; once a long test session has filled it (8192 entries), a new
    # function's entries are not counted. Start from an empty one.
    jax.clear_caches()
    jitted = jax.jit(conv)
    for lo, hi in zip(LO, HI):
        _close(jitted(jnp.float32(lo), jnp.float32(hi)), bisect_count(float(lo), float(hi)))
    assert jitted._cache_size() == 1


def if_in_loop(x):
    """An `if` with a batched condition inside a batched loop (the `if` is
    batched under the loop body's lane mask)."""
    s = 0.0
    k = 0
    while s < 6.0:
        if x > 1.0:
            s = s + x
        else:
            t = 0.0
            for j in range(50):
                t = t + x * x + 0.5
                if t > 1.0:
                    break
            s = s + t
        k += 1
    return s, k


def test_if_in_loop_under_vmap_values_and_derivatives():
    x = np.array([0.3, 1.5, 0.9, 2.5, 0.1], np.float32)
    conv = autoflow.convert(if_in_loop)
    want = _lanes(if_in_loop, x)
    for fn in (jax.vmap(conv), jax.jit(jax.vmap(conv))):
        _close(fn(jnp.asarray(x)), want)

    def value(x):
        return conv(x)[0]

    for d in (jax.grad, jax.jacfwd):
        got = jax.jit(jax.vmap(d(value)))(jnp.asarray(x))
        for k in range(len(x)):
            np.testing.assert_allclose(np.asarray(got[k]), np.asarray(d(value)(jnp.float32(x[k]))),
                                       rtol=1e-4, atol=1e-5)


def three_deep(cs, m):
    # a `for` in a `while` in a `while`: trip counts differ by lane at every level
    total = 0.0
    i = 0
    while i < m:
        k = 0.0
        while k * k < cs[i]:
            for j in range(2):
                k = k + 0.5
        total = total + k
        i += 1
    return total


def test_a_deep_nest_builds_each_loops_batched_form_a_few_times(monkeypatch):
    """Which carries of a loop are batched is found over a probe axis
    (``_WhileLoop.batched_carries``): a loop in the body then only says which of its
    results are batched. Batched for real at each round of that search, every loop's
    batched form was built again at each round of the loops around it."""
    from autoflow.runtime.loops import batching, while_primitive

    built = []
    real = while_primitive._WhileLoop._batch_masked
    monkeypatch.setattr(while_primitive._WhileLoop, "_batch_masked",
                        lambda self, *a: built.append(self) or real(self, *a))
    monkeypatch.setattr(batching, "lane_loops", None)  # (every batched form here)
    cs = np.array([[1.0, 9.0, 2.5], [30.0, 0.2, 4.0], [7.0, 7.0, 7.0]], np.float32)
    ms = np.array([3, 1, 2], np.int32)
    want = [three_deep(c, m) for c, m in zip(cs, ms)]
    got = jax.vmap(autoflow.convert(three_deep))(jnp.asarray(cs), jnp.asarray(ms))
    assert np.allclose(got, want)
    # the two while loops (the `for` of a static range is unrolled): each built once
    # for each time the loop around it is (4 in all without the probe)
    assert len(built) <= 2, len(built)
