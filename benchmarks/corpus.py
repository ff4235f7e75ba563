"""Conversion-time corpus: realistic JAX functions with Python control flow.

Each function is 5-40 lines and uses some mix of ``if``/``elif``/``else``,
``while``, ``for`` (over ``range``, arrays, ``enumerate``, ``zip``),
``break``, ``continue``, ``return`` inside loops, ``and``/``or``/``not`` and
conditional expressions -- the kind of code ``autoflow`` is meant for.

``FUNCTIONS`` lists the functions, ``examples()`` pairs each with example
arguments (built on call, so importing this module stays cheap); ``check()`` runs every
function eagerly and under ``autoflow.jit`` and compares the results (the
benchmark only needs the source, but a corpus that does not convert or run
correctly would be measuring the wrong thing).

``generated_source(n_lines)`` builds one function of about ``n_lines`` lines
out of a repeated 10-line block, for the "does conversion time grow
linearly" measurement.
"""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np


def relu_branch(x):
    if x > 0:
        y = x
    else:
        y = 0.0 * x
    return y


def piecewise(x):
    if x < -1.0:
        y = -1.0 - 0.5 * (x + 1.0)
    elif x < 1.0:
        y = x * x * x
    elif x < 2.0:
        y = 1.0 + 3.0 * (x - 1.0)
    else:
        y = 4.0 + jnp.log(x - 1.0)
    return y


def huber(r, delta):
    a = jnp.abs(r)
    if a <= delta:
        loss = 0.5 * r * r
    else:
        loss = delta * (a - 0.5 * delta)
    return loss


def gcd(a, b):
    a = jnp.abs(a)
    b = jnp.abs(b)
    while b != 0:
        a, b = b, a % b
    return a


def int_power(x, n):
    result = jnp.ones_like(x)
    while n > 0:
        if n % 2 == 1:
            result = result * x
        x = x * x
        n = n // 2
    return result


def digit_sum(n):
    total = 0
    while n > 0:
        total += n % 10
        n = n // 10
    return total


def is_prime(n):
    if n < 2:
        return False
    i = 2
    while i * i <= n:
        if n % i == 0:
            return False
        i += 1
    return True


def newton_sqrt(a):
    x = a
    for _ in range(30):
        x_new = 0.5 * (x + a / x)
        if jnp.abs(x_new - x) < 1e-6 * a:
            x = x_new
            break
        x = x_new
    return x


def horner(coeffs, x):
    acc = jnp.zeros_like(x)
    for c in coeffs:
        acc = acc * x + c
    return acc


def welford(xs):
    mean = 0.0
    m2 = 0.0
    n = 0
    for x in xs:
        n += 1
        delta = x - mean
        mean = mean + delta / n
        m2 = m2 + delta * (x - mean)
    var = m2 / (n - 1) if n > 1 else 0.0 * m2
    return mean, var


def trapezoid(ys, dx):
    total = 0.0
    n = ys.shape[0]
    for i in range(n - 1):
        total = total + 0.5 * (ys[i] + ys[i + 1]) * dx
    return total


def simpson(ys, h):
    n = ys.shape[0]
    total = ys[0] + ys[n - 1]
    for i in range(1, n - 1):
        if i % 2 == 1:
            total = total + 4.0 * ys[i]
        else:
            total = total + 2.0 * ys[i]
    return total * h / 3.0


def running_max(xs):
    best = xs[0]
    where = 0
    for i, x in enumerate(xs):
        if x > best:
            best = x
            where = i
    return best, where


def first_negative(xs):
    for i in range(xs.shape[0]):
        if xs[i] < 0:
            return i
    return -1


def count_in_band(xs, lo, hi):
    count = 0
    for x in xs:
        if x < lo or x > hi:
            continue
        count += 1
    return count


def dot_until(xs, ys, limit):
    acc = 0.0
    for x, y in zip(xs, ys):
        acc = acc + x * y
        if acc > limit:
            break
    return acc


