"""The ``autoflow`` command line, run as users run it: the console script in a subprocess.

Golden outputs live in ``tests/cli_data/``; ``AUTOFLOW_REGENERATE=1 pytest
tests/test_cli.py`` rewrites them (review the diff afterwards).
"""

from __future__ import annotations

import ast
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "cli_data"
REGENERATE = os.environ.get("AUTOFLOW_REGENERATE", "") not in ("", "0")
_SCRIPT = Path(sys.executable).parent / ("autoflow.exe" if os.name == "nt" else "autoflow")
SCRIPT = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "autoflow"]
MODULE = [sys.executable, "-m", "autoflow"]

LOOP = "def g(x):\n    while x < 3:\n        x += 1\n    return x\n"


def run(*args, stdin=None, cwd=ROOT, env=None, command=None):
    full_env = {**os.environ, "NO_COLOR": "", "AUTOFLOW_TRACEBACK": "", **(env or {})}
    data = stdin.encode() if isinstance(stdin, str) else stdin
    proc = subprocess.run((command or SCRIPT) + [str(a) for a in args], input=data,
                          capture_output=True, cwd=cwd, env=full_env, timeout=120)
    proc.out = proc.stdout.decode("utf-8", "replace")
    proc.err = proc.stderr.decode("utf-8", "replace")
    return proc


def golden(name, actual):
    path = DATA / name
    if REGENERATE:
        path.write_text(actual, encoding="utf-8")
        return
    assert path.exists(), f"{path} is missing: run with AUTOFLOW_REGENERATE=1, then review it"
    assert actual == path.read_text(encoding="utf-8"), (
        f"output differs from {path} (AUTOFLOW_REGENERATE=1 rewrites it)")


def one_error_line(proc, rc=1):
    assert proc.returncode == rc, (proc.returncode, proc.err)
    assert proc.out == "", "nothing may reach standard output when an input fails"
    assert "Traceback" not in proc.err
    lines = proc.err.splitlines()
    assert len(lines) == 1, proc.err
    return lines[0]


# ---------------------------------------------------------------------------
# usage
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("args", [[], ["convert"], ["check"], ["frobnicate", "x.py"],
                                  ["convert", "--color", "sometimes", "x.py"],
                                  ["convert", "--bogus", "x.py"], ["explain", "f.py:g", "--args", "q7"],
                                  ["explain", "no_colon.py", "--args", "f32"]])
def test_usage_errors_exit_2(args):
    proc = run(*args)
    assert proc.returncode == 2, (args, proc.returncode, proc.err)
    assert proc.out == "" and "Traceback" not in proc.err and proc.err.strip()


def test_help_says_what_reads_and_what_imports():
    assert run("--help").returncode == 0
    assert "never import" in run("convert", "--help").out
    assert "never imported" in run("check", "--help").out
    help_text = " ".join(run("explain", "--help").out.split())
    assert "Import FILE (this RUNS its top-level code" in help_text


def test_check_help_names_the_codes_check_has():
    from autoflow import pitfalls

    text = " ".join(run("check", "--help").out.split())
    first, last = min(pitfalls.CODES), max(pitfalls.CODES)
    assert f"{first}..{last}" in text, text
    failing = sorted(pitfalls.FAILING)
    assert failing[-1] in text and failing[0] in text, text


# ---------------------------------------------------------------------------
# bad inputs: one compiler-style line each, exit 1, nothing on stdout
# ---------------------------------------------------------------------------

def test_a_notebook_is_refused_not_read_as_no_code(tmp_path):
    """A notebook's JSON parses as one Python dict: `check` said "no control flow to
    convert" and `convert` printed the JSON back, both with exit status 0."""
    import json

    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
            "source": ["def f(x):\n", "    while x > 1:\n", "        x = x / 2\n",
                       "    return x\n"]}
    nb = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    for name in ("nb.ipynb", "exported.json"):
        (tmp_path / name).write_text(json.dumps(nb, indent=1))
        for cmd in ("convert", "check"):
            proc = run(cmd, tmp_path / name)
            assert proc.returncode == 1 and proc.out == "", (cmd, proc.out)
            assert "a Jupyter notebook, not Python source" in proc.err
            assert "nbconvert --to script" in proc.err and "Traceback" not in proc.err


