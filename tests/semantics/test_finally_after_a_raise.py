"""A ``finally`` clause runs when a traced ``raise`` in its ``try`` body fires, before
the exception leaves, as in Python (its ``print`` was missing: the check stopped the
compiled code first). The check raises after the clause; what the clause prints, then
the exception, are Python's, under ``autoflow.jit``, ``jax.jit``, ``vmap`` (the lanes'
lines compared as a multiset) and at every call.
"""

from __future__ import annotations

import collections

import jax
import jax.numpy as jnp
import pytest

import autoflow


def guard_then_finally(x):
    try:
        if x < 0:
            raise ValueError(f"negative {x}")
        y = x * 2.0
    finally:
        print("finally")
    print("after")
    return y


def in_a_loop(n):
    i = 0
    total = 0
    while i < n:
        try:
            if i == 2:
                raise KeyError(i)
            total = total + i
        finally:
            print("cleanup", i)
        i += 1
    return total


def nested(x):
    try:
        try:
            if x > 3:
                assert x < 5, "too big"
                raise OverflowError("between 3 and 5")
        finally:
            print("inner")
        print("between")
    finally:
        print("outer")
    return x


def _helper_that_raises(x):
    if x > 1:
        raise RuntimeError("from the helper")
    return x


def through_a_call(x):
    try:
        y = _helper_that_raises(x) + 1.0
    finally:
        print("finally of the caller")
    return y


CASES = [
    (guard_then_finally, [2.0, -1.0]),
    (in_a_loop, [1, 5]),
    (nested, [1.0, 4.0, 6.0]),
    (through_a_call, [0.5, 2.0]),
]


def _run(capfd, thunk):
    capfd.readouterr()
    try:
        out, exc = thunk(), None
    except Exception as e:  # noqa: BLE001 - the oracle records what Python raises
        out, exc = None, e
    jax.effects_barrier()
    return out, exc, capfd.readouterr().out.splitlines()


@pytest.mark.parametrize("fn, inputs", CASES, ids=[c[0].__name__ for c in CASES])
def test_finally_runs_then_the_exception(fn, inputs, capfd):
    for how, run in (("autoflow.jit", autoflow.jit(fn)), ("jax.jit", jax.jit(autoflow.convert(fn)))):
        for v in inputs:
            want, want_exc, want_lines = _run(capfd, lambda: fn(jnp.asarray(v)))
            for _ in range(2):
                got, exc, lines = _run(capfd, lambda: run(jnp.asarray(v)))
                assert lines == want_lines, (how, v, lines, want_lines)
                if want_exc is None:
                    assert exc is None and float(got) == float(want), (how, v, exc)
                elif how == "autoflow.jit":  # (pytest adds its explanation to an eager assert's)
                    assert type(exc) is type(want_exc) and str(exc) == \
                        str(want_exc).splitlines()[0], (v, exc)
                else:  # (JAX's report of the user's exception)
                    text = str(want_exc).splitlines()[0]
                    assert f"{type(want_exc).__name__}: {text}" in str(exc), (v, exc)


@pytest.mark.parametrize("fn, inputs", CASES, ids=[c[0].__name__ for c in CASES])
def test_under_vmap(fn, inputs, capfd):
    inputs = inputs[:2]  # (one lane that raises at most: which of two raises first is not tested)
    lanes = jnp.asarray(inputs)
    want_lines, want_exc = [], None
    for v in inputs:  # (Python, lane by lane, stops at the first lane that raises)
        _, want_exc, lines = _run(capfd, lambda: fn(jnp.asarray(v)))
        want_lines += lines
        if want_exc is not None:
            break
    _, exc, lines = _run(capfd, lambda: jax.vmap(autoflow.convert(fn))(lanes))
    assert type(exc) is type(want_exc)
    if want_exc is None:  # (a lane that raised stops the batch: the others' lines differ)
        assert collections.Counter(lines) == collections.Counter(want_lines), lines
