"""The cost of an ``if`` whose branches hold loops, under ``jax.vmap`` (issue 19, item 4).

With a batched predicate both branches run for every lane, and each branch's
loop runs until its slowest lane is done: the batch pays the longest series
plus the longest continued fraction. The rewrite that avoids it is one loop
whose body picks the update per lane (a cheap ``if``, lowered to a select):
the batch then pays the longest lane only. Both are timed here, interleaved,
against ``jax.scipy.special.gammainc`` on the same batch.

    PYTHONPATH=. python benchmarks/vmap_branch_loops.py
"""

import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import autoflow
from benchmarks.real_algorithms import gammainc as two_loops


def one_loop(a, x):
    """P(a, x) with one loop: each lane steps its own method (series or Lentz)."""
    if x <= 0:
        return jnp.zeros_like(x)
    log_pre = a * jnp.log(x) - x - jax.scipy.special.gammaln(a)
    eps = jnp.finfo(x.dtype).eps
    use_cf = x > 1 and x > a
    # series state
    term = 1.0 / a
    total = term
    n = a
    # continued-fraction state
    b = x + 1 - a
    c = 1.0 / 1e-30
    d = 1.0 / b
    h = d
    for i in range(1, 2000):
        if use_cf:
            an = -i * (i - a)
            b = b + 2
            d = an * d + b
            d = jnp.where(abs(d) < 1e-30, 1e-30, d)
            c = b + an / c
            c = jnp.where(abs(c) < 1e-30, 1e-30, c)
            d = 1.0 / d
            delta = d * c
            h = h * delta
            done = abs(delta - 1) < eps
        else:
            n = n + 1
            term = term * x / n
            total = total + term
            done = abs(term) < abs(total) * eps
        if done:
            break
    if use_cf:
        return 1 - jnp.exp(log_pre) * h
    return total * jnp.exp(log_pre)


def _time(fn, args, reps):
    jax.block_until_ready(fn(*args))
    t = time.perf_counter()
    for _ in range(reps):
        jax.block_until_ready(fn(*args))
    return (time.perf_counter() - t) / reps


def main():
    rng = np.random.default_rng(5)
    a = jnp.asarray(rng.uniform(0.5, 20, size=256), jnp.float32)
    x = jnp.asarray(rng.uniform(0.1, 30, size=256), jnp.float32)
    fns = {
        "if with a loop in each branch": jax.jit(jax.vmap(autoflow.convert(two_loops))),
        "one loop, per-lane update": jax.jit(jax.vmap(autoflow.convert(one_loop))),
        "jax.scipy.special.gammainc": jax.jit(jax.scipy.special.gammainc),
    }
    ref = fns["jax.scipy.special.gammainc"](a, x)
    for name, fn in fns.items():
        np.testing.assert_allclose(fn(a, x), ref, rtol=2e-5, atol=2e-6, err_msg=name)
    times = {k: [] for k in fns}
    for _ in range(9):
        for name, fn in fns.items():
            times[name].append(_time(fn, (a, x), 200))
    lib = statistics.median(times["jax.scipy.special.gammainc"])
    print("| lowering under vmap (256 lanes) | time | vs library |")
    print("|---|---|---|")
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"| {name} | {m * 1e6:.0f} us | {m / lib:.2f}x |")


if __name__ == "__main__":
    main()
