"""The converted tree's last steps, made faster, print and compile what the standard
ones did: ``core.unparse.unparse`` against ``ast.unparse``, and the generated
``nodes.into_ast`` against ``nodes.to_ast`` (a copy), on every function of the five
conversion corpora (``benchmarks/conversion_corpora.py``)."""

from __future__ import annotations

import ast
import os
import sys
import warnings

import pytest

from autoflow import _conversion as af_conversion
from autoflow.core import nodes, unparse as af_unparse
from autoflow.transforms import pipeline

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
sys.path.insert(0, BENCH)
import conversion_corpora  # noqa: E402

OPTIONS = af_conversion._transform_options(af_conversion._options(None, True, (), True, False))


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """``[(gast tree as converted, its ast copy made by to_ast)]`` for every function."""
    out = []
    real = pipeline.to_ast

    def keep(node):
        copy = nodes.to_ast(node)
        made = real(node)
        out.append((made, copy))
        return made

    pipeline.to_ast = keep
    try:
        for fns in conversion_corpora.corpora(str(tmp_path_factory.mktemp("site"))).values():
            for fn in fns:
                af_conversion._by_code.clear()
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        af_conversion._transformed(fn, OPTIONS)
                except Exception:  # noqa: BLE001 - a refusal: nothing printed
                    pass
    finally:
        pipeline.to_ast = real
        af_conversion._by_code.clear()
    assert len(out) > 400
    return out


def test_this_python_gets_the_fast_unparser():
    assert af_unparse.unparse is not ast.unparse


def test_the_fast_unparser_prints_what_ast_unparse_prints(converted):
    different = [ast.unparse(tree) for tree, _ in converted
                 if af_unparse.unparse(tree) != ast.unparse(tree)]
    assert not different, different[0]


def test_into_ast_makes_the_tree_to_ast_copies(converted):
    for made, copy in converted:
        assert ast.dump(made, include_attributes=True) == ast.dump(copy, include_attributes=True)


def test_an_unparser_that_prints_otherwise_is_not_used(monkeypatch):
    # (as on a Python whose private unparser changed: the probe's text differs)
    monkeypatch.setattr(af_unparse._Fast, "block",
                        lambda self, *, extra=None: ast._Unparser.block(self, extra=" "))
    assert af_unparse._checked() is ast.unparse
    monkeypatch.setattr(ast, "_Unparser", None)
    monkeypatch.setattr(af_unparse, "_Unparser", None)
    assert af_unparse._checked() is ast.unparse


def test_deep_nesting_prints_through_the_fast_unparser():
    depth = 90  # (Python parses at most 100 levels of indentation)
    source = "def f(x):\n" + "".join("    " * (k + 1) + f"if x > {k}:\n" for k in range(depth)) \
        + "    " * (depth + 1) + "x = x + 1\n    return x\n"
    tree = ast.parse(source)
    assert af_unparse.unparse(tree) == ast.unparse(tree)
