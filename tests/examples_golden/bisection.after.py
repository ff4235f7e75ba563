"""Bisection root finding with an iteration cap and an early ``break``.

Finds the root of cos(x) - a*x inside [lo, hi]. The loop runs at most
``max_iter`` times and leaves early with ``break`` once the bracket is smaller
than ``tol``; which half of the bracket is kept is an ``if`` on the sign of
f(mid).

Plain ``jax.jit(bisect)`` fails at ``if f_mid * f_lo <= 0:`` with
``jax.errors.TracerBoolConversionError``. ``autoflow.jit`` turns the ``for``
loop with ``break`` into ``lax.while_loop`` and the ``if`` into ``lax.cond``.
"""

import autoflow.runtime as af

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
    f_lo = af.call(f, lo, a)
    broke = False
    i = af.Undefined("i")

    def loop_body(itr, i, hi, lo, f_lo, broke):
        i = itr
        mid = 0.5 * (lo + hi)
        f_mid = af.call(f, mid, a)

        def if_true(hi, lo, f_lo):
            hi = mid
            return (hi, lo, f_lo)

        def if_false(hi, lo, f_lo):
            lo = mid
            f_lo = f_mid
            return (hi, lo, f_lo)
        hi, lo, f_lo = af.if_stmt(f_mid * f_lo <= 0, if_true, if_false, (hi, lo, f_lo), ("hi", "lo", "f_lo"))
        broke = af.bool(hi - lo < tol)
        return (i, hi, lo, f_lo, broke)

    def loop_test(i, hi, lo, f_lo, broke):
        return af.not_(broke)
    i, hi, lo, f_lo, broke = af.for_stmt(af.range(max_iter), loop_body, (i, hi, lo, f_lo, broke), ("i", "hi", "lo", "f_lo", "broke"), test=loop_test)
    return 0.5 * (lo + hi), af.ld(i) + 1


bisect_jit = autoflow.jit(bisect)


def bisect_reference(a, lo, hi, tol=1e-6, max_iter=100):

    def g(x):
        return af.call(math.cos, x) - a * x

    f_lo = af.call(g, lo)
    broke = False
    i = af.Undefined("i")

    def loop_body(itr, i, hi, lo, f_lo, broke):
        i = itr
        mid = 0.5 * (lo + hi)
        f_mid = af.call(g, mid)

        def if_true(hi, lo, f_lo):
            hi = mid
            return (hi, lo, f_lo)

        def if_false(hi, lo, f_lo):
            lo = mid
            f_lo = f_mid
            return (hi, lo, f_lo)
        hi, lo, f_lo = af.if_stmt(f_mid * f_lo <= 0, if_true, if_false, (hi, lo, f_lo), ("hi", "lo", "f_lo"))
        broke = af.bool(hi - lo < tol)
        return (i, hi, lo, f_lo, broke)

    def loop_test(i, hi, lo, f_lo, broke):
        return af.not_(broke)
    i, hi, lo, f_lo, broke = af.for_stmt(af.range(max_iter), loop_body, (i, hi, lo, f_lo, broke), ("i", "hi", "lo", "f_lo", "broke"), test=loop_test)
    return 0.5 * (lo + hi), af.ld(i) + 1


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
        k, (a, lo, hi) = itr
        (root, iters), first, median = af.call(bench, bisect_jit, jnp.float32(a), jnp.float32(lo), jnp.float32(hi))
        root_ref, iters_ref = af.call(bisect_reference, a, lo, hi)
        af.print(af.fstring("a={0}: autoflow root={1:.7f} ({2} iters)  reference root={3:.7f} ({4} iters)", a, af.float(root), af.int(iters), root_ref, iters_ref))
        note = af.if_exp(k == 0, lambda: "trace + compile", lambda: "already compiled")
        af.print(af.fstring("    first call {0:.1f} ms ({1}), median later call {2:.1f} us", first * 1e3, note, median * 1e6))
        np.testing.assert_allclose(af.float(root), root_ref, atol=2e-6)
        af.assert_(abs(af.int(iters) - iters_ref) <= 1, None)
    af.for_stmt(af.enumerate([(1.0, 0.0, 2.0), (0.5, 0.0, 3.0), (3.0, -1.0, 1.0)]), loop_body, (), ())
    af.print("OK")


if __name__ == "__main__":
    main()