def test_syntax_error(tmp_path):
    src = "def f(x):\n    return x +\n"
    (tmp_path / "bad.py").write_text(src)
    try:
        ast.parse(src)
    except SyntaxError as e:
        want = f"bad.py:{e.lineno}:{e.offset}: SyntaxError: {e.msg}"
    for cmd in ("convert", "check"):
        assert one_error_line(run(cmd, "bad.py", cwd=tmp_path)) == want


def test_indentation_error_names_its_kind(tmp_path):
    (tmp_path / "ind.py").write_text("def f(x):\nreturn x\n")
    line = one_error_line(run("convert", "ind.py", cwd=tmp_path))
    assert line.startswith("ind.py:2:") and "IndentationError: " in line


def test_latin1_bytes(tmp_path):
    (tmp_path / "lat.py").write_bytes(b'def f(x):\n    return "caf\xe9"\n')
    line = one_error_line(run("convert", "lat.py", cwd=tmp_path))
    assert line.startswith("lat.py: not valid UTF-8"), line
    assert "line 2" in line


def test_latin1_with_a_coding_declaration_is_fine(tmp_path):
    src = b'# -*- coding: latin-1 -*-\nS = "caf\xe9"\n\ndef f(x):\n    while x < 3:\n        x += 1\n    return x\n'
    (tmp_path / "decl.py").write_bytes(src)
    proc = run("convert", "decl.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.err
    assert b'S = "caf\xe9"' in proc.stdout  # written back in the file's own encoding
    assert b"af.while_stmt(" in proc.stdout


def test_binary_file(tmp_path):
    (tmp_path / "blob.py").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00")
    line = one_error_line(run("convert", "blob.py", cwd=tmp_path))
    assert line.startswith("blob.py: binary file"), line


def test_missing_file(tmp_path):
    assert one_error_line(run("convert", "nope.py", cwd=tmp_path)) == "nope.py: no such file"
    assert one_error_line(run("check", "nope.py", cwd=tmp_path)) == "nope.py: no such file"


def test_directory(tmp_path):
    (tmp_path / "pkg").mkdir()
    assert one_error_line(run("convert", "pkg/", cwd=tmp_path)) == "pkg/: is a directory"


def test_one_bad_input_means_no_partial_output(tmp_path):
    (tmp_path / "good.py").write_text(LOOP)
    proc = run("convert", "good.py", "missing.py", cwd=tmp_path)
    assert one_error_line(proc) == "missing.py: no such file"


def test_unknown_function(tmp_path):
    (tmp_path / "m.py").write_text(LOOP)
    line = one_error_line(run("convert", "--function", "h", "m.py", cwd=tmp_path))
    assert line.startswith("m.py: no function named 'h'")


def test_internal_error_is_one_line_not_a_traceback(tmp_path, monkeypatch, capsys):
    from autoflow import cli
    from autoflow.transforms import module

    def broken(*a, **k):
        raise RuntimeError("something inside autoflow went wrong")

    monkeypatch.setattr(module, "convert_module", broken)
    (tmp_path / "m.py").write_text(LOOP)
    assert cli.main(["convert", str(tmp_path / "m.py")]) == 3
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    assert len(err.splitlines()) == 1 and "autoflow bug" in err and "RuntimeError" in err


def test_autoflow_traceback_shows_an_internal_errors_traceback(monkeypatch, capsys):
    # (docs/cli.md: one line and status 3, or with AUTOFLOW_TRACEBACK=1 the traceback)
    from autoflow import cli

    def broken(argv):
        raise RuntimeError("something inside autoflow went wrong")

    monkeypatch.setattr(cli, "_main", broken)
    monkeypatch.delenv("AUTOFLOW_TRACEBACK", raising=False)
    assert cli.main(["check", "m.py"]) == 3
    assert "RuntimeError" in capsys.readouterr().err
    monkeypatch.setenv("AUTOFLOW_TRACEBACK", "1")
    with pytest.raises(RuntimeError, match="went wrong"):
        cli.main(["check", "m.py"])


def test_calls_into_a_module_next_to_the_file_are_converted(tmp_path, capsys):
    from autoflow import cli
    (tmp_path / "helpers.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "m.py").write_text(
        "import numpy as np\nimport helpers\nfrom . import siblings\n\n\n"
        "def g(x, model):\n    rng = np.random.default_rng(0)\n"
        "    return helpers.f(x) + siblings.h(x) + np.exp(x) + rng.normal() + model.step(x)\n")
    assert cli.main(["convert", str(tmp_path / "m.py")]) == 0
    out = capsys.readouterr().out
    for text in ("af.call(helpers.f, x)", "af.call(siblings.h, x)", "af.call(model.step, x)",
                 "np.exp(x)", "rng.normal()"):
        assert text in out, out
    assert "call(np." not in out and "call(rng" not in out, out


# ---------------------------------------------------------------------------
# convert
# ---------------------------------------------------------------------------

def test_empty_file_prints_nothing(tmp_path):
    (tmp_path / "empty.py").write_text("")
    proc = run("convert", "empty.py", cwd=tmp_path)
    assert (proc.returncode, proc.out, proc.err) == (0, "", "")


def test_file_without_functions_prints_its_input_unchanged(tmp_path):
    src = "# just data\nX = [1, 2,   3]  # spacing kept\nif X:\n    Y = 1\n"
    (tmp_path / "data.py").write_text(src)
    proc = run("convert", "data.py", cwd=tmp_path)
    assert proc.returncode == 0 and proc.out == src


def test_stdin(tmp_path):
    proc = run("convert", "-", stdin=LOOP, cwd=tmp_path)
    assert proc.returncode == 0, proc.err
    assert "af.while_stmt(" in proc.out and "import autoflow.runtime as af" in proc.out
    ast.parse(proc.out)
    bad = run("convert", "-", stdin="def f(:\n", cwd=tmp_path)
    assert one_error_line(bad).startswith("<stdin>:1:")


def test_python_dash_m_is_the_same_command():
    a = run("convert", "examples/collatz.py")
    b = run("convert", "examples/collatz.py", command=MODULE)
    assert a.returncode == b.returncode == 0
    assert a.out == b.out and "af.while_stmt(" in a.out


def test_diff(tmp_path):
    src = "import math\n\n\n" + LOOP + "\n\ndef plain(x):\n    return x + 1  # untouched\n"
    (tmp_path / "m.py").write_text(src)
    proc = run("convert", "--diff", "m.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.err
    lines = proc.out.splitlines()
    assert lines[0].startswith("--- m.py") and lines[1].startswith("+++ m.py")
    assert "-    while x < 3:" in lines
    assert any(ln.startswith("+    x = af.while_stmt(") for ln in lines)
    assert "+import autoflow.runtime as af" in lines
    assert not any("untouched" in ln and ln[:1] in "+-" for ln in lines)
    # Nothing changes: an empty diff.
    (tmp_path / "same.py").write_text("def plain(x):\n    return x + 1\n")
    assert run("convert", "--diff", "same.py", cwd=tmp_path).out == ""


def test_function(tmp_path):
    src = ("def f(x):\n    while x < 3:\n        x += 1\n    return x\n\n\n"
           "def g(x):\n    # a comment that stays\n    return x * 2\n\n\n"
           "class C:\n    def m(self, x):\n        if x > 0:\n            x = -x\n        return x\n")
    (tmp_path / "m.py").write_text(src)
    f = run("convert", "--function", "f", "m.py", cwd=tmp_path)
    assert f.returncode == 0, f.err
    tree = ast.parse(f.out)
    assert [n.name for n in tree.body if isinstance(n, ast.FunctionDef)] == ["f"]
    assert "af.while_stmt(" in f.out and "def g" not in f.out
    # An unchanged function prints exactly as written.
    g = run("convert", "--function", "g", "m.py", cwd=tmp_path)
    assert g.out == "def g(x):\n    # a comment that stays\n    return x * 2\n"
    m = run("convert", "--function", "C.m", "m.py", cwd=tmp_path)
    assert "af.if_stmt(" in m.out and "def m(self, x)" in m.out
    d = run("convert", "--function", "f", "--diff", "m.py", cwd=tmp_path)
    assert "-    while x < 3:" in d.out.splitlines() and "def g" not in d.out


def test_color(tmp_path):
    (tmp_path / "m.py").write_text(LOOP)
    # Not a terminal: no colour unless asked for.
    assert "\x1b[" not in run("convert", "m.py", cwd=tmp_path).out
    assert "\x1b[" not in run("convert", "--diff", "m.py", cwd=tmp_path).out
    # Diffs are coloured even without pygments.
    assert "\x1b[" in run("convert", "--diff", "--color", "always", "m.py", cwd=tmp_path).out
    assert "\x1b[" not in run("convert", "--diff", "--color", "never", "m.py", cwd=tmp_path).out


def test_color_auto_follows_the_terminal_and_no_color(monkeypatch):
    from autoflow.cli import _use_color

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert _use_color("auto", Tty()) and not _use_color("auto", io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not _use_color("auto", Tty())
    assert _use_color("always", io.StringIO()) and not _use_color("never", Tty())


def test_top_level_code_never_runs(tmp_path):
    marker = tmp_path / "ran.txt"
    src = ("from pathlib import Path\n"
           "Path(__file__).with_name('ran.txt').write_text('ran')\n"
           "raise SystemExit('must not run')\n\n\n" + LOOP)
    (tmp_path / "effects.py").write_text(src)
    conv = run("convert", "effects.py", cwd=tmp_path)
    assert conv.returncode == 0 and "af.while_stmt(" in conv.out
    assert run("check", "effects.py", cwd=tmp_path).returncode == 0
    assert not marker.exists()
    # explain says it imports the file, and does.
    exp = run("explain", "effects.py:g", "--args", "i32", cwd=tmp_path)
    assert marker.exists()
    assert one_error_line(exp) == "effects.py:3: error while importing it: SystemExit: must not run"


def test_convert_and_check_never_import_jax(tmp_path):
    (tmp_path / "m.py").write_text(LOOP)
    code = ("import sys, io, contextlib\nfrom autoflow.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert main(['convert', 'm.py']) == 0\n"
            "    assert main(['convert', '--diff', 'm.py']) == 0\n"
            "    assert main(['check', 'm.py']) == 0\n"
            "bad = sorted(m for m in sys.modules if m == 'jax' or m.startswith('jax.'))\n"
            "assert not bad, bad\n")
    proc = run(command=[sys.executable, "-c", code], cwd=tmp_path)
    assert proc.returncode == 0, proc.err


def test_converted_output_imports_and_runs(tmp_path):
    import jax
    import jax.numpy as jnp

    from .equivalence import assert_same, load_module

    proc = run("convert", DATA / "program.py")
    assert proc.returncode == 0, proc.err
    out = tmp_path / "program_converted.py"
    out.write_text(proc.out)
    original, converted = load_module(DATA / "program.py"), load_module(out)
    cases = [("halvings", (jnp.float32(37.0), jnp.float32(1.5))),
             ("abs_sum", (jnp.array([1.0, -2.0, 3.5]),)),
             ("first_negative", (jnp.array([1.0, 2.0, -3.0, 4.0]),)),
             ("first_negative", (jnp.array([1.0, 2.0]),)),
             ("piecewise", (jnp.float32(-2.0),)), ("piecewise", (jnp.float32(3.0),)),
             ("odd_total", (jnp.int32(7),))]
    for name, args in cases:
        expected = getattr(original, name)(*args)
        actual = jax.jit(getattr(converted, name))(*args)
        assert_same(actual, expected, f"{name}{args}")
    assert_same(jax.jit(converted.Scaler.scale)(jnp.float32(2.0), jnp.int32(3)),
                original.Scaler.scale(jnp.float32(2.0), 3), "Scaler.scale")


# ---------------------------------------------------------------------------
# check
# ---------------------------------------------------------------------------

def test_check_examples_golden():
    out = ""
    for path, function in [("examples/collatz.py", "collatz_steps"), ("examples/bisection.py", "bisect")]:
        proc = run("check", path, "--function", function)
        assert (proc.returncode, proc.err) == (0, ""), proc.err
        out += proc.out
    golden("check_examples.txt", out)


def test_check_fallbacks_golden():
    proc = run("check", "tests/cli_data/fallbacks.py")
    assert proc.returncode == 1, "a statement that cannot convert makes check fail"
    assert proc.err == ""
    golden("check_fallbacks.txt", proc.out)


def test_check_stdin_and_function():
    proc = run("check", "-", "--function", "g", stdin=LOOP)
    assert proc.returncode == 0, proc.err
    assert proc.out.splitlines()[0] == "<stdin>:2:5: g: while -> lax.while_loop; carries x"


# ---------------------------------------------------------------------------
# explain
# ---------------------------------------------------------------------------

def _lowering_lines(text):
    lines = text.splitlines()
    start = lines.index("control flow at trace time:") + 1
    end = lines.index("jaxpr:")
    return "\n".join(lines[start:end]) + "\n", "\n".join(lines[end + 1:])


@pytest.mark.parametrize("target,args,name", [
    ("examples/collatz.py:collatz_steps", ["i32"], "explain_collatz.txt"),
    ("examples/bisection.py:bisect", ["f32", "f32", "f32", "1e-6", "50"], "explain_bisection.txt"),
])
def test_explain_golden(target, args, name):
    proc = run("explain", target, "--args", *args)
    assert proc.returncode == 0, proc.err
    lowerings, jaxpr = _lowering_lines(proc.out)
    golden(name, lowerings)
    assert "{ lambda" in jaxpr  # a jaxpr is printed (its exact text is JAX's business)


def test_explain_hlo_and_python_lowerings(tmp_path):
    (tmp_path / "m.py").write_text(
        "def f(x, n, flag):\n"
        "    if flag:\n"
        "        x = x * 2\n"
        "    k = 0\n"
        "    while k < n:\n"
        "        k += 1\n"
        "    return x + k\n")
    proc = run("explain", "m.py:f", "--args", "f32[2,2]", "3", "bool", "--hlo", cwd=tmp_path)
    assert proc.returncode == 0, proc.err
    assert proc.out.startswith("f(f32[2,2], 3, bool[])\n")
    lowerings, rest = _lowering_lines(proc.out)
    assert lowerings == "  m.py:2:5: if -> select (lax.select)\n  m.py:5:5: while -> python\n"
    assert "stablehlo:" in rest and "module @jit_f" in rest


def test_explain_follows_helpers_and_fallbacks(tmp_path):
    (tmp_path / "m.py").write_text(
        "def helper(x):\n"
        "    if x > 1:\n"
        "        x = x - 1\n"
        "    return x\n"
        "\n"
        "\n"
        "def main(x, lock, limit):\n"
        "    while x < 10:\n"
        "        x = helper(x) + 2\n"
        "    with lock:\n"
        "        if limit > 100:\n"
        "            return 0.0\n"
        "    return x\n")
    code = ("import contextlib, sys\nsys.path.insert(0, '.')\nimport m\n"
            "from autoflow.explain import explain\n"
            "print(explain(m.main, 'f32', contextlib.nullcontext(), 5))\n")
    proc = run(command=[sys.executable, "-c", code], cwd=tmp_path)
    assert proc.returncode == 0, proc.err
    lowerings, _ = _lowering_lines(proc.out)
    assert lowerings == (
        "  m.py:8:5: while -> lax.while_loop\n"
        "  m.py:11:9: if -> python\n"
        "  m.py:2:5: if -> select (lax.select) (in helper)\n")


def test_explain_reports_conversion_errors(tmp_path):
    proc = run("explain", "tests/cli_data/fallbacks.py:assigned_in_one_branch", "--args", "f32")
    assert proc.returncode == 1 and proc.out == "" and "Traceback" not in proc.err
    assert proc.err.startswith("tests/cli_data/fallbacks.py:")
    assert "`y` is assigned only when the condition is true" in proc.err


def test_explain_api():
    import jax
    import jax.numpy as jnp

    from autoflow.explain import Explanation, explain

    from .equivalence import load_module

    collatz = load_module(ROOT / "examples" / "collatz.py")
    result = explain(collatz.collatz_steps, jax.ShapeDtypeStruct((), jnp.int32))
    assert isinstance(result, Explanation)
    assert [(low.line, low.kind, low.lowered) for low in result.lowerings] == [
        (30, "while", ("lax.while_loop",)), (31, "if", ("lax.cond",))]
    assert result.signature == "collatz_steps(i32[])"
    assert "while[" in str(result.jaxpr) and str(result).startswith("collatz_steps(i32[])\n")
    # The same function under autoflow.jit, and a concrete argument: Python all the way.
    concrete = explain(collatz.collatz_jit, 6)
    assert [low.lowered for low in concrete.lowerings] == [("python",), ("python",)]


def _unused(jaxpr):
    """Equations of ``jaxpr`` (at any depth) none of whose results is used, and loop
    carries that nothing reads: what the printed jaxpr of ``explain`` must not show."""
    out = []

    def names(atoms):  # (variables; literals are constants)
        return {v for v in atoms if not hasattr(v, "val")}

    def walk(j):
        used = names(j.outvars)
        for eqn in reversed(j.eqns):
            if not names(eqn.outvars) & used and not eqn.effects:
                out.append(str(eqn).splitlines()[0])
            used |= names(eqn.invars)
            for sub in eqn.params.values():
                for s in (sub if isinstance(sub, tuple) else (sub,)):
                    inner = getattr(s, "jaxpr", None)
                    if inner is not None and hasattr(inner, "eqns"):
                        walk(inner)
            if eqn.primitive.name == "while":
                body, cond = eqn.params["body_jaxpr"].jaxpr, eqn.params["cond_jaxpr"].jaxpr
                nb, nc = eqn.params["body_nconsts"], eqn.params["cond_nconsts"]
                read = names(v for e in body.eqns + cond.eqns for v in e.invars) \
                    | names(body.outvars) | names(cond.outvars)
                for k, v in enumerate(eqn.outvars):
                    if v not in used and body.invars[nb + k] not in read \
                            and cond.invars[nc + k] not in read:
                        out.append(f"unread carry {k} of {str(eqn).splitlines()[0]}")

    walk(jaxpr.jaxpr)
    return out


def test_explain_shows_no_unused_equations_or_carries():
    """The loop test tried before a loop is staged, and the iteration counter a loop
    carries for the backward pass, are computed and dropped: `explain` leaves them out,
    as XLA does (the same program otherwise)."""
    import jax
    import jax.numpy as jnp

    from autoflow.explain import explain

    from .equivalence import load_module

    collatz = load_module(ROOT / "examples" / "collatz.py")
    result = explain(collatz.collatz_steps, "i32")
    assert _unused(result.jaxpr) == [], str(result.jaxpr)
    (loop,) = [e for e in result.jaxpr.jaxpr.eqns if e.primitive.name == "while"]
    assert len(loop.outvars) == 2  # n and steps: no extra counter
    # what it computes is what the converted function computes
    shown = jax.core.eval_jaxpr(result.jaxpr.jaxpr, result.jaxpr.consts, jnp.int32(27))
    assert int(shown[0]) == collatz.collatz_steps(27) == 111

    def summed(xs, n):
        total = 0.0
        for i in range(n):
            total = total + xs[i]
        return total
    result = explain(summed, "f32[4]", "i32")
    assert _unused(result.jaxpr) == [], str(result.jaxpr)
    shown = jax.core.eval_jaxpr(result.jaxpr.jaxpr, result.jaxpr.consts, jnp.arange(4.0), 3)
    assert float(shown[0]) == summed([0.0, 1.0, 2.0, 3.0], 3)


def test_check_reports_a_traced_raise_an_except_would_catch(tmp_path):
    (tmp_path / "m.py").write_text(
        "def safe(a, b):\n"
        "    try:\n"
        "        if b == 0:\n"
        "            raise ZeroDivisionError('zero')\n"
        "        return a / b\n"
        "    except Exception:\n"
        "        return 0.0\n"
        "\n"
        "\n"
        "def lowered(a, b):\n"
        "    try:\n"
        "        if b == 0:\n"
        "            raise ZeroDivisionError('zero')\n"
        "        return a / b\n"
        "    except ZeroDivisionError:\n"
        "        return 0.0\n")
    proc = run("check", "m.py", cwd=tmp_path)
    assert proc.returncode == 1
    lines = proc.out.splitlines()
    assert lines[0].startswith("m.py:3:9: safe: if -> lax.cond") and "may be caught" in lines[0]
    assert lines[1].startswith("m.py:12:9: lowered: if -> lax.cond") and "fails" not in lines[1]


def test_run_shows_the_scripts_error_as_python_does(tmp_path):
    # (a script that raised showed autoflow's `cli.py` and `hooks.py` frames above the
    # user's; one that does not parse, a traceback through them and `ast`)
    raising = tmp_path / "raising.py"
    raising.write_text("import math\n\ndef f(x):\n    return math.sqrt(x)\n\nf(-1.0)\n")
    proc = run("run", raising)
    assert proc.returncode == 1, proc.err
    assert "ValueError: math domain error" in proc.err
    assert str(raising) in proc.err and "autoflow/" not in proc.err.replace(str(tmp_path), "")
    broken = tmp_path / "broken.py"
    broken.write_text("def f(x):\n    if x > 0\n        return x\n")
    proc = run("run", broken)
    assert proc.returncode == 1
    assert proc.err.strip() == f"autoflow: {broken}:2:13: SyntaxError: expected ':'" and \
        "Traceback" not in proc.err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_output_that_cannot_be_written_is_no_internal_error():
    with open("/dev/full", "w") as full:
        proc = subprocess.run(SCRIPT + ["convert", str(ROOT / "examples" / "collatz.py")],
                              stdout=full, stderr=subprocess.PIPE, timeout=120,
                              env={**os.environ, "AUTOFLOW_TRACEBACK": ""})
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "cannot write the output" in err and "internal" not in err


def test_check_reads_an_elif_chain_of_hundreds_of_branches(tmp_path):
    # (it said "too deeply nested" and exited 1 from 200 branches; `convert` converts it)
    arms = "".join(f"    elif x == {i}:\n        y = {i}\n" for i in range(1, 300))
    path = tmp_path / "chain.py"
    path.write_text(f"def chain(x):\n    if x == 0:\n        y = 0\n{arms}    else:\n"
                    "        y = -1\n    return y\n")
    proc = run("check", path)
    assert proc.returncode == 0, proc.err
    assert "300 control-flow statements: 300 convert" in proc.out


def test_check_says_why_a_statement_stays_python(tmp_path):
    # (it said "the rewriter left it as Python", where `autoflow.jit` names the variable)
    path = tmp_path / "counting.py"
    path.write_text("counter = 0\n\n\ndef bump(x):\n    global counter\n    if x > 0:\n"
                    "        counter += 1\n    return x\n")
    proc = run("check", path)
    assert proc.returncode == 1
    assert "it assigns `counter`, declared `global` or `nonlocal`" in proc.out, proc.out


def test_converted_output_with_its_jit_runs_without_warnings(tmp_path):
    # (the output keeps `@autoflow.jit`, which converts the converted code again: the
    # branches it had made, `if_true`, were taken for ones made now and renamed, then
    # "cannot convert `f`: its source does not start with its `def`", once per branch)
    src = tmp_path / "jitted.py"
    src.write_text("import autoflow\n\n\n@autoflow.jit\ndef f(x):\n    if x > 0:\n"
                   "        x = x + 1\n    while x < 10:\n        x = x + 3\n    return x\n\n\n"
                   "print(float(f(1.0)), float(f(-3.0)))\n")
    proc = run("convert", src)
    assert proc.returncode == 0, proc.err
    out = tmp_path / "jitted_converted.py"
    out.write_text(proc.out)
    ran = subprocess.run([sys.executable, str(out)], capture_output=True, timeout=120,
                         cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr.decode()
    assert "ConversionWarning" not in ran.stderr.decode(), ran.stderr.decode()
    assert ran.stdout.decode().split() == ["11.0", "12.0"]


def test_explain_words_jax_tracing_errors_as_jit_does(tmp_path):
    # (it printed JAX's own text, "NonConcreteBooleanIndexError: Array boolean indices
    # must be concrete", where `autoflow.jit` points at the line and says what to do)
    path = tmp_path / "masks.py"
    path.write_text("def positives(x):\n    return x[x > 0].sum()\n")
    proc = run("explain", f"{path}:positives", "--args", "f32[3]")
    assert proc.returncode == 1
    assert f"{path}:2:12: boolean-mask indexing of `x`" in proc.err, proc.err
    assert "jnp.where(x > 0, x, 0)" in proc.err and "Traceback" not in proc.err


@pytest.mark.parametrize("data", [b"\xef\xbb\xbfx = 1  # a byte order mark\n",
                                  b"x = 1\r\ny = 2\nz = 3\r\n",
                                  b"def f(x):\r\n    return x + 1\n"],
                         ids=["bom", "mixed-endings", "function-without-control-flow"])
def test_a_file_with_nothing_to_convert_comes_back_byte_for_byte(tmp_path, data):
    # (a UTF-8 byte order mark was dropped, mixed line endings made "\n")
    path = tmp_path / "plain.py"
    path.write_bytes(data)
    proc = run("convert", path)
    assert proc.returncode == 0, proc.err
    assert proc.stdout == data


def test_check_reads_long_expressions_and_chains(tmp_path):
    # a sum of thousands of terms nests as deep (it was a RecursionError on Python 3.13,
    # and minutes on 3.11); a long `elif` chain nests its statements as deep
    src = tmp_path / "long.py"
    chain = "".join(f"    elif x == {i}:\n        y = {i}\n" for i in range(1, 1200))
    src.write_text("def total(x):\n    y = " + " + ".join(["x"] * 4000) + "\n"
                   "    if y > 0:\n        return y\n    return -y\n\n"
                   "def pick(x):\n    if x == 0:\n        y = 0\n" + chain
                   + "    else:\n        y = -1\n    return y\n")
    out = run("check", src)
    assert out.returncode == 0, out.err
    assert "1201 control-flow statements: 1201 convert" in out.out


def test_run_a_directory_runs_its_main_as_python_does(tmp_path):
    pkg = tmp_path / "app"
    pkg.mkdir()
    (pkg / "__main__.py").write_text("import jax.numpy as jnp\n\ndef f(x):\n    if x > 0:\n"
                                     "        return x\n    return -x\n\nprint(f(jnp.float32(-2.0)))\n")
    out = run("run", pkg)
    assert out.returncode == 0, out.err
    assert out.out.strip() == "2.0"
    empty = tmp_path / "empty"
    empty.mkdir()
    out = run("run", empty)
    assert out.returncode == 1 and "is a directory, with no __main__.py" in out.err


def test_explain_refuses_an_async_function_in_one_line(tmp_path):
    src = tmp_path / "coro.py"
    src.write_text("async def g(x):\n    return x\n")
    out = run("explain", f"{src}:g", "--args", "f32")
    assert out.returncode == 1
    assert "`async def` function" in out.err and "RuntimeWarning" not in out.err
