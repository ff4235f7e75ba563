"""Python state a library call changes in a staged branch or loop body (``runtime.python.
library_state``): a generator advanced by ``send``, a random generator's draw, a list a
library function changes in place. Python changes it once per path taken and per
iteration; a staged statement traces each path and body once."""

from __future__ import annotations

import heapq
import operator
import random
import re
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow import ConversionError

from .oracle import F, check


def _running_total():
    t = 0.0
    while True:
        t = t + (yield t)


def sums_sent_to_a_generator(x):
    g = _running_total()
    next(g)
    s = 0.0
    for i in range(3):
        s = g.send(x * (i + 1))
    return s


class _Heap:
    def __init__(self, items):
        self.items, self.pop = items, heapq.heappop


def pops_through_a_held_function(x):
    h = _Heap([3.0, 1.0, 2.0])
    heapq.heapify(h.items)
    s = 0.0
    for i in range(3):
        s = s + x * h.pop(h.items) * (i + 1)
    return s


class _Sampler:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def draw(self):
        return self.rng.normal()


def draws_in_a_traced_if(x):
    s = _Sampler(0)
    if x > 0:
        x = x + s.draw()
    return x


def test_a_generator_sent_to_in_a_static_loop_runs_each_iteration():
    # (the loop was staged and its body traced once: one `send` where Python makes three)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(sums_sent_to_a_generator, F(1.5))


def test_a_list_a_library_function_changes_is_seen():
    # (`heappop` called through an attribute of the user's object: its pops were made
    # once, in the body's one trace)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(pops_through_a_held_function, F(1.0))


def test_a_draw_from_numpys_generator_in_a_traced_if_is_refused():
    with pytest.raises(ConversionError, match="draws from NumPy's random generator") as info:
        autoflow.jit(draws_in_a_traced_if)(jnp.float32(1.0))
    assert "jax.random" in str(info.value) and "test_library_state.py" in str(info.value)


# Library functions called by their module's name (not through the user's objects):
# `heapq.heappush(h, v)`, `operator.setitem(l, i, v)` on a local list, a draw from
# `random` or `np.random`. They ran as written, on both paths of a traced `if`.


def pushes_on_both_paths(x):
    h = [3.0, 5.0]
    if x > 0:
        heapq.heappush(h, 1.0)
    else:
        heapq.heappush(h, 9.0)
    return h[0] * x


def sets_an_item_by_operator(x):
    items = [1.0, 2.0]
    if x > 0:
        operator.setitem(items, 0, 5.0)
    return items[0] * x


def draws_from_the_module(x):
    if x > 0:
        x = x + np.random.rand()
    return x


def draws_from_pythons_random(x):
    if x > 0:
        x = x + random.random()
    return x


@pytest.mark.parametrize("fn", [pushes_on_both_paths, sets_an_item_by_operator],
                         ids=lambda f: f.__name__)
def test_a_list_a_library_function_by_module_name_changes_is_carried(fn):
    for x in (-1.0, 0.5):
        check(fn, F(x))


@pytest.mark.parametrize("fn, whose", [(draws_from_the_module, "NumPy's random generator"),
                                       (draws_from_pythons_random, "Python's `random`")],
                         ids=lambda v: getattr(v, "__name__", "whose"))
def test_a_draw_by_module_name_in_a_traced_if_is_refused(fn, whose):
    with pytest.raises(ConversionError, match=f"draws from {re.escape(whose)}") as info:
        autoflow.jit(fn)(jnp.float32(1.0))
    assert "jax.random" in str(info.value) and "test_library_state.py" in str(info.value)
    assert autoflow.convert(fn)(-1.0) == -1.0  # concrete: Python's statement
