"""Mandelbrot escape time: a scalar ``while`` loop with ``break``, vmapped over a grid.

``escape_time(c)`` iterates z = z*z + c until |z| > 2 (``break``) or
``max_iter`` iterations. It is written for one complex number and mapped over a
flattened 64x48 grid with ``jax.jit(jax.vmap(autoflow.convert(escape_time)))``.
The result is printed as ASCII art.

Plain ``jax.jit(escape_time)`` (and ``jax.vmap`` of it) fails at
``if abs(z) > 2.0:`` with ``jax.errors.TracerBoolConversionError``. With autoflow
the loop becomes a ``lax.while_loop``, which ``jax.vmap`` batches.
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

WIDTH, HEIGHT, MAX_ITER = 64, 48, 50


def escape_time(c, max_iter=MAX_ITER):
    z = jnp.zeros_like(c)
    n = 0
    while n < max_iter:
        z = z * z + c
        if abs(z) > 2.0:
            break
        n += 1
    return n


mandelbrot = jax.jit(jax.vmap(autoflow.convert(escape_time)))


def escape_time_reference(c, max_iter=MAX_ITER):
    z = np.complex64(0)
    n = 0
    while n < max_iter:
        z = z * z + c
        if abs(z) > 2.0:
            break
        n += 1
    return n


def make_grid():
    re = np.linspace(-2.2, 0.8, WIDTH, dtype=np.float32)
    im = np.linspace(-1.2, 1.2, HEIGHT, dtype=np.float32)
    return (re[None, :] + 1j * im[:, None]).astype(np.complex64)


def bench(fn, *args, repeats=10):
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
    grid = make_grid()
    counts, first, median = bench(mandelbrot, jnp.asarray(grid.ravel()))
    counts = np.asarray(counts).reshape(HEIGHT, WIDTH)
    ref = np.array([escape_time_reference(c) for c in grid.ravel()]).reshape(HEIGHT, WIDTH)

    chars = " .:-=+*#%@"
    for row in counts[::2]:
        print("".join(chars[min(int(k) * len(chars) // MAX_ITER, len(chars) - 1)] for k in row))
    print(f"autoflow: total escape iterations {counts.sum()}, points in set {(counts == MAX_ITER).sum()}")
    print(f"reference: total escape iterations {ref.sum()}, points in set {(ref == MAX_ITER).sum()}")
    print(f"first call {first * 1e3:.1f} ms, median later call {median * 1e3:.2f} ms")
    # float32 rounding may differ between XLA and NumPy; allow a few boundary pixels to differ.
    mismatched = (counts != ref).mean()
    print(f"pixels that differ from the reference: {mismatched:.2%}")
    assert mismatched < 0.01
    np.testing.assert_allclose(counts.mean(), ref.mean(), rtol=1e-2)
    print("OK")


if __name__ == "__main__":
    main()
