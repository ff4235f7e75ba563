"""Code other people write (issue 35), against Python's own run of it.

The oracle is the plain function run eagerly; where Python's value cannot be
an array, autoflow's own error at the user's line.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

import numpy as np
import pytest

import autoflow
from autoflow import ConversionError


# ---- `and`/`or` with an operand that is no array -------------------------------------------

def and_name(x, name):
    if x > 0 and name:
        return x
    return -x


def or_none(x):
    if x or None:
        return x + 1
    return x


def while_and_list(x, opts):
    while x < 10 and opts:
        x = x * 2
    return x


def none_check_first(x, y=None):
    if y is not None and x > 0:
        return x + y
    return x * 2


@pytest.mark.parametrize("fn, args, static", [
    (and_name, (1.0, "a"), (1,)), (and_name, (1.0, None), (1,)), (and_name, (1.0, ""), (1,)),
    (and_name, (-1.0, "a"), (1,)),
    (or_none, (0.0,), ()), (or_none, (2.0,), ()),
    (while_and_list, (1.0, [1]), ()), (while_and_list, (1.0, []), ()),
    (none_check_first, (1.0,), ()), (none_check_first, (1.0, 2.0), ()),
])
def test_and_or_with_non_array_operands_as_conditions(fn, args, static):
    want = fn(*args)
    if static:
        got = autoflow.jit(fn, static_argnums=static)(*args)
    else:  # (a list cannot be a static argument: closed over instead)
        got = autoflow.jit(lambda x: fn(x, *args[1:]))(args[0])
    assert np.allclose(np.asarray(got), np.asarray(want))


def or_none_value(x):
    return x or None


def test_and_or_value_that_no_array_can_hold_is_autoflows_error():
    assert or_none_value(1.0) == 1.0
    with pytest.raises(ConversionError) as info:
        autoflow.jit(or_none_value)(1.0)
    text = str(info.value)
    assert "return x or None" in text and "`or`" in text and "None" in text
    assert "test_long_tail.py" in text


# ---- `range` objects with traced bounds ----------------------------------------------------

def range_facts(n, x):
    r = range(2, n, 3)
    return len(r) + sum(r) + r.start + r.step + x


def range_reversed_facts(n):
    r = range(n, 0, -2)
    return len(r), sum(r, 10), max(r), min(r), r[0], r[-1]


def range_to_helper(n, x):
    return _count_up(range(n), x)


def _count_up(r, x):
    for i in r:
        x = x + i
    return x, len(r)


def range_max(n):
    return max(range(n))


@pytest.mark.parametrize("fn, args", [
    (range_facts, (10, 1.0)), (range_facts, (2, 1.0)), (range_facts, (0, 1.0)),
    (range_reversed_facts, (7,)), (range_reversed_facts, (8,)),
    (range_to_helper, (5, 1.0)), (range_to_helper, (0, 1.0)),
    (range_max, (4,)),
])
def test_range_objects_with_traced_bounds(fn, args):
    want = fn(*args)
    got = autoflow.jit(fn)(*args)
    assert np.allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float))


def test_max_of_an_empty_traced_range_raises_pythons_valueerror():
    with pytest.raises(ValueError) as eager:
        range_max(0)
    g = autoflow.jit(range_max)
    assert g(3) == 2
    with pytest.raises(ValueError) as info:
        np.asarray(g(0))
    assert str(info.value).splitlines()[0] == str(eager.value)


# ---- math on traced scalars ----------------------------------------------------------------

def math_mix(x):
    y = math.exp(x) + math.log(x + 3.0) + math.log(x + 3.0, 2) + math.sqrt(abs(x))
    k = math.floor(x) + math.ceil(x) + math.trunc(x)
    return y + math.fabs(x) + math.atan2(x, 2.0) + math.hypot(x, 1.0) + k * 1.0, \
        math.isclose(x, 1.5), math.isfinite(x)


@pytest.mark.parametrize("x", [1.5, -2.25, 0.0])
def test_math_functions_of_traced_scalars(x):
    want = math_mix(x)
    got = autoflow.jit(math_mix)(x)
    for w, g in zip(want, got):
        assert np.allclose(np.asarray(g, dtype=float), float(w), rtol=1e-5)
    assert autoflow.convert(math_mix)(x) == want  # concrete: Python's own math


def math_special(x):
    return math.erf(x) + math.erfc(x) * 2.0 + math.lgamma(x + 3.0) + math.gamma(x + 0.5)


@pytest.mark.parametrize("x", [1.5, -0.25])
def test_math_special_functions_of_traced_scalars(x):
    # (jax.scipy.special, imported at the first such call rather than with the runtime)
    want = math_special(x)
    got = autoflow.jit(math_special)(x)
    assert np.allclose(float(got), want, rtol=1e-5)


# ---- shape-[1] predicates with early exits -------------------------------------------------

def break_on_size_one(x):
    while x < 10:
        x = x + 1
        if x > 5:
            break
    return x


def while_true_size_one(x):
    i = 0
    while True:
        i += 1
        x = x * 2
        if x > 50:
            break
    return x, i


def return_in_loop_size_one(x, n):
    for i in range(n):
        if x[0] > 3:
            return x * i
        x = x + 1
    return x


@pytest.mark.parametrize("fn, args", [
    (break_on_size_one, (np.array([1], np.int32),)), (break_on_size_one, (np.array([12], np.int32),)),
    (while_true_size_one, (np.array([1.0], np.float32),)),
    (return_in_loop_size_one, (np.array([1.0], np.float32), 5)),
    (return_in_loop_size_one, (np.array([1.0], np.float32), 2)),
])
def test_shape_one_predicates_with_early_exits(fn, args):
    want = fn(*args)
    got = autoflow.jit(fn)(*args)
    for w, g in zip(want if isinstance(want, tuple) else (want,),
                    got if isinstance(got, tuple) else (got,)):
        assert np.shape(g) == np.shape(w) and np.allclose(np.asarray(g), np.asarray(w))


# ---- generators ----------------------------------------------------------------------------

def counting(x):
    yield x
    yield x + 1


def test_jit_of_a_generator_function_is_autoflows_error():
    assert list(counting(1.0)) == [1.0, 2.0]
    with pytest.raises(ConversionError) as info:
        autoflow.jit(counting)(1.0)
    text = str(info.value)
    assert "`counting` is a generator function" in text and "def counting(x):" in text


# ---- tracebacks name the user's function -----------------------------------------------------

def fails_in_a_branch(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = n * undefined_name  # noqa: F821 - the error under test
        steps += 1
    return steps


def test_traceback_frames_are_named_after_the_users_function():
    import traceback

    with pytest.raises(NameError) as info:
        autoflow.jit(fails_in_a_branch)(6)
    names = [f.name for f in traceback.extract_tb(info.value.__traceback__)
             if f.filename == __file__][1:]  # (after this test's own frame)
    assert names and set(names) == {"fails_in_a_branch"}


def loop_over_scalar(x, n):
    for i in n:
        x = x + i
    return x


def test_iterating_a_traced_scalar_names_it_and_suggests_range():
    with pytest.raises(TypeError):
        loop_over_scalar(1.0, 3)  # Python
    with pytest.raises(TypeError) as info:
        autoflow.jit(loop_over_scalar)(1.0, 3)
    assert isinstance(info.value, ConversionError)
    text = str(info.value)
    assert "`n`" in text and "range(n)" in text and "for i in n:" in text


# ---- variables bound in an earlier iteration ---------------------------------------------------

def previous_value(x, n):
    for i in range(n):
        if i > 0:
            x = x + prev  # noqa: F821 - bound in an earlier iteration
        prev = x * 2  # noqa: F841 - read by the next iteration
    return x


def previous_value_while(x, n):
    i = 0
    while i < n:
        if i > 0:
            x = x + last  # noqa: F821
        last = x  # noqa: F841 - read by the next iteration
        i += 1
    return x


def read_before_any_binding(x, n):
    for i in range(n):
        if i >= 0:
            x = x + prev  # noqa: F821 - Python raises UnboundLocalError here
        prev = x  # noqa: F841 - read by the next iteration
    return x


@pytest.mark.parametrize("fn", [previous_value, previous_value_while, read_before_any_binding])
@pytest.mark.parametrize("n", [3, 1, 0])
def test_variables_bound_in_an_earlier_iteration(fn, n):
    g = autoflow.jit(fn)
    try:
        want = fn(1.0, n)
    except UnboundLocalError as e:
        with pytest.raises(UnboundLocalError) as info:
            np.asarray(g(1.0, n))
        assert str(info.value).splitlines()[0] == str(e)
    else:
        assert float(g(1.0, n)) == want
        assert float(autoflow.jit(fn, static_argnums=1)(1.0, n)) == want


# ---- class 2: a carry whose shape settles in the first iteration ------------------------------

class _Box:
    pass


def settles_attr(x, n):
    o = _Box()
    o.b = 0
    for i in range(n):
        o.b = o.b + x * i
    return o.b


def settles_while(x, n):
    b = 0
    i = 0
    while i < n:
        b = b + x
        i += 1
    return b, i


def settles_test(x):
    b = 0
    while jnp.sum(b) < 10:
        b = b + x
    return b


def settles_break(x, n):
    total = 0
    for i in range(n):
        total = total + x[None, :] * i
        if total.sum() > 20:
            break
    return total


@pytest.mark.parametrize("fn, args", [
    (settles_attr, (jnp.array([1.5]), 4)),
    (settles_while, (jnp.array([1.5, 2.0]), 3)),
    (settles_test, (jnp.array([1.5]),)),
    (settles_break, (jnp.array([1.0, 2.0, 3.0]), 9)),
    (settles_break, (jnp.array([1.0, 2.0, 3.0]), 1)),
])
def test_a_carry_whose_shape_settles_in_the_first_iteration(fn, args):
    want = fn(*args)
    got = autoflow.jit(fn)(*args)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        assert np.shape(g) == np.shape(w) and np.allclose(g, w)


def test_a_settling_carry_under_vmap_and_grad():
    xs = jnp.array([[1.0], [2.0], [3.0]])
    ns = jnp.array([1, 2, 3])
    got = jax.vmap(autoflow.convert(settles_while))(xs, ns)
    want = [settles_while(x, int(n)) for x, n in zip(xs, ns)]
    assert np.allclose(got[0], np.stack([w[0] for w in want]))
    g = jax.grad(lambda x: autoflow.convert(settles_while)(x, 3)[0].sum())(jnp.array([2.0]))
    assert np.allclose(g, [3.0])


def test_a_settling_carry_in_a_loop_that_runs_no_iteration_is_autoflows_error():
    g = autoflow.jit(settles_while)
    assert np.allclose(g(jnp.array([1.5]), 2)[0], [3.0])
    with pytest.raises(autoflow.ConversionError, match="ran no iteration.*`b`"):
        jax.block_until_ready(g(jnp.array([1.5]), 0))
        jax.effects_barrier()


# ---- `x in range(...)` with a traced operand or bound ------------------------------------------

def in_range(x, lo, hi, step):
    hits = 0
    if x in range(lo, hi, step):
        hits += 1
    if x not in range(hi):
        hits += 10
    return hits


@pytest.mark.parametrize("args", [
    (3, 2, 9, 1), (9, 2, 9, 1), (4, 2, 9, 2), (5, 2, 9, 2), (-1, 2, 9, 1),
    (4, 10, 0, -2), (0, 10, 0, -2), (10, 10, 0, -2), (3, 5, 5, 1),
])
def test_in_range_with_traced_values(args):
    want = in_range(*args)
    assert int(autoflow.jit(in_range)(*args)) == want  # everything traced
    assert int(autoflow.jit(in_range, static_argnums=(1, 2, 3))(*args)) == want
    floats = (float(args[0]),) + args[1:]  # 2.0 in range(5) holds, as in Python
    assert int(autoflow.jit(in_range, static_argnums=(1, 2, 3))(*floats)) == in_range(*floats)
    assert int(autoflow.jit(in_range, static_argnums=(1, 2, 3))(args[0] + 0.5, *args[1:])) \
        == in_range(args[0] + 0.5, *args[1:])


@pytest.mark.parametrize("items", [[1.0, math.nan, 3.0], [math.nan, 1.0, 2.0], [1.0, math.nan],
                                   [math.nan, math.nan], [2.0, -1.0, 2.0], [5.0]])
def test_max_and_min_of_an_array_with_nans_are_pythons(items):
    def extremes(a):
        return max(a), min(a)
    got = autoflow.jit(extremes)(jnp.array(items))
    want = extremes(items)
    assert np.allclose(got, want, equal_nan=True)


def in_a_held_range(x, n):
    r = range(1, n, 2)
    return x in r, x not in r


@pytest.mark.parametrize("args", [(3, 9), (4, 9), (9, 9), (7, 9), (1.0, 3), (-1, 9)])
def test_in_a_range_held_in_a_variable_with_a_traced_bound(args):
    got = autoflow.jit(in_a_held_range)(*args)
    assert tuple(bool(g) for g in got) == in_a_held_range(*args)
