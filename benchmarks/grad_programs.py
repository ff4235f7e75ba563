"""Convergence loops for ``benchmarks/grad_loops.py``: textbook programs whose ``while``
runs until a test on the data holds, converted with autoflow and differentiated.

* ``cg``: conjugate gradient for ``A x = b`` (``A`` 64x64, symmetric positive
  definite), until the squared residual is under ``1e-10``; gradient w.r.t. ``A``
  and ``b``;
* ``odeint``: an adaptive Heun-Euler integrator of ``y' = tanh(W y) - 0.1 y``
  (64 states) over ``[0, 1]``, each step accepted or rejected by its error estimate
  and the step size adapted; gradient w.r.t. ``y0`` and ``W``;
* ``fista``: FISTA for the lasso ``0.5 |F x - g|^2 + 0.2 |x|_1`` (``F`` 128x64),
  until an iteration moves ``x`` by less than ``1e-3``; gradient w.r.t. ``F`` and ``g``;
* ``newton``: Newton's method on Kepler's equation ``E - e sin E = M`` for 64 mean
  anomalies (``e = 0.9``), until every residual is under ``1e-6``; gradient w.r.t.
  ``M`` and ``e``.

``trips(name)`` counts the loop's iterations on the benchmark's inputs (the plain
Python function run eagerly, its ``while`` line traced).
"""

from __future__ import annotations

import inspect
import sys

import jax
import jax.numpy as jnp
import numpy as np

N = 64


def cg(A, b):
    x = jnp.zeros_like(b)
    r = b - A @ x
    p = r
    rs = r @ r
    while rs > 1e-10:
        Ap = A @ p
        alpha = rs / (p @ Ap)
        x = x + alpha * p
        r = r - alpha * Ap
        rs_new = r @ r
        p = r + (rs_new / rs) * p
        rs = rs_new
    return jnp.sum(x * x)


def odeint(y, w):
    t = 0.0
    h = 0.05
    T = 1.0
    while t < T:
        h = jnp.minimum(h, T - t)
        k1 = jnp.tanh(w @ y) - 0.1 * y
        k2 = jnp.tanh(w @ (y + h * k1)) - 0.1 * (y + h * k1)
        err = jnp.sqrt(jnp.mean((0.5 * h * (k2 - k1)) ** 2))
        if err < 1e-4:
            t = t + h
            y = y + 0.5 * h * (k1 + k2)
        h = h * jnp.clip(0.9 * jnp.sqrt(1e-4 / (err + 1e-12)), 0.2, 5.0)
    return jnp.sum(y * y)


def fista(F, g):
    lam = 0.2
    L = jnp.linalg.norm(F, 2) ** 2
    x = jnp.zeros(F.shape[1])
    z = x
    t = 1.0
    delta = 1.0
    while delta > 1e-3:
        u = z - F.T @ (F @ z - g) / L
        x_new = jnp.sign(u) * jnp.maximum(jnp.abs(u) - lam / L, 0.0)
        t_new = 0.5 * (1.0 + jnp.sqrt(1.0 + 4.0 * t * t))
        z = x_new + ((t - 1.0) / t_new) * (x_new - x)
        delta = jnp.max(jnp.abs(x_new - x))
        x = x_new
        t = t_new
    return jnp.sum(x * x)


def newton(M, e):
    E = M
    F = E - e * jnp.sin(E) - M
    while jnp.max(jnp.abs(F)) > 1e-6:
        E = E - F / (1.0 - e * jnp.cos(E))
        F = E - e * jnp.sin(E) - M
    return jnp.sum(jnp.sin(E))


PROGRAMS = {"cg": cg, "odeint": odeint, "fista": fista, "newton": newton}


# The same programs with the trip count known, as a JAX user would write them for
# reverse mode: the loop a ``lax.scan`` of ``n`` steps, which stores every step's
# residuals (JAX's own "store everything"), the branch a ``jnp.where``.

