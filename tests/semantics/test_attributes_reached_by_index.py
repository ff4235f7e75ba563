"""Attributes written on objects that a staged statement reaches by index, through a
``for`` loop's variable or with ``setattr`` and a name in a variable, against eager
Python: the statement carries them (``af.mutates`` before the write), so the path not
taken leaves them as they were and a traced loop sees each iteration's value (before,
they were written while tracing: the path not taken's value, a leaked tracer, or a
loop that never ended under ``vmap``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow


class Box:
    def __init__(self, v):
        self.v = v


def by_index_in_if(x):
    b = Box(x)
    items = [b]
    if x > 1:
        items[0].v = x * 5.0
    return b.v


def by_key_in_static_loop(x):
    b = Box(x)
    reg = {"b": b}
    for _ in range(3):
        if reg["b"].v < 5.0:
            reg["b"].v = reg["b"].v + 2.0
    return b.v


def by_index_in_while(x):
    b = Box(x)
    items = [b]
    n = 0
    while items[0].v < 10.0:
        items[0].v = items[0].v * 2
        n += 1
    return b.v, n


def through_loop_variable(x):
    pts = [Box(x), Box(2 * x)]
    if x > 1:
        for p in pts:
            p.v = p.v * 10
    return pts[0].v + pts[1].v


def named_in_a_variable(x):
    b = Box(0.0)
    name = "v"
    if x > 1:
        setattr(b, name, x * 2)
    return b.v


def by_computed_index_in_static_loop(x):  # (JAX's UnexpectedTracerError before)
    boxes = [Box(0.0), Box(0.0)]
    for i in range(4):
        if x > i:
            boxes[i % 2].v = boxes[i % 2].v + x
    return boxes[0].v + 10 * boxes[1].v


PROGRAMS = [by_index_in_if, by_key_in_static_loop, by_index_in_while, through_loop_variable,
            named_in_a_variable, by_computed_index_in_static_loop]
XS = jnp.array([3.0, 20.0, 0.5])


def _close(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return len(la) == len(lb) and all(np.allclose(x, y) for x, y in zip(la, lb))


@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_an_attribute_reached_by_index_is_carried(fn):
    for x in XS:
        assert _close(autoflow.jit(fn)(x), fn(x)), x
    lanes = jax.vmap(autoflow.convert(fn))(XS)
    want = [fn(x) for x in XS]
    assert _close(lanes, jax.tree_util.tree_map(lambda *v: jnp.stack(v), *want))


@pytest.mark.parametrize("fn", [by_index_in_if, through_loop_variable, named_in_a_variable,
                                by_computed_index_in_static_loop], ids=lambda f: f.__name__)
def test_and_differentiated(fn):
    for x in (0.5, 3.0):
        assert np.allclose(jax.grad(autoflow.convert(fn))(x), jax.grad(fn)(x))


class Counter:
    def __init__(self):
        self.n = jnp.int32(0)

    def step(self, x):
        if x > 0:
            self.n = self.n + 1
        return x * 2


def _jitted_ways(c):
    import functools

    yield autoflow.jit(c.step)
    yield autoflow.jit(functools.partial(Counter.step, c))
    yield autoflow.jit(lambda x: c.step(x))


def test_a_traced_value_left_in_an_object_that_outlives_the_call_is_an_error():
    from autoflow import ConversionError

    for k in range(3):
        c = Counter()  # (a local object: no module state reaches it)
        f = list(_jitted_ways(c))[k]
        with pytest.raises(ConversionError, match=r"`Counter\.n` .*holds a traced value"):
            f(jnp.float32(2.0))


def test_an_object_made_inside_an_outer_trace_is_no_leak():
    class Scaled:
        def __init__(self, w):
            self.w = w

        def apply(self, x):
            if x.sum() > 0:
                return x * self.w
            return x

    @jax.jit
    def outer(w, x):
        return autoflow.jit(Scaled(w).apply)(x)

    assert np.allclose(outer(2.0, jnp.ones(3)), 2.0)
    assert np.allclose(outer(2.0, -jnp.ones(3)), -1.0)


class Registry:
    total = 0.0

    def add(self, x):
        if x > 0:
            type(self).total = type(self).total + x
        return x


def through_the_class(x):
    o = Registry()
    return o.add(x)


def test_a_class_attribute_written_through_type_of_self_is_never_left_traced():
    from autoflow import ConversionError
    from autoflow.runtime.jax import traces

    if not traces._PARENT_TRACE:  # (a JAX whose traces do not say what they came from:
        pytest.skip("this JAX does not say which trace a trace was started from")  # no check)

    before = Registry.total
    with pytest.raises(ConversionError, match="Registry.total"):
        autoflow.jit(through_the_class)(jnp.float32(2.0))
    Registry.total = before


def test_a_frozen_dataclass_written_on_the_path_not_taken():
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Frozen:
        a: object

    def write(x):
        o = Frozen(x)
        if x > 0:
            o.a = x * 2  # (FrozenInstanceError, where Python takes this path)
        return o.a

    assert float(autoflow.jit(write)(jnp.float32(-2.0))) == write(jnp.float32(-2.0))
    with pytest.raises(dataclasses.FrozenInstanceError):
        write(jnp.float32(2.0))
    with pytest.raises(Exception, match="cannot assign to field"):
        jax.block_until_ready(autoflow.jit(write)(jnp.float32(2.0)))