def backtracking_step(x, g, f0):
    t = 1.0
    it = 0
    while jnp.sum((x - t * g) ** 2) > f0 - 0.5 * t * jnp.sum(g * g) and it < 40:
        t = t * 0.5
        it += 1
    return x - t * g, t


def gradient_descent(x, lr, tol):
    loss = jnp.sum(x * x)
    for step in range(200):
        g = 2.0 * x
        x = x - lr * g
        new_loss = jnp.sum(x * x)
        if jnp.abs(loss - new_loss) < tol:
            loss = new_loss
            break
        loss = new_loss
    return x, loss


def power_iteration(a, v):
    lam = 0.0
    for it in range(100):
        w = a @ v
        norm = jnp.linalg.norm(w)
        v = w / norm
        new_lam = v @ (a @ v)
        if jnp.abs(new_lam - lam) < 1e-6:
            lam = new_lam
            break
        lam = new_lam
    return lam, v


def logistic_map(r, x0):
    x = x0
    n = 0
    while n < 500:
        x = r * x * (1.0 - x)
        if x < 1e-3 or x > 1.0 - 1e-3:
            break
        n += 1
    return x, n


def leapfrog(q, p, dt):
    for _ in range(20):
        p = p - 0.5 * dt * q
        q = q + dt * p
        p = p - 0.5 * dt * q
    energy = 0.5 * (p * p + q * q)
    return q, p, energy


def rk4_decay(y, k, dt):
    t = 0.0
    for _ in range(10):
        k1 = -k * y
        k2 = -k * (y + 0.5 * dt * k1)
        k3 = -k * (y + 0.5 * dt * k2)
        k4 = -k * (y + dt * k3)
        y = y + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        t = t + dt
    return y, t


def bisect_root(lo, hi):
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        f_mid = mid * mid - 2.0
        if jnp.abs(f_mid) < 1e-6:
            break
        if f_mid > 0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


def binary_search(xs, target):
    lo = 0
    hi = xs.shape[0] - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if xs[mid] < target:
            lo = mid + 1
        else:
            hi = mid
    return lo


def clamp_norm(v, max_norm):
    norm = jnp.sqrt(jnp.sum(v * v))
    if norm > max_norm and max_norm > 0:
        v = v * (max_norm / norm)
    scale = 1.0 if norm <= max_norm else max_norm / norm
    return v, scale


def sign_counts(xs):
    pos = 0
    neg = 0
    zero = 0
    for x in xs:
        if x > 0:
            pos += 1
        elif x < 0:
            neg += 1
        else:
            zero += 1
    return pos, neg, zero


def cumulative_clip(xs, cap):
    out = jnp.zeros_like(xs)
    total = 0.0
    for i in range(xs.shape[0]):
        total = total + xs[i]
        if total > cap:
            total = cap
        elif total < -cap:
            total = -cap
        out = out.at[i].set(total)
    return out


def matrix_power(m, n):
    result = jnp.eye(m.shape[0], dtype=m.dtype)
    base = m
    while n > 0:
        if n % 2 == 1:
            result = result @ base
        base = base @ base
        n = n // 2
    return result


def nested_sum(a):
    total = 0.0
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            if j > i:
                break
            total = total + a[i, j]
    return total


def pair_search(xs, target):
    found_i = -1
    found_j = -1
    for i in range(xs.shape[0]):
        for j in range(xs.shape[0]):
            if i != j and xs[i] + xs[j] == target:
                found_i = i
                found_j = j
                break
        if found_i >= 0:
            break
    return found_i, found_j


def softmax_stable(z, temperature):
    if temperature <= 0:
        temperature = 1.0
    z = z / temperature
    zmax = jnp.max(z)
    if zmax > 30.0:
        z = z - zmax
    e = jnp.exp(z)
    return e / jnp.sum(e)


