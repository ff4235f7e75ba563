"""Golden before/after fixtures, and each fixture run eagerly vs converted.

A fixture ``tests/fixtures/NAME.py`` holds one or more functions and:

* ``CASES``: ``[(function name, (args...)), ...]``, inputs run eagerly and under
  ``autoflow.jit`` (results must match);
* optionally ``JIT_KWARGS = {name: {...}}`` (e.g. ``static_argnames``),
  ``GRAD = [(name, (args...))]`` (``jax.grad`` of the converted function vs
  eager ``jax.grad``) and ``VMAP = [(name, (batched args...))]`` (``jax.vmap``
  of the converted function vs a Python loop over the batch).

``NAME.after.py`` is the expected ``autoflow convert NAME.py`` output;
``pytest tests/test_fixtures.py --autoflow-update`` (or ``AUTOFLOW_REGENERATE=1``) rewrites them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import autoflow

from .equivalence import assert_same, load_module

FIXTURES = sorted(p for p in (Path(__file__).parent / "fixtures").glob("*.py")
                  if not p.name.endswith(".after.py"))


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_golden(path, autoflow_golden):
    converted = autoflow_golden.check_conversion(path)
    # The output is valid Python, and unparsing it again is stable.
    assert ast.unparse(ast.parse(converted)) == ast.unparse(ast.parse(ast.unparse(ast.parse(converted))))


def _cases(attr):
    out = []
    for path in FIXTURES:
        module = load_module(path)
        for i, case in enumerate(getattr(module, attr, [])):
            out.append(pytest.param(path, i, id=f"{path.stem}-{case[0]}-{i}"))
    return out


@pytest.mark.parametrize("path,index", _cases("CASES"))
def test_eager_vs_jit(path, index):
    module = load_module(path)
    name, args = module.CASES[index]
    fn = getattr(module, name)
    kwargs = getattr(module, "JIT_KWARGS", {}).get(name, {})
    expected = fn(*args)
    actual = autoflow.jit(fn, **kwargs)(*args)
    assert_same(actual, expected, f"{path.stem}.{name}{args}")


@pytest.mark.parametrize("path,index", _cases("GRAD"))
def test_grad(path, index):
    module = load_module(path)
    name, args = module.GRAD[index]
    fn = getattr(module, name)
    expected = jax.grad(fn)(*args)
    actual = jax.jit(jax.grad(autoflow.convert(fn)))(*args)
    assert_same(actual, expected, f"grad {path.stem}.{name}{args}")


@pytest.mark.parametrize("path,index", _cases("VMAP"))
def test_vmap(path, index):
    module = load_module(path)
    name, args = module.VMAP[index]
    fn = getattr(module, name)
    actual = jax.jit(jax.vmap(autoflow.convert(fn)))(*args)
    rows = [fn(*[a[i] for a in args]) for i in range(len(args[0]))]
    expected = jax.tree_util.tree_map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *rows)
    assert_same(actual, expected, f"vmap {path.stem}.{name}")
