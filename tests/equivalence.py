"""Eager Python is the oracle: helpers that compare it with converted code."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import jax
import numpy as np

import autoflow


def load_module(path):
    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"fixture_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_same(actual, expected, context=""):
    """Same pytree structure and the same values (to float tolerance)."""
    a_leaves, a_tree = jax.tree_util.tree_flatten(actual)
    e_leaves, e_tree = jax.tree_util.tree_flatten(expected)
    assert a_tree == e_tree, f"{context}: structure {a_tree} != eager {e_tree}"
    for a, e in zip(a_leaves, e_leaves):
        a, e = np.asarray(a), np.asarray(e)
        assert a.shape == e.shape, f"{context}: shape {a.shape} != eager {e.shape}"
        if e.dtype.kind in "fc" or a.dtype.kind in "fc":
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6, err_msg=context)
        else:
            np.testing.assert_array_equal(a, e, err_msg=context)


def check_jit(fn, *args, jit_kwargs=None, context=""):
    """``autoflow.jit(fn)(*args)`` equals ``fn(*args)`` run eagerly."""
    expected = fn(*args)
    actual = autoflow.jit(fn, **(jit_kwargs or {}))(*args)
    assert_same(actual, expected, context or fn.__name__)
    return actual
