"""Textbook numeric algorithms written in plain Python (issue 43).

Fresh programs in the style of the public collections of algorithms people learn from:
number theory, digit manipulation (with ``str`` of the number as often as with
arithmetic), root finding, series, bit tricks, small dynamic programs over tables of a
static size (``[0] * (N + 1)``, ``[[0] * M for _ in range(N)]``), and searches over
arrays. Each is checked against Python's own eager run (``tests/semantics/oracle.py``):
``autoflow.convert`` on concrete values, ``autoflow.jit`` on traced ones, ``jax.vmap``
over all its cases at once, and ``jax.grad`` where it computes a float. A program that
cannot be staged says so with autoflow's own error at the user's line (``refuse=``).

Then: no output of any of them (values, printed text, exception messages) and no
message of the error reference (``docs/error-reference.md``) holds a JAX tracer's
text.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
import sys

import jax
import jax.numpy as jnp
import pytest

import autoflow
from tests.semantics.oracle import check, check_error

PROGRAMS = []


def program(*cases, vmap=True, grad=False, static=(), refuse=None, raises=()):
    """Register ``fn`` with argument tuples ``cases`` (``raises``: ``[(args, type)]`` on
    which Python raises; ``refuse``: the names autoflow's error must mention)."""

    def deco(fn):
        PROGRAMS.append(pytest.param(fn, cases, dict(vmap=vmap, grad=grad, static=static,
                                                     refuse=refuse, raises=list(raises)),
                                     id=fn.__name__))
        return fn

    return deco


# =========================================================================================
# number theory
# =========================================================================================

@program((12, 18), (17, 5), (0, 9), (48, 180), (7, 0))
def gcd_euclid(a, b):
    while b:
        a, b = b, a % b
    return a


@program((4, 6), (21, 6), (7, 13), (10, 10))
def lcm_by_gcd(a, b):
    x, y = a, b
    while y != 0:
        x, y = y, x % y
    return a * b // x


@program((240, 46), (17, 5), (12, 8), (5, 3))
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


@program((3, 11), (10, 17), (7, 26), raises=[((4, 8), ValueError)])
def mod_inverse(a, m):
    old_r, r = a, m
    old_s, s = 1, 0
    while r != 0:
        q = old_r // r
        old_r, r = r, old_r - q * r
        old_s, s = s, old_s - q * s
    if old_r != 1:
        raise ValueError(f"{a} has no inverse modulo {m}")
    return old_s % m


@program((1,), (2,), (17,), (91,), (97,), (7919,), (1000,))
def is_prime_trial(n):
    if n < 2:
        return False
    i = 2
    while i * i <= n:
        if n % i == 0:
            return False
        i += 1
    return True


@program((1,), (2,), (3,), (25,), (29,), (49,), (7927,))
def is_prime_6k(n):
    if n <= 3:
        return n > 1
    if n % 2 == 0 or n % 3 == 0:
        return False
    i = 5
    while i * i <= n:
        if n % i == 0 or n % (i + 2) == 0:
            return False
        i += 6
    return True


@program((10,), (2,), (30,), (100,))
def count_primes_below(n):
    count = 0
    for k in range(2, n):
        prime = True
        d = 2
        while d * d <= k:
            if k % d == 0:
                prime = False
                break
            d += 1
        if prime:
            count += 1
    return count


@program((1,), (5,), (10,), (25,))
def nth_prime(n):
    count = 0
    candidate = 1
    while count < n:
        candidate += 1
        d = 2
        prime = True
        while d * d <= candidate:
            if candidate % d == 0:
                prime = False
                break
            d += 1
        if prime:
            count += 1
    return candidate


SIEVE_MAX = 200


@program((10,), (50,), (200,), (2,))
def sieve_count(n):
    is_p = [True] * (SIEVE_MAX + 1)
    is_p[0] = False
    is_p[1] = False
    i = 2
    while i * i <= n:
        if is_p[i]:
            j = i * i
            while j <= n:
                is_p[j] = False
                j += i
        i += 1
    count = 0
    for k in range(n + 1):
        if is_p[k]:
            count += 1
    return count


@program((6,), (12,), (28,), (1,), (97,))
def sum_of_divisors(n):
    total = 0
    for d in range(1, n + 1):
        if n % d == 0:
            total += d
    return total


@program((6,), (28,), (12,), (496,), (1,))
def is_perfect(n):
    if n < 2:
        return False
    s = 1
    d = 2
    while d * d <= n:
        if n % d == 0:
            s += d
            if d != n // d:
                s += n // d
        d += 1
    return s == n


@program((1,), (9,), (10,), (36,), (97,), (100,))
def euler_phi(n):
    result = n
    p = 2
    m = n
    while p * p <= m:
        if m % p == 0:
            while m % p == 0:
                m //= p
            result -= result // p
        p += 1
    if m > 1:
        result -= result // m
    return result


@program((13195,), (17,), (2,), (600,), (97 * 89,))
def largest_prime_factor(n):
    factor = 2
    last = 1
    while n > 1:
        if n % factor == 0:
            last = factor
            n //= factor
            while n % factor == 0:
                n //= factor
        factor += 1
    return last


@program((15,), (49,), (2,), (97,))
def smallest_prime_factor(n):
    if n % 2 == 0:
        return 2
    d = 3
    while d * d <= n:
        if n % d == 0:
            return d
        d += 2
    return n


@program((2, 10, 1000), (3, 0, 7), (7, 13, 11), (5, 117, 19))
def mod_pow(base, exp, mod):
    result = 1
    base = base % mod
    while exp > 0:
        if exp % 2 == 1:
            result = result * base % mod
        base = base * base % mod
        exp //= 2
    return result


@program((0,), (1,), (2,), (10,), (30,))
def fibonacci_iterative(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


@program((10, 7), (100, 10), (1, 3), (50, 1000))
def fibonacci_mod(n, m):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, (a + b) % m
    return a


@program((1,), (6,), (7,), (27,), (97,))
def collatz_steps(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


@program((1,), (6,), (27,), (15,))
def collatz_peak(n):
    peak = n
    while n != 1:
        if n % 2:
            n = 3 * n + 1
        else:
            n //= 2
        peak = max(peak, n)
    return peak


@program((0,), (9,), (38,), (98765,), (123456789,))
def digital_root_arith(n):
    while n >= 10:
        s = 0
        while n > 0:
            s += n % 10
            n //= 10
        n = s
    return n


@program((0,), (16,), (15,), (1000000,), (999999,))
def is_perfect_square(n):
    r = math.isqrt(n)
    return r * r == n


@program((1,), (2,), (6,), (64,), (0,), (-8,))
def is_power_of_two(n):
    return n > 0 and n & (n - 1) == 0


@program((1,), (3,), (6,), (7,), (55,), (56,))
def is_triangular(n):
    k = 1
    total = 0
    while total < n:
        total += k
        k += 1
    return total == n


@program((5, 2), (10, 3), (20, 10), (6, 0), (3, 5))
def binomial_loop(n, k):
    if k < 0 or k > n:
        return 0
    k = min(k, n - k)
    c = 1
    for i in range(k):
        c = c * (n - i) // (i + 1)
    return c


@program((0,), (1,), (5,), (10,))
def catalan_comb(n):
    return math.comb(2 * n, n) // (n + 1)


@program((0,), (1,), (5,), (10,), (12,))
def factorial_loop(n):
    out = 1
    for i in range(2, n + 1):
        out *= i
    return out


@program((0,), (3,), (7,), (12,), raises=[((-1,), ValueError)])
def factorial_math(n):
    return math.factorial(n)


@program((10,), (2,), (100,))
def sum_of_primes(n):
    total = 0
    for k in range(2, n):
        d = 2
        ok = True
        while d * d <= k:
            if k % d == 0:
                ok = False
                break
            d += 1
        if ok:
            total += k
    return total


@program((4,), (28,), (100,), (98,))
def goldbach_pair(n):
    for p in range(2, n // 2 + 1):
        q = n - p
        pp = all(p % d != 0 for d in range(2, p))
        qq = True
        d = 2
        while d * d <= q:
            if q % d == 0:
                qq = False
                break
            d += 1
        if pp and qq:
            return p, q
    return 0, 0


@program((220,), (284,), (6,), (1184,))
def is_amicable(a):
    def div_sum(n):
        s = 1
        d = 2
        while d * d <= n:
            if n % d == 0:
                s += d + (n // d if d != n // d else 0)
            d += 1
        return s
    b = div_sum(a)
    return b != a and div_sum(b) == a


@program((1,), (7,), (4,), (19,), (20,))
def is_happy(n):
    def step(m):
        s = 0
        while m > 0:
            s += (m % 10) ** 2
            m //= 10
        return s
    slow, fast = n, step(n)
    while fast != 1 and slow != fast:
        slow = step(slow)
        fast = step(step(fast))
    return fast == 1


@program((2, 3, 3, 5), (1, 4, 2, 5), (0, 7, 3, 11))
def crt_two(a1, m1, a2, m2):
    x = a1
    while x % m2 != a2:
        x += m1
    return x


@program((2, 7), (3, 7), (5, 11), (10, 13))
def euler_criterion(a, p):
    r = 1
    b = a % p
    e = (p - 1) // 2
    while e > 0:
        if e & 1:
            r = r * b % p
        b = b * b % p
        e >>= 1
    return 1 if r == 1 else -1


@program((1, 2), (8, 2), (1000, 10), (81, 3), (80, 3))
def integer_log(n, b):
    k = 0
    while n >= b:
        n //= b
        k += 1
    return k


@program((12,), (360,), (97,), (1,))
def count_divisors(n):
    count = 0
    d = 1
    while d * d <= n:
        if n % d == 0:
            count += 1 if d * d == n else 2
        d += 1
    return count


@program((12,), (360,), (97,), (1024,))
def prime_factor_multiplicity(n):
    count = 0
    p = 2
    while n > 1 and p * p <= n:
        while n % p == 0:
            n //= p
            count += 1
        p += 1
    if n > 1:
        count += 1
    return count


@program((0,), (1,), (5,), (12,))
def pell_number(n):
    a, b = 0, 1
    if n == 0:
        return 0
    for _ in range(n - 1):
        a, b = b, 2 * b + a
    return b


@program((12, 18), (0, 5), (-4, 6), (35, 64))
def math_gcd_lcm(a, b):
    return math.gcd(a, b), math.lcm(a, b)


@program((5, 2), (10, 0), (10, 10), (12, 4), raises=[((-1, 2), ValueError)])
def math_comb_perm(n, k):
    return math.comb(n, k) + math.perm(n, k)


@program((0,), (15,), (16,), (99999,), raises=[((-4,), ValueError)])
def isqrt_floor(n):
    return math.isqrt(n)


# =========================================================================================
# digits
# =========================================================================================

@program((0,), (7,), (12345,), (98765,), (100000,))
def digit_sum_arith(n):
    s = 0
    while n > 0:
        s += n % 10
        n //= 10
    return s


@program((0,), (7,), (12345,), (98765,), (100000,))
def digit_sum_str(n):
    return sum(int(d) for d in str(n))


@program((0,), (7,), (12345,), (100000,))
def count_digits_arith(n):
    if n == 0:
        return 1
    count = 0
    while n:
        count += 1
        n //= 10
    return count


@program((0,), (7,), (12345,), (100000,), (-42,))
def count_digits_str(n):
    return len(str(abs(n)))


@program((0,), (1230,), (12345,), (7,))
def reverse_number_arith(n):
    r = 0
    while n > 0:
        r = r * 10 + n % 10
        n //= 10
    return r


@program((1,), (1230,), (12345,), (7,), (1000000,))
def reverse_number_str(n):
    return int(str(n)[::-1])


@program((0,), (121,), (123,), (1221,), (10,))
def is_palindrome_arith(n):
    original, r = n, 0
    while n > 0:
        r = r * 10 + n % 10
        n //= 10
    return original == r


@program((0,), (121,), (123,), (1221,), (10,), (12321,))
def is_palindrome_str(n):
    s = str(n)
    return s == s[::-1]


@program((153,), (370,), (371,), (407,), (154,), (9474,), (9475,), (1,))
def armstrong_str(n):
    k = len(str(n))
    total = 0
    m = n
    while m > 0:
        total += (m % 10) ** k
        m //= 10
    return total == n


@program((153,), (9474,), (100,), (0,))
def armstrong_digits(n):
    digits = str(n)
    power = len(digits)
    return sum(int(d) ** power for d in digits) == n


@program((18,), (21,), (19,), (1729,))
def is_harshad(n):
    return n % sum(int(c) for c in str(n)) == 0


@program((0,), (9,), (38,), (98765,), (999999999,))
def digital_root_str(n):
    while len(str(n)) > 1:
        n = sum(int(d) for d in str(n))
    return n


@program((0,), (39,), (999,), (25,))
def persistence_str(n):
    steps = 0
    while n >= 10:
        p = 1
        for d in str(n):
            p *= int(d)
        n = p
        steps += 1
    return steps


@program((5,), (123,), (907,), (40,))
def product_of_digits(n):
    p = 1
    for c in str(n):
        p *= int(c)
    return p


@program((5,), (1729,), (90210,), (111,))
def largest_digit(n):
    return max(int(c) for c in str(n))


@program((5,), (1729,), (90210,), (111,))
def smallest_digit(n):
    return min(int(c) for c in str(n))


@program((1727, 7), (12345, 9), (100, 0), (5, 5))
def count_digit(n, d):
    return str(n).count(str(d))


@program((1727,), (12,), (7,), (0,))
def contains_seven(n):
    return "7" in str(n)


@program((5,), (6,), (25,), (76,), (7,), (376,))
def is_automorphic(n):
    return str(n * n).endswith(str(n))


@program((9,), (45,), (297,), (10,), (1,))
def is_kaprekar(n):
    sq = str(n * n)
    half = len(sq) // 2
    left = int(sq[:half]) if half > 0 else 0
    right = int(sq[half:])
    return right > 0 and left + right == n


@program((1124,), (123,), (22,), (1412,))
def is_spy(n):
    s, p = 0, 1
    for c in str(n):
        s += int(c)
        p *= int(c)
    return s == p


@program((89,), (135,), (175,), (518,), (10,))
def is_disarium(n):
    total = 0
    for i, c in enumerate(str(n)):
        total += int(c) ** (i + 1)
    return total == n


@program((145,), (1,), (2,), (40585,), (146,))
def is_strong(n):
    return sum(math.factorial(int(d)) for d in str(n)) == n


@program((121,), (918082,), (12345,), (11,))
def divisible_by_11_alternating(n):
    total = 0
    sign = 1
    for c in str(n)[::-1]:
        total += sign * int(c)
        sign = -sign
    return total % 11 == 0


@program((79927398,), (1234567812,), (49927398,), (18,))
def luhn_valid(n):
    total = 0
    for i, c in enumerate(reversed(str(n))):
        d = int(c)
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


@program((1,), (5,), (255,), (1024,))
def binary_length_str(n):
    return len(bin(n)) - 2


@program((5,), (9,), (6,), (0,), (585,))
def binary_palindrome(n):
    b = bin(n)[2:]
    return b == b[::-1]


@program((1234,), (5,), (9001,), (1000,))
def rotate_left_digits(n):
    s = str(n)
    return int(s[1:] + s[0])


@program((9,), (1,), (2,), (45,))
def is_neon(n):
    return sum(int(d) for d in str(n * n)) == n


@program((3210,), (102,), (5,), (100,))
def is_duck(n):
    return "0" in str(n)[1:]


@program((1,), (123,), (808,), (99,), (1234,))
def next_palindrome(n):
    n += 1
    while str(n) != str(n)[::-1]:
        n += 1
    return n


@program((1234,), (1324,), (1111,), (9,))
def digits_non_decreasing(n):
    s = str(n)
    for i in range(len(s) - 1):
        if s[i] > s[i + 1]:
            return False
    return True


@program((7,), (12345,), (123456789,))
def zero_padded_length(n):
    return len(str(n).zfill(8)), str(n).zfill(8) == str(n).rjust(8, "0")


@program((7,), refuse=["n"])
def repeat_a_traced_number_of_times(n):
    # The length of `"0" * k` is a traced number: no array of a static size holds it.
    return len("0" * (8 - len(str(n))) + str(n))


@program((255,), (16,), (4096,), (1,))
def hex_digit_count(n):
    return len(hex(n)) - 2, hex(n)[2:].upper().count("F")


@program((7,), (-42,), (12345,))
def right_aligned_spaces(n):
    s = f"{n:>8}"
    return len(s) - len(s.lstrip())


@program((10, 2), (255, 16), (100, 7), (0, 3))
def digit_sum_base(n, b):
    s = 0
    while n:
        s += n % b
        n //= b
    return s


@program((5,), (37,), (120,))
def binary_string_value(n):
    s = bin(n)[2:]
    value = 0
    for c in s:
        value = value * 2 + (1 if c == "1" else 0)
    return value, int(s, 2)


@program((12,), (57,), (100,))
def ordinal_digits(n):
    return sum(ord(c) - ord("0") for c in str(n))


@program((5,), (321,), (-7,))
def formatted_report(n):
    msg = f"value={n:+05d}|{n:x}|{n!r}"
    return len(msg), msg.count("0"), msg.startswith("value=+") or msg.startswith("value=-")


@program((8,), (13,), (0,), raises=[((-3,), ValueError)])
def checked_label(n):
    label = f"n={n}"
    if n < 0:
        raise ValueError("negative input: " + label)
    return len(label)


@program((3,), (12,), raises=[((-1,), ValueError)])
def message_via_percent(n):
    msg = "bad value %d (must be >= 0)" % n
    if n < 0:
        raise ValueError(msg)
    return n * 2


@program((3,), (41,))
def prints_digits(n):
    for d in str(n):
        print("digit", d)
    print(f"total {sum(int(c) for c in str(n))}")
    return n


# =========================================================================================
# root finding (floats: jax.grad too where the result is smooth in the input)
# =========================================================================================

@program((2.0,), (9.0,), (0.25,), (10.0,), grad=True)
def sqrt_bisection(x):
    lo, hi = 0.0, max(1.0, x)
    while hi - lo > 1e-5:
        mid = (lo + hi) / 2
        if mid * mid < x:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@program((2.0,), (9.0,), (0.25,), (100.0,), grad=True)
def sqrt_newton(x):
    guess = x if x > 1 else 1.0
    for _ in range(30):
        guess = 0.5 * (guess + x / guess)
    return guess


@program((8.0,), (27.0,), (2.0,), (0.5,), grad=True)
def cbrt_newton_tol(x):
    y = x
    while abs(y * y * y - x) > 1e-4 * x:
        y = y - (y * y * y - x) / (3 * y * y)
    return y


@program((1.0,), (2.0,), (3.0,), grad=True)
def cubic_root_bisection(c):
    lo, hi = -10.0, 10.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        f_mid = mid ** 3 + mid - c
        if f_mid > 0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


@program((2.0,), (5.0,), (10.0,), grad=True)
def secant_sqrt(a):
    x0, x1 = 1.0, a
    for _ in range(20):
        f0 = x0 * x0 - a
        f1 = x1 * x1 - a
        if abs(f1 - f0) < 1e-12:
            break
        x0, x1 = x1, x1 - f1 * (x1 - x0) / (f1 - f0)
    return x1


@program((2.0,), (3.0,), (7.0,))
def regula_falsi(a):
    lo, hi = 0.0, a
    c = lo
    for _ in range(50):
        flo = lo * lo - a
        fhi = hi * hi - a
        c = (lo * fhi - hi * flo) / (fhi - flo)
        fc = c * c - a
        if abs(fc) < 1e-6:
            break
        if flo * fc < 0:
            hi = c
        else:
            lo = c
    return c


@program((0.5,), (1.0,), (0.0,))
def fixed_point_cos(x):
    for _ in range(200):
        nx = math.cos(x)
        if abs(nx - x) < 1e-7:
            return nx
        x = nx
    return x


@program((2.0,), (10.0,), (0.5,), grad=True)
def halley_cbrt(a):
    x = 1.0
    for _ in range(20):
        f = x ** 3 - a
        fp = 3 * x ** 2
        fpp = 6 * x
        x = x - 2 * f * fp / (2 * fp * fp - f * fpp)
    return x


@program((2.0,), (1e-3,), (50.0,))
def newton_with_iteration_cap(a):
    x = a
    it = 0
    while True:
        nx = 0.5 * (x + a / x)
        it += 1
        if abs(nx - x) < 1e-6 or it >= 100:
            break
        x = nx
    return nx, it


@program((0,), (1,), (15,), (16,), (1000000,))
def isqrt_newton(n):
    if n < 2:
        return n
    x = n
    y = (x + 1) // 2
    while y < x:
        x = y
        y = (x + n // x) // 2
    return x


@program((32.0, 5), (81.0, 4), (2.0, 2))
def nth_root_bisection(x, n):
    lo, hi = 0.0, max(1.0, x)
    for _ in range(60):
        mid = (lo + hi) / 2
        if mid ** n > x:
            hi = mid
        else:
            lo = mid
    return lo


@program((0.0, 4.0), (-1.0, 3.0), (1.0, 5.0))
def golden_section_min(a, b):
    g = (math.sqrt(5.0) - 1) / 2
    c = b - g * (b - a)
    d = a + g * (b - a)
    while abs(b - a) > 1e-5:
        if (c - 2.0) ** 2 < (d - 2.0) ** 2:
            b = d
        else:
            a = c
        c = b - g * (b - a)
        d = a + g * (b - a)
    return (a + b) / 2


@program((1.0,), (10.0,), (0.1,))
def log_by_newton(x):
    y = 0.0
    for _ in range(50):
        y = y - (math.exp(y) - x) / math.exp(y)
    return y


@program((1.0,), (-5.0,), raises=[((9.0,), ValueError)])
def bisection_checked(c):
    lo, hi = -2.0, 2.0
    if (lo ** 3 - c) * (hi ** 3 - c) > 0:
        raise ValueError(f"no sign change on [{lo}, {hi}] for c={c}")
    while hi - lo > 1e-6:
        mid = (lo + hi) / 2
        if (mid ** 3 - c) * (lo ** 3 - c) <= 0:
            hi = mid
        else:
            lo = mid
    return lo


# =========================================================================================
# series
# =========================================================================================

@program((0.0,), (1.0,), (-2.0,), (3.5,), grad=True)
def exp_series(x):
    term, total, n = 1.0, 1.0, 1
    while abs(term) > 1e-9:
        term *= x / n
        total += term
        n += 1
    return total


@program((0.5,), (1.0,), (3.0,), grad=True)
def sin_series(x):
    term, total = x, x
    for n in range(1, 15):
        term *= -x * x / ((2 * n) * (2 * n + 1))
        total += term
    return total


@program((0.5,), (1.0,), (2.0,), grad=True)
def cos_series_tol(x):
    term, total, n = 1.0, 1.0, 0
    while abs(term) > 1e-8:
        n += 1
        term *= -x * x / ((2 * n - 1) * (2 * n))
        total += term
    return total


@program((0.5,), (0.1,), (-0.5,), grad=True)
def log1p_series(x):
    total = 0.0
    power = x
    for k in range(1, 60):
        total += power / k if k % 2 == 1 else -power / k
        power *= x
    return total


@program((10,), (100,), (1000,))
def leibniz_pi(n):
    total = 0.0
    for k in range(n):
        total += (-1) ** k / (2 * k + 1)
    return 4 * total


@program((10,), (100,))
def wallis_pi(n):
    p = 1.0
    for k in range(1, n + 1):
        p *= (4.0 * k * k) / (4.0 * k * k - 1)
    return 2 * p


@program((1,), (10,), (100,))
def harmonic(n):
    return sum(1 / k for k in range(1, n + 1))


@program((10,), (1000,))
def basel_partial(n):
    total = 0.0
    k = 1
    while k <= n:
        total += 1.0 / (k * k)
        k += 1
    return total


@program((0.5, 10), (0.9, 50), (-0.5, 7), grad=True)
def geometric_sum(r, n):
    total, term = 0.0, 1.0
    for _ in range(n):
        total += term
        term *= r
    return total


@program((5,), (15,))
def e_by_factorials(n):
    total, fact = 0.0, 1.0
    for k in range(n):
        if k > 0:
            fact *= k
        total += 1.0 / fact
    return total


@program((0.5,), (0.2,), (-0.7,), grad=True)
def arctan_series(x):
    total, power, k = 0.0, x, 0
    while abs(power) / (2 * k + 1) > 1e-9:
        total += (-1) ** k * power / (2 * k + 1)
        power *= x * x
        k += 1
    return total


@program((5,), (20,))
def fibonacci_ratio(n):
    a, b = 1.0, 1.0
    for _ in range(n):
        a, b = b, a + b
    return b / a


@program((5,), (50,))
def nilakantha_pi(n):
    pi = 3.0
    sign = 1.0
    for k in range(1, n + 1):
        a = 2.0 * k
        pi += sign * 4.0 / (a * (a + 1) * (a + 2))
        sign = -sign
    return pi


@program((10,), (100,))
def sum_of_squares_check(n):
    total = 0
    for k in range(1, n + 1):
        total += k * k
    return total, total == n * (n + 1) * (2 * n + 1) // 6


@program((10,), (1000,))
def alternating_harmonic(n):
    total = 0.0
    for k in range(1, n + 1):
        if k % 2:
            total += 1.0 / k
        else:
            total -= 1.0 / k
    return total


COEFFS = [1.0, -3.0, 0.5, 2.0, -1.0]


@program((0.0,), (1.5,), (-2.0,), grad=True)
def horner(x):
    result = 0.0
    for c in COEFFS:
        result = result * x + c
    return result


@program((0.3, 5), (0.9, 10), (-0.5, 3), grad=True)
def chebyshev_t(x, n):
    t0, t1 = 1.0, x
    if n == 0:
        return t0
    for _ in range(n - 1):
        t0, t1 = t1, 2 * x * t1 - t0
    return t1


@program((1e-3,), (1e-6,))
def terms_until_small(eps):
    n = 1
    while 1.0 / (n * n) > eps:
        n += 1
    return n


# =========================================================================================
# bit tricks
# =========================================================================================

@program((0,), (1,), (255,), (1023,), (12345,))
def popcount_kernighan(n):
    count = 0
    while n:
        n &= n - 1
        count += 1
    return count


@program((0,), (1,), (255,), (1023,), (12345,))
def popcount_bin_string(n):
    return bin(n).count("1")


@program((0,), (7,), (8,), (255,))
def parity(n):
    p = 0
    while n:
        p ^= n & 1
        n >>= 1
    return p


@program((1,), (5,), (16,), (1000,))
def next_power_of_two(n):
    p = 1
    while p < n:
        p <<= 1
    return p


@program((12,), (7,), (64,), (1,))
def lowest_set_bit(n):
    return n & -n


@program((1,), (6,), (255,), (128,))
def reverse_bits_8(n):
    r = 0
    for _ in range(8):
        r = (r << 1) | (n & 1)
        n >>= 1
    return r


@program((5,), (10,), (0,), (255,))
def gray_code_roundtrip(n):
    g = n ^ (n >> 1)
    back = 0
    while g:
        back ^= g
        g >>= 1
    return back == n, n ^ (n >> 1)


@program((8,), (12,), (1,), (1024,))
def trailing_zeros_loop(n):
    count = 0
    while n & 1 == 0:
        n >>= 1
        count += 1
    return count


@program((1,), (255,), (65535,), (2 ** 14,))
def leading_zeros_16(n):
    count = 0
    mask = 1 << 15
    while mask and not (n & mask):
        count += 1
        mask >>= 1
    return count


@program((1,), (255,), (256,), (1000000,))
def bit_length_loop(n):
    length = 0
    while n:
        length += 1
        n >>= 1
    return length


@program((1, 4), (7, 8), (255, 0), (12345, 54321))
def hamming_distance(a, b):
    x = a ^ b
    count = 0
    while x:
        count += x & 1
        x >>= 1
    return count


@program((jnp.asarray([4, 1, 2, 1, 2], jnp.int32),), (jnp.asarray([7, 3, 3, 5, 5], jnp.int32),))
def single_number_xor(xs):
    result = 0
    for x in xs:
        result ^= x
    return result


@program((3, -4), (-3, -4), (5, 6), (0, -1))
def opposite_signs(x, y):
    return (x ^ y) < 0


@program((3, 4), (0, 9), (123, 456), (15, 15))
def add_bitwise(a, b):
    while b != 0:
        carry = a & b
        a = a ^ b
        b = carry << 1
    return a


@program((3, 4), (0, 9), (17, 23), (12, 1))
def russian_peasant(a, b):
    result = 0
    while b > 0:
        if b & 1:
            result += a
        a <<= 1
        b >>= 1
    return result


@program((5, 0), (5, 1), (5, 2), (1024, 10))
def bit_at(n, i):
    return (n >> i) & 1


@program((10,), (16,), (100,))
def total_set_bits_upto(n):
    total = 0
    for k in range(1, n + 1):
        total += bin(k).count("1")
    return total


@program((9,), (529,), (20,), (15,), (1041,))
def binary_gap(n):
    best = 0
    current = -1
    for c in bin(n)[2:]:
        if c == "1":
            if current > best:
                best = current
            current = 0
        elif current >= 0:
            current += 1
    return best


@program((5,), (7,), (10,), (11,))
def alternating_bits(n):
    prev = n & 1
    n >>= 1
    while n:
        bit = n & 1
        if bit == prev:
            return False
        prev = bit
        n >>= 1
    return True


@program((0b1011, 1, 2), (0, 0, 3), (255, 4, 7))
def toggle_bit_range(n, lo, hi):
    mask = ((1 << (hi - lo + 1)) - 1) << lo
    return n ^ mask


@program((1,), (255,), (1000,))
def bit_count_methods(n):
    return n.bit_length(), n.bit_count()


# =========================================================================================
# small dynamic programs over tables of a static size
# =========================================================================================

N_MAX = 40


@program((0,), (1,), (10,), (30,))
def fibonacci_table(n):
    fib = [0] * (N_MAX + 1)
    fib[1] = 1
    for i in range(2, n + 1):
        fib[i] = fib[i - 1] + fib[i - 2]
    return fib[n]


@program((1,), (2,), (5,), (20,))
def climbing_stairs(n):
    ways = [0] * (N_MAX + 1)
    ways[0] = 1
    ways[1] = 1
    for i in range(2, n + 1):
        ways[i] = ways[i - 1] + ways[i - 2]
    return ways[n]


@program((0,), (11,), (37,), (100,))
def coin_change_ways(amount):
    coins = [1, 5, 10, 25]
    ways = [0] * 101
    ways[0] = 1
    for c in coins:
        for a in range(c, amount + 1):
            ways[a] += ways[a - c]
    return ways[amount]


@program((0,), (11,), (7,), (30,))
def coin_change_min(amount):
    coins = [1, 3, 4]
    best = [float("inf")] * 31
    best[0] = 0
    for a in range(1, amount + 1):
        for c in coins:
            if c <= a and best[a - c] + 1 < best[a]:
                best[a] = best[a - c] + 1
    return best[amount]


@program((5,), (10,), (0,))
def knapsack_01(capacity):
    weights = [1, 3, 4, 5]
    values = [1, 4, 5, 7]
    dp = [0] * 11
    for i in range(4):
        for w in range(capacity, weights[i] - 1, -1):
            dp[w] = max(dp[w], dp[w - weights[i]] + values[i])
    return dp[capacity]


SEQ_A = [1, 3, 4, 1, 2, 1, 3]
SEQ_B = [3, 4, 1, 2, 1, 3, 1]


@program((7, 7), (3, 5), (0, 4), (7, 2))
def lcs_length(m, n):
    dp = [[0] * 8 for _ in range(8)]
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            if SEQ_A[i - 1] == SEQ_B[j - 1]:
                dp[i][j] = dp[i - 1][j - 1] + 1
            else:
                dp[i][j] = max(dp[i - 1][j], dp[i][j - 1])
    return dp[m][n]


@program((7, 7), (3, 5), (0, 4), (6, 1))
def edit_distance(m, n):
    dp = [[0] * 8 for _ in range(8)]
    for i in range(m + 1):
        dp[i][0] = i
    for j in range(n + 1):
        dp[0][j] = j
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            cost = 0 if SEQ_A[i - 1] == SEQ_B[j - 1] else 1
            dp[i][j] = min(dp[i - 1][j] + 1, dp[i][j - 1] + 1, dp[i - 1][j - 1] + cost)
    return dp[m][n]


@program((jnp.asarray([10, 9, 2, 5, 3, 7, 101, 18], jnp.int32),),
         (jnp.asarray([0, 1, 0, 3, 2, 3, 4, 1], jnp.int32),))
def longest_increasing_subsequence(xs):
    n = len(xs)
    best = [1] * n
    for i in range(n):
        for j in range(i):
            if xs[j] < xs[i] and best[j] + 1 > best[i]:
                best[i] = best[j] + 1
    return max(best)


@program((jnp.asarray([-2.0, 1.0, -3.0, 4.0, -1.0, 2.0, 1.0, -5.0, 4.0]),),
         (jnp.asarray([-3.0, -1.0, -2.0, -4.0, -1.0, -6.0, -2.0, -7.0, -3.0]),), grad=True)
def kadane(xs):
    best = xs[0]
    current = xs[0]
    for x in xs[1:]:
        current = max(x, current + x)
        best = max(best, current)
    return best


@program((3, 7), (1, 1), (5, 5), (2, 3))
def unique_paths(m, n):
    grid = [[1] * 8 for _ in range(8)]
    for i in range(1, m):
        for j in range(1, n):
            grid[i][j] = grid[i - 1][j] + grid[i][j - 1]
    return grid[m - 1][n - 1]


@program((jnp.asarray([[1.0, 3.0, 1.0], [1.0, 5.0, 1.0], [4.0, 2.0, 1.0]]),),
         (jnp.asarray([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]),), grad=True)
def min_path_sum(grid):
    rows, cols = grid.shape
    cost = [[0.0] * cols for _ in range(rows)]
    for i in range(rows):
        for j in range(cols):
            if i == 0 and j == 0:
                cost[i][j] = grid[0, 0]
            elif i == 0:
                cost[i][j] = cost[i][j - 1] + grid[i, j]
            elif j == 0:
                cost[i][j] = cost[i - 1][j] + grid[i, j]
            else:
                cost[i][j] = min(cost[i - 1][j], cost[i][j - 1]) + grid[i, j]
    return cost[rows - 1][cols - 1]


PRICES = [0, 1, 5, 8, 9, 10, 17, 17, 20]


@program((4,), (8,), (1,), (0,))
def rod_cutting(n):
    best = [0] * 9
    for length in range(1, n + 1):
        for cut in range(1, length + 1):
            best[length] = max(best[length], PRICES[cut] + best[length - cut])
    return best[n]


@program((5,), (10,), (1,), (20,))
def integer_partitions(n):
    ways = [0] * 21
    ways[0] = 1
    for part in range(1, n + 1):
        for total in range(part, n + 1):
            ways[total] += ways[total - part]
    return ways[n]


@program((0,), (3,), (10,))
def catalan_table(n):
    c = [0] * 16
    c[0] = 1
    for i in range(1, n + 1):
        for j in range(i):
            c[i] += c[j] * c[i - 1 - j]
    return c[n]


@program((jnp.asarray([2, 7, 9, 3, 1], jnp.int32),), (jnp.asarray([1, 2, 3, 1, 5], jnp.int32),))
def house_robber(houses):
    take, skip = 0, 0
    for h in houses:
        take, skip = skip + h, max(take, skip)
    return max(take, skip)


@program((0,), (4,), (10,), (25,))
def tribonacci_table(n):
    t = [0] * 30
    t[1] = 1
    t[2] = 1
    for i in range(3, n + 1):
        t[i] = t[i - 1] + t[i - 2] + t[i - 3]
    return t[n]


@program((0, 0), (4, 2), (6, 3), (10, 5))
def pascal_row_entry(n, k):
    row = [1] + [0] * 11
    for i in range(1, n + 1):
        for j in range(i, 0, -1):
            row[j] = row[j] + row[j - 1]
    return row[k]


@program((9,), (30,), (2,), (0,))
def subset_sum_reachable(target):
    items = [3, 34, 4, 12, 5, 2]
    reach = [False] * 31
    reach[0] = True
    for v in items:
        for s in range(30, v - 1, -1):
            if reach[s - v]:
                reach[s] = True
    return reach[target]


@program((7, 7), (4, 6), (2, 2))
def longest_common_substring(m, n):
    dp = [[0] * 8 for _ in range(8)]
    best = 0
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            if SEQ_A[i - 1] == SEQ_B[j - 1]:
                dp[i][j] = dp[i - 1][j - 1] + 1
                best = max(best, dp[i][j])
    return best


@program((jnp.asarray([2.0, 3.0, -2.0, 4.0]),), (jnp.asarray([-2.0, 0.0, -1.0, 3.0]),))
def max_product_subarray(xs):
    hi = lo = best = xs[0]
    for x in xs[1:]:
        if x < 0:
            hi, lo = lo, hi
        hi = max(x, hi * x)
        lo = min(x, lo * x)
        best = max(best, hi)
    return best


@program((5,), (12,), (1,))
def min_squares(n):
    dp = [0] * 13
    for i in range(1, n + 1):
        dp[i] = i
        j = 1
        while j * j <= i:
            dp[i] = min(dp[i], dp[i - j * j] + 1)
            j += 1
    return dp[n]


@program((3,), (6,), (1,))
def derangements(n):
    d = [0] * 10
    d[0] = 1
    for i in range(2, n + 1):
        d[i] = (i - 1) * (d[i - 1] + d[i - 2])
    return d[n]


# =========================================================================================
# searches over arrays
# =========================================================================================

ARR = jnp.asarray([1, 3, 5, 7, 9, 11, 13, 15], jnp.int32)
PY_SORTED = [2, 4, 4, 4, 8, 16, 23, 42]


@program((jnp.asarray([4, 2, 7, 1], jnp.int32), 7), (jnp.asarray([4, 2, 7, 1], jnp.int32), 5))
def linear_search(xs, target):
    for i in range(len(xs)):
        if xs[i] == target:
            return i
    return -1


@program((7,), (1,), (15,), (4,), (0,), (16,))
def binary_search(target):
    lo, hi = 0, len(ARR) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if ARR[mid] == target:
            return mid
        if ARR[mid] < target:
            lo = mid + 1
        else:
            hi = mid - 1
    return -1


@program((4,), (1,), (50,), (16,))
def bisect_left_py(target):
    lo, hi = 0, len(PY_SORTED)
    while lo < hi:
        mid = (lo + hi) // 2
        if PY_SORTED[mid] < target:
            lo = mid + 1
        else:
            hi = mid
    return lo


@program((4,), (1,), (50,), (16,))
def bisect_right_py(target):
    lo, hi = 0, len(PY_SORTED)
    while lo < hi:
        mid = (lo + hi) // 2
        if target < PY_SORTED[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


@program((4,), (5,), (42,))
def count_in_sorted(target):
    def first(t):
        lo, hi = 0, len(PY_SORTED)
        while lo < hi:
            mid = (lo + hi) // 2
            if PY_SORTED[mid] < t:
                lo = mid + 1
            else:
                hi = mid
        return lo
    return first(target + 1) - first(target)


@program((0.0, 4.0), (-3.0, 1.0))
def ternary_search(lo, hi):
    for _ in range(100):
        m1 = lo + (hi - lo) / 3
        m2 = hi - (hi - lo) / 3
        if -(m1 - 1.5) ** 2 < -(m2 - 1.5) ** 2:
            lo = m1
        else:
            hi = m2
    return (lo + hi) / 2


@program((jnp.asarray([1, 3, 20, 4, 1, 0], jnp.int32),), (jnp.asarray([5, 4, 3, 2, 1, 0], jnp.int32),))
def find_peak(xs):
    lo, hi = 0, len(xs) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if xs[mid] < xs[mid + 1]:
            lo = mid + 1
        else:
            hi = mid
    return lo


@program((9,), (2,), (42,), (5,))
def jump_search(target):
    n = len(PY_SORTED)
    step = int(math.sqrt(n))
    prev = 0
    while prev < n and PY_SORTED[min(prev + step, n) - 1] < target:
        prev += step
    for i in range(prev, min(prev + step, n)):
        if PY_SORTED[i] == target:
            return i
    return -1


@program((13,), (1,), (15,), (2,))
def exponential_search(target):
    if ARR[0] == target:
        return 0
    bound = 1
    while bound < len(ARR) and ARR[bound] <= target:
        bound *= 2
    lo, hi = bound // 2, min(bound, len(ARR) - 1)
    while lo <= hi:
        mid = (lo + hi) // 2
        if ARR[mid] == target:
            return mid
        if ARR[mid] < target:
            lo = mid + 1
        else:
            hi = mid - 1
    return -1


@program((9,), (1,), (15,), (8,))
def interpolation_search(target):
    lo, hi = 0, len(ARR) - 1
    while lo <= hi and ARR[lo] <= target <= ARR[hi]:
        if ARR[hi] == ARR[lo]:
            return lo if ARR[lo] == target else -1
        pos = lo + (target - ARR[lo]) * (hi - lo) // (ARR[hi] - ARR[lo])
        if ARR[pos] == target:
            return pos
        if ARR[pos] < target:
            lo = pos + 1
        else:
            hi = pos - 1
    return -1


@program((jnp.asarray([4, 5, 6, 7, 0, 1, 2], jnp.int32),), (jnp.asarray([1, 2, 3, 4, 5, 6, 7], jnp.int32),))
def rotated_min(xs):
    lo, hi = 0, len(xs) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if xs[mid] > xs[hi]:
            lo = mid + 1
        else:
            hi = mid
    return xs[lo]


@program((9,), (100,), (12,))
def two_sum_sorted(target):
    i, j = 0, len(ARR) - 1
    while i < j:
        s = ARR[i] + ARR[j]
        if s == target:
            return i, j
        if s < target:
            i += 1
        else:
            j -= 1
    return -1, -1


@program((jnp.asarray([3.0, 9.0, 2.0, 9.0]),), (jnp.asarray([-1.0, -5.0, -1.0, -7.0]),))
def argmax_manual(xs):
    best, where = xs[0], 0
    for i in range(1, len(xs)):
        if xs[i] > best:
            best, where = xs[i], i
    return where


@program((jnp.asarray([3, 9, 2, 8], jnp.int32),), (jnp.asarray([5, 5, 1, 5], jnp.int32),))
def second_largest(xs):
    first = second = -1000000
    for x in xs:
        if x > first:
            second, first = first, x
        elif first > x > second:
            second = x
    return second


@program((jnp.asarray([2, 2, 1, 1, 1, 2, 2], jnp.int32),), (jnp.asarray([3, 3, 4, 3, 4, 4, 4], jnp.int32),))
def majority_vote(xs):
    candidate, count = 0, 0
    for x in xs:
        if count == 0:
            candidate = x
        count += 1 if x == candidate else -1
    return candidate


@program((5,), (0,), (16,), (8,))
def search_insert(target):
    lo, hi = 0, len(ARR)
    while lo < hi:
        mid = (lo + hi) // 2
        if ARR[mid] < target:
            lo = mid + 1
        else:
            hi = mid
    return lo


@program((jnp.asarray([3, 0, 1], jnp.int32),), (jnp.asarray([2, 0, 1], jnp.int32),))
def missing_number(xs):
    n = len(xs)
    return n * (n + 1) // 2 - sum(xs)


@program((3, 1, 2, 2), (5, 5, 1, 5), (1, 2, 3, 3), raises=[((1, 2, 3, 4), ValueError)])
def list_index_of(a, b, c, target):
    xs = [a, b, c]
    return xs.index(target), xs.count(target)


@program((5.0, 1.0, 4.0, 2.0, 3.0), (1.0, 1.0, 1.0, 2.0, 0.0), grad=True)
def median_by_sort(a, b, c, d, e):
    xs = [a, b, c, d, e]
    xs.sort()
    return xs[2]


@program((3, 1, 2), (9, 9, 1), (1, 2, 3))
def sort_descending_list(a, b, c):
    xs = [a, b, c]
    xs.sort(reverse=True)
    xs.reverse()
    return xs


@program((4.0, 3.0, 2.0, 1.0), (1.0, 2.0, 3.0, 4.0), (2.0, 4.0, 1.0, 3.0))
def bubble_sort(a, b, c, d):
    xs = [a, b, c, d]
    n = len(xs)
    for i in range(n):
        for j in range(n - 1 - i):
            if xs[j] > xs[j + 1]:
                xs[j], xs[j + 1] = xs[j + 1], xs[j]
    return xs


@program((4.0, 3.0, 2.0, 1.0), (1.0, 2.0, 3.0, 4.0), (2.0, 4.0, 1.0, 3.0))
def insertion_sort(a, b, c, d):
    xs = [a, b, c, d]
    for i in range(1, len(xs)):
        key = xs[i]
        j = i - 1
        while j >= 0 and xs[j] > key:
            xs[j + 1] = xs[j]
            j -= 1
        xs[j + 1] = key
    return xs


@program((jnp.asarray([5.0, 2.0, 9.0, 1.0]),), (jnp.asarray([1.0, 2.0, 3.0, 4.0]),))
def selection_sort_array(xs):
    n = xs.shape[0]
    for i in range(n):
        smallest = i
        for j in range(i + 1, n):
            if xs[j] < xs[smallest]:
                smallest = j
        a, b = xs[i], xs[smallest]
        xs = xs.at[i].set(b).at[smallest].set(a)
    return xs


@program((jnp.asarray([2, 4, 1, 3, 5], jnp.int32),), (jnp.asarray([5, 4, 3, 2, 1], jnp.int32),))
def count_inversions(xs):
    count = 0
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            if xs[i] > xs[j]:
                count += 1
    return count


# =========================================================================================
# what cannot be staged: autoflow's own error at the user's line
# =========================================================================================

@program((10,), refuse=["s"])
def decimal_to_binary_string(n):
    # The string grows by one character an iteration: no carry of a static size holds it.
    s = ""
    while n > 0:
        s = str(n % 2) + s
        n //= 2
    return len(s)


@program((3.25,), refuse=[])
def float_digit_count(x):
    # The shortest text of a traced float is not computed.
    return len(str(x))


@program((12, 18), refuse=["gcd_recursive"])
def gcd_recursive(a, b):
    # The recursion's depth depends on a traced value.
    if b == 0:
        return a
    return gcd_recursive(b, a % b)


class _Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __repr__(self):
        return f"_Pair({self.a}, {self.b})"


@program((3, 4), refuse=[])
def object_text_length(a, b):
    # An object that is no pytree formats its traced attributes with its own __repr__.
    return len(repr(_Pair(a, b)))


@program((3, 4), (5, -2))
def object_printed_and_formatted(a, b):
    # (its own __repr__ formatted tracers while tracing: printed, a tracer's text; in an
    # f-string, autoflow's error. Made at run time from a copy holding the values now.)
    p = _Pair(a, b)
    print("pair", p, f"<{p}>")
    if a > b:
        print("bigger first:", _Pair(a - b, b))
    return a + b


@program((3,), (-1,))
def exception_printed(a):
    print(ValueError(a), KeyError("k", a * 2))
    return a


# =========================================================================================
# the runner
# =========================================================================================

@pytest.mark.parametrize("fn, cases, opts", PROGRAMS)
def test_program_matches_python(fn, cases, opts):
    static = opts["static"]
    if opts["refuse"] is not None:
        check_error(fn, *cases[0], names=opts["refuse"], static_argnums=static,
                    error=autoflow.AutoflowError)
        return
    for case in cases:
        check(fn, *case, static_argnums=static, grad=opts["grad"])
    for case, exc in opts["raises"]:
        check(fn, *case, static_argnums=static, expect_raise=exc)
    if opts["vmap"] and len(cases) > 1:
        check(fn, *cases[0], concrete=False, traced=False, vmap=cases[1:], static_argnums=static)


def test_there_are_enough_programs():
    assert len(PROGRAMS) >= 150


# -- no tracer's text in what a user sees ------------------------------------------------

# A tracer's text (`JitTracer(int32[])`, `Traced<ShapedArray(int32[])>with<...>`,
# `BatchTracer(...)`), not the name of an error class (`TracerBoolConversionError`).
TRACER_TEXT = re.compile(r"\b\w*Tracer\b|Traced<|ShapedArray\(")


def _outputs(thunk):
    """(what ``thunk`` printed, its result or exception's text, the exception or None)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            value = thunk()
            jax.block_until_ready(value)
            jax.effects_barrier()
            text, exc = repr(value), None
        except Exception as e:  # noqa: BLE001 - the text of any exception counts
            jax.effects_barrier()
            notes = "\n".join(getattr(e, "__notes__", ()))
            text, exc = f"{type(e).__name__}: {e}\n{notes}", e
    return out.getvalue(), text, exc


@pytest.mark.parametrize("fn, cases, opts", PROGRAMS)
def test_no_tracer_text_in_outputs(fn, cases, opts):
    """Every case under ``autoflow.jit`` and all cases under ``jax.vmap``: printed text,
    values and messages hold no tracer's text; what is printed and raised is Python's."""
    jitted = autoflow.jit(fn)
    runs = [(case, lambda case=case: jitted(*case)) for case in cases]
    runs += [(case, lambda case=case: jitted(*case)) for case, _ in opts["raises"]]
    for case, thunk in runs:
        printed, text, exc = _outputs(thunk)
        assert not TRACER_TEXT.search(printed + text), f"{fn.__name__}{case}: {printed}{text}"
        eager_printed, _, eager_exc = _outputs(lambda case=case: fn(*case))
        assert printed == eager_printed, f"{fn.__name__}{case}: printed {printed!r}, " \
                                         f"Python printed {eager_printed!r}"
        if eager_exc is not None and exc is not None and not isinstance(exc, autoflow.AutoflowError):
            assert str(exc) == str(eager_exc), f"{fn.__name__}{case}: {exc} != {eager_exc}"
    if opts["vmap"] and len(cases) > 1 and not opts["static"]:
        batched = [jnp.stack([jnp.asarray(c[i]) for c in cases]) for i in range(len(cases[0]))]
        printed, text, _ = _outputs(lambda: jax.vmap(autoflow.convert(fn))(*batched))
        assert not TRACER_TEXT.search(printed + text), f"{fn.__name__} vmap: {printed}{text}"


def test_no_tracer_text_in_the_error_reference(tmp_path, monkeypatch):
    """Every example of ``docs/error-reference.md``, run as the documentation tests run
    it: what it prints and the message of what it raises hold no tracer's text."""
    from tests import test_docs

    monkeypatch.chdir(tmp_path)
    page = test_docs.DOCS / "error-reference.md"
    blocks = [b for b in test_docs.blocks_of(page) if b.lang == "python" and b.skip is None
              and b.source_of is None]
    assert len(blocks) > 20
    space = {"__name__": "docs_error_reference_tracers"}
    module = type(sys)("docs_error_reference_tracers")
    sys.modules[module.__name__] = module
    seen = 0
    try:
        for block in blocks:
            path = tmp_path / f"error_reference_{block.line}.py"
            path.write_text(block.code)
            module.__file__ = str(path)
            code = compile(block.code, str(path), "exec")
            printed, text, _ = _outputs(lambda code=code: exec(code, module.__dict__))
            assert not TRACER_TEXT.search(printed + text), f"{block.where}: {printed}{text}"
            seen += 1
    finally:
        sys.modules.pop(module.__name__, None)
    del space
    assert seen == len(blocks)
