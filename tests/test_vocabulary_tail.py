"""The tail of issue 34's vocabulary: reductions over a filtered comprehension,
``bool``/``operator.truth`` in conditions, a traced value written into a NumPy
buffer, and ``range`` with a traced step of 0.

Eager Python is the oracle: each function runs eagerly on the same inputs,
then converted on concrete inputs (``autoflow.convert``: the same values of
the same types), under ``autoflow.jit`` and under ``jax.vmap``. Where Python
raises, autoflow raises the same exception; where the answer would depend on
a run-time emptiness Python reports as ``ValueError``, autoflow's own error
says what to do.
"""

from __future__ import annotations

import operator
import re
import traceback
from operator import truth

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow.errors import ConversionError

from .equivalence import assert_same
from .test_errors import check_message, marked_line, source_file

XS = np.array([1.0, 5.0, 3.0, 7.0, 2.0, 5.0], np.float32)
THRESHOLDS = (0.5, 3.0, 5.0, 10.0)  # (10.0 keeps no item)


def eager_python(fn, *args):
    """``fn(*args)``, or the exception it raises (type and message)."""
    try:
        return fn(*args), None
    except Exception as e:  # noqa: BLE001 - the oracle's exception is the result
        return None, e


def same_types(actual, expected, context):
    for a, e in zip(jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(expected)):
        assert type(a) is type(e), f"{context}: {type(a)} != eager {type(e)}"


def check_everywhere(fn, xs, thresholds=THRESHOLDS):
    """``fn(xs, t)`` against eager Python: concrete (a list of floats), jitted
    (a traced array; a list of traced scalars), and vmapped over ``t``."""
    for t in thresholds:
        as_list = [float(v) for v in xs]
        expected = fn(as_list, t)
        concrete = autoflow.convert(fn)(as_list, t)
        assert_same(concrete, expected, f"{fn.__name__}(t={t}) concrete")
        same_types(concrete, expected, f"{fn.__name__}(t={t}) concrete")

        expected = fn(jnp.asarray(xs), jnp.float32(t))
        assert_same(autoflow.jit(fn)(xs, np.float32(t)), expected, f"{fn.__name__}(t={t}) jit")
        assert_same(autoflow.jit(fn)(as_list, t), fn(as_list, t),
                    f"{fn.__name__}(t={t}) jit, a list of traced scalars")
    ts = np.asarray(thresholds, np.float32)
    batched = jax.vmap(autoflow.convert(fn), in_axes=(None, 0))(jnp.asarray(xs), ts)
    for i, t in enumerate(ts):
        lane = jax.tree_util.tree_map(lambda v, i=i: v[i], batched)
        expected = jax.tree_util.tree_map(jnp.asarray, fn(jnp.asarray(xs), t))
        assert_same(lane, expected, f"{fn.__name__}(t={t}) vmap")


# ---------------------------------------------------------------------------
# 1. reductions over a comprehension with an `if`
# ---------------------------------------------------------------------------

def sum_gen(xs, t):
    return sum(x for x in xs if x > t)


def sum_start(xs, t):
    return sum((x * 2 for x in xs if x > t), 10.0)


def sum_start_keyword(xs, t):
    return sum([x - t for x in xs if x >= t], start=1.5)


def sum_listcomp(xs, t):
    return sum([x * x for x in xs if x < t])


def sum_of_tests(xs, t):
    return sum(x > 4 for x in xs if x > t)  # booleans, summed as integers


def len_listcomp(xs, t):
    return len([x for x in xs if x > t])


def any_gen(xs, t):
    return any(x > 2 * t for x in xs if x > t)


def all_gen(xs, t):
    return all(x > t + 1 for x in xs if x > t)


def all_listcomp(xs, t):
    return all([x != 5 for x in xs if x > t])


def max_default(xs, t):
    return max((x for x in xs if x > t), default=-1.0)


def min_default(xs, t):
    return min((x + 1 for x in xs if x > t), default=99.0)


def max_key(xs, t):
    return max((x for x in xs if x > t), key=lambda v: (v - 4) ** 2, default=0.0)


def two_ifs_and_enumerate(xs, t):
    return sum(x * i for i, x in enumerate(xs) if x > t if i % 2 == 0)


def nested_fors(xs, t):
    return sum(x * y for x in xs for y in (1.0, 2.0) if x * y > t)


def in_a_loop(xs, t):
    total = 0.0
    for k in range(3):
        total = total + sum(x for x in xs if x > t + k)
    return total


