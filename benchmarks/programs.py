"""Benchmark programs: natural Python control flow vs. hand-written ``jax.lax``.

Every program comes in two versions:

* ``*_py``  -- what a user writes: plain Python ``if``/``while``/``for`` with
  ``break``/``continue``/``return``, ``and``/``or``, counters initialised to
  Python ints/floats.  Runs eagerly on concrete values (plain JAX, no
  ``autoflow``) and is what ``autoflow.jit`` converts.
* ``*_lax`` -- the same algorithm written by hand with ``lax.while_loop`` /
  ``lax.fori_loop`` / ``lax.cond``, mirroring the structure of the Python
  version (one ``lax.cond`` per data-dependent ``if``, one loop per loop).
  This is the baseline ``autoflow`` is compared against.

``PROGRAMS`` lists :class:`Program` records; ``validate()`` checks that the
eager Python version and ``jax.jit`` of the lax version agree (no autoflow
needed).  ``TINY`` lists the scalar call-overhead cases.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


# --------------------------------------------------------------------------
# 1. Collatz: number of steps to reach 1 (while + if/else on traced int)
# --------------------------------------------------------------------------
def collatz_py(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def collatz_lax(n):
    def cond(c):
        n, _ = c
        return n != 1

    def body(c):
        n, steps = c
        n = lax.cond(n % 2 == 0, lambda n: n // 2, lambda n: 3 * n + 1, n)
        return n, steps + 1

    _, steps = lax.while_loop(cond, body, (n, jnp.int32(0)))
    return steps


# --------------------------------------------------------------------------
# 2. Newton's method (cube root of a vector) with tolerance + early break
# --------------------------------------------------------------------------
def newton_py(a):
    x = jnp.ones_like(a)
    for i in range(50):
        step = (x * x * x - a) / (3.0 * x * x)
        x = x - step
        if jnp.max(jnp.abs(step)) < 1e-5:
            break
    return x


def newton_lax(a):
    def cond(c):
        i, _, done = c
        return (i < 50) & jnp.logical_not(done)

    def body(c):
        i, x, _ = c
        step = (x * x * x - a) / (3.0 * x * x)
        x = x - step
        return i + 1, x, jnp.max(jnp.abs(step)) < 1e-5

    _, x, _ = lax.while_loop(cond, body, (jnp.int32(0), jnp.ones_like(a), jnp.bool_(False)))
    return x


# --------------------------------------------------------------------------
# 3. Bisection: root of m^3 + m - t on [lo, hi], iteration cap + early break
# --------------------------------------------------------------------------
def bisect_py(lo, hi, t):
    mid = (lo + hi) / 2
    for i in range(60):
        mid = (lo + hi) / 2
        fm = mid * mid * mid + mid - t
        if jnp.abs(fm) < 1e-4:
            break
        if fm > 0:
            hi = mid
        else:
            lo = mid
    return mid


def bisect_lax(lo, hi, t):
    def cond(c):
        i, _, _, _, done = c
        return (i < 60) & jnp.logical_not(done)

    def body(c):
        i, lo, hi, _, _ = c
        mid = (lo + hi) / 2
        fm = mid * mid * mid + mid - t
        done = jnp.abs(fm) < 1e-4
        lo, hi = lax.cond(
            done,
            lambda: (lo, hi),
            lambda: lax.cond(fm > 0, lambda: (lo, mid), lambda: (mid, hi)),
        )
        return i + 1, lo, hi, mid, done

    mid0 = (lo + hi) / 2
    _, _, _, mid, _ = lax.while_loop(cond, body, (jnp.int32(0), lo, hi, mid0, jnp.bool_(False)))
    return mid


# --------------------------------------------------------------------------
# 4. Prefix sum over an array, stopping when it exceeds a threshold
#    (for-over-array + traced break)
# --------------------------------------------------------------------------
def prefix_until_py(xs, threshold):
    total = 0.0
    count = 0
    for x in xs:
        total = total + x
        if total > threshold:
            break
        count += 1
    return total, count


def prefix_until_lax(xs, threshold):
    n = xs.shape[0]

    def cond(c):
        i, _, _, done = c
        return (i < n) & jnp.logical_not(done)

    def body(c):
        i, total, count, _ = c
        total = total + xs[i]
        done = total > threshold
        count = lax.cond(done, lambda: count, lambda: count + 1)
        return i + 1, total, count, done

    init = (jnp.int32(0), jnp.zeros((), xs.dtype), jnp.int32(0), jnp.bool_(False))
    _, total, count, _ = lax.while_loop(cond, body, init)
    return total, count


# --------------------------------------------------------------------------
# 5. Mandelbrot escape time over a grid, vmapped per point
#    (while with `and` condition; counters start as Python numbers)
# --------------------------------------------------------------------------
MANDEL_ITERS = 64


def escape_time_py(cr, ci):
    zr = 0.0
    zi = 0.0
    n = 0
    while n < 64 and zr * zr + zi * zi <= 4.0:
        zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
        n += 1
    return n


def mandelbrot_py(cr, ci):
    return jax.vmap(escape_time_py)(cr, ci)


def escape_time_lax(cr, ci):
    def cond(c):
        zr, zi, n = c
        return (n < 64) & (zr * zr + zi * zi <= 4.0)

    def body(c):
        zr, zi, n = c
        return zr * zr - zi * zi + cr, 2.0 * zr * zi + ci, n + 1

    init = (jnp.zeros_like(cr), jnp.zeros_like(ci), jnp.int32(0))
    _, _, n = lax.while_loop(cond, body, init)
    return n


def mandelbrot_lax(cr, ci):
    return jax.vmap(escape_time_lax)(cr, ci)


# --------------------------------------------------------------------------
# 6. Adaptive-step ODE integrator (Heun/Euler embedded pair, error control)
# --------------------------------------------------------------------------
def ode_rhs(t, y):
    return jnp.stack([y[1], -y[0] - 0.1 * y[1] + jnp.sin(t)])


def ode_py(y0, t_end):
    t = 0.0
    y = y0
    h = 0.01
    n_steps = 0
    while t_end - t > 1e-6:
        if h > t_end - t:
            h = t_end - t
        k1 = ode_rhs(t, y)
        k2 = ode_rhs(t + h, y + h * k1)
        y_low = y + h * k1
        y_high = y + 0.5 * h * (k1 + k2)
        err = jnp.max(jnp.abs(y_high - y_low)) + 1e-12
        if err <= 1e-4:
            t = t + h
            y = y_high
            n_steps += 1
        h = h * jnp.clip(0.9 * jnp.sqrt(1e-4 / err), 0.2, 5.0)
    return y, n_steps


def ode_lax(y0, t_end):
    def cond(c):
        t, _, _, _ = c
        return t_end - t > 1e-6

    def body(c):
        t, y, h, n_steps = c
        h = lax.cond(h > t_end - t, lambda: t_end - t, lambda: h)
        k1 = ode_rhs(t, y)
        k2 = ode_rhs(t + h, y + h * k1)
        y_low = y + h * k1
        y_high = y + 0.5 * h * (k1 + k2)
        err = jnp.max(jnp.abs(y_high - y_low)) + 1e-12
        t, y, n_steps = lax.cond(
            err <= 1e-4,
            lambda: (t + h, y_high, n_steps + 1),
            lambda: (t, y, n_steps),
        )
        h = h * jnp.clip(0.9 * jnp.sqrt(1e-4 / err), 0.2, 5.0)
        return t, y, h, n_steps

    init = (jnp.float32(0.0), y0, jnp.float32(0.01), jnp.int32(0))
    _, y, _, n_steps = lax.while_loop(cond, body, init)
    return y, n_steps


# --------------------------------------------------------------------------
# 7. k-means (Lloyd) until the centroids stop moving
# --------------------------------------------------------------------------
def kmeans_py(points, centroids):
    k = centroids.shape[0]
    shift = jnp.inf
    it = 0
    while shift > 1e-4 and it < 100:
        d = jnp.sum((points[:, None, :] - centroids[None, :, :]) ** 2, axis=-1)
        assign = jnp.argmin(d, axis=1)
        onehot = jax.nn.one_hot(assign, k, dtype=points.dtype)
        counts = jnp.sum(onehot, axis=0)
        new_centroids = (onehot.T @ points) / jnp.maximum(counts, 1.0)[:, None]
        new_centroids = jnp.where((counts == 0)[:, None], centroids, new_centroids)
        shift = jnp.max(jnp.abs(new_centroids - centroids))
        centroids = new_centroids
        it += 1
    return centroids, it


def kmeans_lax(points, centroids):
    k = centroids.shape[0]

    def cond(c):
        _, shift, it = c
        return (shift > 1e-4) & (it < 100)

    def body(c):
        centroids, _, it = c
        d = jnp.sum((points[:, None, :] - centroids[None, :, :]) ** 2, axis=-1)
        assign = jnp.argmin(d, axis=1)
        onehot = jax.nn.one_hot(assign, k, dtype=points.dtype)
        counts = jnp.sum(onehot, axis=0)
        new_centroids = (onehot.T @ points) / jnp.maximum(counts, 1.0)[:, None]
        new_centroids = jnp.where((counts == 0)[:, None], centroids, new_centroids)
        shift = jnp.max(jnp.abs(new_centroids - centroids))
        return new_centroids, shift, it + 1

    init = (centroids, jnp.array(jnp.inf, points.dtype), jnp.int32(0))
    centroids, _, it = lax.while_loop(cond, body, init)
    return centroids, it


# --------------------------------------------------------------------------
# 8. Fixed-point iteration x = 0.5 cos(x) + b with tolerance
#    (`while True` + traced break)
# --------------------------------------------------------------------------
def fixed_point_py(b):
    x = jnp.zeros_like(b)
    n = 0
    while True:
        x_new = 0.5 * jnp.cos(x) + b
        err = jnp.max(jnp.abs(x_new - x))
        x = x_new
        n += 1
        if err < 1e-6:
            break
    return x, n


def fixed_point_lax(b):
    def cond(c):
        _, _, done = c
        return jnp.logical_not(done)

    def body(c):
        x, n, _ = c
        x_new = 0.5 * jnp.cos(x) + b
        err = jnp.max(jnp.abs(x_new - x))
        return x_new, n + 1, err < 1e-6

    x, n, _ = lax.while_loop(cond, body, (jnp.zeros_like(b), jnp.int32(0), jnp.bool_(False)))
    return x, n


# --------------------------------------------------------------------------
# 9. Clipped sum with `continue` (for over concrete range, traced body)
# --------------------------------------------------------------------------
def clipped_sum_py(xs):
    total = 0.0
    for i in range(xs.shape[0]):
        x = xs[i]
        if x < 0:
            continue
        if x > 0.9:
            total = total + 0.9
        else:
            total = total + x * x
    return total


def clipped_sum_lax(xs):
    def body(i, total):
        x = xs[i]
        return lax.cond(
            x < 0,
            lambda: total,
            lambda: lax.cond(x > 0.9, lambda: total + 0.9, lambda: total + x * x),
        )

    return lax.fori_loop(0, xs.shape[0], body, jnp.zeros((), xs.dtype))


# --------------------------------------------------------------------------
# 10. Linear search with early `return` inside the loop
# --------------------------------------------------------------------------
def first_above_py(xs, t):
    for i in range(xs.shape[0]):
        if xs[i] > t:
            return i
    return -1


def first_above_lax(xs, t):
    n = xs.shape[0]

    def cond(c):
        i, found = c
        return (i < n) & jnp.logical_not(found)

    def body(c):
        i, _ = c
        found = xs[i] > t
        return lax.cond(found, lambda: (i, found), lambda: (i + 1, found))

    i, found = lax.while_loop(cond, body, (jnp.int32(0), jnp.bool_(False)))
    return jnp.where(found, i, -1)


# --------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------
@dataclasses.dataclass
class Program:
    name: str
    py: Callable
    lax: Callable
    make_args: Callable[[bool], tuple]  # quick -> args
    rtol: float = 1e-5
    atol: float = 1e-5
    # eager reference for validation when the Python version cannot run
    # eagerly as-is (e.g. it vmaps a Python-control-flow function).
    eager: Callable | None = None
    note: str = ""
    # The fraction of output elements that may differ beyond rtol/atol: for
    # chaotic maps only, where one rounding changes the answer (see mandelbrot).
    mismatch: float = 0.0


def _collatz_args(quick):
    return (jnp.int32(77031),)  # 350 steps, max 21 933 016 (< 2**31)


def _newton_args(quick):
    n = 1_000 if quick else 100_000
    return (jnp.linspace(1.0, 100.0, n, dtype=jnp.float32),)


def _bisect_args(quick):
    return (jnp.float32(0.0), jnp.float32(10.0), jnp.float32(30.0))


def _prefix_args(quick):
    n = 1_024 if quick else 8_192
    xs = jax.random.uniform(jax.random.PRNGKey(0), (n,), jnp.float32)
    return (xs, jnp.float32(n / 4))


def _mandel_grid(quick):
    n = 32 if quick else 200
    re = jnp.linspace(-2.0, 0.6, n, dtype=jnp.float32)
    im = jnp.linspace(-1.2, 1.2, n, dtype=jnp.float32)
    cr, ci = jnp.meshgrid(re, im)
    return cr.ravel(), ci.ravel()


def _mandel_args(quick):
    return _mandel_grid(quick)


def _mandel_eager(cr, ci):
    cr = np.asarray(cr, np.float32)
    ci = np.asarray(ci, np.float32)
    return np.array([escape_time_py(np.float32(a), np.float32(b)) for a, b in zip(cr, ci)], np.int32)


def _ode_args(quick):
    return (jnp.array([1.0, 0.0], jnp.float32), jnp.float32(2.0 if quick else 10.0))


def _kmeans_args(quick):
    n = 500 if quick else 4_000
    key = jax.random.PRNGKey(1)
    k1, k2 = jax.random.split(key)
    centers = jnp.array([[0, 0], [5, 5], [-5, 5], [5, -5], [-5, -5], [0, 8], [8, 0], [-8, 0]], jnp.float32)
    lab = jax.random.randint(k1, (n,), 0, centers.shape[0])
    pts = centers[lab] + jax.random.normal(k2, (n, 2), jnp.float32)
    return (pts, pts[:8])


def _fixed_point_args(quick):
    n = 1_000 if quick else 100_000
    return (jnp.linspace(-1.0, 1.0, n, dtype=jnp.float32),)


def _clipped_args(quick):
    n = 256 if quick else 2_000
    return (jax.random.uniform(jax.random.PRNGKey(2), (n,), jnp.float32, -1.0, 1.0),)


def _first_above_args(quick):
    n = 1_024 if quick else 10_000
    xs = jnp.linspace(0.0, 1.0, n, dtype=jnp.float32)
    return (xs, jnp.float32(0.75))


PROGRAMS: list[Program] = [
    Program("collatz", collatz_py, collatz_lax, _collatz_args),
    Program("newton", newton_py, newton_lax, _newton_args),
    Program("bisection", bisect_py, bisect_lax, _bisect_args),
    Program("prefix_sum_threshold", prefix_until_py, prefix_until_lax, _prefix_args, rtol=1e-4),
    # Points on the set's boundary are chaotic: whether XLA fuses `zr*zr - zi*zi + cr`
    # into a multiply-add changes their escape count. On the full 200x200 grid 7 of
    # 40,000 counts differ between autoflow's and the lax program (by at most 3), and
    # 4 and 8 between each and NumPy's float32 (jax 0.10.2 and 0.11.2, CPU).
    Program("mandelbrot_vmap", mandelbrot_py, mandelbrot_lax, _mandel_args, eager=_mandel_eager,
            mismatch=1e-3),
    Program("ode_adaptive_heun", ode_py, ode_lax, _ode_args, rtol=1e-3, atol=1e-4),
    Program("kmeans", kmeans_py, kmeans_lax, _kmeans_args, rtol=1e-4, atol=1e-4),
    Program("fixed_point", fixed_point_py, fixed_point_lax, _fixed_point_args),
    Program("clipped_sum_continue", clipped_sum_py, clipped_sum_lax, _clipped_args, rtol=1e-4),
    Program("first_above_return", first_above_py, first_above_lax, _first_above_args),
]


# --------------------------------------------------------------------------
# Tiny scalar programs for call-overhead measurement
# --------------------------------------------------------------------------
def tiny_if_py(x):
    if x > 0:
        y = x * 2.0
    else:
        y = -x
    return y


def tiny_if_lax(x):
    return lax.cond(x > 0, lambda x: x * 2.0, lambda x: -x, x)


def tiny_while_py(x):
    n = 0
    while x > 1.0:
        x = x / 2.0
        n += 1
    return n


def tiny_while_lax(x):
    def body(c):
        x, n = c
        return x / 2.0, n + 1

    _, n = lax.while_loop(lambda c: c[0] > 1.0, body, (x, jnp.int32(0)))
    return n


def tiny_noflow_py(x):
    return x * 2.0 + 1.0


TINY = [
    Program("scalar_if", tiny_if_py, tiny_if_lax, lambda q: (jnp.float32(3.0),)),
    Program("scalar_while", tiny_while_py, tiny_while_lax, lambda q: (jnp.float32(1000.0),)),
    Program("scalar_no_control_flow", tiny_noflow_py, tiny_noflow_py, lambda q: (jnp.float32(3.0),)),
]


# --------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------
def assert_tree_close(a: Any, b: Any, rtol: float, atol: float, what: str = "",
                      mismatch: float = 0.0) -> None:
    la = jax.tree_util.tree_leaves(a)
    lb = jax.tree_util.tree_leaves(b)
    if len(la) != len(lb):
        raise AssertionError(f"{what}: {len(la)} outputs vs {len(lb)}")
    for k, (x, y) in enumerate(zip(la, lb)):
        x = np.asarray(x)
        y = np.asarray(y)
        if x.shape != y.shape:
            raise AssertionError(f"{what}: output {k} shape {x.shape} vs {y.shape}")
        far = ~np.isclose(x.astype(np.float64), y.astype(np.float64), rtol=rtol, atol=atol)
        if far.sum() > mismatch * far.size:
            diff = np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))
            raise AssertionError(f"{what}: output {k} differs in {far.sum()} of {far.size} "
                                 f"elements (max abs diff {diff:.3g})")


def eager_reference(p: Program, args: tuple):
    return p.eager(*args) if p.eager is not None else p.py(*args)


def validate(quick: bool = True, verbose: bool = True) -> None:
    """Check eager Python version == jax.jit(hand-written lax) for all programs."""
    for p in PROGRAMS + TINY:
        args = p.make_args(quick)
        ref = eager_reference(p, args)
        got = jax.jit(p.lax)(*args)
        assert_tree_close(ref, got, p.rtol, p.atol, p.name, p.mismatch)
        if verbose:
            leaves = [np.asarray(v) for v in jax.tree_util.tree_leaves(got)]
            summary = ", ".join(
                str(v.item()) if v.size == 1 else f"{v.dtype}{list(v.shape)} sum={float(v.astype(np.float64).sum()):.5g}"
                for v in leaves
            )
            print(f"ok  {p.name:24s} {summary}")


if __name__ == "__main__":
    import sys

    validate(quick="--full" not in sys.argv)
