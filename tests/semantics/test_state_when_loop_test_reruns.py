"""State a loop carries (attributes, containers) survives its test being run again
in the middle of the body.

Under ``jit`` or ``vmap`` a staged ``raise`` (or check) in a loop's body fires only
where the loop still runs, so the loop's test is evaluated again where the effect
is staged (``effects.path_condition``). A loop that carries attributes or container
contents sets them to the iteration's values to evaluate its test; done in the
middle of the body, that undid what the body had written to them before the
``raise``: ``st.a = ...`` then a traced ``if ...: raise`` lost the write (issue 42,
``tests/fuzz_compose.py`` seed 10433, ``vmap_jit``). Each lane of each
composition must be what Python computes for it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow.runtime import jax as jx


class Box:
    def __init__(self, a):
        self.a = a


class Holder:
    def __init__(self, x):
        self.vals = [x, x * 0.0]
        self.d = {"s": x}


# -- the programs: (n: int, x: float) -> float ---------------------------------------


def reproducer(n, x):  # the fuzzer's program, reduced
    k2 = 2 + n % 2
    st = Box(x * 0.5)

    def bump(v):  # never called: it makes k2 a cell
        nonlocal k2
        k2 += v
        return k2
    for v0 in jnp.ones(3):
        st.a = st.a + jnp.tanh(st.a)
        if k2 < 0:
            raise ValueError("neg")
        if v0 < 2.0:
            break
    return st.a


def no_cell(n, x):  # (the `if` has no outputs)
    st = Box(x * 0.5)
    for v0 in jnp.arange(5.0):
        st.a = st.a + jnp.tanh(st.a)
        if n < -5:
            raise ValueError("neg")
        if v0 >= n:
            break
    return st.a


def while_with_break(n, x):
    st = Box(x)
    i = 0
    while i < n + 2:
        st.a = st.a * 0.5 + 1.0
        if st.a > 100.0:
            raise ValueError("big")
        i += 1
        if i > 2:
            break
    return st.a + i


def write_in_branch(n, x):
    st = Box(x)
    i = 0
    while i < n + 1:
        if n % 2 == 0:
            st.a = st.a * 2.0
        else:
            st.a = st.a - 1.0
        if n < -5:
            raise ValueError("neg")
        i += 1
    return st.a


def write_then_raise_in_a_branch(n, x):
    st = Box(x)
    i = 0
    while i < n + 1:
        if x > 0:
            st.a = st.a * 1.5
            if n > 100:
                raise ValueError("big")
        else:
            st.a = st.a - 0.5
        i += 1
    return st.a


def loop_test_reads_the_attribute(n, x):
    st = Box(jnp.abs(x) + 0.1)
    i = 0
    while st.a < 4.0 + n:
        st.a = st.a * 1.5
        i += 1
        if i > 100:
            raise ValueError("spins")
    return st.a * i


def raise_in_nested_if(n, x):
    st = Box(x)
    for i in range(4):
        st.a = jnp.sin(st.a) + st.a
        if n > 0:
            if n > 100:
                raise ValueError("big")
        if i >= n:
            break
    return st.a


def list_in_attribute(n, x):
    h = Holder(x)
    i = 0
    while i < n:
        h.vals[0] = h.vals[0] * 1.5
        h.vals[1] = h.vals[1] + 1.0
        if h.vals[1] > 50.0:
            raise ValueError("big")
        i += 1
    return h.vals[0] + h.vals[1]


def dict_in_attribute(n, x):
    h = Holder(x)
    for i in range(3):
        h.d["s"] = h.d["s"] * 0.5 + x
        if n < -5:
            raise ValueError("neg")
        if i >= n:
            break
    return h.d["s"]


def _log_step(log, v):
    log["t"] = log["t"] + v


def container_changed_by_a_call(n, x):
    log = {"t": x}
    st = Box(x)
    i = 0
    while i < n + 1:
        _log_step(log, st.a)
        st.a = st.a * 0.75
        if n < -5:
            raise ValueError("neg")
        i += 1
    return log["t"] + st.a


def nested_loops(n, x):
    st = Box(x)
    i = 0
    while i < n:
        st.a = st.a + 1.0
        j = 0
        while j < n % 2 + 1:  # (staged too: the outer test is on its path)
            st.a = st.a * 0.5
            if n > 100:
                raise ValueError("big")
            j += 1
        i += 1
    return st.a


def two_attributes_and_a_check(n, x):
    st = Box(x)
    st.b = x * 0.0
    for i in range(4):
        st.b = st.b + 1.0
        st.a = st.a * 0.5
        assert n > -5, "neg"
        if i + 1 >= n:
            break
    return st.a + st.b


PROGRAMS = [reproducer, no_cell, while_with_break, write_in_branch, write_then_raise_in_a_branch,
            loop_test_reads_the_attribute, raise_in_nested_if,
            list_in_attribute, dict_in_attribute, container_changed_by_a_call, nested_loops,
            two_attributes_and_a_check]

NS = jnp.array([2, 0, 3, 1], jnp.int32)
XS = jnp.array([2.0, -2.0, -1.25, 1.5], jnp.float32)

COMPOSE = {
    "jit": lambda f: lambda n, x: jnp.stack([jax.jit(f)(n[i], x[i]) for i in range(len(n))]),
    "vmap": jax.vmap,
    "jit_vmap": lambda f: jax.jit(jax.vmap(f)),
    "vmap_jit": lambda f: jax.vmap(jax.jit(f)),
}


def _eager(fn, ns, xs):
    return np.array([float(fn(int(n), xs[i])) for i, n in enumerate(ns)], np.float32)


@pytest.mark.parametrize("how", list(COMPOSE))
@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_each_lane_is_pythons(fn, how):
    got = COMPOSE[how](autoflow.convert(fn))(NS, XS)
    np.testing.assert_allclose(np.asarray(got), _eager(fn, NS, XS), rtol=1e-5, atol=1e-6)


# (the oldest supported JAX has no hijax primitives: a `while` loop, and a `for` with a
# `break`, cannot be reverse-differentiated there without `max_loop_iterations`)
@pytest.mark.skipif(not jx.primitives(), reason="this JAX has no hijax primitives")
@pytest.mark.parametrize("fn", [reproducer, while_with_break, write_in_branch, nested_loops,
                                write_then_raise_in_a_branch, list_in_attribute],
                         ids=lambda f: f.__name__)
def test_gradients_are_pythons(fn):
    expected = np.array([float(jax.grad(fn, 1)(int(n), XS[i])) for i, n in enumerate(NS)])
    g = jax.grad(autoflow.convert(fn), 1)
    got_vmap = jax.vmap(g)(NS, XS)
    got_jit = [float(jax.jit(g)(NS[i], XS[i])) for i in range(len(NS))]
    np.testing.assert_allclose(np.asarray(got_vmap), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(got_jit), expected, rtol=1e-5, atol=1e-6)


def test_the_raise_still_fires_where_python_raises():
    ns = jnp.array([2, -7], jnp.int32)
    xs = jnp.array([1.0, 2.0], jnp.float32)
    with pytest.raises(ValueError, match="neg"):
        jax.block_until_ready(jax.vmap(autoflow.convert(no_cell))(ns, xs))
