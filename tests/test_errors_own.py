"""Errors in the user's words (issue 35, class 9): a run-time failure's traceback
holds the user's frames and none of autoflow's; a name bound on one path of a traced
`if` whose other path returns gets the error it gets without the `return`; a shape
computed from constants with `jnp` gets advice that fits; no generated name
(`if_true`, `loop_body`...) shows in a message or a traceback."""

from __future__ import annotations

import os
import re
import traceback

import jax
import jax.numpy as jnp
import pytest

import autoflow

AUTOFLOW_DIR = os.path.dirname(os.path.abspath(autoflow.__file__)) + os.sep
GENERATED = re.compile(r"\b(if_true|if_false|loop_body|loop_test|broke|did_return|af_\w+)\b")


def frames(exc):
    return traceback.extract_tb(exc.__traceback__)


def assert_user_frames_only(exc, line_text):
    tb = frames(exc)
    own = [f"{f.filename}:{f.lineno} {f.name}" for f in tb if f.filename.startswith(AUTOFLOW_DIR)]
    assert not own, own
    assert any(f.filename == __file__ and f.line and line_text in f.line for f in tb), tb
    assert not any(GENERATED.search(f.name) for f in tb), [f.name for f in tb]


# ---- run-time failures: the user's frames only -------------------------------------------------

def raises_when_positive(x):
    for i in range(3):
        if x > i:
            raise ValueError("x is too large")
    return x


def asserts_negative(x):
    assert x < 0, "x must be negative"
    return x


def doubles_until_large(x):
    while x < 100.0:
        x = x * 2.0
    return x


@pytest.mark.parametrize("fn, exc_type, line_text, kw", [
    (raises_when_positive, ValueError, 'raise ValueError("x is too large")', {}),
    (asserts_negative, AssertionError, 'assert x < 0, "x must be negative"', {}),
    (doubles_until_large, autoflow.LoopLimitError if hasattr(autoflow, "LoopLimitError") else Exception,
     "x = x * 2.0", {"max_loop_iterations": 3}),
])
def test_a_run_time_failure_shows_only_the_users_frames(fn, exc_type, line_text, kw):
    if not kw:  # Python raises the same exception eagerly
        with pytest.raises(exc_type):
            fn(1.0)
    with pytest.raises(exc_type) as info:
        autoflow.jit(fn, **kw)(jnp.float32(1.0))
    if kw:
        line_text = "while x < 100.0:"
    assert_user_frames_only(info.value, line_text)


def test_a_failure_that_is_not_the_users_keeps_its_type_without_autoflow_frames():
    @autoflow.jit
    def ok(x):
        if x > 0:
            raise ValueError("never at these values")
        return x

    assert float(ok(jnp.float32(-1.0))) == -1.0
    with pytest.raises(TypeError) as info:  # a wrong argument: JAX's own error
        ok("not an array")
    assert not [f for f in frames(info.value) if f.filename.startswith(AUTOFLOW_DIR + "api.py")]


# ---- a name bound on one path, the other path returns ----------------------------------------

def one_path_returns(x):
    if x > 0:
        y = x * 2.0
    elif x < -5.0:
        return x
    return y


def one_path_binds(x):
    if x > 0:
        y = x * 2.0
    return y


@pytest.mark.parametrize("x", [1.0, -1.0, -10.0])
def test_a_name_bound_on_one_path_is_pythons_error_where_it_is_unbound(x):
    # with or without a `return` on the other path: Python's value, or its
    # UnboundLocalError when the compiled code runs, at the user's line
    for fn in (one_path_returns, one_path_binds):
        try:
            want = fn(x)
        except UnboundLocalError as e:
            with pytest.raises(UnboundLocalError) as info:
                autoflow.jit(fn)(jnp.float32(x))
            assert str(info.value) == str(e)
            assert not GENERATED.search(str(info.value))
            last = traceback.extract_tb(info.value.__traceback__)[-1]
            assert last.line.strip() == "return y", last
        else:
            assert float(autoflow.jit(fn)(jnp.float32(x))) == float(want)


def test_the_unbound_read_on_concrete_values_is_pythons_error():
    with pytest.raises(UnboundLocalError) as python:
        one_path_returns(-1.0)
    with pytest.raises(UnboundLocalError) as converted:
        autoflow.convert(one_path_returns)(-1.0)
    assert "'y'" in str(python.value) and "`y`" in str(converted.value)
    assert "return y" in str(converted.value) and not GENERATED.search(str(converted.value))


# ---- shapes from constants -----------------------------------------------------------------------

def grid(x):
    a, b, h = 0.0, 1.0, 0.25
    num = jnp.ceil((b - a) / h).astype(int)
    return jnp.zeros(num) + x


def grid_from_argument(x, h):
    num = jnp.ceil(1.0 / h).astype(int)
    return jnp.zeros(num) + x


def test_a_shape_from_constants_gets_advice_for_constants():
    assert grid(1.0).shape == (4,)  # eager Python
    with pytest.raises(TypeError) as info:
        autoflow.jit(grid)(1.0)
    text = str(info.value)
    assert "`num`" in text and "computed only from constants" in text
    assert "math" in text and "ensure_compile_time_eval" in text
    assert "static_argnames" not in text
    assert "jnp.zeros(num)" in text


def test_a_shape_from_an_argument_still_suggests_static_argnames():
    with pytest.raises(TypeError) as info:
        autoflow.jit(grid_from_argument)(1.0, 0.25)
    text = str(info.value)
    assert "static_argnames" in text and "computed only from constants" not in text
    # With `h` static, `num` comes from constants only: the advice for constants.
    with pytest.raises(TypeError) as info:
        autoflow.jit(grid_from_argument, static_argnames=("h",))(1.0, 0.25)
    assert "computed only from constants" in str(info.value)


def test_the_advice_works():
    import math

    def fixed(x):
        num = math.ceil((1.0 - 0.0) / 0.25)
        return jnp.zeros(num) + x

    def compile_time(x):
        with jax.ensure_compile_time_eval():
            num = jnp.ceil((1.0 - 0.0) / 0.25).astype(int)
        return jnp.zeros(num) + x

    for fn in (fixed, compile_time):
        assert autoflow.jit(fn)(1.0).shape == grid(1.0).shape


# ---- generated names -------------------------------------------------------------------------------

def fails_in_nested_constructs(x, n):
    total = 0.0
    for i in range(n):
        while x > 1.0:
            if x > 50.0:
                break
            x = x / 2.0
        if i == 2:
            total = total + undefined_helper(x)  # noqa: F821 - the error under test
        total = total + x
    return total


@pytest.mark.parametrize("traced", [False, True])
def test_frames_and_messages_name_the_users_function(traced):
    with pytest.raises(NameError) as python:
        fails_in_nested_constructs(4.0, 4)
    run = autoflow.jit(fails_in_nested_constructs) if traced else \
        autoflow.convert(fails_in_nested_constructs)
    with pytest.raises(NameError) as info:
        run(jnp.float32(4.0) if traced else 4.0, 4)
    assert str(info.value) == str(python.value)
    names = {f.name for f in frames(info.value) if f.filename == __file__}
    assert "fails_in_nested_constructs" in names
    assert not any(GENERATED.search(n) for n in names), names
