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
    # a comment after code stays on its line (the statement is printed as written)
    assert body < lines.index("# inside the loop") < lines.index("x = x * 0.5  # halve")
    assert "return x  # result" in lines


# ---------------------------------------------------------------------------
# Faithful printing inside converted functions (issue 22 item 1)
# ---------------------------------------------------------------------------

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

from autoflow.transforms import faithful  # noqa: E402


def _both(source, name="m.py"):
    """``(faithful output, unparser's output, changed)`` of one module."""
    with faithful.fallbacks() as fallbacks:
        out, changed = convert_module(source, name)
    plain, changed_plain = convert_module(source, name, faithful=False)
    assert changed == changed_plain
    return out, plain, changed, fallbacks


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_faithful_output_is_the_unparsers_program(path):
    source = path.read_text(encoding="utf-8")
    out, plain, _, fallbacks = _both(source, str(path))
    assert ast.dump(ast.parse(out)) == ast.dump(ast.parse(plain))
    assert fallbacks == []


FUZZ_SEEDS = int(os.environ.get("AUTOFLOW_FIDELITY_SEEDS", "40"))


@pytest.mark.parametrize("chunk", range(4))
def test_faithful_output_of_fuzz_programs_is_the_unparsers_program(chunk):
    import tests.fuzzgen as fuzzgen

    for seed in range(chunk, FUZZ_SEEDS, 4):
        source = fuzzgen.generate(seed)
        out, plain, changed, fallbacks = _both(source, f"seed{seed}.py")
        assert "f" in changed, seed
        assert ast.dump(ast.parse(out)) == ast.dump(ast.parse(plain)), seed
        assert fallbacks == [], seed


STYLE = '''import jax.numpy as jnp


class Model:
    def step(self, x, n):
        \'\'\'Step.

            Indented docstring line.
        \'\'\'
        tol , eps = 1e-4, 2.5E-3   # spacing kept
        name = 'step'
        w = jnp.asarray([1.0,
                         2.0])
        for i in range(n):
            x = x*0.5  + eps   # halve
            if x.sum() < tol:
                break
        return x * w [0], name


def branch(x, limit=1e3):
    a, b = x*2, x/2
    if a.sum() > limit * 1e-2:
        a = a - 1e-3
    return a + b
'''


def test_unchanged_code_inside_a_converted_function_is_printed_as_written():
    out, plain, changed, _ = _both(STYLE)
    assert changed == ["Model.step", "branch"]
    for line in STYLE.splitlines():
        if line.strip().startswith(("for ", "if ", "break", "a = a")):
            continue  # converted statements (or moved ones, checked below)
        assert line in out.splitlines(), line
    # a moved statement keeps its text, re-indented by the file's unit
    assert "        a = a - 1e-3" in out.splitlines()
    # a converted condition keeps its literal spelling
    assert "af.if_stmt(a.sum() > limit * 1e-2," in out
    assert "0.0001" not in out and "0.01" not in out and "(a, b) = " not in out
    # the unparser's text respells these (what this printer avoids)
    assert "0.0001" in plain and "tol, eps = (0.0001, 0.0025)" in plain


def test_converted_code_uses_the_files_indentation_and_quotes():
    two = "def f(x, n):\n  k = 0\n  while k < n:\n    x = x + 1\n    k = k + 1\n  return x\n"
    tab = two.replace("    ", "\t\t").replace("  ", "\t")
    for src, unit in ((two, "  "), (tab, "\t")):
        out, plain, changed, _ = _both(src)
        assert ast.dump(ast.parse(out)) == ast.dump(ast.parse(plain))
        body = [line for line in out.splitlines()[1:] if line.strip()]
        for line in body:
            lead = line[:len(line) - len(line.lstrip())]
            assert lead == unit * (len(lead) // len(unit)), repr(line)
        assert f"{unit}def loop_body(x, k):" in out.splitlines()
        namespace = {}
        exec(compile(out, "m.py", "exec"), namespace)
        assert namespace["f"](1.0, 3) == 4.0
    # generated strings follow the file's quotes: single by default, double
    # where the file mostly writes double quotes
    single, *_ = _both(two)
    assert "('x', 'k')" in single
    double, *_ = _both(two + 'A = "a"\nB = "b"\n')
    assert '("x", "k")' in double


def _run_cli(*args, cwd):
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "autoflow", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=120)


DIFF_SOURCE = '''"""Several functions; only `loop` has control flow to convert."""
import jax.numpy as jnp

SCALE  =  2.5e-1   # odd spacing


def first(a, b):
    # nothing to convert
    return a*b + 1e-3


class Holder:
    def method(self, x):
        """A method docstring.

            Indented line: part of the value.
        """
        y , z = x, 1E2   # odd spacing, scientific literal
        return y * z


def loop(x, n):
    """Docstring of the converted function."""
    total = x * 1e-4   # kept as written
    for i in range(n):
        # accumulate
        total = total + x   # add
    return total


def last(q):
    return q  # after the converted one
'''


