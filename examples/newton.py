"""Newton's method for a scalar root, iterated until the step is below a tolerance.

Solves x**3 - 2*x - a = 0 (Wallis' cubic for a = 5) with Newton's method. The
derivative comes from ``jax.grad``. The loop stops when ``abs(delta) <= tol``
or after ``max_iter`` iterations, so the number of iterations depends on the
data.

Plain ``jax.jit(newton)`` fails at ``while abs(delta) > tol and i < max_iter``
with ``jax.errors.TracerBoolConversionError`` (a traced value is converted to a
Python bool). ``autoflow.jit`` turns the loop into ``lax.while_loop``.
"""

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
    return x**3 - 2.0 * x - a


def newton(a, x0, tol=1e-6, max_iter=50):
    df = jax.grad(f)
    x = x0
    delta = f(x, a) / df(x, a)
    i = 0
    while abs(delta) > tol and i < max_iter:
        x = x - delta
        delta = f(x, a) / df(x, a)
        i += 1
    return x, i


newton_jit = autoflow.jit(newton)


def newton_reference(a, x0, tol=1e-6, max_iter=50):
    x = float(x0)
    delta = (x**3 - 2 * x - a) / (3 * x**2 - 2)
    i = 0
    while abs(delta) > tol and i < max_iter:
        x = x - delta
        delta = (x**3 - 2 * x - a) / (3 * x**2 - 2)
        i += 1
    return x, i


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
    for k, (a, x0) in enumerate([(5.0, 2.0), (10.0, 1.0), (-3.0, -2.0)]):
        (x, iters), first, median = bench(newton_jit, jnp.float32(a), jnp.float32(x0))
        x_ref, iters_ref = newton_reference(a, x0)
        print(f"a={a:5.1f} x0={x0:4.1f}: autoflow x={float(x):.7f} ({int(iters)} iters)"
              f"  reference x={x_ref:.7f} ({iters_ref} iters)")
        note = "trace + compile" if k == 0 else "already compiled"
        print(f"    first call {first * 1e3:.1f} ms ({note}), median later call {median * 1e6:.1f} us")
        np.testing.assert_allclose(float(x), x_ref, rtol=1e-5)
        assert abs(float(f(x, a))) < 1e-4
    print("OK")


if __name__ == "__main__":
    main()
