"""Entropic optimal transport: Sinkhorn iterations until the marginal error is small.

Alternately rescales u and v until the row marginals of the transport plan
diag(u) K diag(v) match ``a`` to within ``tol`` (or ``max_iter`` is hit).

Plain ``jax.jit(sinkhorn)`` fails at ``while err > tol and it < max_iter:``
with ``jax.errors.TracerBoolConversionError``. ``autoflow.jit`` emits a
``lax.while_loop``.
"""

import autoflow.runtime as af

import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

try:
    import autoflow
except ImportError:  # running from a source checkout without installing autoflow
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import autoflow


def sinkhorn(a, b, cost, eps=0.02, tol=1e-5, max_iter=1000):
    K = jnp.exp(-cost / eps)
    u = jnp.ones_like(a)
    v = jnp.ones_like(b)
    err = jnp.inf
    it = 0

    def loop_test(u, v, err, it):
        return af.and_(err > tol, lambda: it < max_iter)

    def loop_body(u, v, err, it):
        u = a / (K @ v)
        v = b / (K.T @ u)
        err = jnp.abs(u * (K @ v) - a).sum()
        it += 1
        return (u, v, err, it)
    u, v, err, it = af.while_stmt(loop_test, loop_body, (u, v, err, it), ("u", "v", "err", "it"))
    plan = u[:, None] * K * v[None, :]
    return plan, it


sinkhorn_jit = autoflow.jit(sinkhorn)


def sinkhorn_reference(a, b, cost, eps=0.02, tol=1e-5, max_iter=1000):
    a, b, cost = (np.asarray(x, np.float64) for x in (a, b, cost))
    K = np.exp(-cost / eps)
    u, v = np.ones_like(a), np.ones_like(b)
    err, it = np.inf, 0

    def loop_test(u, v, err, it):
        return af.and_(err > tol, lambda: it < max_iter)

    def loop_body(u, v, err, it):
        u = a / (K @ v)
        v = b / (K.T @ u)
        err = np.abs(u * (K @ v) - a).sum()
        it += 1
        return (u, v, err, it)
    u, v, err, it = af.while_stmt(loop_test, loop_body, (u, v, err, it), ("u", "v", "err", "it"))
    return u[:, None] * K * v[None, :], it


def make_problem(n=40, m=30, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(size=(n, 2))
    y = rng.uniform(size=(m, 2)) + 0.3
    cost = ((x[:, None] - y[None]) ** 2).sum(-1)
    cost /= cost.max()
    a = rng.uniform(0.5, 1.5, size=n)
    b = rng.uniform(0.5, 1.5, size=m)
    return (a / a.sum()).astype(np.float32), (b / b.sum()).astype(np.float32), cost.astype(np.float32)


def bench(fn, *args, repeats=20):
    t0 = time.perf_counter()
    out = jax.block_until_ready(af.call(fn, *args))
    first = time.perf_counter() - t0
    times = []

    def loop_body(_, times):
        t0 = time.perf_counter()
        jax.block_until_ready(af.call(fn, *args))
        times = af.append(times, time.perf_counter() - t0)
        return times
    times = af.for_stmt(af.range(repeats), loop_body, (times,), ("times",))
    return out, first, statistics.median(times)


def main():
    a, b, cost = af.call(make_problem)
    (plan, iters), first, median = af.call(bench, sinkhorn_jit, jnp.asarray(a), jnp.asarray(b), jnp.asarray(cost))
    plan_ref, iters_ref = af.call(sinkhorn_reference, a, b, cost)
    plan = np.asarray(plan)
    af.print(af.fstring("autoflow:  {0} iterations, transport cost {1:.6f}", af.int(iters), af.float((plan * cost).sum())))
    af.print(af.fstring("reference: {0} iterations, transport cost {1:.6f}", iters_ref, af.float((plan_ref * cost).sum())))
    af.print(af.fstring("first call {0:.1f} ms, median later call {1:.1f} us", first * 1e3, median * 1e6))
    np.testing.assert_allclose(plan.sum(1), a, atol=2e-5)
    np.testing.assert_allclose(plan.sum(0), b, atol=2e-5)
    np.testing.assert_allclose(plan, plan_ref, rtol=1e-3, atol=1e-6)
    af.assert_(abs(af.int(iters) - iters_ref) <= af.max(2, iters_ref // 20), None)
    af.print("OK")


if __name__ == "__main__":
    main()