def fixed_point_cos(b):
    x = jnp.zeros_like(b)
    n = 0
    while True:
        x_new = jnp.cos(x) * 0.5 + b
        n += 1
        if jnp.max(jnp.abs(x_new - x)) < 1e-6 or n >= 100:
            x = x_new
            break
        x = x_new
    return x, n


def fib(n):
    a = 0
    b = 1
    i = 0
    while i < n:
        a, b = b, a + b
        i += 1
    return a


def escape_time(cr, ci):
    zr = 0.0
    zi = 0.0
    n = 0
    while n < 50 and zr * zr + zi * zi <= 4.0:
        zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
        n += 1
    return n


def adaptive_euler(y, t_end):
    t = 0.0
    h = 0.1
    steps = 0
    while t < t_end:
        if t + h > t_end:
            h = t_end - t
        y_full = y - h * y
        y_half = y - 0.5 * h * y
        y_half = y_half - 0.5 * h * y_half
        err = jnp.abs(y_full - y_half)
        if err < 1e-3:
            t = t + h
            y = y_half
            steps += 1
            h = h * 1.5
        else:
            h = h * 0.5
    return y, steps


def collatz_max(n):
    peak = n
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        if n > peak:
            peak = n
        steps += 1
    return steps, peak


def scan_ema(xs, alpha):
    ema = xs[0]
    out = jnp.zeros_like(xs)
    for i, x in enumerate(xs):
        if i == 0:
            continue
        ema = alpha * x + (1.0 - alpha) * ema
        out = out.at[i].set(ema)
    return out


def bouncing_ball(y, v, dt):
    g = -9.81
    restitution = 0.8
    bounces = 0
    t = 0.0
    for step in range(400):
        v = v + g * dt
        y = y + v * dt
        t = t + dt
        if y < 0.0:
            y = -y * restitution
            v = -v * restitution
            bounces += 1
            if jnp.abs(v) < 0.5:
                y = 0.0 * y
                v = 0.0 * v
                break
        elif y > 100.0:
            y = 100.0 + 0.0 * y
            v = 0.0 * v
    energy = 0.5 * v * v - g * y
    return y, v, bounces, t, energy


def run_lengths(xs, threshold):
    longest = 0
    current = 0
    runs = 0
    previous_above = False
    for x in xs:
        above = x > threshold
        if not above:
            current = 0
            previous_above = False
            continue
        if previous_above:
            current += 1
        else:
            current = 1
            runs += 1
        if current > longest:
            longest = current
        previous_above = True
    return longest, runs


def conjugate_gradient(a, b, tol):
    x = jnp.zeros_like(b)
    r = b - a @ x
    p = r
    rs_old = r @ r
    it = 0
    while it < 50:
        ap = a @ p
        alpha = rs_old / (p @ ap)
        x = x + alpha * p
        r = r - alpha * ap
        rs_new = r @ r
        if jnp.sqrt(rs_new) < tol:
            break
        p = r + (rs_new / rs_old) * p
        rs_old = rs_new
        it += 1
    return x, it


def damped_newton(x, target):
    for outer in range(20):
        f = x * x * x - target
        df = 3.0 * x * x
        if jnp.abs(f) < 1e-6:
            break
        step = f / df
        t = 1.0
        inner = 0
        while inner < 10:
            x_try = x - t * step
            if jnp.abs(x_try * x_try * x_try - target) < jnp.abs(f):
                break
            t = t * 0.5
            inner += 1
        x = x - t * step
    return x


def annealing(key, x, temperature):
    best = x
    best_cost = (x - 2.0) ** 2 + jnp.sin(5.0 * x)
    cost = best_cost
    for step in range(100):
        key, k1, k2 = jax.random.split(key, 3)
        candidate = x + jax.random.normal(k1) * temperature
        new_cost = (candidate - 2.0) ** 2 + jnp.sin(5.0 * candidate)
        accept = new_cost < cost or jax.random.uniform(k2) < jnp.exp((cost - new_cost) / temperature)
        if accept:
            x = candidate
            cost = new_cost
        if cost < best_cost:
            best = x
            best_cost = cost
        temperature = temperature * 0.97
        if temperature < 1e-3:
            break
    return best, best_cost