def _scanned(step, carry, n):
    return jax.lax.scan(lambda c, _: (step(c), None), carry, None, length=n)[0]


def cg_scan(A, b, n):
    def step(c):
        x, r, p, rs = c
        Ap = A @ p
        alpha = rs / (p @ Ap)
        x, r = x + alpha * p, r - alpha * Ap
        rs_new = r @ r
        return x, r, r + (rs_new / rs) * p, rs_new

    x = jnp.zeros_like(b)
    r = b - A @ x
    x, _, _, _ = _scanned(step, (x, r, r, r @ r), n)
    return jnp.sum(x * x)


def odeint_scan(y, w, n):
    T = 1.0

    def step(c):
        t, h, y = c
        h = jnp.minimum(h, T - t)
        k1 = jnp.tanh(w @ y) - 0.1 * y
        k2 = jnp.tanh(w @ (y + h * k1)) - 0.1 * (y + h * k1)
        err = jnp.sqrt(jnp.mean((0.5 * h * (k2 - k1)) ** 2))
        ok = err < 1e-4
        t, y = jnp.where(ok, t + h, t), jnp.where(ok, y + 0.5 * h * (k1 + k2), y)
        return t, h * jnp.clip(0.9 * jnp.sqrt(1e-4 / (err + 1e-12)), 0.2, 5.0), y

    _, _, y = _scanned(step, (jnp.float32(0.0), jnp.float32(0.05), y), n)
    return jnp.sum(y * y)


def fista_scan(F, g, n):
    lam = 0.2
    L = jnp.linalg.norm(F, 2) ** 2

    def step(c):
        x, z, t = c
        u = z - F.T @ (F @ z - g) / L
        x_new = jnp.sign(u) * jnp.maximum(jnp.abs(u) - lam / L, 0.0)
        t_new = 0.5 * (1.0 + jnp.sqrt(1.0 + 4.0 * t * t))
        return x_new, x_new + ((t - 1.0) / t_new) * (x_new - x), t_new

    x = jnp.zeros(F.shape[1])
    x, _, _ = _scanned(step, (x, x, jnp.float32(1.0)), n)
    return jnp.sum(x * x)


def newton_scan(M, e, n):
    def step(c):
        E, F = c
        E = E - F / (1.0 - e * jnp.cos(E))
        return E, E - e * jnp.sin(E) - M

    E, _ = _scanned(step, (M, M - e * jnp.sin(M) - M), n)
    return jnp.sum(jnp.sin(E))


SCANNED = {"cg": cg_scan, "odeint": odeint_scan, "fista": fista_scan, "newton": newton_scan}


def inputs(name):
    k = jax.random.split(jax.random.PRNGKey(0), 6)
    if name == "cg":
        m = jax.random.normal(k[0], (N, N)) / np.sqrt(N)
        return m @ m.T + 0.05 * jnp.eye(N), jax.random.normal(k[1], (N,))
    if name == "odeint":
        return jax.random.normal(k[2], (N,)), jax.random.normal(k[3], (N, N)) / np.sqrt(N)
    if name == "fista":
        return (jax.random.normal(k[4], (2 * N, N)) / np.sqrt(2 * N),
                jax.random.normal(k[5], (2 * N,)))
    return jnp.linspace(0.1, 6.0, N), jnp.float32(0.9)


def trips(name):
    """How many times the loop of ``name`` runs on ``inputs(name)``."""
    fn = PROGRAMS[name]
    lines, first = inspect.getsourcelines(fn)
    test = first + next(i for i, s in enumerate(lines) if s.strip().startswith("while"))
    count = [0]

    def tracer(frame, event, arg):
        if frame.f_code is not fn.__code__:
            return None
        if event == "line" and frame.f_lineno == test:
            count[0] += 1
        return tracer

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        fn(*inputs(name))
    finally:
        sys.settrace(old)
    return count[0] - 1