def test_diff_touches_only_the_converted_statements(tmp_path):
    path = tmp_path / "several.py"
    path.write_text(DIFF_SOURCE)
    r = _run_cli("convert", "--diff", path.name, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    tree = ast.parse(DIFF_SOURCE)
    loop = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "loop")
    converted = next(s for s in loop.body if isinstance(s, ast.For))
    import re
    hunks = [tuple(int(v or 1) for v in m.groups())
             for m in re.finditer(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@", r.stdout, re.M)]
    assert len(hunks) == 2, r.stdout
    # hunk 1: the runtime import after the module docstring (added lines only)
    removed = [line for line in r.stdout.splitlines()
               if line.startswith("-") and not line.startswith("---")]
    added = [line for line in r.stdout.splitlines()
             if line.startswith("+") and not line.startswith("+++")]
    assert "+import autoflow.runtime as af" in added
    # every removed line is a line of the converted `for` statement ...
    for_lines = DIFF_SOURCE.splitlines()[converted.lineno - 1:converted.end_lineno]
    assert removed and all(line[1:] in for_lines for line in removed)
    assert "-    for i in range(n):" in removed
    # ... and the second hunk's changed lines lie within the `for` statement's lines
    # (diff context is 3 lines around them)
    start, length = hunks[1]
    changed_at = [start + k for k, line in enumerate(
        [ln for ln in r.stdout.split("@@", 4)[4].splitlines()[1:] if not ln.startswith("+")])
        if line.startswith("-")]
    assert changed_at and all(converted.lineno <= k <= converted.end_lineno for k in changed_at)
    assert not any("1e-4" in line or "1E2" in line or "2.5e-1" in line for line in removed)
    # the comments inside the loop are still there
    assert any("# accumulate" in line for line in r.stdout.splitlines() if line.startswith(" "))
    assert any("total = total + x   # add" in line for line in r.stdout.splitlines())


def _fixture_cases():
    out = []
    for path in INPUTS:
        if path.parent.name != "fixtures":
            continue
        source = path.read_text(encoding="utf-8")
        if "CASES" in source:
            out.append(path)
    return out


@pytest.mark.parametrize("path", _fixture_cases(), ids=lambda p: p.stem)
def test_converted_fixture_output_runs_like_the_input(path, tmp_path):
    """The printed output (what a user keeps) runs like the input, on the
    fixture's own inputs, concretely and under ``jax.jit``."""
    import jax

    from .equivalence import assert_same, load_module

    original = load_module(path)
    text, _ = convert_module(path.read_text(encoding="utf-8"), str(path))
    out = tmp_path / path.name
    out.write_text(text, encoding="utf-8")
    converted = load_module(out)
    for name, args in original.CASES:
        expected = getattr(original, name)(*args)
        fn = getattr(converted, name)
        assert_same(fn(*args), expected, f"{path.stem}.{name}{args} (converted, concrete)")
        kwargs = getattr(original, "JIT_KWARGS", {}).get(name, {})
        assert_same(jax.jit(fn, **kwargs)(*args), expected,
                    f"{path.stem}.{name}{args} (converted, jax.jit)")


def test_headers_of_statements_that_stay_python_are_printed_as_written():
    source = '''def isascii(c): return 0 <= ord(c) <= 127   # after code on the def line


def g(x, n, path):
    with open(path) as f:  # with comment
        for i in range(n):
            x = x + 1.5e0
    try:  # try comment
        if x: x = 2
    except (ValueError,
            TypeError) as e:  # except comment
        raise
    return x
'''
    out, plain, changed, fallbacks = _both(source)
    assert changed == ["isascii", "g"] and fallbacks == []
    assert ast.dump(ast.parse(out)) == ast.dump(ast.parse(plain))
    lines = out.splitlines()
    for kept in ("    with open(path) as f:  # with comment", "    try:  # try comment",
                 "    except (ValueError,", "            TypeError) as e:  # except comment",
                 "            x = x + 1.5e0"):
        assert kept in lines, kept
    assert _comments(out) == _comments(source)


def test_form_feeds_do_not_shift_lines():
    # str.splitlines splits at a form feed; Python's line numbers do not
    source = ("import jax\n\x0c\ndef f(x):\n    # c\n    if x > 1e-4:\n        x = 1\n"
              "    return x\n\x0c\ndef g(y):\n    return y\n")
    out, plain, changed, fallbacks = _both(source)
    assert changed == ["f"] and fallbacks == []
    assert ast.dump(ast.parse(out)) == ast.dump(ast.parse(plain))
    assert out.count("\n    return x\n") == 1 and "x > 1e-4" in out
    assert out.endswith("\x0c\ndef g(y):\n    return y\n")


def test_a_comment_after_two_statements_on_one_line_is_kept_once():
    source = ("def f(x, n):\n    a = 1; b = 2  # both\n    for i in range(n):\n"
              "        x = x + a; x = x * b  # loop line\n    return x\n")
    out, plain, changed, fallbacks = _both(source)
    assert changed == ["f"] and fallbacks == []
    assert ast.dump(ast.parse(out)) == ast.dump(ast.parse(plain))
    assert _comments(out) == _comments(source)


def test_a_plain_try_inside_a_try_star_keeps_its_except():
    source = '''def f(x, n):
    try:
        try:
            x = x + 1
        except ValueError:  # inner
            pass
    except* TypeError:
        pass
    for i in range(n):
        x = x * 2
    return x
'''
    out, plain, changed, fallbacks = _both(source)
    assert changed == ["f"] and fallbacks == []
    assert ast.dump(ast.parse(out)) == ast.dump(ast.parse(plain))
    assert "        except ValueError:  # inner" in out.splitlines()


def test_the_printer_builds_on_an_unparser_that_takes_no_flag(monkeypatch):
    # Python 3.13's unparser takes no `_avoid_backslashes` (3.11's and 3.12's do): the
    # printer sets the flag itself there, and prints the same program either way.
    from autoflow.transforms import printer
    src = ('def f(x, n):\n    k = 0\n    while k < n:\n'
           '        print(f"k={k!r:>4} {x:.2f} {\'q\'}")\n        x = x + 1\n        k = k + 1\n'
           '    return x\nA = "a"\n')
    before, plain, _, fallbacks = _both(src)
    assert fallbacks == []
    monkeypatch.setattr(printer, "_AVOID_BACKSLASHES_ARG", False)
    after, _, _, fallbacks = _both(src)
    assert fallbacks == []
    assert after == before
    assert ast.dump(ast.parse(after)) == ast.dump(ast.parse(plain))