REDUCTIONS = [sum_gen, sum_start, sum_start_keyword, sum_listcomp, sum_of_tests, len_listcomp,
              any_gen, all_gen, all_listcomp, max_default, min_default, max_key,
              two_ifs_and_enumerate, nested_fors, in_a_loop]


@pytest.mark.parametrize("fn", REDUCTIONS, ids=lambda f: f.__name__)
def test_filtered_reductions_match_python(fn):
    check_everywhere(fn, XS)


def test_the_filter_is_a_mask_not_a_refusal():
    # What the rewriter makes: the test and a thunk for the item.
    src = autoflow.to_source(sum_gen)
    assert "af.filtered(" in src and "python_condition" not in src, src


@pytest.mark.parametrize("fn", [sum_gen, len_listcomp, any_gen, max_default],
                         ids=lambda f: f.__name__)
def test_a_traced_array_is_reduced_at_once_not_unrolled(fn):
    # The staged program does not grow with the array's length.
    sizes = []
    for n in (4, 400):
        jaxpr = jax.make_jaxpr(autoflow.convert(fn))(jnp.ones(n), 0.5)
        sizes.append(len(jaxpr.jaxpr.eqns))
    assert sizes[0] == sizes[1], sizes


def sum_rows(m, t):
    return sum(row for row in m if row[0] > t)


def test_rows_of_a_traced_matrix():
    m = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    for t in (-1.0, 4.0, 20.0):
        expected = sum_rows(jnp.asarray(m), jnp.float32(t))
        assert_same(autoflow.jit(sum_rows)(m, np.float32(t)), jnp.broadcast_to(
            jnp.asarray(expected), (3,)), f"t={t}")


def max_first(xs, t):
    return max((x for x in xs if x > t), key=abs, default=0.0)


def test_max_picks_the_first_largest_and_keeps_nan_as_python_does():
    # key=abs ties -3 and 3: Python keeps the first.
    ties = np.array([1.0, -3.0, 3.0, 2.0], np.float32)
    check_everywhere(max_first, ties, thresholds=(-5.0, 0.0, 2.5))
    nan_first = np.array([np.nan, 3.0, 1.0], np.float32)
    nan_later = np.array([1.0, np.nan, 3.0], np.float32)
    for xs in (nan_first, nan_later):
        for t in (-1.0, 2.0):
            assert_same(autoflow.jit(max_default)(xs, np.float32(t)),
                        max_default(jnp.asarray(xs), jnp.float32(t)), f"{xs} t={t}")
            assert_same(autoflow.jit(min_default)(xs, np.float32(t)),
                        min_default(jnp.asarray(xs), jnp.float32(t)), f"{xs} t={t}")


def traced_and_static_tests(xs, t):
    # a static test on the index, a traced one on the value
    return sum(x for i, x in enumerate(xs) if i != 1 and x > t), \
        max((x for i, x in enumerate(xs) if i == 0 or x > t))


def test_static_and_traced_tests_mixed():
    # `i == 0` keeps the first item on every path: `max` needs no default.
    check_everywhere(traced_and_static_tests, XS)


def effects_in_order(xs, t, log):
    found = any(log.append(("item", x)) or x > t for x in xs if log.append(("test", x)) or x > 0)
    return found


def test_concrete_reductions_are_lazy_as_python():
    # `any` stops at the first true item, and each test runs before its item.
    for t in (0.0, 4.0, 100.0):
        xs = [-1.0, 2.0, 5.0, 3.0]
        log_py, log_af = [], []
        assert effects_in_order(xs, t, log_py) == autoflow.convert(effects_in_order)(xs, t, log_af)
        assert log_af == log_py, (t, log_af, log_py)


def max_no_default(xs, t):
    return max(x for x in xs if x > t)  # ERROR


def min_none_default(xs, t):
    return min((x for x in xs if x > t), default=None)  # ERROR


def test_max_of_possibly_empty_needs_a_default():
    # Concrete: Python's own answer, and Python's ValueError when nothing is kept.
    assert autoflow.convert(max_no_default)([1.0, 5.0], 2.0) == max_no_default([1.0, 5.0], 2.0)
    _, expected = eager_python(max_no_default, [1.0, 5.0], 9.0)
    with pytest.raises(type(expected), match=re.escape(str(expected))):
        autoflow.convert(max_no_default)([1.0, 5.0], 9.0)
    # Traced: whether any item is kept is known at run time only.
    with pytest.raises(ConversionError) as info:
        autoflow.jit(max_no_default)(XS, np.float32(2.0))
    check_message(info.value, max_no_default, mentions=["default=", "jnp.max", "ValueError"])
    with pytest.raises(ConversionError) as info:
        autoflow.jit(min_none_default)(XS, np.float32(2.0))
    check_message(info.value, min_none_default, mentions=["None", "default"])
    assert autoflow.convert(min_none_default)([1.0], 2.0) is None


