"""A corpus of ordinary numeric JAX functions, written fresh for measuring conversion time.

The functions are the kind JAX users write by hand: numeric kernels and small algorithms
on scalars and small fixed-size arrays, with data-dependent ``if``/``elif``/``else``,
``while`` convergence loops, ``for i in range(n)`` loops, ``break``/``continue``, early
``return``, conditional expressions, ``and``/``or``/``not``, accumulations, nested loops
and calls between the functions of this file. Domains: piecewise functions, root finding,
quadrature, ODE steps, statistics, sorting and searching on fixed-size arrays, number
theory on integers, physics updates, finance, signal processing, geometry, optimization,
grids (games of life), small linear algebra and simulations.

Every function runs eagerly on its example arguments and gives the same result under
``autoflow.jit`` (``tests/test_corpus_numeric.py``). ``EXAMPLES`` maps each function's
name to its example arguments, ``FUNCTIONS`` lists the functions in file order.
"""

import jax
import jax.numpy as jnp


# --------------------------------------------------------------------------------------
# piecewise functions and clipping
# --------------------------------------------------------------------------------------

def piecewise_linear(x):
    if x < -1.0:
        y = -1.0 - 0.1 * (x + 1.0)
    elif x < 0.0:
        y = x
    elif x < 2.0:
        y = 0.5 * x
    else:
        y = 1.0 + 0.2 * (x - 2.0)
    return y


def huber_loss(residuals, delta):
    total = 0.0
    for r in residuals:
        a = jnp.abs(r)
        if a <= delta:
            total += 0.5 * r * r
        else:
            total += delta * (a - 0.5 * delta)
    return total / residuals.shape[0]


def grade_bucket(score):
    if score >= 90:
        g = 4
    elif score >= 80:
        g = 3
    elif score >= 70:
        g = 2
    elif score >= 60:
        g = 1
    else:
        g = 0
    return g


def wrap_angle(theta):
    two_pi = 2.0 * jnp.pi
    while theta > jnp.pi:
        theta = theta - two_pi
    while theta <= -jnp.pi:
        theta = theta + two_pi
    return theta


def tiered_tariff(kwh):
    cost = 0.0
    if kwh > 0.0:
        cost += jnp.minimum(kwh, 100.0) * 0.12
    if kwh > 100.0:
        cost += jnp.minimum(kwh - 100.0, 200.0) * 0.15
    if kwh > 300.0:
        cost += (kwh - 300.0) * 0.2
    return cost


def classify_quadrant(x, y):
    if x == 0.0 and y == 0.0:
        return 0
    if x >= 0.0:
        return 1 if y >= 0.0 else 4
    return 2 if y >= 0.0 else 3


# --------------------------------------------------------------------------------------
# root finding
# --------------------------------------------------------------------------------------

def bisection_root(lo, hi, tol):
    flo = lo * lo * lo - 2.0 * lo - 5.0
    steps = 0
    while hi - lo > tol and steps < 100:
        mid = 0.5 * (lo + hi)
        fmid = mid * mid * mid - 2.0 * mid - 5.0
        if fmid == 0.0:
            return mid
        if (fmid < 0.0) == (flo < 0.0):
            lo = mid
            flo = fmid
        else:
            hi = mid
        steps += 1
    return 0.5 * (lo + hi)


def newton_sqrt(a):
    if a <= 0.0:
        return 0.0 * a
    x = jnp.where(a > 1.0, a, 1.0)
    for _ in range(30):
        nxt = 0.5 * (x + a / x)
        if jnp.abs(nxt - x) <= 1e-7 * nxt:
            x = nxt
            break
        x = nxt
    return x


def secant_root(x0, x1, tol):
    f0 = x0 * x0 - 3.0
    f1 = x1 * x1 - 3.0
    it = 0
    while jnp.abs(f1) > tol and it < 50:
        denom = f1 - f0
        if denom == 0.0:
            break
        x2 = x1 - f1 * (x1 - x0) / denom
        x0, f0 = x1, f1
        x1 = x2
        f1 = x1 * x1 - 3.0
        it += 1
    return x1, it


def fixed_point_cos(x0):
    x = x0
    for k in range(100):
        nxt = jnp.cos(x)
        if jnp.abs(nxt - x) < 1e-6:
            return nxt, k
        x = nxt
    return x, 100


def hybrid_root(a, b, tol):
    fa = jnp.tanh(a) - 0.3 * a - 0.2
    fb = jnp.tanh(b) - 0.3 * b - 0.2
    if fa * fb > 0.0:
        return jnp.nan * a, 0
    if jnp.abs(fa) < jnp.abs(fb):
        a, b = b, a
        fa, fb = fb, fa
    c, fc = a, fa
    used_bisect = True
    iters = 0
    while jnp.abs(b - a) > tol and fb != 0.0:
        if iters >= 80:
            break
        iters += 1
        if fa != fc and fb != fc:
            # inverse quadratic interpolation
            s = (a * fb * fc / ((fa - fb) * (fa - fc))
                 + b * fa * fc / ((fb - fa) * (fb - fc))
                 + c * fa * fb / ((fc - fa) * (fc - fb)))
        else:
            # secant step
            s = b - fb * (b - a) / (fb - fa)
        lo = (3.0 * a + b) / 4.0
        between = (s > jnp.minimum(lo, b)) and (s < jnp.maximum(lo, b))
        if not between or (used_bisect and jnp.abs(s - b) >= jnp.abs(b - c) / 2.0):
            s = 0.5 * (a + b)
            used_bisect = True
        elif not used_bisect and jnp.abs(s - b) >= jnp.abs(c - a) / 2.0:
            s = 0.5 * (a + b)
            used_bisect = True
        else:
            used_bisect = False
        fs = jnp.tanh(s) - 0.3 * s - 0.2
        c, fc = b, fb
        if fa * fs < 0.0:
            b, fb = s, fs
        else:
            a, fa = s, fs
        if jnp.abs(fa) < jnp.abs(fb):
            a, b = b, a
            fa, fb = fb, fa
    return b, iters


# --------------------------------------------------------------------------------------
# quadrature
# --------------------------------------------------------------------------------------

def bump(x):
    return jnp.exp(-x * x) * (1.0 + 0.5 * jnp.sin(3.0 * x))


def trapezoid_rule(a, b, n):
    h = (b - a) / n
    total = 0.5 * (bump(a) + bump(b))
    for i in range(1, n):
        total += bump(a + i * h)
    return total * h


def simpson_rule(a, b, n):
    if n % 2 == 1:
        n = n + 1
    h = (b - a) / n
    s = bump(a) + bump(b)
    for i in range(1, n):
        x = a + i * h
        if i % 2 == 1:
            s += 4.0 * bump(x)
        else:
            s += 2.0 * bump(x)
    return s * h / 3.0


def adaptive_trapezoid(a, b, tol):
    n = 1
    h = b - a
    est = 0.5 * h * (bump(a) + bump(b))
    for level in range(12):
        h = 0.5 * h
        mids = 0.0
        for k in range(n):
            mids += bump(a + (2 * k + 1) * h)
        new = 0.5 * est + h * mids
        n = 2 * n
        if jnp.abs(new - est) < tol * jnp.abs(new):
            return new, level
        est = new
    return est, 12


def romberg(a, b):
    table = jnp.zeros((6, 6))
    h = b - a
    table = table.at[0, 0].set(0.5 * h * (bump(a) + bump(b)))
    n = 1
    for i in range(1, 6):
        h = 0.5 * h
        acc = 0.0
        for k in range(n):
            acc += bump(a + (2 * k + 1) * h)
        table = table.at[i, 0].set(0.5 * table[i - 1, 0] + h * acc)
        n = n * 2
        factor = 1.0
        for j in range(1, i + 1):
            factor = factor * 4.0
            prev = table[i, j - 1]
            val = prev + (prev - table[i - 1, j - 1]) / (factor - 1.0)
            table = table.at[i, j].set(val)
    return table[5, 5]


def gauss_legendre_3(a, b):
    nodes = (-0.7745966692, 0.0, 0.7745966692)
    weights = (0.5555555556, 0.8888888889, 0.5555555556)
    mid = 0.5 * (a + b)
    half = 0.5 * (b - a)
    total = 0.0
    for x, w in zip(nodes, weights):
        total += w * bump(mid + half * x)
    return half * total


def lcg_next(state):
    return (state * 75 + 74) % 65537


def lcg_uniform(state):
    return state.astype(jnp.float32) / 65537.0


def monte_carlo_pi(seed, n):
    state = seed
    inside = 0
    for _ in range(n):
        state = lcg_next(state)
        x = lcg_uniform(state)
        state = lcg_next(state)
        y = lcg_uniform(state)
        if x * x + y * y <= 1.0:
            inside += 1
    return 4.0 * inside / n


# --------------------------------------------------------------------------------------
# ODE steps
# --------------------------------------------------------------------------------------

def oscillator_rhs(x, v, omega):
    return v, -omega * omega * x


