"""Python numbers against narrow arrays across the paths of staged statements, against
eager Python: the value each path gives is kept (``300`` against an int8 array is not
cast to int8), two Python numbers stay weakly typed (``3`` or ``4.5`` then ``+ bfloat16``
is a bfloat16, as in Python), ``enumerate``'s count is a Python int, and ``sum`` of a
traced array has Python's dtype (the items' own).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow


def int_or_float(x):
    if x > 1:
        r = 3
    else:
        r = 4.5
    return r + jnp.bfloat16(1)


def int_or_bool(x):
    r = 1 if x > 1 else True
    return r + jnp.int8(1)


def narrow_or_big(x):
    if x > 1:
        r = jnp.int8(5)
    else:
        r = 300
    return r


def half_or_big(x):
    if x > 1:
        return jnp.float16(1.5)
    return 1e6


def unsigned_or_negative(x):
    r = jnp.uint8(7) if x > 1 else -1
    return r


def loop_from_big(n):
    r = 1000
    for i in range(n):
        r = jnp.int8(i)
    return r


def counted(xs):
    s = jnp.int8(0)
    for k, x in enumerate(xs):
        s = s + k * x
    return s


def summed(xs):
    return sum(xs)


def _same(got, want, dtype=True):
    got, want = jnp.asarray(got), jnp.asarray(want)
    assert got.dtype == want.dtype or not dtype, (got.dtype, want.dtype)
    assert np.array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64)), (got, want)


@pytest.mark.parametrize("fn", [int_or_float, int_or_bool, narrow_or_big, half_or_big,
                                unsigned_or_negative], ids=lambda f: f.__name__)
def test_each_path_keeps_its_number(fn):
    # (a Python number and an array of another dtype on two paths: one dtype after the
    # `if`, which holds both values; two Python numbers: Python's weak type)
    mixed = fn in (narrow_or_big, half_or_big, unsigned_or_negative)
    xs = jnp.array([0.0, 2.0], jnp.float32)
    for x in xs:
        _same(autoflow.jit(fn)(x), fn(x), dtype=not mixed)
    lanes = jax.vmap(autoflow.convert(fn))(xs)
    want = [jnp.asarray(fn(x)) for x in xs]
    dtype = jnp.result_type(*want)  # (the lanes share one dtype)
    assert np.array_equal(np.asarray(lanes, np.float64), np.asarray(want, np.float64))
    assert lanes.dtype == dtype or mixed


def test_a_loop_that_runs_no_iteration_keeps_the_python_number():
    for n in (0, 3):
        assert int(autoflow.jit(loop_from_big)(jnp.int32(n))) == int(loop_from_big(n))


@pytest.mark.parametrize("dtype", [jnp.int8, jnp.uint8, jnp.float16])
def test_enumerate_counts_with_python_ints(dtype):
    xs = jnp.array([1, 2, 3], dtype)
    _same(autoflow.jit(counted)(xs), counted(xs))


@pytest.mark.parametrize("values, dtype", [([100, 100], jnp.int8), ([200, 100], jnp.uint8),
                                           ([1.5, 2.25], jnp.float16), ([True, True], jnp.bool_)])
def test_sum_of_a_traced_array_has_pythons_dtype(values, dtype):
    xs = jnp.array(values, dtype)
    got, want = autoflow.jit(summed)(xs), summed(xs)
    if dtype == jnp.bool_:
        assert int(got) == int(want) == 2
    else:
        _same(got, want)


def truncated(x):
    if x != 0:
        return int(x)
    return 0


@pytest.mark.parametrize("value, error", [(float("nan"), ValueError), (float("inf"), OverflowError),
                                          (-float("inf"), OverflowError), (3e9, OverflowError)])
def test_int_of_a_traced_float_raises_where_python_does(value, error):
    with pytest.raises(error):
        autoflow.jit(truncated)(jnp.float32(value)).block_until_ready()
    if value != 3e9:  # (Python's int has no limit; int32 does)
        with pytest.raises(error):
            truncated(jnp.float32(value))


def test_int_of_a_traced_float_truncates_as_python():
    xs = jnp.array([2.7, -2.7, 0.0, 1e6], jnp.float32)
    assert [int(autoflow.jit(truncated)(x)) for x in xs] == [truncated(x) for x in xs]
    assert [int(v) for v in jax.vmap(autoflow.convert(truncated))(xs)] == [truncated(x) for x in xs]
