"""The numeric conversion-time corpus (``benchmarks/corpus_numeric.py``) runs correctly.

The corpus is measured for conversion time; a function that does not convert, or that
computes something else under ``autoflow.jit``, would be measuring the wrong thing. Each
function runs eagerly (plain Python and JAX) on its example arguments and under
``autoflow.jit``; the results agree leaf by leaf (floats within rtol 1e-5 / atol 1e-6,
integers and booleans exactly). Slow tier: about 120 compilations.
"""

from __future__ import annotations

import importlib.util
import pathlib

import jax
import numpy as np
import pytest

import autoflow

pytestmark = pytest.mark.slow

_PATH = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "corpus_numeric.py"


def _load():
    spec = importlib.util.spec_from_file_location("benchmarks_corpus_numeric", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


corpus = _load()


def test_every_function_has_examples():
    names = [fn.__name__ for fn in corpus.FUNCTIONS]
    assert len(names) == len(set(names))
    assert set(names) == set(corpus.EXAMPLES)
    defined = [v.__name__ for k, v in vars(corpus).items()
               if callable(v) and getattr(v, "__module__", None) == corpus.__name__
               and not k.startswith("_")]
    assert names == defined  # every top-level function, in file order


@pytest.mark.parametrize("fn", corpus.FUNCTIONS, ids=lambda fn: fn.__name__)
def test_jit_matches_eager(fn):
    args = corpus.EXAMPLES[fn.__name__]
    expected = fn(*args)
    got = autoflow.jit(fn)(*args)
    exp_leaves, exp_tree = jax.tree_util.tree_flatten(expected)
    got_leaves, got_tree = jax.tree_util.tree_flatten(got)
    assert exp_tree == got_tree, (exp_tree, got_tree)
    for e, g in zip(exp_leaves, got_leaves):
        e = np.asarray(e)
        g = np.asarray(g)
        assert e.shape == g.shape, (e.shape, g.shape)
        if np.issubdtype(e.dtype, np.inexact) or np.issubdtype(g.dtype, np.inexact):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_array_equal(g, e)
