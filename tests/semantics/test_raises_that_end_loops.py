"""Control flow around a traced ``raise``, against eager Python: a loop that only a
traced ``raise`` ends (its carries concrete) is staged once an iteration stages the
``raise``, and stops where it fires (it ran on forever, while tracing); a ``while``
whose test binds a name (``:=``) and that has an ``else:``; a handler that re-raises;
``contextlib.suppress`` around a traced ``raise``.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import pytest

import autoflow
from autoflow import ConversionError


def ended_by_raise(x):
    i = 0
    while True:
        i += 1
        if i * x > 3:
            raise ValueError(f"stop at {i}")
    return i


def ended_by_raise_with_total(x):
    i = 0
    total = 0.0
    while i > -1:
        i += 1
        total = total + x
        if total > 10:
            raise ValueError(f"over at {i}")
    return i


@pytest.mark.parametrize("fn", [ended_by_raise, ended_by_raise_with_total],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("x", [1.0, 2.5])
def test_a_loop_only_a_traced_raise_ends(fn, x):
    with pytest.raises(ValueError) as eager:
        fn(jnp.float32(x))
    with pytest.raises(ValueError) as staged:
        jax.block_until_ready(autoflow.jit(fn)(jnp.float32(x)))
    assert str(staged.value) == str(eager.value)


def walrus_else(n):
    i = 0
    while (i := i + 1) < n:
        pass
    else:
        i = i * 10
    return i


def walrus_else_binds(n):
    i = 0
    while (j := i * 2) < n:
        i += 1
    else:
        j = j + 100
    return j


def walrus_else_break(n, x):
    i = 0
    while (i := i + 1) < n:
        x = x * 2
        if x > 20:
            break
    else:
        x = -x
    return x


@pytest.mark.parametrize("fn, args", [
    (walrus_else, (3,)), (walrus_else, (0,)), (walrus_else_binds, (3,)),
    (walrus_else_break, (3, 1.0)), (walrus_else_break, (9, 1.0))])
def test_a_while_whose_test_binds_a_name_and_has_an_else(fn, args):
    traced = tuple(jnp.int32(a) if isinstance(a, int) else jnp.float32(a) for a in args)
    assert float(autoflow.jit(fn)(*traced)) == float(fn(*traced))
    assert float(autoflow.convert(fn)(*args)) == float(fn(*args))


def reraised(x):
    try:
        if x > 0:
            raise KeyError("k")
        y = 1.0
    except KeyError:
        raise
    return y


def suppressed(x):
    y = 0.0
    with contextlib.suppress(ValueError):
        if x > 0:
            raise ValueError("suppressed")
        y = 1.0
    return y


@pytest.mark.parametrize("fn", [reraised, suppressed], ids=lambda f: f.__name__)
def test_what_would_catch_a_traced_raise_is_autoflows_error_not_an_internal_one(fn):
    with pytest.raises(ConversionError, match="would catch it"):
        autoflow.jit(fn)(jnp.float32(-1.0))
    with pytest.raises(ConversionError, match="would catch it"):
        jax.vmap(autoflow.convert(fn))(jnp.array([1.0, -1.0]))
    assert autoflow.convert(fn)(-1.0) == fn(jnp.float32(-1.0))  # concrete: Python


# An iteration run as Python that stages a check (a list item written at a traced index
# may be out of range: Python's IndexError) and then `break`s on a traced condition: the
# rest of the loop starts from its test on the state that iteration left (it began from
# the test before the iteration, and ran a second one).


def write_then_break(x, i):
    out = [0.0, 0.0, 0.0, 0.0]
    j = 0
    while j < 2:
        print("body", j)
        if x > j:
            out[i] = out[i] + 1.0
            break
        j += 1
    return out


def indexed_by_outer_for(x):
    out = [0.0, 0.0, 0.0, 0.0]
    for i in range(2):
        j = 0
        while j < 2:
            if x > j:
                out[2 * i + j] = 1.0
                return out
            j += 1
    return out


def test_the_loop_goes_on_from_its_test_after_an_iteration_that_staged_a_check(capsys):
    for x in (1.5, 0.5, -1.0):
        want = write_then_break(jnp.float32(x), 0)
        printed = capsys.readouterr().out
        got = autoflow.jit(write_then_break)(jnp.float32(x), jnp.int32(0))
        jax.effects_barrier()
        assert [float(v) for v in got] == [float(v) for v in want], x
        assert capsys.readouterr().out == printed, x
        assert [float(v) for v in autoflow.jit(indexed_by_outer_for)(jnp.float32(x))] == \
            [float(v) for v in indexed_by_outer_for(jnp.float32(x))], x
    xs = jnp.array([1.5, 0.5, -1.0])
    lanes = jax.vmap(autoflow.convert(indexed_by_outer_for))(xs)
    for k, x in enumerate(xs):
        assert [float(v[k]) for v in lanes] == [float(v) for v in indexed_by_outer_for(x)]
