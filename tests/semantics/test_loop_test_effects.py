"""Effects in a ``while`` loop's test happen once per test Python evaluates.

The test that first comes out traced was evaluated (and its ``print`` staged) before
the loop is staged: the staged loop does not evaluate it on that state again. Under
``vmap`` a lane whose loop has ended evaluates no more tests (its test's ``print`` does
not happen), as lane by lane in Python.
"""

from __future__ import annotations

import collections

import jax
import jax.numpy as jnp
import pytest

import autoflow
from autoflow.runtime import jax as jx

# (the oldest supported JAX has no hijax primitives: no reverse mode through a `while`, and
# a callback under `vmap` of values no lane changes runs once, as JAX's own does)
needs_primitives = pytest.mark.skipif(not jx.primitives(), reason="this JAX has no hijax primitives")


def below(i, n):
    print("test", i)
    return i < n


def count_up(n):
    i = 0
    while below(i, n):
        i += 1
    return i


def count_up_with_body_print(n):
    i = 0
    while below(i, n):
        print("body", i)
        i += 2
    return i


class Counter:
    def __init__(self):
        self.tests = 0

    def more(self, x, limit):
        self.tests += 1
        print("checking", x)
        return x < limit


def doubling_with_state(x, limit):
    c = Counter()
    while c.more(x, limit):
        x = x * 2.0
    return x, c.tests


def _printed(capfd, thunk):
    capfd.readouterr()
    out = thunk()
    jax.effects_barrier()
    return out, capfd.readouterr().out.splitlines()


def _eager(capfd, fn, *args):
    return _printed(capfd, lambda: fn(*args))


def test_each_test_prints_once_under_jit_at_every_call(capfd):
    for fn in (count_up, count_up_with_body_print):
        jitted = autoflow.jit(fn)
        for n in (3, 0, 1):
            want, want_lines = _eager(capfd, fn, n)
            for _ in range(2):  # (the second call runs the compiled program only)
                got, lines = _printed(capfd, lambda: jitted(jnp.int32(n)))
                assert int(got) == want and lines == want_lines, (fn.__name__, n, lines)


def test_state_the_test_changes(capfd):
    jitted = autoflow.jit(doubling_with_state)
    for x in (1.0, 9.0):
        (want, tests), want_lines = _eager(capfd, doubling_with_state, x, 5.0)
        (got, got_tests), lines = _printed(capfd, lambda: jitted(jnp.float32(x), 5.0))
        assert float(got) == want and int(got_tests) == tests and lines == want_lines, lines


@needs_primitives
def test_a_lane_that_has_ended_tests_no_more(capfd):
    ns = [2, 0, 3]
    want_lines = []
    for n in ns:
        want_lines += _eager(capfd, count_up, n)[1]
    for batched in (jax.vmap(autoflow.convert(count_up)),
                    jax.jit(jax.vmap(autoflow.convert(count_up)))):
        got, lines = _printed(capfd, lambda: batched(jnp.array(ns)))
        assert [int(v) for v in got] == [count_up(n) for n in ns]
        # (the lanes' lines interleave under vmap: compared as a multiset)
        assert collections.Counter(lines) == collections.Counter(want_lines), lines


@needs_primitives
def test_under_grad_and_vmap_of_grad(capfd):
    def first(x):
        return doubling_with_state(x, 5.0)[0] * x

    conv = autoflow.convert(first)
    for x in (1.0, 0.7):
        want, want_lines = _eager(capfd, lambda: jax.grad(first)(jnp.float32(x)))
        got, lines = _printed(capfd, lambda: jax.jit(jax.grad(conv))(jnp.float32(x)))
        # (eager `jax.grad` prints its tracers: the lines are compared by count)
        assert float(got) == float(want) and len(lines) == len(want_lines), lines
    xs = jnp.array([1.0, 0.7, 6.0], jnp.float32)
    got = jax.vmap(jax.grad(conv))(xs)
    assert [float(g) for g in got] == [float(jax.grad(first)(x)) for x in xs]
