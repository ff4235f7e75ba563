"""Adaptive-step Dormand-Prince RK45 integration of the Van der Pol oscillator.

``while t < t_end`` takes one embedded RK4(5) step, accepts or rejects it with
an ``if err <= 1.0`` and updates the step size. The number of steps depends on
the solution.

Plain ``jax.jit(integrate)`` fails at ``while t < t_end:`` with
``jax.errors.TracerBoolConversionError``. ``autoflow.jit`` emits a
``lax.while_loop`` whose body contains a ``lax.cond``.
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

# Dormand-Prince 5(4) Butcher tableau.
C = [0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0]
A = [
    [],
    [1 / 5],
    [3 / 40, 9 / 40],
    [44 / 45, -56 / 15, 32 / 9],
    [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
    [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
    [35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84],
]
B5 = [35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0]
B4 = [5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40]


def van_der_pol(t, y, mu):
    return jnp.stack([y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]])


def dopri_step(t, y, h, mu):
    ks = [af.call(van_der_pol, t, y, mu)]

    def loop_body(itr, ks):
        c, a = itr
        y_stage = y + h * af.sum((a_j * k_j for a_j, k_j in zip(a, ks)))
        ks = af.append(ks, af.call(van_der_pol, t + c * h, y_stage, mu))
        return ks
    ks = af.for_stmt(af.zip(C[1:], A[1:]), loop_body, (ks,), ("ks",))
    y5 = y + h * af.sum((b * k for b, k in zip(B5, ks)))
    y4 = y + h * af.sum((b * k for b, k in zip(B4, ks)))
    return y5, y5 - y4


def integrate(y0, t_end, mu, rtol=1e-5, atol=1e-6):
    t = 0.0
    y = y0
    h = 0.01
    n_accepted = 0
    n_rejected = 0

    def loop_test(h, t, y, n_accepted, n_rejected):
        return t < t_end

    def loop_body(h, t, y, n_accepted, n_rejected):
        h = jnp.minimum(h, t_end - t)
        y_new, err_vec = af.call(dopri_step, t, y, h, mu)
        scale = atol + rtol * jnp.maximum(jnp.abs(y), jnp.abs(y_new))
        err = jnp.sqrt(jnp.mean((err_vec / scale) ** 2))

        def if_true(t, y, n_accepted, n_rejected):
            t = t + h
            y = y_new
            n_accepted += 1
            return (t, y, n_accepted, n_rejected)

        def if_false(t, y, n_accepted, n_rejected):
            n_rejected += 1
            return (t, y, n_accepted, n_rejected)
        t, y, n_accepted, n_rejected = af.if_stmt(err <= 1.0, if_true, if_false, (t, y, n_accepted, n_rejected), ("t", "y", "n_accepted", "n_rejected"))
        h = h * jnp.clip(0.9 * err ** -0.2, 0.2, 5.0)
        return (h, t, y, n_accepted, n_rejected)
    h, t, y, n_accepted, n_rejected = af.while_stmt(loop_test, loop_body, (h, t, y, n_accepted, n_rejected), ("h", "t", "y", "n_accepted", "n_rejected"))
    return y, n_accepted, n_rejected


integrate_jit = autoflow.jit(integrate)


def integrate_reference(y0, t_end, mu, rtol=1e-5, atol=1e-6):
    def rhs(t, y):
        return np.array([y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]])

    t, y, h = 0.0, np.asarray(y0, dtype=np.float64), 0.01
    n_accepted = n_rejected = 0

    def loop_test(h, t, y, n_accepted, n_rejected):
        return t < t_end

    def loop_body(h, t, y, n_accepted, n_rejected):
        h = af.min(h, t_end - t)
        ks = [af.call(rhs, t, y)]

        def loop_body(itr, ks):
            c, a = itr
            ks = af.append(ks, af.call(rhs, t + c * h, y + h * af.sum((a_j * k_j for a_j, k_j in zip(a, ks)))))
            return ks
        ks = af.for_stmt(af.zip(C[1:], A[1:]), loop_body, (ks,), ("ks",))
        y5 = y + h * af.sum((b * k for b, k in zip(B5, ks)))
        y4 = y + h * af.sum((b * k for b, k in zip(B4, ks)))
        scale = atol + rtol * np.maximum(np.abs(y), np.abs(y5))
        err = np.sqrt(np.mean(((y5 - y4) / scale) ** 2))

        def if_true(t, y, n_accepted, n_rejected):
            t, y = t + h, y5
            n_accepted += 1
            return (t, y, n_accepted, n_rejected)

        def if_false(t, y, n_accepted, n_rejected):
            n_rejected += 1
            return (t, y, n_accepted, n_rejected)
        t, y, n_accepted, n_rejected = af.if_stmt(err <= 1.0, if_true, if_false, (t, y, n_accepted, n_rejected), ("t", "y", "n_accepted", "n_rejected"))
        h = h * np.clip(af.if_exp(err > 0, lambda: 0.9 * err ** -0.2, lambda: np.inf), 0.2, 5.0)
        return (h, t, y, n_accepted, n_rejected)
    h, t, y, n_accepted, n_rejected = af.while_stmt(loop_test, loop_body, (h, t, y, n_accepted, n_rejected), ("h", "t", "y", "n_accepted", "n_rejected"))
    return y, n_accepted, n_rejected


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

    def loop_body(itr):
        k, mu = itr
        y0 = jnp.array([2.0, 0.0])
        (y, n_acc, n_rej), first, median = af.call(bench, integrate_jit, y0, jnp.float32(10.0), jnp.float32(mu))
        y_ref, n_acc_ref, n_rej_ref = af.call(integrate_reference, [2.0, 0.0], 10.0, mu)
        af.print(af.fstring("mu={0}: autoflow y(10)={1} ({2} accepted, {3} rejected steps)", mu, np.asarray(y), af.int(n_acc), af.int(n_rej)))
        af.print(af.fstring("        reference y(10)={0} ({1} accepted, {2} rejected steps)", y_ref, n_acc_ref, n_rej_ref))
        note = af.if_exp(k == 0, lambda: "trace + compile", lambda: "already compiled")
        af.print(af.fstring("    first call {0:.1f} ms ({1}), median later call {2:.2f} ms", first * 1e3, note, median * 1e3))
        np.testing.assert_allclose(np.asarray(y), y_ref, rtol=1e-3, atol=1e-3)
        af.assert_(abs(af.int(n_acc) - n_acc_ref) <= af.max(3, n_acc_ref // 20), None)
    af.for_stmt(af.enumerate([1.0, 3.0]), loop_body, (), ())
    af.print("OK")


if __name__ == "__main__":
    main()
