"""``autoflow check`` flags the classic jit pitfalls (issue 21, item 5).

Each file in ``tests/check_cases/`` is a "before" file: a line that must be
flagged ends with ``# expect: CODE name...`` (the names the warning must
mention); every other line must not be flagged. The files are only read,
never imported or run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from autoflow import check, pitfalls

CASES = os.path.join(os.path.dirname(__file__), "check_cases")
FILES = sorted(f for f in os.listdir(CASES) if f.endswith(".py"))
EXPECT = re.compile(r"#\s*expect:\s*(AF\d+)((?:\s+[\w.]+)*)")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(pitfalls.__file__)))


def expected(path):
    out = {}
    with open(path) as f:
        for i, line in enumerate(f, 1):
            m = EXPECT.search(line)
            if m:
                out[(i, m.group(1))] = m.group(2).split()
    return out


def cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "autoflow", "check", *args], input=stdin,
                          capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT))


def test_every_pitfall_kind_has_a_case():
    codes = {code for f in FILES for (_, code) in expected(os.path.join(CASES, f))}
    assert codes == set(pitfalls.CODES)


@pytest.mark.parametrize("name", FILES)
def test_case_file_gives_exactly_the_expected_warnings(name):
    path = os.path.join(CASES, name)
    source = open(path).read()
    want = expected(path)
    found = pitfalls.find(source, path)
    assert {(p.line, p.code) for p in found} == set(want), \
        "\n".join(p.format() for p in found)
    for p in found:
        text = p.format()
        assert text.startswith(f"{path}:{p.line}:{p.col + 1}: warning: {p.code} ")
        assert "\n    fix: " in text and text.endswith(".")
        for n in want[(p.line, p.code)]:
            assert f"`{n}`" in text, f"`{n}` not named in:\n{text}"
        # the column points into the flagged line
        line = source.splitlines()[p.line - 1]
        assert p.col < len(line.split("#")[0].rstrip())


def test_advice_per_kind():
    def fixes(name):
        path = os.path.join(CASES, name)
        return {p.code: p.fix for p in pitfalls.find(open(path).read(), path)}

    assert "static_argnames=(\"n\",)" in fixes("shapes_and_masks.py")["AF103"]
    assert "jnp.nonzero(" in fixes("shapes_and_masks.py")["AF102"]
    assert "size=N" in fixes("shapes_and_masks.py")["AF102"]
    assert "before the loop" in fixes("jit_in_loop.py")["AF104"]
    assert "jax.debug.print" in fixes("prints.py")["AF105"]
    assert "fori_loop" in fixes("unrolled.py")["AF106"]
    assert "as an argument" in fixes("globals_rebound.py")["AF101"]


def test_prints_say_they_become_run_time_prints():
    path = os.path.join(CASES, "prints.py")
    by_line = {p.line: p.text for p in pitfalls.find(open(path).read(), path)}
    converted, plain = sorted(by_line.items())
    assert "each time the compiled code runs" in converted[1]
    assert "once, while tracing" in plain[1]


def test_ignore_comments_silence_one_code_or_all():
    src = ("import jax\n"
           "def f(xs):\n"
           "    for x in xs:\n"
           "        jax.jit(lambda v: v)(x)  # autoflow: ignore[AF101, AF104]\n"
           "        jax.jit(lambda v: v)(x)  # autoflow: ignore\n"
           "        jax.jit(lambda v: v)(x)  # autoflow: ignore[AF105]\n"
           "        jax.jit(lambda v: v)(x)\n")
    assert [(p.line, p.code) for p in pitfalls.find(src)] == [(6, "AF104"), (7, "AF104")]


def test_cli_prints_warnings_and_strict_fails():
    path = os.path.join("tests", "check_cases", "jit_in_loop.py")
    r = cli(path)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ": warning: " in ln]
    assert [ln.split(": warning: ")[0] for ln in lines] == [f"{path}:10:16", f"{path}:20:20"]
    assert all(" AF104 " in ln for ln in lines)
    strict = cli("--strict", path)
    assert strict.returncode == 1 and strict.stdout == r.stdout


def test_strict_passes_when_there_are_no_warnings(tmp_path):
    good = tmp_path / "good.py"
    good.write_text("import autoflow\n\n@autoflow.jit\ndef f(x):\n    if x > 0:\n"
                    "        x = -x\n    return x\n")
    r = cli("--strict", str(good))
    assert r.returncode == 0 and ": warning: " not in r.stdout, r.stdout + r.stderr


def test_finding_pitfalls_imports_no_jax():
    code = ("import sys, autoflow.pitfalls as p; p.find(open(sys.argv[1]).read()); "
            "assert 'jax' not in sys.modules")
    r = subprocess.run([sys.executable, "-c", code, os.path.join(CASES, "shapes_and_masks.py")],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 0, r.stderr


def test_function_option_narrows_the_warnings():
    path = os.path.join("tests", "check_cases", "jit_in_loop.py")
    r = cli("--function", "sweep", path)
    lines = [ln for ln in r.stdout.splitlines() if ": warning: " in ln]
    assert [ln.split(": warning: ")[0] for ln in lines] == [f"{path}:20:20"], r.stdout


def test_af107_flags_exactly_the_static_loops_that_unroll(tmp_path):
    """What AF107 says is what autoflow does: the flagged loop's body is copied once
    per iteration into the jaxpr; the unflagged one (fixed shapes) is one staged loop."""
    import importlib.util

    import jax
    import jax.numpy as jnp

    import autoflow

    source = (
        "import jax.numpy as jnp\nimport autoflow\n\n"
        "@autoflow.jit\ndef prefix(x):\n    t = 0.0\n    for i in range(1, 6):\n"
        "        t = t + jnp.sum(x[:i])\n    return t\n\n"
        "@autoflow.jit\ndef masked(x):\n    t = 0.0\n    for i in range(1, 6):\n"
        "        t = t + jnp.sum(jnp.where(jnp.arange(x.shape[0]) < i, x, 0.0))\n    return t\n")
    path = tmp_path / "af107_case.py"
    path.write_text(source)
    flagged = {p.line for p in pitfalls.find(source, str(path)) if p.code == "AF107"}
    assert flagged == {7}
    spec = importlib.util.spec_from_file_location("af107_case", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = jnp.arange(6.0)
    with pytest.warns(autoflow.PerformanceWarning, match="unrolled"):  # the same, at run time
        assert float(mod.prefix(x)) == 20.0
    assert float(mod.masked(x)) == 20.0
    unrolled = str(jax.make_jaxpr(mod.prefix.__wrapped__)(x))
    staged = str(jax.make_jaxpr(mod.masked.__wrapped__)(x))
    assert unrolled.count("reduce_sum") == 5 and "scan" not in unrolled and "while" not in unrolled
    assert "scan" in staged or "while" in staged


RECURSIONS = '''
import autoflow


def by_depth(x, depth=3):
    if depth == 0:
        return x
    if x > 0:
        return by_depth(x - 1.0, depth - 1) * 2
    return by_depth(x + 1.0, depth - 1)


@autoflow.jit
def by_depth_through_jit(x, depth=3):
    if depth == 0:
        return x
    if x > 0:
        return by_depth_through_jit(x - 1.0, depth - 1) * 2
    return by_depth_through_jit(x + 1.0, depth - 1)


def by_value(x):
    if x > 0:
        return by_value(x - 1.0) + 1.0
    return x


f = autoflow.jit(by_depth)
g = autoflow.jit(by_value)
'''


def test_check_looks_at_the_if_that_ends_a_recursion():
    # (a default the calls do not pass is a Python number, in the recursive calls too
    # unless they go through jit: `check` said `by_depth` traced forever, at `if x > 0`)
    findings = {(f.function, f.line): f.status for f in check.check_source(RECURSIONS, "r.py")}
    assert findings[("by_depth", 6)] != "fails" and findings[("by_depth", 8)] != "fails"
    assert findings[("by_depth_through_jit", 15)] == "fails"
    assert findings[("by_depth_through_jit", 17)] != "fails"
    assert findings[("by_value", 23)] == "fails"


LOOPS = '''
import autoflow
import jax


class Keys:
    def __init__(self, key):
        self.key = key

    def next(self):
        self.key, sub = jax.random.split(self.key)
        return sub


def drawn(key):
    keys = Keys(key)
    u = jax.random.uniform(keys.next())
    while u < 0.9:
        u = jax.random.uniform(keys.next())
    return u


def fit(w):
    history = []
    for step in range(20):
        w = w - 0.2 * (w - 3.0)
        loss = (w - 3.0) ** 2
        history.append(loss)
        if loss < 1e-2:
            break
    return w, history


def skipped(w):
    history = []
    for step in range(20):
        history.append(w)
        if w < 1e-2:
            continue
        w = w * 0.5
    return w, history


f, g, h = autoflow.jit(drawn), autoflow.jit(fit), autoflow.jit(skipped)
'''


def test_check_tells_a_method_named_next_from_an_iterator_and_sees_appends_before_a_break():
    # (`keys.next()` was taken for an iterator's, which Python 3's have not; an append
    # above the `break` that ends a staged loop was not seen, and the run fails there)
    found = {(f.function, f.line): f.status for f in check.check_source(LOOPS, "l.py")}
    assert found[("drawn", 18)] != "fails"
    assert found[("fit", 29)] == "fails"
    assert "fails" not in {v for (fn, _), v in found.items() if fn == "skipped"}


def test_a_static_range_left_as_python_is_no_failure_and_flags_are_breaks_only(tmp_path):
    """A `for _ in range(2)` the rewriter leaves as Python (it rebinds a `nonlocal`)
    runs as written: check said "cannot convert" (exit status 1) where `autoflow.jit`
    runs it; and a loop whose test reads a variable the rewriter renamed (a `nonlocal`'s
    copy) was said to have a `break`."""
    import autoflow
    from autoflow.check import FALLBACK, check_source

    source = ("def nested_nonlocal(x):\n    c = 0\n    def bump():\n        nonlocal c\n"
              "        for _ in range(2):\n            c += 1\n    while x > 1:\n"
              "        x = x / 2\n        bump()\n    return c\n")
    found = {f.kind: f for f in check_source(source, "nl.py")}
    assert found["for"].status != FALLBACK and "static range" in found["for"].note
    assert "break" not in found["while"].note
    import importlib.util

    path = tmp_path / "nl_static.py"  # (autoflow reads the source of what it converts)
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("nl_static", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = module.nested_nonlocal
    assert int(autoflow.jit(fn)(10.0)) == fn(10.0) == 8