def rk4_oscillator(x, v, omega, dt, steps):
    for _ in range(steps):
        k1x, k1v = oscillator_rhs(x, v, omega)
        k2x, k2v = oscillator_rhs(x + 0.5 * dt * k1x, v + 0.5 * dt * k1v, omega)
        k3x, k3v = oscillator_rhs(x + 0.5 * dt * k2x, v + 0.5 * dt * k2v, omega)
        k4x, k4v = oscillator_rhs(x + dt * k3x, v + dt * k3v, omega)
        x = x + dt / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x)
        v = v + dt / 6.0 * (k1v + 2.0 * k2v + 2.0 * k3v + k4v)
    return x, v


def leapfrog_orbit(pos, vel, dt, steps):
    r = jnp.sqrt(jnp.sum(pos * pos))
    acc = -pos / (r * r * r)
    for _ in range(steps):
        vel = vel + 0.5 * dt * acc
        pos = pos + dt * vel
        r = jnp.sqrt(jnp.sum(pos * pos))
        if r < 0.05:
            break
        acc = -pos / (r * r * r)
        vel = vel + 0.5 * dt * acc
    return pos, vel


def step_doubling_euler(y0, t_end):
    t = 0.0
    y = y0
    h = 0.1
    accepted = 0
    while t < t_end:
        if t + h > t_end:
            h = t_end - t
        full = y + h * (-2.0 * y + jnp.sin(t))
        half = y + 0.5 * h * (-2.0 * y + jnp.sin(t))
        half = half + 0.5 * h * (-2.0 * half + jnp.sin(t + 0.5 * h))
        err = jnp.abs(full - half)
        if err > 1e-3 and h > 1e-4:
            h = 0.5 * h
            continue
        y = half
        t = t + h
        accepted += 1
        if err < 1e-4:
            h = jnp.minimum(2.0 * h, 0.5)
    return y, accepted


def heun_euler_adaptive(y0, t_end, tol):
    t = 0.0
    y = y0
    h = 0.05
    steps = 0
    rejected = 0
    while t < t_end and steps < 1000:
        if t + h > t_end:
            h = t_end - t
        k1 = -y * y + jnp.cos(t)
        k2 = -(y + h * k1) ** 2 + jnp.cos(t + h)
        y_low = y + h * k1
        y_high = y + 0.5 * h * (k1 + k2)
        err = jnp.abs(y_high - y_low)
        if err <= tol or h < 1e-6:
            t = t + h
            y = y_high
            steps += 1
        else:
            rejected += 1
        if err == 0.0:
            factor = 2.0
        else:
            factor = 0.9 * jnp.sqrt(tol / err)
        factor = jnp.clip(factor, 0.2, 2.0)
        h = h * factor
    return y, steps, rejected


def projectile_range(v0, angle, drag, dt):
    vx = v0 * jnp.cos(angle)
    vy = v0 * jnp.sin(angle)
    x = 0.0
    y = 0.0
    steps = 0
    while y >= 0.0 and steps < 2000:
        speed = jnp.sqrt(vx * vx + vy * vy)
        vx = vx - dt * drag * speed * vx
        vy = vy - dt * (9.81 + drag * speed * vy)
        x = x + dt * vx
        y = y + dt * vy
        steps += 1
    return x, steps


# --------------------------------------------------------------------------------------
# statistics
# --------------------------------------------------------------------------------------

def welford_mean_var(xs):
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


def count_outliers(xs, z):
    mu = jnp.mean(xs)
    sd = jnp.std(xs)
    count = 0
    for i in range(xs.shape[0]):
        if sd == 0.0:
            break
        dev = jnp.abs(xs[i] - mu) / sd
        if dev <= z:
            continue
        count += 1
    return count


def second_largest(xs):
    first = -jnp.inf
    second = -jnp.inf
    for x in xs:
        if x > first:
            second = first
            first = x
        elif x > second and x != first:
            second = x
    return second


def histogram_fixed(xs, lo, hi):
    counts = jnp.zeros(8, dtype=jnp.int32)
    width = (hi - lo) / 8.0
    for x in xs:
        if x < lo or x >= hi:
            continue
        b = ((x - lo) / width).astype(jnp.int32)
        b = jnp.minimum(b, 7)
        counts = counts.at[b].add(1)
    return counts


def max_drawdown(prices):
    peak = prices[0]
    worst = 0.0
    for p in prices:
        if p > peak:
            peak = p
        dd = (peak - p) / peak
        worst = jnp.maximum(worst, dd)
    return worst


def longest_positive_run(xs):
    best = 0
    best_start = -1
    run = 0
    for i, x in enumerate(xs):
        if x > 0:
            run += 1
            if run > best:
                best = run
                best_start = i - run + 1
        else:
            run = 0
    return best, best_start


def autocorrelation(xs, lag):
    n = xs.shape[0]
    mu = jnp.mean(xs)
    num = 0.0
    den = 0.0
    for i in range(n):
        d = xs[i] - mu
        den += d * d
        if i + lag < n:
            num += d * (xs[i + lag] - mu)
    return num / den if den > 0.0 else 0.0 * den


def trimmed_mean(xs, lo, hi):
    total = 0.0
    count = 0
    for x in xs:
        if not lo <= x <= hi:
            continue
        total += x
        count += 1
    if count == 0:
        return 0.0 * total
    return total / count


def pearson_r(xs, ys):
    n = xs.shape[0]
    sx = 0.0
    sy = 0.0
    for i in range(n):
        sx += xs[i]
        sy += ys[i]
    mx = sx / n
    my = sy / n
    cov = 0.0
    vx = 0.0
    vy = 0.0
    for i in range(n):
        dx = xs[i] - mx
        dy = ys[i] - my
        cov += dx * dy
        vx += dx * dx
        vy += dy * dy
    if vx == 0.0 or vy == 0.0:
        return 0.0 * cov
    return cov / jnp.sqrt(vx * vy)


def median_by_counting(xs):
    n = xs.shape[0]
    for i in range(n):
        less = 0
        equal = 0
        for j in range(n):
            if xs[j] < xs[i]:
                less += 1
            elif xs[j] == xs[i]:
                equal += 1
        if less <= n // 2 and n // 2 < less + equal:
            return xs[i]
    return xs[0]


# --------------------------------------------------------------------------------------
# sorting and searching on fixed-size arrays
# --------------------------------------------------------------------------------------

def bubble_sort(xs):
    n = xs.shape[0]
    for i in range(n):
        swapped = False
        for j in range(n - 1 - i):
            if xs[j] > xs[j + 1]:
                a = xs[j]
                xs = xs.at[j].set(xs[j + 1])
                xs = xs.at[j + 1].set(a)
                swapped = True
        if not swapped:
            break
    return xs


def insertion_sort(xs):
    for i in range(1, xs.shape[0]):
        key = xs[i]
        j = i - 1
        while j >= 0 and xs[j] > key:
            xs = xs.at[j + 1].set(xs[j])
            j -= 1
        xs = xs.at[j + 1].set(key)
    return xs


def binary_search(sorted_xs, target):
    lo = 0
    hi = sorted_xs.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if sorted_xs[mid] < target:
            lo = mid + 1
        else:
            hi = mid
    return lo


def kth_smallest(xs, k):
    for i in range(k + 1):
        m = i
        for j in range(i + 1, xs.shape[0]):
            if xs[j] < xs[m]:
                m = j
        tmp = xs[i]
        xs = xs.at[i].set(xs[m]).at[m].set(tmp)
    return xs[k]


def merge_sorted(a, b):
    na = a.shape[0]
    nb = b.shape[0]
    out = jnp.zeros(na + nb, dtype=a.dtype)
    i = 0
    j = 0
    k = 0
    while i < na and j < nb:
        if a[i] <= b[j]:
            out = out.at[k].set(a[i])
            i += 1
        else:
            out = out.at[k].set(b[j])
            j += 1
        k += 1
    while i < na:
        out = out.at[k].set(a[i])
        i += 1
        k += 1
    while j < nb:
        out = out.at[k].set(b[j])
        j += 1
        k += 1
    return out


def two_sum_sorted(xs, target):
    lo = 0
    hi = xs.shape[0] - 1
    while lo < hi:
        s = xs[lo] + xs[hi]
        if s == target:
            return lo, hi
        if s < target:
            lo += 1
        else:
            hi -= 1
    return -1, -1


# --------------------------------------------------------------------------------------
# number theory on integers
# --------------------------------------------------------------------------------------

def gcd(a, b):
    while b != 0:
        a, b = b, a % b
    return a


def is_prime(n):
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    d = 3
    while d * d <= n:
        if n % d == 0:
            return False
        d += 2
    return True


def count_primes(limit):
    count = 0
    for k in range(2, limit):
        if is_prime(k):
            count += 1
    return count


def digit_sum(n):
    s = 0
    n = jnp.abs(n)
    while n > 0:
        s += n % 10
        n = n // 10
    return s


def digital_root(n):
    while n >= 10:
        n = digit_sum(n)
    return n