def banded_histogram(xs, edges):
    counts = jnp.zeros(edges.shape[0] - 1, jnp.int32)
    outside = 0
    for x in xs:
        if x < edges[0] or x >= edges[edges.shape[0] - 1]:
            outside += 1
            continue
        for b in range(edges.shape[0] - 1):
            if x < edges[b + 1]:
                counts = counts.at[b].add(1)
                break
    return counts, outside


def classify_triangle(a, b, c):
    if a <= 0 or b <= 0 or c <= 0:
        return -1
    if a + b <= c or a + c <= b or b + c <= a:
        return 0
    if a == b and b == c:
        kind = 3
    elif a == b or b == c or a == c:
        kind = 2
    else:
        kind = 1
    largest = jnp.maximum(a, jnp.maximum(b, c))
    rest = a * a + b * b + c * c - largest * largest
    if jnp.abs(rest - largest * largest) < 1e-6 * largest * largest:
        kind = kind + 10
    return kind


def _f32(*v):
    return tuple(jnp.float32(a) for a in v)


def examples():
    """``[(function, example_args)]`` for every corpus function (builds arrays: call lazily)."""
    _XS = jnp.linspace(-1.0, 2.0, 16, dtype=jnp.float32)
    _SORTED = jnp.sort(jax.random.uniform(jax.random.PRNGKey(3), (32,), jnp.float32))
    _SPD = jnp.array([[4.0, 1.0, 0.0], [1.0, 3.0, 0.5], [0.0, 0.5, 2.0]], jnp.float32)

    return [
        (relu_branch, _f32(-2.0)),
        (piecewise, _f32(1.5)),
        (huber, _f32(3.0, 1.0)),
        (gcd, (jnp.int32(1071), jnp.int32(462))),
        (int_power, (jnp.float32(1.1), jnp.int32(13))),
        (digit_sum, (jnp.int32(987654),)),
        (is_prime, (jnp.int32(7919),)),
        (newton_sqrt, _f32(10.0)),
        (horner, (jnp.array([1.0, -2.0, 0.5, 3.0], jnp.float32), jnp.float32(0.7))),
        (welford, (_XS,)),
        (trapezoid, (_XS, jnp.float32(0.1))),
        (simpson, (_XS[:15], jnp.float32(0.1))),
        (running_max, (jnp.sin(_XS * 3.0),)),
        (first_negative, (jnp.cos(_XS * 2.0),)),
        (count_in_band, (_XS, jnp.float32(0.0), jnp.float32(1.0))),
        (dot_until, (_XS, jnp.abs(_XS), jnp.float32(3.0))),
        (backtracking_step, (jnp.ones(4, jnp.float32), jnp.full(4, 3.0, jnp.float32), jnp.float32(4.0))),
        (gradient_descent, (jnp.ones(3, jnp.float32), jnp.float32(0.1), jnp.float32(1e-6))),
        (power_iteration, (_SPD, jnp.ones(3, jnp.float32))),
        (logistic_map, _f32(3.2, 0.3)),
        (leapfrog, _f32(1.0, 0.0, 0.1)),
        (rk4_decay, _f32(1.0, 0.5, 0.1)),
        (bisect_root, _f32(0.0, 2.0)),
        (binary_search, (_SORTED, jnp.float32(0.5))),
        (clamp_norm, (jnp.array([3.0, 4.0], jnp.float32), jnp.float32(2.0))),
        (sign_counts, (jnp.round(_XS),)),
        (cumulative_clip, (_XS, jnp.float32(2.0))),
        (matrix_power, (_SPD / 4.0, jnp.int32(5))),
        (nested_sum, (jnp.arange(16.0, dtype=jnp.float32).reshape(4, 4),)),
        (pair_search, (jnp.arange(8.0, dtype=jnp.float32), jnp.float32(9.0))),
        (softmax_stable, (_XS * 40.0, jnp.float32(2.0))),
        (fixed_point_cos, (jnp.linspace(-1.0, 1.0, 8, dtype=jnp.float32),)),
        (fib, (jnp.int32(20),)),
        (escape_time, _f32(-0.5, 0.5)),
        (adaptive_euler, _f32(1.0, 2.0)),
        (collatz_max, (jnp.int32(27),)),
        (scan_ema, (_XS, jnp.float32(0.3))),
        (bouncing_ball, _f32(10.0, 0.0, 0.01)),
        (run_lengths, (jnp.sin(_XS * 7.0), jnp.float32(0.0))),
        (conjugate_gradient, (_SPD, jnp.ones(3, jnp.float32), jnp.float32(1e-5))),
        (damped_newton, _f32(1.0, 30.0)),
        (annealing, (jax.random.PRNGKey(0), jnp.float32(0.0), jnp.float32(1.0))),
        (banded_histogram, (_XS, jnp.array([-0.5, 0.0, 0.5, 1.0, 1.5], jnp.float32))),
        (classify_triangle, _f32(3.0, 4.0, 5.0)),
    ]


