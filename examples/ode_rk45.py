"""Adaptive-step Dormand-Prince RK45 integration of the Van der Pol oscillator.

``while t < t_end`` takes one embedded RK4(5) step, accepts or rejects it with
an ``if err <= 1.0`` and updates the step size. The number of steps depends on
the solution.

Plain ``jax.jit(integrate)`` fails at ``while t < t_end:`` with
``jax.errors.TracerBoolConversionError``. ``autoflow.jit`` emits a
``lax.while_loop`` whose body contains a ``lax.cond``.
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
    ks = [van_der_pol(t, y, mu)]
    for c, a in zip(C[1:], A[1:]):
        y_stage = y + h * sum(a_j * k_j for a_j, k_j in zip(a, ks))
        ks.append(van_der_pol(t + c * h, y_stage, mu))
    y5 = y + h * sum(b * k for b, k in zip(B5, ks))
    y4 = y + h * sum(b * k for b, k in zip(B4, ks))
    return y5, y5 - y4


def integrate(y0, t_end, mu, rtol=1e-5, atol=1e-6):
    t = 0.0
    y = y0
    h = 0.01
    n_accepted = 0
    n_rejected = 0
    while t < t_end:
        h = jnp.minimum(h, t_end - t)
        y_new, err_vec = dopri_step(t, y, h, mu)
        scale = atol + rtol * jnp.maximum(jnp.abs(y), jnp.abs(y_new))
        err = jnp.sqrt(jnp.mean((err_vec / scale) ** 2))
        if err <= 1.0:
            t = t + h
            y = y_new
            n_accepted += 1
        else:
            n_rejected += 1
        h = h * jnp.clip(0.9 * err ** -0.2, 0.2, 5.0)
    return y, n_accepted, n_rejected


integrate_jit = autoflow.jit(integrate)


def integrate_reference(y0, t_end, mu, rtol=1e-5, atol=1e-6):
    def rhs(t, y):
        return np.array([y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]])

    t, y, h = 0.0, np.asarray(y0, dtype=np.float64), 0.01
    n_accepted = n_rejected = 0
    while t < t_end:
        h = min(h, t_end - t)
        ks = [rhs(t, y)]
        for c, a in zip(C[1:], A[1:]):
            ks.append(rhs(t + c * h, y + h * sum(a_j * k_j for a_j, k_j in zip(a, ks))))
        y5 = y + h * sum(b * k for b, k in zip(B5, ks))
        y4 = y + h * sum(b * k for b, k in zip(B4, ks))
        scale = atol + rtol * np.maximum(np.abs(y), np.abs(y5))
        err = np.sqrt(np.mean(((y5 - y4) / scale) ** 2))
        if err <= 1.0:
            t, y = t + h, y5
            n_accepted += 1
        else:
            n_rejected += 1
        h = h * np.clip(0.9 * err ** -0.2 if err > 0 else np.inf, 0.2, 5.0)
    return y, n_accepted, n_rejected


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
    for k, mu in enumerate([1.0, 3.0]):
        y0 = jnp.array([2.0, 0.0])
        (y, n_acc, n_rej), first, median = bench(integrate_jit, y0, jnp.float32(10.0), jnp.float32(mu))
        y_ref, n_acc_ref, n_rej_ref = integrate_reference([2.0, 0.0], 10.0, mu)
        print(f"mu={mu}: autoflow y(10)={np.asarray(y)} ({int(n_acc)} accepted, {int(n_rej)} rejected steps)")
        print(f"        reference y(10)={y_ref} ({n_acc_ref} accepted, {n_rej_ref} rejected steps)")
        note = "trace + compile" if k == 0 else "already compiled"
        print(f"    first call {first * 1e3:.1f} ms ({note}), median later call {median * 1e3:.2f} ms")
        np.testing.assert_allclose(np.asarray(y), y_ref, rtol=1e-3, atol=1e-3)
        assert abs(int(n_acc) - n_acc_ref) <= max(3, n_acc_ref // 20)
    print("OK")


if __name__ == "__main__":
    main()
