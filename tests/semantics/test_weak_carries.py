"""A Python scalar carried through a traced loop keeps JAX's weak type (issue 44, 1).

Eagerly, ``s = 0.5`` combined with a float16 array is float16 after any number of
``s = s * 1.01``; so it is under ``jax.jit`` of a hand-written ``lax.while_loop`` whose
init is a Python scalar. A staged loop's carry that starts as a Python int or float
stays weakly typed while its body keeps it so, and the results' dtypes are the eager
run's: for float16, bfloat16, int8 and uint8 arrays, in ``while``, ``for`` over a traced
range, a ``for`` over an array's rows (a scan) and nested loops, under ``jit``, ``vmap``
and ``grad``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow.runtime import jax as jx

DTYPES = [jnp.float16, jnp.bfloat16, jnp.int8, jnp.uint8]
STARTS = {"int": 3, "float": 0.5}


def while_loop(h, n, s):
    i = 0
    while i < n:
        s = s * 2
        i += 1
    return h * s, s


def for_range(h, n, s):
    for i in range(n):
        s = s + i
    return h + s, s


def for_rows(h, n, s):
    for row in h:  # h: 2-D, a scan over its rows
        s = s + 1
    return h * s, s


def nested(h, n, s):
    for i in range(n):
        j = 0
        while j < i:
            s = s + 1
            j += 1
    return h - s, s


PROGRAMS = [while_loop, for_range, for_rows, nested]


def _h(dtype, rows=False):
    h = jnp.arange(1, 5, dtype=jnp.float32).reshape((2, 2) if rows else (4,))
    return h.astype(dtype)


def _dtypes(out):
    return [jnp.result_type(x) for x in out]


@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("start", STARTS, ids=str)
def test_results_have_the_eager_dtypes_under_jit(fn, start):
    s0 = STARTS[start]
    for dtype in DTYPES:
        h = _h(dtype, rows=fn is for_rows)
        want = fn(h, 3, s0)
        got = autoflow.jit(lambda h, n: fn(h, n, s0))(h, 3)
        assert _dtypes(got) == _dtypes(want), (dtype, _dtypes(got), _dtypes(want))
        for g, w in zip(got, want):
            assert np.allclose(np.asarray(g, np.float32), np.asarray(w, np.float32))


@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_results_have_the_eager_dtypes_under_vmap(fn):
    for dtype, s0 in ((jnp.float16, 0.5), (jnp.int8, 3)):
        h = _h(dtype, rows=fn is for_rows)
        hs = jnp.stack([h, h + 1])
        ns = jnp.array([2, 3])
        got = jax.vmap(autoflow.convert(lambda h, n: fn(h, n, s0)))(hs, ns)
        for k in range(2):
            want = fn(hs[k], int(ns[k]), s0)
            assert [x.dtype for x in got] == _dtypes(want), (dtype, k)
            for g, w in zip(got, want):
                assert np.allclose(np.asarray(g[k], np.float32), np.asarray(w, np.float32))


@pytest.mark.parametrize("fn", [while_loop, for_range, nested], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=lambda d: jnp.dtype(d).name)
def test_gradients_have_the_eager_dtype(fn, dtype):
    h = _h(dtype)

    def loss(h, n):
        return fn(h, n, 0.5)[0].sum()

    want = jax.grad(loss)(h, 3)
    got = jax.grad(autoflow.convert(loss))(h, jnp.int32(3))
    assert got.dtype == want.dtype == dtype
    assert np.allclose(np.asarray(got, np.float32), np.asarray(want, np.float32))


def test_a_carry_that_meets_a_strong_value_becomes_strong_as_in_python():
    # s starts weak; the body multiplies it by a float16 array element: from then on it
    # is a float16 value (JAX's promotion), as eagerly
    def f(h, n):
        s = 0.5
        for i in range(n):
            s = s * h[0]
        return s * jnp.ones(2, jnp.float32), s

    h = _h(jnp.float16)
    want = f(h, 3)
    got = autoflow.jit(f)(h, 3)
    assert _dtypes(got) == _dtypes(want)


def test_a_carry_promoted_from_int_to_float_stays_weak():
    def f(h, n):
        s = 1
        i = 0
        while i < n:
            s = s * 1.5
            i += 1
        return h * s

    h = _h(jnp.bfloat16)
    assert autoflow.jit(f)(h, 2).dtype == f(h, 2).dtype == jnp.bfloat16
    assert np.allclose(np.asarray(autoflow.jit(f)(h, 2), np.float32),
                       np.asarray(f(h, 2), np.float32))



def returned_counter(x):
    it = 0
    while it < 10:
        it += 1
        if x * it > 5.0:
            return it
    return -1


def returned_midpoint(x):
    lo, hi = 0.0, 4.0
    while hi - lo > 1e-3:
        mid = 0.5 * (lo + hi)
        if abs(mid * mid - x) < 1e-6:
            return mid
        if mid * mid < x:
            lo = mid
        else:
            hi = mid
    return lo


def first_bound_in_the_loop(x):
    k = 0
    while k < 3:
        found = k * 2  # (first bound here: a Python int)
        k += 1
        if x > k:
            break
    return found


def _with_small(fn, dtype):
    def run(x, h):
        return fn(x) + h  # (the value's weak type decides the sum's dtype)
    return run


@pytest.mark.skipif(not jx.primitives(), reason="this JAX has no hijax primitives (its public "
                    "path keeps such a value strongly typed under the test runner)")
@pytest.mark.parametrize("fn, dtype", [(returned_counter, jnp.int8), (returned_midpoint, jnp.float16),
                                       (first_bound_in_the_loop, jnp.int8),
                                       (returned_midpoint, jnp.bfloat16)])
def test_a_value_first_bound_in_a_loop_keeps_its_weak_type(fn, dtype):
    # (a `return` in a loop, a variable first bound in its body: the value a Python number
    # gives them was strongly typed: `counter() + int8` was int32, eagerly int8)
    h = jnp.ones((2,), dtype)
    for x in (2.0, 0.5, 9.0):
        want = _with_small(fn, dtype)(jnp.float32(x), h)
        got = autoflow.jit(_with_small(fn, dtype))(jnp.float32(x), h)
        assert got.dtype == want.dtype == dtype, (x, got.dtype, want.dtype)
        np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32))
        weak = autoflow.jit(fn)(jnp.float32(x)).weak_type
        assert weak == jnp.asarray(fn(jnp.float32(x))).weak_type, x


# A traced `if` whose paths give a Python number and an array of its dtype: JAX's
# promotion of the two is strong (as `lax.cond` and `jnp.where` give), and so is Python's
# result on the array's path; the merged value was weak, and `+ float16` then float16.

def clipped(x, h):
    if x < -1.0:
        y = -1.0
    else:
        y = x
    return y + h


def clipped_by_return(x, h):
    if x < -1.0:
        return -1.0 + h
    return x + h


def grown_until_returned(a, h):
    x = 1.0
    for i in range(3):
        if x > 100.0:
            return x + h
        x = x + a
    return x + h


@pytest.mark.parametrize("fn", [clipped, clipped_by_return, grown_until_returned],
                         ids=lambda f: f.__name__)
def test_a_python_number_against_an_array_on_the_other_path_is_strong(fn):
    x, h = jnp.float32(0.5), jnp.float16(0.25)
    want = fn(x, h)
    got = autoflow.jit(fn)(x, h)
    assert got.dtype == want.dtype == jnp.float32 and not jx.typeof(got).weak_type
    np.testing.assert_allclose(got, want, rtol=1e-6)
    lanes = jax.vmap(autoflow.convert(fn), in_axes=(0, None))(jnp.array([0.5, 2.0]), h)
    assert lanes.dtype == jnp.float32
    np.testing.assert_allclose(lanes, [fn(jnp.float32(v), h) for v in (0.5, 2.0)], rtol=1e-6)


def bucket_of(x, small):
    return int(x) * small


def scaled_float(n, h):
    return float(n) * h


@pytest.mark.parametrize("fn, args", [
    (bucket_of, (jnp.float32(2.7), jnp.int8(100))),  # (Python: 2 * int8(100) wraps: -56)
    (scaled_float, (jnp.int32(3), jnp.float16(0.1))),
], ids=lambda v: getattr(v, "__name__", ""))
def test_int_and_float_of_a_traced_value_adapt_as_pythons_numbers_do(fn, args):
    # (they were strong int32/float32 arrays, where Python's int and float adapt to the
    # array they meet: -56 int8 became 200 int32, a float16 product float32)
    want = fn(*args)
    got = autoflow.jit(fn)(*args)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32),
                               rtol=1e-3)


def root_scaled(x, h):
    import math

    return math.sqrt(x) * h


def gcd_scaled(a, b, small):
    import math

    return math.gcd(a, b) * small


def test_math_of_a_traced_value_adapts_as_pythons_numbers_do():
    for fn, args in [(root_scaled, (jnp.float32(2.0), jnp.float16(0.5))),
                     (gcd_scaled, (jnp.int32(12), jnp.int32(18), jnp.int8(50)))]:
        want, got = fn(*args), autoflow.jit(fn)(*args)
        assert got.dtype == want.dtype, fn.__name__
        np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32),
                                   rtol=1e-3)


def fib_mod_scaled(n, m, small):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, (a + b) % m
    return a * small


def extended_euclid_scaled(a, b, small):
    old_s, s = 1, 0
    while b != 0:
        q = a // b
        a, b = b, a - q * b
        old_s, s = s, old_s - q * s
    return old_s * small


def test_a_carry_rotated_from_a_strong_one_is_strong():
    # (`a, b = b, f(a, b)`: after two iterations `a` is what `b` was, strong in Python; it
    # stayed weak, and an int8 product wrapped: -91 where Python gives 165)
    for fn, args in [(fib_mod_scaled, (jnp.int32(10), jnp.int32(1000), jnp.int8(3))),
                     (extended_euclid_scaled, (jnp.int32(240), jnp.int32(46), jnp.int8(100)))]:
        want, got = fn(*args), autoflow.jit(fn)(*args)
        assert got.dtype == want.dtype and int(got) == int(want), fn.__name__


# An array carry (not a Python number) whose dtype the body changes (`x / 2` of an int32):
# the loop carries the body's dtype. Where it runs, that is Python's value; where it runs
# no iteration, Python keeps the int32, which the compiled loop cannot give (its float32
# of an int32 above 2**24 is another number): autoflow's error when the compiled code
# runs, naming the variable and both dtypes (it returned the float32, silently).

def halve_while_large(n):
    x = n
    while x > 1000:
        x = x / 2
    return x


def halve_over_a_traced_range(n, k):
    x = n
    for _ in range(k):
        x = x / 2
    return x


def test_a_carry_whose_dtype_the_body_changes():
    from .oracle import I, check

    check(halve_while_large, I(5000), vmap=[(I(9000),), (I(2 ** 24 + 1),)])
    check(halve_over_a_traced_range, I(2 ** 24 + 1), I(2), vmap=[(I(7), I(1))])
    assert halve_while_large(I(2 ** 24 + 1)).dtype == jnp.float32  # (the oracle: runs)
    assert halve_while_large(I(7)).dtype == jnp.int32  # (the oracle: runs no iteration)
    said = r"ran no iteration, so `x` \(int32\[\] before it, float32\[\] after an iteration\)"
    with pytest.raises(autoflow.ConversionError, match=said):
        jax.block_until_ready(autoflow.jit(halve_while_large)(I(7)))
    with pytest.raises(Exception, match=said):
        jax.block_until_ready(jax.jit(jax.vmap(autoflow.convert(halve_while_large)))(
            jnp.array([5000, 7], jnp.int32)))
    with pytest.raises(autoflow.ConversionError, match=said):
        jax.block_until_ready(autoflow.jit(halve_over_a_traced_range)(I(2 ** 24 + 1), I(0)))
    with pytest.raises(Exception, match=said):  # (JAX's JaxRuntimeError, the message in it)
        jax.block_until_ready(jax.jit(autoflow.convert(halve_while_large))(I(7)))
    # (a Python number before the loop takes the loop's dtype, as in JAX arithmetic)
    assert autoflow.jit(halve_while_large)(7) == 7