def if_before_last_for(xs, t):
    return sum(x * y for x in xs if x > t for y in (1.0, 2.0))  # ERROR


def test_an_if_before_the_last_for_still_reports():
    # It decides how often the inner `for` runs: autoflow's clear error, never a wrong value.
    assert autoflow.convert(if_before_last_for)([1.0, 5.0], 2.0) == if_before_last_for([1.0, 5.0], 2.0)
    with pytest.raises(ConversionError) as info:
        autoflow.jit(if_before_last_for)(XS, np.float32(2.0))
    check_message(info.value, if_before_last_for, mentions=["comprehension"])


# ---------------------------------------------------------------------------
# 2. bool(x) and operator.truth(x) in conditions
# ---------------------------------------------------------------------------

def bool_in_if(x):
    y = x
    if bool(x > 0):
        y = x * 2
    return y


def truth_in_while(x):
    n = 0
    while operator.truth(x > 1):
        x = x / 2
        n += 1
    return x, n


def bare_truth_in_if(x):
    return x + 1 if truth(x - 3) else x - 1


def bool_and(x, y):
    z = 0.0
    if bool(x) and y > 1:
        z = x + y
    return z


def bool_value(x):
    return bool(x), operator.truth(x - 1.0)


class Probe:
    def truth(self, v):  # a method called `truth`: called as written
        return v * 10


def method_named_truth(x):
    return Probe().truth(x)


@pytest.mark.parametrize("fn,args", [
    (bool_in_if, (1.5,)), (bool_in_if, (-2.0,)),
    (truth_in_while, (20.0,)), (truth_in_while, (0.5,)),
    (bare_truth_in_if, (3.0,)), (bare_truth_in_if, (5.0,)),
    (bool_and, (0.0, 3.0)), (bool_and, (2.0, 3.0)), (bool_and, (2.0, 0.5)),
    (bool_value, (0.0,)), (bool_value, (1.0,)),
    (method_named_truth, (2.0,)),
], ids=lambda a: getattr(a, "__name__", str(a)))
def test_truth_conversions_stage_like_conditions(fn, args):
    expected = fn(*args)
    concrete = autoflow.convert(fn)(*args)
    assert_same(concrete, expected, "concrete")
    same_types(concrete, expected, "concrete")
    assert_same(autoflow.jit(fn)(*args), expected, "jit")
    batch = [np.asarray([a, a + 1.0], np.float32) for a in args]
    out = jax.vmap(autoflow.convert(fn))(*batch)
    for i in range(2):
        assert_same(jax.tree_util.tree_map(lambda v, i=i: v[i], out),
                    fn(*[b[i] for b in batch]), f"vmap lane {i}")


@autoflow.do_not_convert
def _library_truth(v):
    return operator.truth(v)


def bool_conversion_in_library(x):
    return _library_truth(x > 0)  # ERROR


def test_a_bool_conversion_error_never_says_shape():
    with pytest.raises(jax.errors.TracerBoolConversionError) as info:
        autoflow.jit(bool_conversion_in_library)(1.0)
    msg = str(info.value)
    assert isinstance(info.value, autoflow.AutoflowError)
    assert "shape" not in msg, msg
    for advice in ("truth value", "jnp.where", "lax.cond", "static"):
        assert advice in msg, msg


@autoflow.do_not_convert
def _library_float(v):
    return float(v)


def float_of_traced_int(n):
    return _library_float(n * 2)  # ERROR


def test_a_conversion_of_an_int_is_not_a_shape_error():
    # JAX's text says "traced array with shape int32[]" of every value: not a shape.
    with pytest.raises(Exception) as info:
        autoflow.jit(float_of_traced_int)(3)
    assert isinstance(info.value, autoflow.AutoflowError)
    assert "used as a shape" not in str(info.value), str(info.value)


# ---------------------------------------------------------------------------
# 3. a traced value written into a NumPy buffer
# ---------------------------------------------------------------------------

def numpy_buffer(x, n):
    buf = np.zeros(n)
    for i in range(n):
        buf[i] = x * i  # ERROR
    return buf


