"""Python's errors on the path not taken.

Both branches of a staged ``if`` are traced, but Python runs one: an error Python raises
in the user's own code on the other path (``d["b"]``, ``obj.missing``, ``1 // 0``, a list
index out of range) happens only where the compiled code takes that path, as the same
exception; elsewhere the converted function gives Python's value (it raised while tracing,
for every input). Where an ``except`` of the traced code around the ``if`` would catch it,
autoflow says so at trace time (a run-time error cannot be caught there).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow.errors import ConversionError
from autoflow.runtime import jax as jx


class Box:
    scale = 3.0


def missing_key(x):
    d = {"a": 2.0}
    if x < 0:
        return x * d["b"]
    return x * d["a"]


def missing_attribute(x):
    box = Box()
    if x < 0:
        return x * box.missing
    return x * box.scale


def division_by_zero(x):
    k = 0
    y = x
    if x < -1:
        y = x / (1 // k)
    elif x < 0:
        y = x * 3.0
    return y


def index_out_of_range(x):
    weights = [1.0, 2.0]
    if x > 10:
        return x * weights[5]
    return x * weights[1]


def _lookup(table, key):
    return table[key]


def in_a_helper(x):
    table = {"one": 1.0}
    y = x * 2.0
    if x > 5:
        y = y * _lookup(table, "two")
    return y


def in_a_conditional_expression(x):
    d = {"a": 2.0}
    return x * (d["b"] if x < -3 else d["a"])


def in_a_loop(x):
    d = {"a": 1.5}
    for i in range(3):
        if x > 100.0:
            x = x + d["z"]
        x = x * d["a"]
    return x


CASES = [  # (fn, inputs Python returns on, an input it raises on)
    (missing_key, [1.0, 2.5], -1.0),
    (missing_attribute, [1.0, 0.5], -1.0),
    (division_by_zero, [1.0, -0.5], -2.0),
    (index_out_of_range, [1.0, 3.0], 11.0),
    (in_a_helper, [1.0, 4.0], 6.0),
    (in_a_conditional_expression, [1.0, -1.0], -4.0),
    (in_a_loop, [1.0, 2.0], 101.0),
]
IDS = [c[0].__name__ for c in CASES]


def _raised(thunk):
    try:
        thunk()
    except Exception as e:  # noqa: BLE001 - the oracle records what Python raises
        return e
    return None


def _same_error(got, want):
    """``got`` is Python's ``want``: the same type and text (JAX's `jax.jit` reports
    it inside its own error; `autoflow.jit` wraps only code with a `raise` of its own)."""
    assert got is not None, f"returned where Python raised {want!r}"
    if type(got) is type(want):
        assert str(got) == str(want)
    else:
        assert type(got).__name__ in ("JaxRuntimeError", "XlaRuntimeError"), repr(got)
        assert str(got).rstrip().endswith(f"{type(want).__name__}: {want}"), str(got)[-200:]


@pytest.mark.parametrize("fn, good, bad", CASES, ids=IDS)
def test_the_path_not_taken_raises_nothing(fn, good, bad):
    jitted = autoflow.jit(fn)
    for v in good:
        np.testing.assert_allclose(jitted(jnp.float32(v)), fn(jnp.float32(v)), rtol=1e-6)
    want = _raised(lambda: fn(jnp.float32(bad)))
    assert want is not None
    _same_error(_raised(lambda: jitted(jnp.float32(bad))), want)


@pytest.mark.parametrize("fn, good, bad", CASES, ids=IDS)
def test_under_vmap_and_grad(fn, good, bad):
    lanes = jnp.array(good, jnp.float32)
    batched = jax.vmap(autoflow.convert(fn))
    np.testing.assert_allclose(batched(lanes), [fn(jnp.float32(v)) for v in good], rtol=1e-6)
    np.testing.assert_allclose(jax.jit(jax.vmap(jax.grad(autoflow.convert(fn))))(lanes),
                               [jax.grad(fn)(jnp.float32(v)) for v in good], rtol=1e-6)
    # a lane on the path: Python's exception itself (vmap without jit), the lane's
    want = _raised(lambda: fn(jnp.float32(bad)))
    got = _raised(lambda: batched(jnp.array([good[0], bad], jnp.float32)))
    if jx.primitives():
        assert type(got) is type(want) and str(got) == str(want), repr(got)
    else:  # (a JAX without autoflow's primitives: a loop is JAX's own, its error JAX's)
        _same_error(got, want)


def caught_around_the_if(x):
    d = {"a": 1.0}
    try:
        if x < 0:
            y = d["b"]
        else:
            y = x * 2.0
    except KeyError:
        y = -100.0
    return y


def _calls_inside_try(x):
    try:
        return missing_key(x)
    except LookupError:
        return x * 0.0


def caught_by_the_caller(x):
    return _calls_inside_try(x) + 1.0


@pytest.mark.parametrize("fn", [caught_around_the_if, caught_by_the_caller])
def test_an_except_that_would_catch_it_is_autoflows_error(fn):
    assert float(fn(jnp.float32(-1.0))) in (-100.0, 1.0)  # (Python catches it)
    with pytest.raises(ConversionError, match="an `except` around it would catch it") as info:
        autoflow.jit(fn)(jnp.float32(2.0))
    assert 'd["b"]' in str(info.value)


def test_an_except_of_the_caller_of_the_jitted_function_is_not_in_the_way():
    jitted = autoflow.jit(missing_key)
    try:
        assert float(jitted(jnp.float32(2.0))) == 4.0
    except KeyError:  # (around the call: the run-time error reaches it, as in Python)
        raise AssertionError("raised on the path not taken") from None


def tracer_error_on_the_other_path(x):
    if x > 0:
        return x * 2
    return x * len("abc"[x])  # eager Python indexes with the array; traced, JAX refuses


def test_errors_that_come_from_tracing_are_still_raised_while_tracing():
    assert int(tracer_error_on_the_other_path(jnp.int32(-1))) == -1
    with pytest.raises(jax.errors.TracerIntegerConversionError):
        autoflow.jit(tracer_error_on_the_other_path)(jnp.int32(1))


class _Safe:
    def inv(self, x):
        if x == 0:
            raise ZeroDivisionError("zero")
        return 1 / x

    def run(self, x):
        try:
            y = self.inv(x)
        except ZeroDivisionError:
            y = 0.0
        return y


def _checked_inv(x):
    if x == 0:
        raise ZeroDivisionError("zero")
    return 1 / x


def caller_catches(x):
    try:
        y = _checked_inv(x)
    except ArithmeticError:
        y = 0.0
    return y


def caller_catches_other(x):
    try:
        y = _checked_inv(x)
    except KeyError:
        y = 0.0
    return y


@pytest.mark.parametrize("fn", [_Safe().run, caller_catches], ids=["method", "function"])
def test_a_traced_raise_that_a_callers_except_would_catch_is_an_error(fn):
    with pytest.raises(ConversionError, match="an `except` around it would catch it"):
        autoflow.jit(fn)(jnp.float32(0.0))
    assert fn(jnp.float32(0.0)) == 0.0  # (Python's answer, which the staged raise cannot give)


def test_an_except_of_another_type_lets_the_raise_stage():
    f = autoflow.jit(caller_catches_other)
    assert float(f(jnp.float32(2.0))) == 0.5
    with pytest.raises(ZeroDivisionError, match="zero"):
        f(jnp.float32(0.0)).block_until_ready()
    # and the caller of the jitted function may catch it, as Python's caller would
    try:
        f(jnp.float32(0.0)).block_until_ready()
    except ZeroDivisionError:
        pass


def reads_an_undefined_global(x):
    if x > 0:
        return x
    return undefined_in_this_module  # noqa: F821 - Python's NameError, on this path only


def test_an_undefined_global_on_a_path_is_pythons_name_error():
    # (the function has no `raise`: `autoflow.jit` gave JAX's `JaxRuntimeError`, which an
    # `except NameError` does not catch)
    jitted = autoflow.jit(reads_an_undefined_global)
    assert float(jitted(jnp.float32(2.0))) == 2.0
    with pytest.raises(NameError, match="undefined_in_this_module"):
        jitted(jnp.float32(-1.0))
