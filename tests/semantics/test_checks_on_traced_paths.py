"""Checks on a path a traced condition chooses, against eager Python.

* ``assert False, "..."`` (a test known while tracing) in a traced branch or loop fails
  only where the compiled code takes that path, with its message made then;
* an ``assert`` of a traced test, or a read of a variable a traced condition may leave
  unbound, inside a ``try`` whose ``except`` would catch its error, is autoflow's error
  (raised when the compiled code runs, no ``except`` could catch it; under a bare
  ``vmap`` one failing lane sent every lane into the ``except``);
* ``print(..., file=sys.stderr)`` and ``sys.stdout.write`` write to the stream that is
  ``sys.stderr``/``sys.stdout`` at each call;
* ``max`` of an empty generator is Python's ``ValueError`` under ``autoflow.jit``.
"""

from __future__ import annotations

import contextlib
import io
import sys

import jax
import jax.numpy as jnp
import pytest

import autoflow
from autoflow import ConversionError
from autoflow.runtime import jax as jx

from .oracle import check, check_error


def unreachable(x):
    if x > 0:
        assert False, "unreachable for x <= 0"
    return x * 2


def unreachable_in_loop(n):
    s = 0
    for i in range(n):
        if i > 3:
            assert False, f"i={i}"
        s += i
    return s


def bare_assert_false(x):
    while x < 10:
        x = x + 3
        if x > 11.5:
            assert False
    return x


@pytest.mark.parametrize("x", [-1.0, 0.0, 2.0])
def test_static_assert_on_a_traced_path(x):
    check(unreachable, x, vmap=[(-3.0,), (-0.5,)] if x <= 0 else None, grad=x <= 0,
          expect_raise=AssertionError if x > 0 else None)


@pytest.mark.parametrize("n", [0, 3, 4, 6])
def test_static_assert_in_a_traced_loop_has_its_message(n):
    check(unreachable_in_loop, n, expect_raise=AssertionError if n > 4 else None)
    if n > 4:
        with pytest.raises(AssertionError, match="^i=4\n") as info:
            autoflow.jit(unreachable_in_loop)(n)
        assert any("the `assert` at" in note for note in info.value.__notes__)


@pytest.mark.parametrize("x", [2.0, 9.0, 15.0])
def test_bare_static_assert_in_a_while(x):
    check(bare_assert_false, x, vmap=[(2.0,), (4.0,)] if x != 9.0 else None,
          expect_raise=AssertionError if x == 9.0 else None)


def catches_unbound(x):
    if x > 0:
        y = x * 2
    try:
        return y
    except UnboundLocalError:
        return -1.0


def catches_assertion(x):
    try:
        assert x < 0, "positive"
        v = x
    except AssertionError:
        v = -1.0
    return v


def catches_loop_unbound(n):
    for i in range(n):
        last = i
    try:
        return last * 1.0
    except NameError:
        return -1.0


@pytest.mark.parametrize("fn, arg, name", [(catches_unbound, 1.5, "y"),
                                           (catches_assertion, -2.0, None),
                                           (catches_loop_unbound, 3, "last")])
def test_a_check_an_except_would_catch_is_autoflows_error(fn, arg, name):
    exc = check_error(fn, arg, names=(name,) if name else ())
    assert "an `except` around it would catch it" in str(exc)
    lanes = jnp.array([arg, -arg]) if name != "last" else jnp.array([3, 0])
    with pytest.raises(ConversionError, match="would catch it"):
        jax.vmap(autoflow.convert(fn))(lanes)  # (one lane's failure sent all to the except)


def writes_to_streams(x):
    if x > 0:
        print("err", x, file=sys.stderr)
        sys.stdout.write("out\n")
    return x


def test_standard_streams_are_read_at_each_call():
    f = autoflow.jit(writes_to_streams)
    for fn in (writes_to_streams, f):
        got = []
        for v in (1.0, 2.0):
            err, out = io.StringIO(), io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                fn(jnp.float32(v))
                jax.effects_barrier()
            got.append((err.getvalue(), out.getvalue()))
        assert got == [("err 1.0\n", "out\n"), ("err 2.0\n", "out\n")], fn


def largest(n):
    return max(i * i for i in range(n))


def test_max_of_an_empty_generator_raises_pythons_error():
    f = autoflow.jit(largest)
    assert f(3) == largest(3)
    with pytest.raises(ValueError, match="empty"):
        f(0)


def reads_unbound_in_a_loop(y):
    w = 1
    while w > 0 and y > 100.0:  # runs no iteration for y <= 100
        w -= 1
        m = m + 1  # noqa: F821, F841 - unbound: Python raises where an iteration runs
    return y


@pytest.mark.parametrize("y", [1.5, 200.0])
def test_an_unbound_read_in_a_loop_that_runs_no_iteration(y):
    check(reads_unbound_in_a_loop, y, vmap=[(2.5,)] if y < 100 else None,
          expect_raise=UnboundLocalError if y > 100 else None)


def guarded(n):
    if n < 0:
        raise ValueError(f"negative {n}")
    return n + 1


def test_a_raise_under_vmap_is_one_check_not_one_per_lane():
    # (one host callback per lane made the program, and its compile time, grow with the
    # batch: 28-42 s at 1,000 lanes); the first lane on the raise's path raises
    sizes = [len(jax.make_jaxpr(jax.vmap(autoflow.convert(guarded)))(
        jnp.arange(b, dtype=jnp.int32)).jaxpr.eqns) for b in (4, 64)]
    if jx.primitives():  # (an older JAX has JAX's callbacks only: one per lane)
        assert sizes[0] == sizes[1]
    with pytest.raises(ValueError, match="^negative -2"):
        jax.vmap(autoflow.convert(guarded))(jnp.array([1, -2, -3]))
    assert list(jax.vmap(autoflow.convert(guarded))(jnp.array([1, 2]))) == [2, 3]
