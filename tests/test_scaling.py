"""Conversion is linear in nesting depth, elif chain length and function length
(issue 22, item 4), and input that Python compiles converts to code that compiles
and runs like it.

The work is counted, not timed: cProfile's count of Python calls made by one
uncached conversion, per line of input (the measure of
``benchmarks/conversion_scaling.py``). Linear work keeps it flat as the size grows.
"""

from __future__ import annotations

import cProfile
import importlib.util
import pstats
import subprocess
import sys
import os

import jax.numpy as jnp
import pytest

import autoflow
from autoflow import api as af_api
from autoflow.core.deep import deep_call

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks"))
import conversion_scaling as cs  # noqa: E402


def _calls_per_line(src, tmp_path, name):
    fn = cs.load(src, str(tmp_path), name)

    def count():
        cs.convert(fn)  # warm: templates, linecache
        profile = cProfile.Profile()
        profile.enable()
        cs.convert(fn)
        profile.disable()
        return pstats.Stats(profile).total_calls

    return deep_call(count) / len(src.splitlines())


@pytest.mark.parametrize("case,small,big", [
    ("depth", 5, 60),
    ("elif", 20, 200),
    ("statements", 10, 1000),
])
def test_work_per_line_is_flat(case, small, big, tmp_path):
    make = {"depth": cs.depth_source, "elif": cs.elif_source,
            "statements": cs.length_source}[case]
    a = _calls_per_line(make(small), tmp_path, f"{case}_{small}")
    b = _calls_per_line(make(big), tmp_path, f"{case}_{big}")
    # quadratic work showed as 3.5x (depth 5 -> 60) and 10x (elif 20 -> 200)
    assert b / a < 1.5, (case, small, a, big, b)


def _load(src, tmp_path, name):
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, path


def _cli_output(path):
    run = subprocess.run([sys.executable, "-m", "autoflow", "convert", str(path)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    return run.stdout


def _runs_like_python(mod, path, xs, jit):
    converted = autoflow.convert(mod.f)
    for x in xs:
        assert converted(x, 1.0) == mod.f(x, 1.0), x
    if jit:
        jitted = autoflow.jit(mod.f)
        for x in xs:
            assert jnp.allclose(jitted(jnp.float32(x), jnp.float32(1.0)), mod.f(x, 1.0)), x
    # The printed conversion compiles and gives Python's results too.
    out = _cli_output(path)
    namespace = {"__name__": "converted"}
    exec(compile(out, str(path), "exec"), namespace)
    for x in xs:
        assert namespace["f"](x, 1.0) == mod.f(x, 1.0), x


def test_elif_chain_of_300_branches(tmp_path):
    # A chain nests one branch function per elif: cut into chunks, it stays within
    # Python's indentation and stack limits (it did not compile past ~95 branches).
    mod, path = _load(cs.elif_source(300), tmp_path, "chain300")
    _runs_like_python(mod, path, [-1.0, 0.5, 17.5, 150.5, 298.5, 299.5, 1000.0], jit=True)


def test_nesting_depth_98(tmp_path):
    # 98 nested blocks inside a def: Python's limit (100 levels of indentation).
    mod, path = _load(cs.depth_source(98), tmp_path, "deep98")
    _runs_like_python(mod, path, [-1.0, 3.5, 50.5, 97.5, 200.0], jit=False)


def test_summaries_agree_with_the_plain_analysis(monkeypatch):
    # Every summary checked against the plain recursive analysis (liveness,
    # definedness, bound names, returns, jumps, shared state) while converting
    # every fixture and the benchmark corpus.
    from pathlib import Path

    from autoflow.analysis import summaries
    from autoflow.testing import check_conversion
    import corpus

    monkeypatch.setattr(summaries, "CHECK", True)
    for path in sorted((Path(__file__).parent / "fixtures").glob("*.py")):
        if not path.name.endswith(".after.py"):
            check_conversion(path)
    options = af_api._transform_options(af_api._options(None, True, (), True, False))
    for fn in corpus.FUNCTIONS:
        af_api._by_code.clear()
        af_api._transformed(fn, options)
    af_api._by_code.clear()
