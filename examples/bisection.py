"""Bisection root finding with an iteration cap and an early ``break``.

Finds the root of cos(x) - a*x inside [lo, hi]. The loop runs at most
``max_iter`` times and leaves early with ``break`` once the bracket is smaller
than ``tol``; which half of the bracket is kept is an ``if`` on the sign of
f(mid).

Plain ``jax.jit(bisect)`` fails at ``if f_mid * f_lo <= 0:`` with
``jax.errors.TracerBoolConversionError``. ``autoflow.jit`` turns the ``for``
loop with ``break`` into ``lax.while_loop`` and the ``if`` into ``lax.cond``.
"""

import math
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


def f(x, a):
    return jnp.cos(x) - a * x


def bisect(a, lo, hi, tol=1e-6, max_iter=100):
    f_lo = f(lo, a)
    for i in range(max_iter):
        mid = 0.5 * (lo + hi)
        f_mid = f(mid, a)
        if f_mid * f_lo <= 0:
            hi = mid
        else:
            lo = mid
            f_lo = f_mid
        if hi - lo < tol:
            break
    return 0.5 * (lo + hi), i + 1


bisect_jit = autoflow.jit(bisect)


def bisect_reference(a, lo, hi, tol=1e-6, max_iter=100):
    def g(x):
        return math.cos(x) - a * x

    f_lo = g(lo)
    for i in range(max_iter):
        mid = 0.5 * (lo + hi)
        f_mid = g(mid)
        if f_mid * f_lo <= 0:
            hi = mid
        else:
            lo = mid
            f_lo = f_mid
        if hi - lo < tol:
            break
    return 0.5 * (lo + hi), i + 1


def bench(fn, *args, repeats=20):
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return out, first, statistics.median(times)


def main():
    for k, (a, lo, hi) in enumerate([(1.0, 0.0, 2.0), (0.5, 0.0, 3.0), (3.0, -1.0, 1.0)]):
        (root, iters), first, median = bench(
            bisect_jit, jnp.float32(a), jnp.float32(lo), jnp.float32(hi))
        root_ref, iters_ref = bisect_reference(a, lo, hi)
        print(f"a={a}: autoflow root={float(root):.7f} ({int(iters)} iters)"
              f"  reference root={root_ref:.7f} ({iters_ref} iters)")
        note = "trace + compile" if k == 0 else "already compiled"
        print(f"    first call {first * 1e3:.1f} ms ({note}), median later call {median * 1e6:.1f} us")
        np.testing.assert_allclose(float(root), root_ref, atol=2e-6)
        assert abs(int(iters) - iters_ref) <= 1
    print("OK")


if __name__ == "__main__":
    main()