def numpy_buffer_augmented(x):
    buf = np.ones(3)
    buf[1] += x  # ERROR
    return buf


def jnp_buffer(x, n):
    buf = jnp.zeros(n)
    for i in range(n):
        buf = buf.at[i].set(x * i)
    return buf


def test_traced_value_into_a_numpy_buffer_is_autoflows_error():
    # Concrete: NumPy, as Python runs it.
    assert_same(autoflow.convert(numpy_buffer)(2.0, 4), numpy_buffer(2.0, 4))
    assert type(autoflow.convert(numpy_buffer)(2.0, 4)) is np.ndarray
    with pytest.raises(ConversionError) as info:
        autoflow.jit(numpy_buffer, static_argnames="n")(2.0, 4)
    msg = check_message(info.value, numpy_buffer, names=["buf", "jnp.zeros(...)",
                                                         "buf = buf.at[i].set(x * i)"])
    assert "setting an array element" not in (msg or str(info.value))

    with pytest.raises(ConversionError) as info:
        autoflow.jit(numpy_buffer_augmented)(2.0)
    check_message(info.value, numpy_buffer_augmented, names=["buf", "buf = buf.at[1].add(x)"])
    # the advice works
    assert_same(autoflow.jit(jnp_buffer, static_argnames="n")(2.0, 4), numpy_buffer(2.0, 4))


def numpy_buffer_static_values(x):
    buf = np.zeros(4)
    for i in range(4):
        buf[i] = i * 2  # concrete values: NumPy, as Python runs it
    return x + buf


def test_a_numpy_buffer_of_concrete_values_still_works():
    assert_same(autoflow.jit(numpy_buffer_static_values)(1.0), numpy_buffer_static_values(1.0))


# ---------------------------------------------------------------------------
# 4. range() with a traced step of 0
# ---------------------------------------------------------------------------

def range_sum(a, step):
    t = 0
    for i in range(0, a, step):  # ERROR
        t += i
    return t


def range_in_branch(a, step, go):
    t = a * 0
    if go > 0:
        for i in range(a, 0, step):
            t += i
    return t


def test_a_traced_step_of_zero_raises_pythons_error_at_every_call():
    _, expected = eager_python(range_sum, 5, 0)
    assert isinstance(expected, ValueError)
    jitted = autoflow.jit(range_sum)
    for _ in range(2):  # at every call of the compiled function
        with pytest.raises(ValueError) as info:
            jitted(jnp.int32(5), jnp.int32(0))
        assert str(info.value) == str(expected)
        last = traceback.extract_tb(info.value.__traceback__)[-1]
        assert (last.filename, last.lineno) == (source_file(range_sum), marked_line(range_sum))
    # a step that is not 0: the loop, as Python runs it
    for a, step in ((7, 2), (7, -1), (-6, -2), (5, 9)):
        assert int(jitted(jnp.int32(a), jnp.int32(step))) == range_sum(a, step)


def test_a_concrete_step_of_zero_raises_at_once():
    _, expected = eager_python(range_sum, 5, 0)
    with pytest.raises(ValueError, match=re.escape(str(expected))):
        autoflow.jit(range_sum, static_argnames="step")(jnp.int32(5), 0)
    with pytest.raises(ValueError, match=re.escape(str(expected))):
        autoflow.convert(range_sum)(5, 0)


def test_a_zero_step_on_a_path_not_taken_is_no_error():
    jitted = autoflow.jit(range_in_branch)
    for a, step, go in ((6, 0, -1), (6, -2, 1), (6, -4, 1)):
        assert int(jitted(jnp.int32(a), jnp.int32(step), jnp.int32(go))) \
            == range_in_branch(a, step, go)
    _, expected = eager_python(range_in_branch, 6, 0, 1)
    with pytest.raises(ValueError, match=re.escape(str(expected))):
        jitted(jnp.int32(6), jnp.int32(0), jnp.int32(1))


def test_a_zero_step_under_vmap():
    steps = jnp.asarray([1, 2], jnp.int32)
    out = jax.vmap(autoflow.convert(range_sum), in_axes=(None, 0))(jnp.int32(7), steps)
    assert [int(v) for v in out] == [range_sum(7, int(s)) for s in steps]
    with pytest.raises(Exception, match="range\\(\\) arg 3 must not be zero"):
        jax.vmap(autoflow.convert(range_sum), in_axes=(None, 0))(
            jnp.int32(7), jnp.asarray([1, 0], jnp.int32))
