"""``autoflow convert`` output: converting it again changes nothing, it
compiles, and the string values of the input (docstrings included) survive."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from autoflow.transforms.module import convert_module

ROOT = Path(__file__).resolve().parent.parent
INPUTS = sorted(p for p in (ROOT / "tests" / "fixtures").glob("*.py")
                if not p.name.endswith(".after.py")) + sorted((ROOT / "examples").glob("*.py"))


def _strings(text):
    """Every string constant of a module (docstrings included, f-string parts
    not: a traced ``print(f"...")`` is rewritten), with its count."""
    tree = ast.parse(text)
    parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr)
             for v in ast.walk(n)}
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in parts:
            out[node.value] = out.get(node.value, 0) + 1
    return out


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_converting_the_output_again_changes_nothing(path):
    source = path.read_text(encoding="utf-8")
    once, changed = convert_module(source, str(path))
    compile(once, str(path), "exec")
    twice, again = convert_module(once, str(path))
    assert twice == once
    assert again == []
    # every string of the input keeps its value (the converter adds name labels only)
    before, after = _strings(source), _strings(once)
    assert all(after.get(s, 0) >= n for s, n in before.items())


def test_docstrings_and_multiline_strings_keep_their_value(tmp_path):
    source = '''"""Module doc."""
import jax.numpy as jnp


class Model:
    def step(self, x):
        """Take a step.

        Longer text, indented:
            more.
        """
        s = """multi
  line"""
        if x > 0:  # a comment outside the function is kept; this one is not
            x = x - 1
        return x, s


def untouched(y):
    """Docstring.
       Second line."""
    return y  # kept
'''
    out, changed = convert_module(source, str(tmp_path / "m.py"))
    assert changed == ["Model.step"]
    src_tree, out_tree = ast.parse(source), ast.parse(out)

    def docs(tree):
        return {n.name: ast.get_docstring(n, clean=False) for n in ast.walk(tree)
                if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Module))
                and hasattr(n, "name")}

    assert docs(src_tree) == {k: v for k, v in docs(out_tree).items() if k in docs(src_tree)}
    assert ast.get_docstring(out_tree, clean=False) == "Module doc."
    assert "multi\n  line" in _strings(out)
    # the function with nothing to convert is byte for byte the same
    assert source[source.index("def untouched"):] in out
    assert convert_module(out, str(tmp_path / "m.py"))[0] == out


def _comments(text):
    import io
    import tokenize
    return sorted(t.string for t in tokenize.generate_tokens(io.StringIO(text).readline)
                  if t.type == tokenize.COMMENT)


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_comment_is_kept(path):
    source = path.read_text(encoding="utf-8")
    out, _ = convert_module(source, str(path))
    assert _comments(out) == _comments(source)


def test_comments_inside_a_converted_function_stay_with_their_statements(tmp_path):
    source = '''def step(x, n):
    # before the loop
    for i in range(n):
        # inside the loop
        x = x * 0.5  # halve
        if x < 1e-3:
            break
    return x  # result
'''
    out, changed = convert_module(source, str(tmp_path / "s.py"))
    assert changed == ["step"]
    lines = [line.strip() for line in out.splitlines()]
    assert lines.index("# before the loop") < lines.index("broke = False")
    body = lines.index("def loop_body(i, x, broke):")
    assert body < lines.index("# inside the loop") < lines.index("# halve") \
        < lines.index("x = x * 0.5")
    assert lines.index("# result") == lines.index("return x") - 1
