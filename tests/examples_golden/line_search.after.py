"""Gradient descent with a backtracking (Armijo) line search, plus a derivative through it.

Fits L2-regularised logistic regression. Each of the ``n_steps`` outer
iterations computes the gradient with ``jax.grad`` and then halves the step
size ``while`` the Armijo sufficient-decrease condition fails: a data-dependent
``while`` inside a ``for``. The fitted weights are then differentiated with
respect to the regularisation strength with ``jax.jacfwd`` through
``autoflow.convert(fit)`` (forward mode, because reverse mode cannot go through
a ``lax.while_loop``) and checked against the implicit-function-theorem value.

Plain ``jax.jit(fit)`` fails at the ``while loss(...) > ...:`` line with
``jax.errors.TracerBoolConversionError``.
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


def loss(w, X, y, lam):
    z = X @ w
    return jnp.mean(jnp.logaddexp(0.0, z) - y * z) + 0.5 * lam * jnp.dot(w, w)


def fit(X, y, lam, n_steps=100, beta=0.5, c=1e-4):
    w = jnp.zeros(X.shape[1])

    def loop_body(_, w):
        g = jax.grad(af.converted(loss))(w, X, y, lam)
        f0 = af.call(loss, w, X, y, lam)
        t = 4.0

        def loop_test(t):
            return af.call(loss, w - t * g, X, y, lam) > f0 - c * t * jnp.dot(g, g)

        def loop_body(t):
            t = beta * t
            return t
        t = af.while_stmt(loop_test, loop_body, (t,), ("t",))
        w = w - t * g
        return w
    w = af.for_stmt(af.range(n_steps), loop_body, (w,), ("w",))
    return w


fit_jit = autoflow.jit(fit)
dw_dlam = jax.jit(jax.jacfwd(autoflow.convert(fit), argnums=2))


def fit_reference(X, y, lam, n_steps=100, beta=0.5, c=1e-4):
    X, y = np.asarray(X, np.float64), np.asarray(y, np.float64)

    def f(w):
        z = X @ w
        return np.mean(np.logaddexp(0.0, z) - y * z) + 0.5 * lam * w @ w

    w = np.zeros(X.shape[1])

    def loop_body(_, w):
        g = X.T @ (1 / (1 + np.exp(-(X @ w))) - y) / af.len(y) + lam * w
        f0, t = af.call(f, w), 4.0

        def loop_test(t):
            return af.call(f, w - t * g) > f0 - c * t * g @ g

        def loop_body(t):
            t = beta * t
            return t
        t = af.while_stmt(loop_test, loop_body, (t,), ("t",))
        w = w - t * g
        return w
    w = af.for_stmt(af.range(n_steps), loop_body, (w,), ("w",))
    return w


def dw_dlam_reference(X, w, lam):
    # At the optimum grad L(w) + lam * w = 0, so (H + lam I) dw/dlam = -w.
    X = np.asarray(X, np.float64)
    p = 1 / (1 + np.exp(-(X @ w)))
    H = X.T @ (X * (p * (1 - p))[:, None]) / af.len(X) + lam * np.eye(af.len(w))
    return -np.linalg.solve(H, w)


def make_data(n=200, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    w_true = np.array([1.5, -2.0, 0.5, 0.0])[:d]
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-(X @ w_true)))).astype(np.float64)
    return X.astype(np.float32), y.astype(np.float32)


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
    X, y = af.call(make_data)
    lam = 0.05
    w, first, median = af.call(bench, fit_jit, jnp.asarray(X), jnp.asarray(y), jnp.float32(lam))
    w_ref = af.call(fit_reference, X, y, lam)
    af.print(af.fstring("autoflow  w = {0}", np.asarray(w)))
    af.print(af.fstring("reference w = {0}", w_ref))
    af.print(af.fstring("    first call {0:.1f} ms, median later call {1:.2f} ms", first * 1e3, median * 1e3))
    np.testing.assert_allclose(np.asarray(w), w_ref, rtol=1e-3, atol=1e-4)

    dw, first, median = af.call(bench, dw_dlam, jnp.asarray(X), jnp.asarray(y), jnp.float32(lam))
    dw_ref = af.call(dw_dlam_reference, X, w_ref, lam)
    af.print(af.fstring("autoflow  dw/dlam = {0}", np.asarray(dw)))
    af.print(af.fstring("reference dw/dlam = {0}", dw_ref))
    af.print(af.fstring("    first call {0:.1f} ms, median later call {1:.2f} ms", first * 1e3, median * 1e3))
    np.testing.assert_allclose(np.asarray(dw), dw_ref, rtol=2e-2, atol=1e-3)
    af.print("OK")


if __name__ == "__main__":
    main()
