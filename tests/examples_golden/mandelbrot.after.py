"""Mandelbrot escape time: a scalar ``while`` loop with ``break``, vmapped over a grid.

``escape_time(c)`` iterates z = z*z + c until |z| > 2 (``break``) or
``max_iter`` iterations. It is written for one complex number and mapped over a
flattened 64x48 grid with ``jax.jit(jax.vmap(autoflow.convert(escape_time)))``.
The result is printed as ASCII art.

Plain ``jax.jit(escape_time)`` (and ``jax.vmap`` of it) fails at
``if abs(z) > 2.0:`` with ``jax.errors.TracerBoolConversionError``. With autoflow
the loop becomes a ``lax.while_loop``, which ``jax.vmap`` batches.
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

WIDTH, HEIGHT, MAX_ITER = 64, 48, 50


def escape_time(c, max_iter=MAX_ITER):
    z = jnp.zeros_like(c)
    n = 0
    broke = False

    def loop_test(z, broke, n):
        return af.and_(af.not_(broke), lambda: n < max_iter)

    def loop_body(z, broke, n):
        z = z * z + c
        broke = af.bool(abs(z) > 2.0)

        def if_true(n):
            n += 1
            return n

        def if_false(n):
            return n
        n = af.if_stmt(af.not_(broke), if_true, if_false, (n,), ("n",), guard=True)
        return (z, broke, n)
    z, broke, n = af.while_stmt(loop_test, loop_body, (z, broke, n), ("z", "broke", "n"))
    return n


mandelbrot = jax.jit(jax.vmap(autoflow.convert(escape_time)))


def escape_time_reference(c, max_iter=MAX_ITER):
    z = np.complex64(0)
    n = 0
    broke = False

    def loop_test(z, broke, n):
        return af.and_(af.not_(broke), lambda: n < max_iter)

    def loop_body(z, broke, n):
        z = z * z + c
        broke = af.bool(abs(z) > 2.0)

        def if_true(n):
            n += 1
            return n

        def if_false(n):
            return n
        n = af.if_stmt(af.not_(broke), if_true, if_false, (n,), ("n",), guard=True)
        return (z, broke, n)
    z, broke, n = af.while_stmt(loop_test, loop_body, (z, broke, n), ("z", "broke", "n"))
    return n


def make_grid():
    re = np.linspace(-2.2, 0.8, WIDTH, dtype=np.float32)
    im = np.linspace(-1.2, 1.2, HEIGHT, dtype=np.float32)
    return (re[None, :] + 1j * im[:, None]).astype(np.complex64)


def bench(fn, *args, repeats=10):
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
    grid = af.call(make_grid)
    counts, first, median = af.call(bench, mandelbrot, jnp.asarray(grid.ravel()))
    counts = np.asarray(counts).reshape(HEIGHT, WIDTH)
    ref = np.array([af.call(escape_time_reference, c) for c in grid.ravel()]).reshape(HEIGHT, WIDTH)

    chars = " .:-=+*#%@"

    def loop_body(row):
        af.print(af.join("", (chars[af.min(af.int(k) * af.len(chars) // MAX_ITER, af.len(chars) - 1)] for k in row)))
    af.for_stmt(counts[::2], loop_body, (), ())
    af.print(af.fstring("autoflow: total escape iterations {0}, points in set {1}", counts.sum(), (counts == MAX_ITER).sum()))
    af.print(af.fstring("reference: total escape iterations {0}, points in set {1}", ref.sum(), (ref == MAX_ITER).sum()))
    af.print(af.fstring("first call {0:.1f} ms, median later call {1:.2f} ms", first * 1e3, median * 1e3))
    # float32 rounding may differ between XLA and NumPy; allow a few boundary pixels to differ.
    mismatched = (counts != ref).mean()
    af.print(af.fstring("pixels that differ from the reference: {0:.2%}", mismatched))
    af.assert_(mismatched < 0.01, None)
    np.testing.assert_allclose(counts.mean(), ref.mean(), rtol=1e-2)
    af.print("OK")


if __name__ == "__main__":
    main()