# Every public function defined above, in source order (no arrays are built).
FUNCTIONS = [v for k, v in list(globals().items())
             if inspect.isfunction(v) and v.__module__ == __name__
             and not k.startswith("_") and k != "examples"]


def _same(a, b, rtol=1e-4, atol=1e-5):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    if len(la) != len(lb):
        return f"{len(la)} outputs vs {len(lb)}"
    for x, y in zip(la, lb):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        if x.shape != y.shape:
            return f"shape {x.shape} vs {y.shape}"
        if not np.allclose(x, y, rtol=rtol, atol=atol):
            return f"values differ: {x} vs {y}"
    return None


def check(verbose: bool = False) -> list[str]:
    """Run every corpus function eagerly and under ``autoflow.jit``; return problems."""
    import autoflow

    problems = []
    cases = examples()
    assert [f for f, _ in cases] == FUNCTIONS, "examples() and FUNCTIONS disagree"
    for fn, args in cases:
        try:
            ref = fn(*args)
            got = autoflow.jit(fn, strict=True)(*args)
        except Exception as e:  # noqa: BLE001 - report every failure
            problems.append(f"{fn.__name__}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
            continue
        why = _same(ref, got)
        if why:
            problems.append(f"{fn.__name__}: eager vs autoflow.jit: {why}")
        elif verbose:
            print(f"ok  {fn.__name__}")
    return problems


# --------------------------------------------------------------------------
# Generated long functions (linearity of conversion time)
# --------------------------------------------------------------------------
_BLOCK = """\
    if x > {k}.0:
        y = y + x * {k}.0
    else:
        y = y - {k}.0
    for i in range(3):
        y = y * 0.5 + i
        if y > 100.0:
            break
    while z < {k}.0 and y > 0:
        z = z + 1.0
"""


def generated_source(n_lines: int, name: str = "generated") -> str:
    """A function of about ``n_lines`` lines: a ``def``, repeated 10-line blocks, a ``return``."""
    blocks = max(1, (n_lines - 5) // 10)
    head = f"def {name}(x, y, z):\n    x = x * 1.0\n    y = y * 1.0\n    z = z * 1.0\n"
    body = "".join(_BLOCK.format(k=k % 7) for k in range(blocks))
    return head + body + "    return x, y, z\n"


if __name__ == "__main__":
    bad = check(verbose=True)
    print(f"{len(FUNCTIONS)} functions, line counts:",
          sorted(len(inspect.getsource(f).splitlines()) for f in FUNCTIONS))
    for p in bad:
        print("PROBLEM", p)
