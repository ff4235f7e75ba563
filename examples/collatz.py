"""Number of Collatz steps needed to reach 1.

``while n != 1`` with an ``if n % 2 == 0`` / ``else`` inside: both the trip
count and the branch taken depend on the value of ``n``. The scalar function is
jitted with autoflow and also ``jax.vmap``-ed over 1..1000.

Plain ``jax.jit(collatz_steps)`` fails at ``while n != 1:`` with
``jax.errors.TracerBoolConversionError``. ``autoflow.jit`` emits
``lax.while_loop`` with a ``lax.cond`` in its body.
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


def collatz_steps(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


collatz_jit = autoflow.jit(collatz_steps)
collatz_batch = jax.jit(jax.vmap(autoflow.convert(collatz_steps)))


def collatz_reference(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


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
    steps, first, median = bench(collatz_jit, jnp.int32(27))
    ref = collatz_reference(27)
    print(f"n=27: autoflow {int(steps)} steps, reference {ref} steps")
    print(f"    first call {first * 1e3:.1f} ms, median later call {median * 1e6:.1f} us")
    np.testing.assert_allclose(int(steps), ref)

    ns = jnp.arange(1, 1001, dtype=jnp.int32)
    steps, first, median = bench(collatz_batch, ns)
    ref = np.array([collatz_reference(int(n)) for n in range(1, 1001)])
    print(f"n=1..1000 (vmap): autoflow max {int(steps.max())} steps at n={int(steps.argmax()) + 1},"
          f" reference max {ref.max()} steps at n={ref.argmax() + 1}")
    print(f"    first call {first * 1e3:.1f} ms, median later call {median * 1e6:.1f} us")
    np.testing.assert_allclose(np.asarray(steps), ref)
    print("OK")


if __name__ == "__main__":
    main()
