"""Number of Collatz steps needed to reach 1.

``while n != 1`` with an ``if n % 2 == 0`` / ``else`` inside: both the trip
count and the branch taken depend on the value of ``n``. The scalar function is
jitted with autoflow and also ``jax.vmap``-ed over 1..1000.

Plain ``jax.jit(collatz_steps)`` fails at ``while n != 1:`` with
``jax.errors.TracerBoolConversionError``. ``autoflow.jit`` emits
``lax.while_loop`` with a ``lax.cond`` in its body.
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


def collatz_steps(n):
    steps = 0

    def loop_test(n, steps):
        return n != 1

    def loop_body(n, steps):

        def if_true(n):
            n = n // 2
            return n

        def if_false(n):
            n = 3 * n + 1
            return n
        n = af.if_stmt(n % 2 == 0, if_true, if_false, (n,), ("n",))
        steps += 1
        return (n, steps)
    n, steps = af.while_stmt(loop_test, loop_body, (n, steps), ("n", "steps"))
    return steps


collatz_jit = autoflow.jit(collatz_steps)
collatz_batch = jax.jit(jax.vmap(autoflow.convert(collatz_steps)))


def collatz_reference(n):
    steps = 0

    def loop_test(n, steps):
        return n != 1

    def loop_body(n, steps):

        def if_true(n):
            n = n // 2
            return n

        def if_false(n):
            n = 3 * n + 1
            return n
        n = af.if_stmt(n % 2 == 0, if_true, if_false, (n,), ("n",))
        steps += 1
        return (n, steps)
    n, steps = af.while_stmt(loop_test, loop_body, (n, steps), ("n", "steps"))
    return steps


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
    steps, first, median = af.call(bench, collatz_jit, jnp.int32(27))
    ref = af.call(collatz_reference, 27)
    af.print(af.fstring("n=27: autoflow {0} steps, reference {1} steps", af.int(steps), ref))
    af.print(af.fstring("    first call {0:.1f} ms, median later call {1:.1f} us", first * 1e3, median * 1e6))
    np.testing.assert_allclose(af.int(steps), ref)

    ns = jnp.arange(1, 1001, dtype=jnp.int32)
    steps, first, median = af.call(bench, collatz_batch, ns)
    ref = np.array([af.call(collatz_reference, af.int(n)) for n in af.range(1, 1001)])
    af.print(af.fstring("n=1..1000 (vmap): autoflow max {0} steps at n={1}, reference max {2} steps at n={3}", af.int(steps.max()), af.int(steps.argmax()) + 1, ref.max(), ref.argmax() + 1))
    af.print(af.fstring("    first call {0:.1f} ms, median later call {1:.1f} us", first * 1e3, median * 1e6))
    np.testing.assert_allclose(np.asarray(steps), ref)
    af.print("OK")


if __name__ == "__main__":
    main()
