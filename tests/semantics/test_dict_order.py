"""The order of a dict's keys through staged statements, against eager Python.

JAX flattens a dict in sorted key order and rebuilds it so; Python keeps the order the
keys were added in, and iterating the dict (``list(d)``, ``d.values()``, a loop over it)
sees that order. A dict carried through a traced ``if`` or loop keeps Python's order;
one whose order would depend on a traced condition, or change in a staged loop, is
autoflow's error at that statement.
"""

from __future__ import annotations

import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow import ConversionError

from .oracle import check


def branch_writes(x):
    d = {"w": x, "b": 2.0}
    if x > 0:
        d["w"] = x * 2
    else:
        d["b"] = -x
    return jnp.stack(list(d.values()))


def loop_writes(x):
    d = {"w": x, "b": 2.0, "a": 1.0}
    while d["w"] < 5:
        d["w"] = d["w"] + 1
    return jnp.stack([v * (k + 1) for k, v in enumerate(d.values())])


def rebound_in_branch(x):
    d = {"w": x, "b": 2.0}
    if x > 0:
        d = {"w": x * 3, "b": 1.0}
    return jnp.stack(list(d.values()))


def key_added_in_static_loop(x):
    cfg = {"z": x}
    for i in range(3):
        if x > i:
            cfg["z"] = cfg["z"] + 1
    cfg["a"] = 1.0
    return jnp.stack(list(cfg.values()))


def nested_in_a_list(x):
    ds = [{"y": x, "c": 0.0}]
    for _ in range(2):
        if x > 0:
            ds[0]["y"] = ds[0]["y"] * 2
        else:
            ds[0]["c"] = ds[0]["c"] - x
    return jnp.stack(list(ds[0].values()))


PROGRAMS = [branch_writes, loop_writes, rebound_in_branch, key_added_in_static_loop,
            nested_in_a_list]
XS = jnp.array([1.0, -2.0, 7.0])


@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_a_dict_keeps_pythons_key_order(fn):
    for x in XS:
        assert np.allclose(autoflow.jit(fn)(x), fn(x))
    assert np.allclose(jax.vmap(autoflow.convert(fn))(XS), np.stack([fn(x) for x in XS]))
    grad = jax.grad(lambda v: (autoflow.convert(fn)(v) * jnp.arange(1.0, 4.0)[:fn(v).size]).sum())
    want = jax.grad(lambda v: (fn(v) * jnp.arange(1.0, 4.0)[:fn(v).size]).sum())
    assert np.allclose(grad(1.5), want(1.5))


def orders_differ(x):
    d = {}
    if x > 0:
        d["a"] = x
        d["b"] = 1.0
    else:
        d["b"] = 2.0
        d["a"] = -x
    return list(d.values())


def reinserted(x):
    d = {"w": x, "b": 2.0}
    while x < 3:
        x = x + 1
        v = d.pop("w")
        d["w"] = v + 1
    return x


def test_an_order_that_depends_on_the_path_is_an_error():
    with pytest.raises(ConversionError, match=r"`d` gets its keys in another order"):
        autoflow.jit(orders_differ)(-5.0)
    assert autoflow.convert(orders_differ)(-5.0) == orders_differ(-5.0)  # concrete: Python


def test_an_order_a_staged_loop_changes_is_an_error():
    with pytest.raises(ConversionError, match=r"`d` has its keys in another order"):
        autoflow.jit(reinserted)(0.0)
    assert autoflow.convert(reinserted)(0.0) == reinserted(0.0)


# Dicts of the kinds JAX flattens as dicts (OrderedDict, defaultdict) changed in place on
# one path of a traced `if`: the change reaches the dict, as a plain dict's does (it was
# JAX's UnexpectedTracerError); and an early `return` of a dict display in a loop keeps
# its key order on the path that fills it (it was autoflow's error about the order).

def ordered_in_place(x):
    d = collections.OrderedDict(b=x, a=2.0 * x)
    if x > 0:
        d["b"] = d["b"] - 1
    return jnp.stack(list(d.values())) * (1.0 if type(d) is collections.OrderedDict else 0.0)


def defaulted_in_place(x):
    d = collections.defaultdict(float, w=x)
    d["v"] += 0.5  # (a key the factory made)
    if x > 0:
        d["w"] = d["w"] * 3
    else:
        d["v"] += 1.0
    return d["w"] + d["v"] + len(d)


def returns_a_dict_in_a_loop(y):
    k = 0
    while k < 10:
        if y.sum() > 10:
            return {"y": y, "k": k}
        y = y * 1.5
        k += 1
    return {"y": y, "k": k}


@pytest.mark.parametrize("x", [1.5, -2.0])
def test_dict_kinds_changed_in_place(x):
    check(ordered_in_place, x, vmap=[(-2.0,)])
    check(defaulted_in_place, x, grad=True)


def test_an_early_return_of_a_dict_keeps_its_order():
    y = jnp.array([1.0, 2.0])
    got = autoflow.convert(returns_a_dict_in_a_loop)(y)
    assert list(got) == ["y", "k"]
    check(returns_a_dict_in_a_loop, y, vmap=[(jnp.array([5.0, 6.0]),)])


def rebuilt_by_tree_map(x, loss):
    p = {"w": x, "b": 2 * x}
    if loss > 0.1:
        p = jax.tree_util.tree_map(lambda a: a - 0.1, p)
    return p["w"] + p["b"]


def test_an_order_jax_sorted_is_named_in_the_advice():
    with pytest.raises(ConversionError, match="keys sorted: build it with its keys in sorted"):
        autoflow.jit(rebuilt_by_tree_map)(1.0, 1.0)