def collatz_length(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def mod_pow(base, exp, mod):
    result = 1
    base = base % mod
    while exp > 0:
        if exp % 2 == 1:
            result = (result * base) % mod
        exp = exp // 2
        base = (base * base) % mod
    return result


def sum_proper_divisors(n):
    if n < 2:
        return 0 * n
    total = 1
    d = 2
    while d * d <= n:
        if n % d == 0:
            total += d
            other = n // d
            if other != d:
                total += other
        d += 1
    return total


def abundance_class(n):
    if n < 2:
        return 0
    s = sum_proper_divisors(n)
    if s == n:
        return 1
    return 2 if s > n else -1


def popcount(n):
    count = 0
    while n != 0:
        count += n & 1
        n = n >> 1
    return count


def extended_gcd(a, b):
    old_r, r = a, b
    old_s, s = 1, 0
    old_t, t = 0, 1
    while r != 0:
        q = old_r // r
        old_r, r = r, old_r - q * r
        old_s, s = s, old_s - q * s
        old_t, t = t, old_t - q * t
    return old_r, old_s, old_t


def is_palindrome_number(n):
    if n < 0:
        return False
    original = n
    rev = 0
    while n > 0:
        rev = rev * 10 + n % 10
        n = n // 10
    return rev == original


def euler_phi(n):
    count = 0
    for k in range(1, n + 1):
        if gcd(k, n) == 1:
            count += 1
    return count


def square_digit_sum(n):
    s = 0
    while n > 0:
        d = n % 10
        s += d * d
        n = n // 10
    return s


def is_happy(n):
    slow = n
    fast = n
    while True:
        slow = square_digit_sum(slow)
        fast = square_digit_sum(square_digit_sum(fast))
        if slow == fast:
            break
    return slow == 1


def sieve_count(limit):
    flags = jnp.ones(64, dtype=jnp.int32)
    flags = flags.at[0].set(0).at[1].set(0)
    p = 2
    while p * p < 64:
        if flags[p] == 1:
            q = p * p
            while q < 64:
                flags = flags.at[q].set(0)
                q += p
        p += 1
    count = 0
    for k in range(64):
        if k < limit and flags[k] == 1:
            count += 1
    return count


def fib_matrix(n):
    result = jnp.eye(2, dtype=jnp.int32)
    base = jnp.array([[1, 1], [1, 0]], dtype=jnp.int32)
    while n > 0:
        if n % 2 == 1:
            result = result @ base
        base = base @ base
        n = n // 2
    return result[0, 1]


def fizzbuzz_score(n):
    score = 0
    for k in range(1, n + 1):
        if k % 15 == 0:
            score += 15
        elif k % 5 == 0:
            score += 5
        elif k % 3 == 0:
            score += 3
        else:
            score -= 1
    return score


# --------------------------------------------------------------------------------------
# physics updates
# --------------------------------------------------------------------------------------

def bouncing_ball(h0, restitution, dt, max_steps):
    y = h0
    v = 0.0
    bounces = 0
    for _ in range(max_steps):
        v = v - 9.81 * dt
        y = y + v * dt
        if y < 0.0:
            y = -y * restitution
            v = -v * restitution
            bounces += 1
            if jnp.abs(v) < 0.5:
                break
    return y, bounces


def pendulum_half_period(theta0, length, dt):
    theta = theta0
    omega = 0.0
    t = 0.0
    crossed = 0
    prev = theta
    while crossed < 2 and t < 20.0:
        alpha = -9.81 / length * jnp.sin(theta)
        omega = omega + dt * alpha
        theta = theta + dt * omega
        t = t + dt
        if (prev > 0.0) != (theta > 0.0):
            crossed += 1
        prev = theta
    return t


def particles_in_box(pos, vel, width, dt, steps):
    hits = 0
    for _ in range(steps):
        pos = pos + dt * vel
        for i in range(pos.shape[0]):
            if pos[i] < 0.0:
                pos = pos.at[i].set(-pos[i])
                vel = vel.at[i].set(-vel[i])
                hits += 1
            elif pos[i] > width:
                pos = pos.at[i].set(2.0 * width - pos[i])
                vel = vel.at[i].set(-vel[i])
                hits += 1
    return pos, hits


def billiards_2d(pos, vel, radius, width, height, dt, steps):
    n = pos.shape[0]
    wall_hits = 0
    ball_hits = 0
    for _ in range(steps):
        pos = pos + dt * vel
        for i in range(n):
            x = pos[i, 0]
            y = pos[i, 1]
            if x < radius:
                pos = pos.at[i, 0].set(2.0 * radius - x)
                vel = vel.at[i, 0].set(-vel[i, 0])
                wall_hits += 1
            elif x > width - radius:
                pos = pos.at[i, 0].set(2.0 * (width - radius) - x)
                vel = vel.at[i, 0].set(-vel[i, 0])
                wall_hits += 1
            if y < radius:
                pos = pos.at[i, 1].set(2.0 * radius - y)
                vel = vel.at[i, 1].set(-vel[i, 1])
                wall_hits += 1
            elif y > height - radius:
                pos = pos.at[i, 1].set(2.0 * (height - radius) - y)
                vel = vel.at[i, 1].set(-vel[i, 1])
                wall_hits += 1
        for i in range(n):
            for j in range(i + 1, n):
                d = pos[j] - pos[i]
                dist2 = jnp.dot(d, d)
                if dist2 >= 4.0 * radius * radius or dist2 == 0.0:
                    continue
                rel = vel[j] - vel[i]
                approach = jnp.dot(rel, d)
                if approach >= 0.0:
                    continue
                # equal masses: exchange the velocity components along the line of centres
                impulse = approach / dist2 * d
                vel = vel.at[i].add(impulse)
                vel = vel.at[j].add(-impulse)
                ball_hits += 1
    energy = 0.5 * jnp.sum(vel * vel)
    return pos, wall_hits, ball_hits, energy


def heat_equation_1d(u, alpha, steps):
    for _ in range(steps):
        lap = jnp.roll(u, 1) - 2.0 * u + jnp.roll(u, -1)
        u = u + alpha * lap
        u = u.at[0].set(0.0)
        u = u.at[-1].set(0.0)
        if jnp.max(jnp.abs(lap)) < 1e-4:
            break
    return u


def orbit_steps(r0, v0, dt):
    x, y = r0, 0.0
    vx, vy = 0.0, v0
    angle_prev = 0.0
    steps = 0
    while steps < 5000:
        r3 = (x * x + y * y) ** 1.5
        vx = vx - dt * x / r3
        vy = vy - dt * y / r3
        x = x + dt * vx
        y = y + dt * vy
        steps += 1
        angle = jnp.arctan2(y, x)
        if angle_prev < 0.0 and angle >= 0.0:
            break
        angle_prev = angle
    return steps


def pid_controller(setpoint, kp, ki, kd, dt, steps):
    y = 0.0
    integral = 0.0
    prev_err = setpoint - y
    for _ in range(steps):
        err = setpoint - y
        integral = integral + err * dt
        if integral > 10.0:
            integral = 10.0
        elif integral < -10.0:
            integral = -10.0
        deriv = (err - prev_err) / dt
        u = kp * err + ki * integral + kd * deriv
        u = jnp.clip(u, -5.0, 5.0)
        y = y + dt * (u - 0.5 * y)
        prev_err = err
    return y, integral


def radioactive_chain(n_a, n_b, ka, kb, dt, steps):
    peak_b = n_b
    peak_step = 0
    for s in range(steps):
        decay_a = ka * n_a * dt
        decay_b = kb * n_b * dt
        n_a = n_a - decay_a
        n_b = n_b + decay_a - decay_b
        if n_b > peak_b:
            peak_b = n_b
            peak_step = s + 1
    return n_a, n_b, peak_step


# --------------------------------------------------------------------------------------
# finance
# --------------------------------------------------------------------------------------

def loan_payoff_months(balance, annual_rate, payment):
    monthly = annual_rate / 12.0
    months = 0
    interest_paid = 0.0
    while balance > 0.0:
        interest = balance * monthly
        if payment <= interest:
            return -1, interest_paid
        balance = balance + interest - payment
        interest_paid += interest
        months += 1
        if months >= 600:
            break
    return months, interest_paid


def npv(rate, cashflows):
    total = 0.0
    discount = 1.0
    for cf in cashflows:
        total += cf / discount
        discount = discount * (1.0 + rate)
    return total


def irr_bisect(cashflows):
    lo = -0.9
    hi = 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        v = npv(mid, cashflows)
        if jnp.abs(v) < 1e-4:
            break
        if v > 0.0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def progressive_tax(income, thresholds, rates):
    tax = 0.0
    prev = 0.0
    for i in range(thresholds.shape[0]):
        if income <= prev:
            break
        upper = jnp.minimum(income, thresholds[i])
        tax += (upper - prev) * rates[i]
        prev = thresholds[i]
    if income > prev:
        tax += (income - prev) * rates[-1]
    return tax


def option_payoff(spot, strike, kind):
    if kind == 0:
        payoff = jnp.maximum(spot - strike, 0.0)
    elif kind == 1:
        payoff = jnp.maximum(strike - spot, 0.0)
    elif kind == 2:
        payoff = jnp.where(spot > strike, 1.0, 0.0)
    else:
        payoff = jnp.abs(spot - strike)
    return payoff


def window_mean(xs, end, width):
    total = 0.0
    for k in range(width):
        total += xs[end - 1 - k]
    return total / width


def crossover_trades(prices, short, long):
    position = 0
    trades = 0
    for t in range(long, prices.shape[0] + 1):
        fast = window_mean(prices, t, short)
        slow = window_mean(prices, t, long)
        signal = 1 if fast > slow else -1
        if signal != position:
            if position != 0:
                trades += 1
            position = signal
    return trades, position


def amortization_interest(principal, annual_rate, months):
    r = annual_rate / 12.0
    if r == 0.0:
        payment = principal / months
    else:
        payment = principal * r / (1.0 - (1.0 + r) ** (-months))
    balance = principal
    total_interest = 0.0
    for _ in range(months):
        interest = balance * r
        total_interest += interest
        balance = balance - (payment - interest)
    return payment, total_interest


def inventory_policy(demand, reorder_point, order_qty, stock):
    orders = 0
    lost = 0.0
    for d in demand:
        if d > stock:
            lost += d - stock
            stock = 0.0 * stock
        else:
            stock = stock - d
        if stock < reorder_point:
            stock = stock + order_qty
            orders += 1
    return stock, orders, lost


# --------------------------------------------------------------------------------------
# signal processing
# --------------------------------------------------------------------------------------

def moving_average(xs, width):
    n = xs.shape[0]
    out = jnp.zeros_like(xs)
    acc = 0.0
    for i in range(n):
        acc += xs[i]
        if i >= width:
            acc -= xs[i - width]
        count = i + 1 if i < width else width
        out = out.at[i].set(acc / count)
    return out


def zero_crossings(xs):
    count = 0
    prev = xs[0]
    for i in range(1, xs.shape[0]):
        cur = xs[i]
        if cur == 0.0:
            continue
        if prev != 0.0 and (prev < 0.0) != (cur < 0.0):
            count += 1
        prev = cur
    return count


def fir_filter(xs, taps):
    n = xs.shape[0]
    m = taps.shape[0]
    out = jnp.zeros(n)
    for i in range(n):
        acc = 0.0
        for k in range(m):
            if i - k < 0:
                break
            acc += taps[k] * xs[i - k]
        out = out.at[i].set(acc)
    return out


def median3(a, b, c):
    if a > b:
        a, b = b, a
    if b > c:
        b, c = c, b
    if a > b:
        a, b = b, a
    return b


def median3_filter(xs):
    out = xs
    for i in range(1, xs.shape[0] - 1):
        out = out.at[i].set(median3(xs[i - 1], xs[i], xs[i + 1]))
    return out


def hysteresis_threshold(xs, low, high):
    state = False
    switches = 0
    out = jnp.zeros(xs.shape[0], dtype=jnp.int32)
    for i in range(xs.shape[0]):
        if not state and xs[i] > high:
            state = True
            switches += 1
        elif state and xs[i] < low:
            state = False
            switches += 1
        out = out.at[i].set(1 if state else 0)
    return out, switches


def dft_power(xs, k):
    n = xs.shape[0]
    re = 0.0
    im = 0.0
    for t in range(n):
        angle = 2.0 * jnp.pi * k * t / n
        re += xs[t] * jnp.cos(angle)
        im -= xs[t] * jnp.sin(angle)
    return re * re + im * im


def quantize(xs, levels, lo, hi):
    step = (hi - lo) / (levels - 1)
    out = jnp.zeros_like(xs)
    clipped = 0
    for i in range(xs.shape[0]):
        v = xs[i]
        if v < lo:
            v = lo
            clipped += 1
        elif v > hi:
            v = hi
            clipped += 1
        q = jnp.round((v - lo) / step)
        out = out.at[i].set(lo + q * step)
    return out, clipped


def sliding_max(xs, width):
    n = xs.shape[0]
    out = jnp.zeros_like(xs)
    for i in range(n):
        m = xs[i]
        j = i - 1
        while j >= 0 and j > i - width:
            if xs[j] > m:
                m = xs[j]
            j -= 1
        out = out.at[i].set(m)
    return out


def rms_gate(xs, frame, threshold):
    gated = jnp.zeros_like(xs)
    open_frames = 0
    for start in range(0, xs.shape[0], frame):
        energy = 0.0
        for k in range(frame):
            energy += xs[start + k] * xs[start + k]
        rms = jnp.sqrt(energy / frame)
        if rms < threshold:
            continue
        open_frames += 1
        for k in range(frame):
            gated = gated.at[start + k].set(xs[start + k])
    return gated, open_frames


# --------------------------------------------------------------------------------------
# geometry
# --------------------------------------------------------------------------------------

def point_in_polygon(px, py, xs, ys):
    n = xs.shape[0]
    inside = False
    j = n - 1
    for i in range(n):
        yi = ys[i]
        yj = ys[j]
        if (yi > py) != (yj > py):
            x_cross = (xs[j] - xs[i]) * (py - yi) / (yj - yi) + xs[i]
            if px < x_cross:
                inside = not inside
        j = i
    return inside


def orientation(ax, ay, bx, by, cx, cy):
    v = (by - ay) * (cx - bx) - (bx - ax) * (cy - by)
    if v > 0.0:
        return 1
    if v < 0.0:
        return 2
    return 0


def on_segment(ax, ay, bx, by, cx, cy):
    return (jnp.minimum(ax, cx) <= bx and bx <= jnp.maximum(ax, cx)
            and jnp.minimum(ay, cy) <= by and by <= jnp.maximum(ay, cy))


def segments_intersect(p, q, r, s):
    o1 = orientation(p[0], p[1], q[0], q[1], r[0], r[1])
    o2 = orientation(p[0], p[1], q[0], q[1], s[0], s[1])
    o3 = orientation(r[0], r[1], s[0], s[1], p[0], p[1])
    o4 = orientation(r[0], r[1], s[0], s[1], q[0], q[1])
    if o1 != o2 and o3 != o4:
        return True
    if o1 == 0 and on_segment(p[0], p[1], r[0], r[1], q[0], q[1]):
        return True
    if o2 == 0 and on_segment(p[0], p[1], s[0], s[1], q[0], q[1]):
        return True
    if o3 == 0 and on_segment(r[0], r[1], p[0], p[1], s[0], s[1]):
        return True
    if o4 == 0 and on_segment(r[0], r[1], q[0], q[1], s[0], s[1]):
        return True
    return False


def triangle_kind(a, b, c):
    if a > b:
        a, b = b, a
    if b > c:
        b, c = c, b
    if a > b:
        a, b = b, a
    if a + b <= c:
        return 0
    if a == b and b == c:
        return 1
    d = a * a + b * b - c * c
    if jnp.abs(d) < 1e-5 * c * c:
        return 2
    if a == b or b == c:
        return 3
    return 4 if d > 0.0 else 5


def closest_pair_distance(xs, ys):
    n = xs.shape[0]
    best = jnp.inf
    for i in range(n):
        for j in range(i + 1, n):
            dx = xs[i] - xs[j]
            dy = ys[i] - ys[j]
            d = dx * dx + dy * dy
            if d < best:
                best = d
    return jnp.sqrt(best)


def is_convex(xs, ys):
    n = xs.shape[0]
    sign = 0
    for i in range(n):
        j = (i + 1) % n
        k = (i + 2) % n
        cross = (xs[j] - xs[i]) * (ys[k] - ys[j]) - (ys[j] - ys[i]) * (xs[k] - xs[j])
        if cross == 0.0:
            continue
        s = 1 if cross > 0.0 else -1
        if sign == 0:
            sign = s
        elif s != sign:
            return False
    return True


def circle_rect_overlap(cx, cy, r, x0, y0, x1, y1):
    nx = cx
    if cx < x0:
        nx = x0
    elif cx > x1:
        nx = x1
    ny = cy
    if cy < y0:
        ny = y0
    elif cy > y1:
        ny = y1
    return (cx - nx) ** 2 + (cy - ny) ** 2 <= r * r


def polyline_length(xs, ys, max_len):
    total = 0.0
    for i in range(1, xs.shape[0]):
        seg = jnp.sqrt((xs[i] - xs[i - 1]) ** 2 + (ys[i] - ys[i - 1]) ** 2)
        if total + seg > max_len:
            return max_len, i
        total += seg
    return total, xs.shape[0]


def de_casteljau(ctrl, t):
    pts = ctrl
    n = ctrl.shape[0]
    for level in range(1, n):
        for i in range(n - level):
            pts = pts.at[i].set((1.0 - t) * pts[i] + t * pts[i + 1])
    return pts[0]


# --------------------------------------------------------------------------------------
# optimization steps
# --------------------------------------------------------------------------------------

def gradient_descent_2d(x, y, lr, tol):
    it = 0
    while it < 500:
        gx = 2.0 * (x - 1.0) + 0.5 * y
        gy = 8.0 * (y + 2.0) + 0.5 * x
        if gx * gx + gy * gy < tol * tol:
            break
        x = x - lr * gx
        y = y - lr * gy
        it += 1
    return x, y, it


def golden_section(a, b, tol):
    ratio = 0.6180339887
    c = b - ratio * (b - a)
    d = a + ratio * (b - a)
    fc = (c - 0.7) ** 2 + jnp.sin(3.0 * c)
    fd = (d - 0.7) ** 2 + jnp.sin(3.0 * d)
    while b - a > tol:
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = (c - 0.7) ** 2 + jnp.sin(3.0 * c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = (d - 0.7) ** 2 + jnp.sin(3.0 * d)
    return 0.5 * (a + b)


def backtracking_step(x, direction, alpha0):
    fx = jnp.sum((x - 1.0) ** 2) + jnp.sum(x ** 4)
    g = 2.0 * (x - 1.0) + 4.0 * x ** 3
    slope = jnp.sum(g * direction)
    alpha = alpha0
    for _ in range(30):
        trial = x + alpha * direction
        ft = jnp.sum((trial - 1.0) ** 2) + jnp.sum(trial ** 4)
        if ft <= fx + 1e-4 * alpha * slope:
            break
        alpha = alpha * 0.5
    return alpha


def momentum_descent(x, lr, beta, steps):
    v = jnp.zeros_like(x)
    for _ in range(steps):
        g = 4.0 * x ** 3 - 3.0 * x + 0.5
        v = beta * v - lr * g
        x = x + v
        if jnp.linalg.norm(g) < 1e-4:
            break
    return x


def adam_minimize(x, lr, steps):
    m = jnp.zeros_like(x)
    v = jnp.zeros_like(x)
    b1t = jnp.asarray(1.0)
    b2t = jnp.asarray(1.0)
    for _ in range(steps):
        g = 2.0 * (x - 3.0) + jnp.cos(x)
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        b1t = b1t * 0.9
        b2t = b2t * 0.999
        mhat = m / (1.0 - b1t)
        vhat = v / (1.0 - b2t)
        x = x - lr * mhat / (jnp.sqrt(vhat) + 1e-8)
    return x


def rugged_energy(x):
    return (x * x - 1.0) ** 2 + 0.3 * jnp.sin(5.0 * x)


def simulated_annealing(x0, seed, steps):
    x = x0
    fx = rugged_energy(x)
    best = x
    best_f = fx
    state = seed
    temp = jnp.asarray(1.0)
    for _ in range(steps):
        state = lcg_next(state)
        cand = x + (lcg_uniform(state) - 0.5)
        fc = rugged_energy(cand)
        state = lcg_next(state)
        accept = fc < fx or lcg_uniform(state) < jnp.exp((fx - fc) / temp)
        if accept:
            x, fx = cand, fc
            if fx < best_f:
                best, best_f = x, fx
        temp = temp * 0.95
    return best, best_f


# --------------------------------------------------------------------------------------
# grids and games
# --------------------------------------------------------------------------------------

def life_step(grid):
    n = grid.shape[0]
    m = grid.shape[1]
    new = jnp.zeros_like(grid)
    for i in range(n):
        for j in range(m):
            alive = 0
            for di in range(-1, 2):
                for dj in range(-1, 2):
                    if di == 0 and dj == 0:
                        continue
                    alive += grid[(i + di) % n, (j + dj) % m]
            cell = grid[i, j]
            if cell == 1 and (alive == 2 or alive == 3):
                new = new.at[i, j].set(1)
            elif cell == 0 and alive == 3:
                new = new.at[i, j].set(1)
    return new


def life_run(grid, generations):
    for g in range(generations):
        nxt = life_step(grid)
        if jnp.all(nxt == grid):
            return grid, g
        grid = nxt
    return grid, generations


def life_step_rolled(grid):
    total = jnp.zeros_like(grid)
    for di in (-1, 0, 1):
        for dj in (-1, 0, 1):
            if di == 0 and dj == 0:
                continue
            total = total + jnp.roll(jnp.roll(grid, di, axis=0), dj, axis=1)
    born = (grid == 0) & (total == 3)
    survive = (grid == 1) & ((total == 2) | (total == 3))
    return jnp.where(born | survive, 1, 0)


def rule90(cells, steps):
    n = cells.shape[0]
    for _ in range(steps):
        new = jnp.zeros_like(cells)
        for i in range(n):
            left = cells[i - 1] if i > 0 else 0
            right = cells[i + 1] if i < n - 1 else 0
            new = new.at[i].set(left ^ right)
        cells = new
    return cells


def region_size(grid, si, sj):
    mark = jnp.zeros_like(grid).at[si, sj].set(1) * grid
    for _ in range(grid.size):
        up = jnp.roll(mark, 1, axis=0).at[0, :].set(0)
        down = jnp.roll(mark, -1, axis=0).at[-1, :].set(0)
        left = jnp.roll(mark, 1, axis=1).at[:, 0].set(0)
        right = jnp.roll(mark, -1, axis=1).at[:, -1].set(0)
        grown = jnp.maximum(jnp.maximum(up, down), jnp.maximum(left, right))
        grown = jnp.maximum(mark, grown) * grid
        if jnp.all(grown == mark):
            break
        mark = grown
    return jnp.sum(mark)


def count_islands(grid):
    n = grid.shape[0]
    m = grid.shape[1]
    seen = jnp.zeros_like(grid)
    stack = jnp.zeros(n * m + 1, dtype=jnp.int32)
    islands = 0
    for i in range(n):
        for j in range(m):
            if grid[i, j] == 0 or seen[i, j] == 1:
                continue
            islands += 1
            stack = stack.at[0].set(i * m + j)
            top = 1
            seen = seen.at[i, j].set(1)
            while top > 0:
                top -= 1
                cell = stack[top]
                ci = cell // m
                cj = cell % m
                for d in range(4):
                    ni = ci + (1 if d == 0 else (-1 if d == 1 else 0))
                    nj = cj + (1 if d == 2 else (-1 if d == 3 else 0))
                    if ni < 0 or nj < 0 or ni >= n or nj >= m:
                        continue
                    if grid[ni, nj] == 1 and seen[ni, nj] == 0:
                        seen = seen.at[ni, nj].set(1)
                        stack = stack.at[top].set(ni * m + nj)
                        top += 1
    return islands


def tic_tac_toe_winner(board):
    for i in range(3):
        if board[i, 0] != 0 and board[i, 0] == board[i, 1] and board[i, 1] == board[i, 2]:
            return board[i, 0]
        if board[0, i] != 0 and board[0, i] == board[1, i] and board[1, i] == board[2, i]:
            return board[0, i]
    if board[1, 1] != 0:
        if board[0, 0] == board[1, 1] and board[1, 1] == board[2, 2]:
            return board[1, 1]
        if board[0, 2] == board[1, 1] and board[1, 1] == board[2, 0]:
            return board[1, 1]
    return 0


def random_walk_exit(seed, size, max_steps):
    state = seed
    x = size // 2
    y = size // 2
    steps = 0
    while steps < max_steps:
        state = lcg_next(state)
        move = (state // 7) % 4
        if move == 0:
            x += 1
        elif move == 1:
            x -= 1
        elif move == 2:
            y += 1
        else:
            y -= 1
        steps += 1
        if x < 0 or y < 0 or x >= size or y >= size:
            break
    return steps, x, y


def bowling_score(rolls):
    score = 0
    i = 0
    for _ in range(10):
        if rolls[i] == 10:
            score += 10 + rolls[i + 1] + rolls[i + 2]
            i += 1
        elif rolls[i] + rolls[i + 1] == 10:
            score += 10 + rolls[i + 2]
            i += 2
        else:
            score += rolls[i] + rolls[i + 1]
            i += 2
    return score


def dijkstra_dense(weights, source):
    n = weights.shape[0]
    dist = jnp.full(n, jnp.inf)
    dist = dist.at[source].set(0.0)
    done = jnp.zeros(n, dtype=jnp.int32)
    for _ in range(n):
        u = -1
        best = jnp.inf
        for v in range(n):
            if done[v] == 0 and dist[v] < best:
                best = dist[v]
                u = v
        if u < 0:
            break
        done = done.at[u].set(1)
        for v in range(n):
            w = weights[u, v]
            if w <= 0.0 or done[v] == 1:
                continue
            alt = dist[u] + w
            if alt < dist[v]:
                dist = dist.at[v].set(alt)
    return dist


# --------------------------------------------------------------------------------------
# small linear algebra and series
# --------------------------------------------------------------------------------------

def power_iteration(mat, iters):
    v = jnp.ones(mat.shape[0]) / jnp.sqrt(mat.shape[0])
    lam = 0.0
    for _ in range(iters):
        w = mat @ v
        norm = jnp.linalg.norm(w)
        if norm == 0.0:
            break
        v = w / norm
        new_lam = jnp.dot(v, mat @ v)
        if jnp.abs(new_lam - lam) < 1e-6 * jnp.abs(new_lam):
            lam = new_lam
            break
        lam = new_lam
    return lam, v


def gauss_seidel(a, b, iters, tol):
    n = b.shape[0]
    x = jnp.zeros_like(b)
    for _ in range(iters):
        max_change = 0.0
        for i in range(n):
            s = b[i]
            for j in range(n):
                if j != i:
                    s = s - a[i, j] * x[j]
            new_xi = s / a[i, i]
            change = jnp.abs(new_xi - x[i])
            if change > max_change:
                max_change = change
            x = x.at[i].set(new_xi)
        if max_change < tol:
            break
    return x


def cholesky_small(a):
    n = a.shape[0]
    low = jnp.zeros_like(a)
    for j in range(n):
        s = a[j, j]
        for k in range(j):
            s = s - low[j, k] * low[j, k]
        if s <= 0.0:
            return jnp.full_like(a, jnp.nan)
        ljj = jnp.sqrt(s)
        low = low.at[j, j].set(ljj)
        for i in range(j + 1, n):
            t = a[i, j]
            for k in range(j):
                t = t - low[i, k] * low[j, k]
            low = low.at[i, j].set(t / ljj)
    return low


def lu_solve_pivot(a, b):
    n = a.shape[0]
    lu = a
    perm = jnp.arange(n)
    swaps = 0
    singular = False
    for k in range(n):
        # partial pivoting: the largest entry of column k on or below the diagonal
        p = k
        biggest = jnp.abs(lu[k, k])
        for i in range(k + 1, n):
            if jnp.abs(lu[i, k]) > biggest:
                biggest = jnp.abs(lu[i, k])
                p = i
        if biggest < 1e-12:
            singular = True
            break
        if p != k:
            row_k = lu[k]
            lu = lu.at[k].set(lu[p])
            lu = lu.at[p].set(row_k)
            pk = perm[k]
            perm = perm.at[k].set(perm[p])
            perm = perm.at[p].set(pk)
            swaps += 1
        for i in range(k + 1, n):
            factor = lu[i, k] / lu[k, k]
            lu = lu.at[i, k].set(factor)
            for j in range(k + 1, n):
                lu = lu.at[i, j].set(lu[i, j] - factor * lu[k, j])
    if singular:
        return jnp.full_like(b, jnp.nan), 0.0
    # forward substitution on the permuted right-hand side
    y = jnp.zeros_like(b)
    for i in range(n):
        s = b[perm[i]]
        for j in range(i):
            s = s - lu[i, j] * y[j]
        y = y.at[i].set(s)
    # back substitution
    x = jnp.zeros_like(b)
    for i in range(n - 1, -1, -1):
        s = y[i]
        for j in range(i + 1, n):
            s = s - lu[i, j] * x[j]
        x = x.at[i].set(s / lu[i, i])
    det = 1.0
    for i in range(n):
        det = det * lu[i, i]
    if swaps % 2 == 1:
        det = -det
    return x, det


def thomas_solve(lower, diag, upper, rhs):
    n = diag.shape[0]
    c = jnp.zeros_like(diag)
    d = jnp.zeros_like(diag)
    c = c.at[0].set(upper[0] / diag[0])
    d = d.at[0].set(rhs[0] / diag[0])
    for i in range(1, n):
        denom = diag[i] - lower[i] * c[i - 1]
        if i < n - 1:
            c = c.at[i].set(upper[i] / denom)
        d = d.at[i].set((rhs[i] - lower[i] * d[i - 1]) / denom)
    x = jnp.zeros_like(diag)
    x = x.at[n - 1].set(d[n - 1])
    for i in range(n - 2, -1, -1):
        x = x.at[i].set(d[i] - c[i] * x[i + 1])
    return x


def clenshaw_chebyshev(coeffs, x):
    b1 = 0.0
    b2 = 0.0
    n = coeffs.shape[0]
    for k in range(n - 1, 0, -1):
        b1, b2 = 2.0 * x * b1 - b2 + coeffs[k], b1
    return x * b1 - b2 + coeffs[0]


def streaming_logsumexp(xs):
    m = -jnp.inf
    s = 0.0
    for x in xs:
        if x > m:
            s = s * jnp.exp(m - x) + 1.0
            m = x
        else:
            s = s + jnp.exp(x - m)
    return m + jnp.log(s)


def exp_series(x, tol):
    term = jnp.ones_like(x)
    total = term
    k = 1
    while jnp.abs(term) > tol * jnp.abs(total):
        term = term * x / k
        total = total + term
        k += 1
        if k > 60:
            break
    return total, k


def sigmoid_table(xs, sharpness):
    out = jnp.zeros_like(xs)
    for i in range(xs.shape[0]):
        z = sharpness * xs[i]
        if z > 20.0:
            val = 1.0
        elif z < -20.0:
            val = 0.0
        else:
            val = jax.nn.sigmoid(z)
        out = out.at[i].set(val)
    return out


def kmeans_1d(xs, iters):
    c0 = jnp.min(xs)
    c2 = jnp.max(xs)
    c1 = 0.5 * (c0 + c2)
    labels = jnp.zeros(xs.shape[0], dtype=jnp.int32)
    for it in range(iters):
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        n0 = 0
        n1 = 0
        n2 = 0
        changed = 0
        for i in range(xs.shape[0]):
            x = xs[i]
            d0 = jnp.abs(x - c0)
            d1 = jnp.abs(x - c1)
            d2 = jnp.abs(x - c2)
            if d0 <= d1 and d0 <= d2:
                lab = 0
                s0 += x
                n0 += 1
            elif d1 <= d2:
                lab = 1
                s1 += x
                n1 += 1
            else:
                lab = 2
                s2 += x
                n2 += 1
            if lab != labels[i]:
                changed += 1
            labels = labels.at[i].set(lab)
        if n0 > 0:
            c0 = s0 / n0
        if n1 > 0:
            c1 = s1 / n1
        if n2 > 0:
            c2 = s2 / n2
        if changed == 0 and it > 0:
            break
    return c0, c1, c2, labels


def elevator_sim(requests, pending, dwell):
    n_floors = pending.shape[0]
    floor = 0
    direction = 1
    door = 0
    moves = 0
    stops = 0
    idle = 0
    wait_time = 0
    for t in range(requests.shape[0]):
        r = requests[t]
        if r >= 0 and r < n_floors and r != floor:
            pending = pending.at[r].set(1)
        wait_time += jnp.sum(pending)
        if door > 0:
            door -= 1
            continue
        if pending[floor] == 1:
            pending = pending.at[floor].set(0)
            stops += 1
            door = dwell
            continue
        if jnp.sum(pending) == 0:
            idle += 1
            continue
        # keep going while a request lies ahead, otherwise turn around
        ahead = False
        f = floor + direction
        while 0 <= f < n_floors:
            if pending[f] == 1:
                ahead = True
                break
            f += direction
        if not ahead:
            direction = -direction
        floor = floor + direction
        moves += 1
        if floor == 0 or floor == n_floors - 1:
            direction = 1 if floor == 0 else -1
    return floor, moves, stops, idle, wait_time


def bank_account_sim(deposits, withdrawals, rate, overdraft_fee, limit):
    balance = 0.0
    fees = 0.0
    frozen_months = 0
    frozen = False
    for month in range(deposits.shape[0]):
        if frozen:
            frozen_months += 1
            balance = balance + deposits[month]
            if balance > 0.0:
                frozen = False
            continue
        balance = balance + deposits[month]
        w = withdrawals[month]
        if w > balance + limit:
            w = balance + limit
        balance = balance - w
        if balance < 0.0:
            balance = balance - overdraft_fee
            fees += overdraft_fee
            if balance < -limit:
                frozen = True
        elif month % 3 == 2:
            balance = balance * (1.0 + rate)
    return balance, fees, frozen_months


# --------------------------------------------------------------------------------------
# example arguments
# --------------------------------------------------------------------------------------

_LIFE = jnp.asarray([[0, 0, 0, 0, 0, 0],
                     [0, 0, 1, 0, 0, 0],
                     [0, 0, 0, 1, 0, 0],
                     [0, 1, 1, 1, 0, 0],
                     [0, 0, 0, 0, 0, 0],
                     [0, 0, 0, 0, 0, 0]], dtype=jnp.int32)

_ISLANDS = jnp.asarray([[1, 1, 0, 0, 1, 0],
                        [1, 0, 0, 1, 1, 0],
                        [0, 0, 1, 0, 0, 0],
                        [1, 0, 1, 1, 0, 1],
                        [1, 0, 0, 1, 0, 1],
                        [0, 1, 0, 0, 0, 1]], dtype=jnp.int32)

_SIGNAL = jnp.asarray([0.1, 0.8, 1.3, 0.9, -0.2, -1.1, -0.7, 0.0,
                       0.4, 1.6, 0.3, -0.5, -1.4, -0.2, 0.6, 0.2])

_PRICES = jnp.asarray([10.0, 10.5, 10.2, 11.0, 11.8, 11.2, 10.4, 9.8,
                       9.5, 10.1, 10.9, 11.5, 12.2, 11.9, 12.6, 13.0])

_SPD = jnp.asarray([[4.0, 1.0, 0.5, 0.0],
                    [1.0, 3.0, 0.2, 0.3],
                    [0.5, 0.2, 2.5, 0.4],
                    [0.0, 0.3, 0.4, 2.0]])

EXAMPLES = {
    "piecewise_linear": (jnp.asarray(1.3),),
    "huber_loss": (jnp.asarray([0.3, -2.0, 1.1, 0.05, -0.7, 3.2]), jnp.asarray(1.0)),
    "grade_bucket": (jnp.asarray(74),),
    "wrap_angle": (jnp.asarray(20.0),),
    "tiered_tariff": (jnp.asarray(345.0),),
    "classify_quadrant": (jnp.asarray(-1.5), jnp.asarray(-0.5)),
    "bisection_root": (jnp.asarray(2.0), jnp.asarray(3.0), jnp.asarray(1e-5)),
    "newton_sqrt": (jnp.asarray(17.0),),
    "secant_root": (jnp.asarray(1.0), jnp.asarray(2.0), jnp.asarray(1e-4)),
    "fixed_point_cos": (jnp.asarray(0.5),),
    "hybrid_root": (jnp.asarray(0.0), jnp.asarray(1.0), jnp.asarray(1e-6)),
    "bump": (jnp.asarray(0.3),),
    "trapezoid_rule": (jnp.asarray(-1.0), jnp.asarray(2.0), 40),
    "simpson_rule": (jnp.asarray(-1.0), jnp.asarray(2.0), jnp.asarray(21)),
    "adaptive_trapezoid": (jnp.asarray(0.0), jnp.asarray(2.0), jnp.asarray(1e-4)),
    "romberg": (jnp.asarray(0.0), jnp.asarray(1.5)),
    "gauss_legendre_3": (jnp.asarray(-0.5), jnp.asarray(1.0)),
    "lcg_next": (jnp.asarray(12345),),
    "lcg_uniform": (jnp.asarray(40000),),
    "monte_carlo_pi": (jnp.asarray(7), 120),
    "oscillator_rhs": (jnp.asarray(0.5), jnp.asarray(-0.2), jnp.asarray(2.0)),
    "rk4_oscillator": (jnp.asarray(1.0), jnp.asarray(0.0), jnp.asarray(1.5),
                       jnp.asarray(0.05), 20),
    "leapfrog_orbit": (jnp.asarray([1.0, 0.0]), jnp.asarray([0.0, 0.9]), jnp.asarray(0.05), 40),
    "step_doubling_euler": (jnp.asarray(1.0), jnp.asarray(1.5)),
    "heun_euler_adaptive": (jnp.asarray(0.5), jnp.asarray(2.0), jnp.asarray(1e-3)),
    "projectile_range": (jnp.asarray(20.0), jnp.asarray(0.7), jnp.asarray(0.01),
                         jnp.asarray(0.02)),
    "welford_mean_var": (jnp.asarray([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]),),
    "count_outliers": (jnp.asarray([1.0, 1.2, 0.9, 1.1, 5.0, 1.0, -3.0, 1.05]),
                       jnp.asarray(1.5)),
    "second_largest": (jnp.asarray([3.0, 9.0, 4.0, 9.0, 7.0, 1.0]),),
    "histogram_fixed": (_SIGNAL, jnp.asarray(-1.2), jnp.asarray(1.2)),
    "max_drawdown": (_PRICES,),
    "longest_positive_run": (_SIGNAL,),
    "autocorrelation": (_SIGNAL, 2),
    "trimmed_mean": (_SIGNAL, jnp.asarray(-1.0), jnp.asarray(1.0)),
    "pearson_r": (jnp.asarray([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
                  jnp.asarray([2.1, 3.9, 6.2, 7.8, 10.1, 12.2])),
    "median_by_counting": (jnp.asarray([7.0, 1.0, 4.0, 4.0, 9.0, 2.0, 8.0]),),
    "bubble_sort": (jnp.asarray([5.0, 1.0, 4.0, 2.0, 8.0, 0.5, 3.0, 7.0]),),
    "insertion_sort": (jnp.asarray([5.0, 1.0, 4.0, 2.0, 8.0, 0.5, 3.0, 7.0]),),
    "binary_search": (jnp.asarray([0.5, 1.0, 2.0, 3.5, 4.0, 7.0, 9.0, 11.0]),
                      jnp.asarray(3.7)),
    "kth_smallest": (jnp.asarray([7.0, 2.0, 9.0, 4.0, 1.0, 8.0]), 2),
    "merge_sorted": (jnp.asarray([1.0, 3.0, 5.0, 9.0]), jnp.asarray([2.0, 3.0, 4.0, 10.0, 12.0])),
    "two_sum_sorted": (jnp.asarray([1, 2, 4, 7, 11, 15]), jnp.asarray(15)),
    "gcd": (jnp.asarray(462), jnp.asarray(1071)),
    "is_prime": (jnp.asarray(97),),
    "count_primes": (jnp.asarray(40),),
    "digit_sum": (jnp.asarray(-98765),),
    "digital_root": (jnp.asarray(987654),),
    "collatz_length": (jnp.asarray(27),),
    "mod_pow": (jnp.asarray(7), jnp.asarray(123), jnp.asarray(997)),
    "sum_proper_divisors": (jnp.asarray(220),),
    "abundance_class": (jnp.asarray(28),),
    "popcount": (jnp.asarray(0b1011011101),),
    "extended_gcd": (jnp.asarray(240), jnp.asarray(46)),
    "is_palindrome_number": (jnp.asarray(12321),),
    "euler_phi": (jnp.asarray(24),),
    "square_digit_sum": (jnp.asarray(4321),),
    "is_happy": (jnp.asarray(19),),
    "sieve_count": (jnp.asarray(50),),
    "fib_matrix": (jnp.asarray(20),),
    "fizzbuzz_score": (jnp.asarray(31),),
    "bouncing_ball": (jnp.asarray(2.0), jnp.asarray(0.7), jnp.asarray(0.02), 300),
    "pendulum_half_period": (jnp.asarray(0.5), jnp.asarray(1.0), jnp.asarray(0.01)),
    "particles_in_box": (jnp.asarray([0.2, 1.5, 2.8, 0.9]), jnp.asarray([-1.0, 2.0, 1.5, -0.3]),
                         jnp.asarray(3.0), jnp.asarray(0.2), 10),
    "heat_equation_1d": (jnp.asarray([0.0, 0.5, 1.0, 2.0, 1.0, 0.5, 0.2, 0.0]),
                         jnp.asarray(0.2), 30),
    "orbit_steps": (jnp.asarray(1.0), jnp.asarray(1.0), jnp.asarray(0.05)),
    "pid_controller": (jnp.asarray(1.0), jnp.asarray(2.0), jnp.asarray(0.5), jnp.asarray(0.05),
                       jnp.asarray(0.1), 50),
    "radioactive_chain": (jnp.asarray(100.0), jnp.asarray(0.0), jnp.asarray(0.3),
                          jnp.asarray(0.1), jnp.asarray(0.5), 40),
    "loan_payoff_months": (jnp.asarray(10000.0), jnp.asarray(0.06), jnp.asarray(300.0)),
    "npv": (jnp.asarray(0.08), jnp.asarray([-1000.0, 300.0, 400.0, 500.0, 200.0])),
    "irr_bisect": (jnp.asarray([-1000.0, 300.0, 400.0, 500.0, 200.0]),),
    "progressive_tax": (jnp.asarray(72000.0), jnp.asarray([10000.0, 40000.0, 90000.0]),
                        jnp.asarray([0.0, 0.1, 0.25, 0.4])),
    "option_payoff": (jnp.asarray(105.0), jnp.asarray(100.0), jnp.asarray(1)),
    "window_mean": (_PRICES, 8, 3),
    "crossover_trades": (_PRICES, 3, 5),
    "amortization_interest": (jnp.asarray(5000.0), jnp.asarray(0.07), 24),
    "inventory_policy": (jnp.asarray([3.0, 5.0, 2.0, 8.0, 1.0, 6.0, 4.0]), jnp.asarray(4.0),
                         jnp.asarray(10.0), jnp.asarray(8.0)),
    "moving_average": (_SIGNAL, 3),
    "zero_crossings": (_SIGNAL,),
    "fir_filter": (_SIGNAL, jnp.asarray([0.5, 0.3, 0.2])),
    "median3": (jnp.asarray(3.0), jnp.asarray(1.0), jnp.asarray(2.0)),
    "median3_filter": (_SIGNAL,),
    "hysteresis_threshold": (_SIGNAL, jnp.asarray(-0.5), jnp.asarray(0.7)),
    "dft_power": (_SIGNAL, jnp.asarray(2)),
    "quantize": (_SIGNAL, 5, jnp.asarray(-1.0), jnp.asarray(1.0)),
    "sliding_max": (_SIGNAL, 3),
    "rms_gate": (_SIGNAL, 4, jnp.asarray(0.6)),
    "point_in_polygon": (jnp.asarray(1.0), jnp.asarray(1.0),
                         jnp.asarray([0.0, 3.0, 3.0, 1.5, 0.0]),
                         jnp.asarray([0.0, 0.0, 2.0, 3.0, 2.0])),
    "orientation": (jnp.asarray(0.0), jnp.asarray(0.0), jnp.asarray(1.0), jnp.asarray(1.0),
                    jnp.asarray(2.0), jnp.asarray(0.5)),
    "on_segment": (jnp.asarray(0.0), jnp.asarray(0.0), jnp.asarray(1.0), jnp.asarray(1.0),
                   jnp.asarray(2.0), jnp.asarray(2.0)),
    "segments_intersect": (jnp.asarray([0.0, 0.0]), jnp.asarray([2.0, 2.0]),
                           jnp.asarray([0.0, 2.0]), jnp.asarray([2.0, 0.0])),
    "triangle_kind": (jnp.asarray(5.0), jnp.asarray(3.0), jnp.asarray(4.0)),
    "closest_pair_distance": (jnp.asarray([0.0, 2.0, 5.0, 1.0, 3.5, 4.0, 0.5]),
                              jnp.asarray([0.0, 1.0, 2.0, 4.0, 3.0, 0.5, 2.5])),
    "is_convex": (jnp.asarray([0.0, 3.0, 3.0, 1.5, 0.0]), jnp.asarray([0.0, 0.0, 2.0, 3.0, 2.0])),
    "circle_rect_overlap": (jnp.asarray(4.0), jnp.asarray(1.0), jnp.asarray(1.2),
                            jnp.asarray(0.0), jnp.asarray(0.0), jnp.asarray(3.0),
                            jnp.asarray(2.0)),
    "polyline_length": (jnp.asarray([0.0, 1.0, 2.0, 4.0, 5.0]), jnp.asarray([0.0, 1.0, 0.0, 1.0, 3.0]),
                        jnp.asarray(4.0)),
    "de_casteljau": (jnp.asarray([[0.0, 0.0], [1.0, 2.0], [3.0, 3.0], [4.0, 0.0]]),
                     jnp.asarray(0.35)),
    "gradient_descent_2d": (jnp.asarray(0.0), jnp.asarray(0.0), jnp.asarray(0.1),
                            jnp.asarray(1e-4)),
    "golden_section": (jnp.asarray(0.0), jnp.asarray(2.0), jnp.asarray(1e-4)),
    "backtracking_step": (jnp.asarray([1.5, -0.5, 2.0]), jnp.asarray([-1.0, 0.5, -2.0]),
                          jnp.asarray(1.0)),
    "momentum_descent": (jnp.asarray([1.0, -1.2]), jnp.asarray(0.05), jnp.asarray(0.8), 60),
    "adam_minimize": (jnp.asarray([0.0, 5.0]), jnp.asarray(0.1), 50),
    "rugged_energy": (jnp.asarray(0.8),),
    "simulated_annealing": (jnp.asarray(1.5), jnp.asarray(11), 40),
    "life_step": (_LIFE,),
    "life_run": (_LIFE, 4),
    "life_step_rolled": (_LIFE,),
    "rule90": (jnp.asarray([0, 0, 0, 0, 1, 0, 0, 0, 0]), 4),
    "region_size": (_ISLANDS, 0, 0),
    "count_islands": (_ISLANDS,),
    "tic_tac_toe_winner": (jnp.asarray([[1, 2, 0], [2, 1, 0], [2, 0, 1]]),),
    "random_walk_exit": (jnp.asarray(3), 7, 200),
    "bowling_score": (jnp.asarray([10, 7, 3, 9, 0, 10, 0, 8, 8, 2, 0, 6, 10, 10, 10, 8, 1,
                                   0, 0, 0, 0]),),
    "dijkstra_dense": (jnp.asarray([[0.0, 4.0, 1.0, 0.0, 0.0],
                                    [4.0, 0.0, 2.0, 5.0, 0.0],
                                    [1.0, 2.0, 0.0, 8.0, 10.0],
                                    [0.0, 5.0, 8.0, 0.0, 2.0],
                                    [0.0, 0.0, 10.0, 2.0, 0.0]]), 0),
    "power_iteration": (_SPD, 50),
    "gauss_seidel": (_SPD, jnp.asarray([1.0, 2.0, 0.5, -1.0]), 30, jnp.asarray(1e-6)),
    "cholesky_small": (_SPD,),
    "thomas_solve": (jnp.asarray([0.0, 1.0, 1.0, 1.0, 1.0]), jnp.asarray([4.0, 4.0, 4.0, 4.0, 4.0]),
                     jnp.asarray([1.0, 1.0, 1.0, 1.0, 0.0]),
                     jnp.asarray([5.0, 6.0, 6.0, 6.0, 5.0])),
    "clenshaw_chebyshev": (jnp.asarray([1.0, 0.5, -0.25, 0.125]), jnp.asarray(0.4)),
    "streaming_logsumexp": (jnp.asarray([1.0, 3.0, -2.0, 0.5, 2.9]),),
    "exp_series": (jnp.asarray(1.7), jnp.asarray(1e-7)),
    "sigmoid_table": (_SIGNAL, jnp.asarray(30.0)),
    "kmeans_1d": (jnp.asarray([0.1, 0.3, 0.2, 5.0, 5.5, 4.8, 9.9, 10.2, 9.5, 2.5]), 10),
    "lu_solve_pivot": (jnp.asarray([[0.0, 2.0, 1.0, 0.0],
                                    [1.0, 1.0, 0.0, 2.0],
                                    [3.0, 0.0, 1.0, 1.0],
                                    [1.0, 2.0, 3.0, 4.0]]),
                       jnp.asarray([1.0, 2.0, 3.0, 4.0])),
    "billiards_2d": (jnp.asarray([[0.5, 0.5], [1.5, 0.6], [2.5, 1.5], [1.0, 1.6]]),
                     jnp.asarray([[1.0, 0.2], [-0.8, 0.1], [0.3, -1.0], [0.5, 0.7]]),
                     jnp.asarray(0.2), jnp.asarray(3.0), jnp.asarray(2.0), jnp.asarray(0.1), 25),
    "elevator_sim": (jnp.asarray([3, -1, 5, -1, -1, 1, -1, 4, -1, -1, 0, -1, -1, -1, 2, -1,
                                  -1, -1, -1, -1]),
                     jnp.asarray([0, 0, 1, 0, 0, 0], dtype=jnp.int32), 1),
    "bank_account_sim": (jnp.asarray([100.0, 50.0, 0.0, 0.0, 200.0, 10.0, 0.0, 300.0]),
                         jnp.asarray([30.0, 200.0, 80.0, 10.0, 20.0, 150.0, 40.0, 20.0]),
                         jnp.asarray(0.01), jnp.asarray(15.0), jnp.asarray(100.0)),
}

FUNCTIONS = [
    piecewise_linear, huber_loss, grade_bucket, wrap_angle, tiered_tariff,
    classify_quadrant, bisection_root, newton_sqrt, secant_root, fixed_point_cos,
    hybrid_root, bump, trapezoid_rule, simpson_rule, adaptive_trapezoid, romberg,
    gauss_legendre_3, lcg_next, lcg_uniform, monte_carlo_pi, oscillator_rhs,
    rk4_oscillator, leapfrog_orbit, step_doubling_euler, heun_euler_adaptive,
    projectile_range, welford_mean_var, count_outliers, second_largest, histogram_fixed,
    max_drawdown, longest_positive_run, autocorrelation, trimmed_mean, pearson_r,
    median_by_counting, bubble_sort, insertion_sort, binary_search, kth_smallest,
    merge_sorted, two_sum_sorted, gcd, is_prime, count_primes, digit_sum, digital_root,
    collatz_length, mod_pow, sum_proper_divisors, abundance_class, popcount,
    extended_gcd, is_palindrome_number, euler_phi, square_digit_sum, is_happy,
    sieve_count, fib_matrix, fizzbuzz_score, bouncing_ball, pendulum_half_period,
    particles_in_box, billiards_2d, heat_equation_1d, orbit_steps, pid_controller,
    radioactive_chain, loan_payoff_months, npv, irr_bisect, progressive_tax,
    option_payoff, window_mean, crossover_trades, amortization_interest,
    inventory_policy, moving_average, zero_crossings, fir_filter, median3,
    median3_filter, hysteresis_threshold, dft_power, quantize, sliding_max, rms_gate,
    point_in_polygon, orientation, on_segment, segments_intersect, triangle_kind,
    closest_pair_distance, is_convex, circle_rect_overlap, polyline_length,
    de_casteljau, gradient_descent_2d, golden_section, backtracking_step,
    momentum_descent, adam_minimize, rugged_energy, simulated_annealing, life_step,
    life_run, life_step_rolled, rule90, region_size, count_islands, tic_tac_toe_winner,
    random_walk_exit, bowling_score, dijkstra_dense, power_iteration, gauss_seidel,
    cholesky_small, lu_solve_pivot, thomas_solve, clenshaw_chebyshev,
    streaming_logsumexp, exp_series, sigmoid_table, kmeans_1d, elevator_sim,
    bank_account_sim,
]
