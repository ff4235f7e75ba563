"""Why a small batched program can look 3-5x slower on XLA's CPU client.

``python benchmarks/cpu_dispatch.py``

XLA's CPU client runs a compiled program on the calling thread when its cost
analysis estimates it below 1000 flops, or when the program holds a host
callback; otherwise it hands the program to a worker thread, a fixed cost per
call (15-20 us on a 2-core machine). The batched bisection of
``real_algorithms.py``, written by hand with ``lax.while_loop``, is about 2000
flops and pays the hand-off; optimistix's version does not, because its error
check (``equinox.internal.error_if``) holds a host callback; autoflow's natural
version compiles to 978 flops (1125 while the constants of its loop went through
an optimization barrier, the old ``checkpoint.as_operands``) and does not either.

This script times, in one process, the same hand-written batched bisection with
and without a never-taken host callback, against autoflow's natural version, so
that the cost shows up as what it is: a property of the dispatch, not of the
loop. With ``--sync-dispatch`` (``jax_cpu_enable_async_dispatch=False``) every
program runs on the calling thread and the three agree.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import jax

if "--sync-dispatch" in sys.argv:
    jax.config.update("jax_cpu_enable_async_dispatch", False)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import autoflow  # noqa: E402
from benchmarks.real_algorithms import _cubic, bisection  # noqa: E402


def lax_bisection(lo, hi, y, rtol=1e-4, atol=1e-4, max_steps=256):
    """The same bisection, written by hand with ``lax.while_loop`` and ``jnp.where``."""
    flip = _cubic(lo) > _cubic(hi)

    def cond(c):
        k, lo, hi, y, err = c
        done = (jnp.abs(hi - lo) < atol + rtol * jnp.abs(y)) & (jnp.abs(err) < atol)
        return (k < max_steps) & ~done

    def body(c):
        k, lo, hi, y, err = c
        err = _cubic(y)
        up = flip != (err < 0)
        lo, hi = jnp.where(up, y, lo), jnp.where(up, hi, y)
        return k + 1, lo, hi, lo + 0.5 * (hi - lo), err

    _, lo, hi, y, err = lax.while_loop(cond, body, (0, lo, hi, y, jnp.inf))
    return y


def with_unused_callback(batched):
    """``batched``, and a host callback that never runs (as equinox's error_if)."""
    def f(*args):
        ys = batched(*args)
        bad = lax.cond(jnp.any(jnp.isnan(ys)),
                       lambda: jax.pure_callback(lambda: np.bool_(False),
                                                 jax.ShapeDtypeStruct((), jnp.bool_)),
                       lambda: jnp.bool_(False))
        return jnp.where(bad, jnp.nan, ys)
    return f


def _time(fn, args, reps=300):
    fn(*args).block_until_ready()
    t = time.perf_counter()
    for _ in range(reps):
        fn(*args).block_until_ready()
    return (time.perf_counter() - t) / reps


def main():
    rng = np.random.default_rng(5)
    b = 16
    args = (jnp.asarray(rng.uniform(0.0, 1.5, size=b), jnp.float32),
            jnp.asarray(rng.uniform(2.5, 4.0, size=b), jnp.float32),
            jnp.full(b, 2.0, jnp.float32))
    sides = {
        "autoflow (natural Python)": jax.jit(jax.vmap(autoflow.convert(
            lambda lo, hi, y: bisection(_cubic, lo, hi, y)))),
        "lax.while_loop by hand": jax.jit(jax.vmap(lax_bisection)),
        "lax.while_loop by hand + unused callback": jax.jit(
            with_unused_callback(jax.vmap(lax_bisection))),
    }
    outs = [np.asarray(f(*args)) for f in sides.values()]
    for o in outs[1:]:
        np.testing.assert_allclose(o, outs[0], rtol=1e-5, atol=1e-5)
    times = {k: [] for k in sides}
    for _ in range(9):
        for k, f in sides.items():
            times[k].append(_time(f, args))
    mode = "sync" if "--sync-dispatch" in sys.argv else "async (default)"
    print(f"vmap over {b} bisections, dispatch {mode}: median of 9 rounds")
    for k, v in times.items():
        flops = sides[k].lower(*args).compile().cost_analysis().get("flops")
        print(f"  {k:44s} {statistics.median(v) * 1e6:7.1f} us   ({flops:.0f} flops)")


if __name__ == "__main__":
    main()
