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
from autoflow import _conversion as af_conversion
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


# The sizes of issue 22: depth 5 to 100 (98 is Python's own limit in a def),
# 10 to 1000 elif branches, 10 to 5000 statements in one function.
@pytest.mark.parametrize("case,small,big", [
    ("depth", 5, 98),
    ("elif", 10, 1000),
    ("statements", 10, 5000),
])
def test_work_per_line_is_flat(case, small, big, tmp_path):
    make = {"depth": cs.depth_source, "elif": cs.elif_source,
            "statements": cs.length_source}[case]
    a = _calls_per_line(make(small), tmp_path, f"{case}_{small}")
    b = _calls_per_line(make(big), tmp_path, f"{case}_{big}")
    # quadratic work showed as 3.5x (depth 5 -> 60) and 10x (elif 20 -> 200)
    assert b / a < 1.5, (case, small, a, big, b)


def test_a_long_chain_costs_no_more_per_line_than_a_short_one():
    # Each chunk of a chain of more than chains.CHUNK branches is one flat
    # `af.if_chain` (no level nested in another, no flag carried per level):
    # nothing grows with the chain, and no work is repeated per chunk. Nested
    # chunks carrying the flag cost 1.49x the calls per line of a 10-branch chain.
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        per_line = {n: _calls_per_line(cs.elif_source(n), tmp, f"chain_{n}")
                    for n in (10, 100, 1000)}
    assert per_line[1000] / per_line[10] < 1.1, per_line
    assert per_line[1000] / per_line[100] < 1.05, per_line


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


def test_summaries_agree_with_the_plain_analysis():
    # Every summary checked against the plain recursive analysis (liveness,
    # definedness, bound names, returns, jumps, shared state) while converting
    # every fixture and the benchmark corpus.
    from pathlib import Path

    from autoflow.analysis import summaries
    from autoflow.testing import check_conversion
    import corpus

    with summaries.checking():
        for path in sorted((Path(__file__).parent / "fixtures").glob("*.py")):
            if not path.name.endswith(".after.py"):
                check_conversion(path)
        options = af_conversion._transform_options(af_conversion._options(None, True, (), True, False))
        for fn in corpus.FUNCTIONS:
            af_conversion._by_code.clear()
            af_conversion._transformed(fn, options)
    assert not summaries.checks()
    af_conversion._by_code.clear()


def _random_chain(rng, n):
    """An ``if``/``elif`` chain of ``n`` branches with bodies that read, bind,
    return, raise and nest, and tests that read and bind (walrus)."""
    names = ["a", "b", "c", "d"]

    def stmt(depth):
        k = rng.randrange(9 if depth < 2 else 7)
        v, w = rng.choice(names), rng.choice(names)
        if k == 7:
            return ([f"if {w}:"] + ["    " + x for x in body(depth + 1)]
                    + ["else:"] + ["    " + x for x in body(depth + 1)])
        if k == 8:
            return [f"for {v} in {w}:"] + ["    " + x for x in body(depth + 1)]
        return [[f"{v} = 1"], [f"{v} = {w} + 1"], [f"{v} += 1"], ["return " + w],
                [f"raise ValueError({w})"], ["pass"], [f"del {v}"]][k]

    def body(depth):
        return [x for _ in range(rng.randrange(1, 3)) for x in stmt(depth)]

    def test():
        v, w = rng.choice(names), rng.choice(names)
        return rng.choice([f"x < {w}", f"({v} := x)", "x"])

    lines = []
    for i in range(n):
        lines.append(("if " if i == 0 else "elif ") + test() + ":")
        lines += ["    " + x for x in body(0)]
    if rng.random() < 0.7:
        lines += ["else:"] + ["    " + x for x in body(0)]
    return "\n".join(lines) + "\n"


def test_the_chain_guard_is_the_whole_chain_analysis():
    # chains._guarded computes, branch by branch and stopping early, what the
    # chain's flag guards: what it binds on every falling path and does not
    # read first. It must equal the whole chain's liveness, computed once more.
    import random

    import gast

    from autoflow.analysis.activity import bound_falling
    from autoflow.analysis.summaries import Summaries
    from autoflow.transforms import chains

    rng = random.Random(0)
    seen = set()
    # (1000 programs: since `del x` reads `x`, fewer of 400 bind without reading first)
    for _ in range(1000):
        src = _random_chain(rng, rng.randrange(1, 6))
        (s,) = gast.parse(src).body
        branches, final = chains._branches(s)
        plain = (bound_falling([s]) or set()) - Summaries().live_in([s], set())
        assert chains._guarded(s, branches, final) == plain, src
        seen.add(frozenset(plain))
    assert len(seen) > 5  # the programs exercise more than the empty answer


def test_printing_a_module_pauses_the_cyclic_gc(monkeypatch):
    # `autoflow convert` keeps every node of a function alive until it is
    # printed: with the cyclic GC on, its full collections walked them all
    # again and again (time per line grew with the function's size). The GC
    # is paused while a module's functions convert and print, and left as it
    # was found.
    import gc

    from autoflow.core.deep import run_deep
    from autoflow.transforms import module, pipeline

    seen = []
    run = pipeline.run
    monkeypatch.setattr(pipeline, "run", lambda *a: (seen.append(gc.isenabled()), run(*a))[1])
    src = cs.elif_source(200)
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            text, changed = run_deep(module.convert_module, src, "<chain>")
            assert gc.isenabled() is enabled
        finally:
            gc.enable()
        assert changed == ["f"] and "af.if_stmt" in text
    assert seen == [False, False]
