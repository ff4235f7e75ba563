"""Where a select stops being cheaper than ``lax.cond`` (sets cond.select_or_cond.SELECT_BUDGET).

A loop of 200 steps whose body is an ``if`` with elementwise branches on a
vector of n elements: the ``lax.cond`` form against the select form, timed
interleaved in one process. The branches together do about 4n element
operations; the crossover (ratio cond/select falls below 1) gives the budget.

    PYTHONPATH=. python benchmarks/select_cost.py
"""

import statistics
import time

import jax
import jax.numpy as jnp
from jax import lax


def make(n, use_select):
    def body(i, x):
        c = x[0] > 0.5
        t = lambda: x * 1.0001 + 1.0
        f = lambda: x * 0.9999 - 0.5
        if use_select:
            return jnp.where(c, t(), f())
        return lax.cond(c, t, f)

    return jax.jit(lambda x: lax.fori_loop(0, 200, body, x))


def bench(fn, x, reps=30):
    fn(x).block_until_ready()
    t = time.perf_counter()
    for _ in range(reps):
        fn(x).block_until_ready()
    return (time.perf_counter() - t) / reps


def main():
    print(f"{'n':>8} {'elem ops':>9} {'cond/select':>12}")
    for n in (1, 16, 128, 512, 1024, 2048, 4096, 16384, 65536):
        x = jnp.linspace(0, 1, n)
        c, s = make(n, False), make(n, True)
        ratios = []
        for _ in range(5):
            ratios.append(bench(c, x) / bench(s, x))
        print(f"{n:>8} {4 * n:>9} {statistics.median(ratios):>12.2f}")


if __name__ == "__main__":
    main()
