"""Newton's method for a scalar root, iterated until the step is below a tolerance.

Solves x**3 - 2*x - a = 0 (Wallis' cubic for a = 5) with Newton's method. The
derivative comes from ``jax.grad``. The loop stops when ``abs(delta) <= tol``
or after ``max_iter`` iterations, so the number of iterations depends on the
data.

Plain ``jax.jit(newton)`` fails at ``while abs(delta) > tol and i < max_iter``
with ``jax.errors.TracerBoolConversionError`` (a traced value is converted to a
Python bool). ``autoflow.jit`` turns the loop into ``lax.while_loop``.
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


def f(x, a):
    return x**3 - 2.0 * x - a


def newton(a, x0, tol=1e-6, max_iter=50):
    df = jax.grad(af.converted(f))
    x = x0
    delta = af.call(f, x, a) / af.call(df, x, a)
    i = 0

    def loop_test(x, delta, i):
        return af.and_(abs(delta) > tol, lambda: i < max_iter)

    def loop_body(x, delta, i):
        x = x - delta
        delta = af.call(f, x, a) / af.call(df, x, a)
        i += 1
        return (x, delta, i)
    x, delta, i = af.while_stmt(loop_test, loop_body, (x, delta, i), ("x", "delta", "i"))
    return x, i


newton_jit = autoflow.jit(newton)


def newton_reference(a, x0, tol=1e-6, max_iter=50):
    x = af.float(x0)
    delta = (x**3 - 2 * x - a) / (3 * x**2 - 2)
    i = 0

    def loop_test(x, delta, i):
        return af.and_(abs(delta) > tol, lambda: i < max_iter)

    def loop_body(x, delta, i):
        x = x - delta
        delta = (x**3 - 2 * x - a) / (3 * x**2 - 2)
        i += 1
        return (x, delta, i)
    x, delta, i = af.while_stmt(loop_test, loop_body, (x, delta, i), ("x", "delta", "i"))
    return x, i


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

    def loop_body(itr):
        k, (a, x0) = itr
        (x, iters), first, median = af.call(bench, newton_jit, jnp.float32(a), jnp.float32(x0))
        x_ref, iters_ref = af.call(newton_reference, a, x0)
        af.print(af.fstring("a={0:5.1f} x0={1:4.1f}: autoflow x={2:.7f} ({3} iters)  reference x={4:.7f} ({5} iters)", a, x0, af.float(x), af.int(iters), x_ref, iters_ref))
        note = af.if_exp(k == 0, lambda: "trace + compile", lambda: "already compiled")
        af.print(af.fstring("    first call {0:.1f} ms ({1}), median later call {2:.1f} us", first * 1e3, note, median * 1e6))
        np.testing.assert_allclose(af.float(x), x_ref, rtol=1e-5)
        af.assert_(abs(af.float(af.call(f, x, a))) < 1e-4, None)
    af.for_stmt(af.enumerate([(5.0, 2.0), (10.0, 1.0), (-3.0, -2.0)]), loop_body, (), ())
    af.print("OK")


if __name__ == "__main__":
    main()
