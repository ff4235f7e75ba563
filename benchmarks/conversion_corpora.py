"""Conversion time per function on every corpus of ordinary code we have.

The first ``autoflow.jit``/``convert``/``to_source`` of a function converts it:
finds its ``def`` in its file (parsed once per file), runs the rewriter's
passes and prints the result. This measures that work (``to_source``'s:
``autoflow._conversion._source`` after clearing the per-code cache, as
``benchmarks/run.py`` section 1 does) per function on five corpora:

``benchmarks``
    ``benchmarks/corpus.py`` (44 functions, 5-22 lines);
``numeric``
    ``benchmarks/corpus_numeric.py``: ordinary numeric functions with loops and
    branches, written for this measurement;
``fixtures``
    the inputs of the golden fixtures, ``tests/fixtures/*.py`` (not ``*.after.py``);
``examples``
    ``examples/*.py``;
``site``
    the Python programs of the documentation site (``docs/*.md``, README.md):
    each fenced ``python`` block that defines a function, as a file of its own.

A file's functions are found by executing only its imports and its ``def``
statements (decorators left out, so nothing of the program runs; a ``def``
whose imports fail is skipped); methods and nested functions are converted with
what holds them. Each corpus is timed in turns (every function once per turn,
the order reversed every other turn); reported per corpus: the median over
functions of each function's best turn (CPU time of the converting thread,
``time.thread_time``: conversion is single-threaded Python, and on a shared
machine the best CPU time is the least disturbed), with the median wall time
beside it.

    .venv/bin/python benchmarks/conversion_corpora.py [--turns 7] [--json FILE]

``--autoflow DIR`` converts with the ``autoflow`` package of the checkout ``DIR``
(another commit's worktree) on the same corpora; ``--paired DIR`` runs this
checkout's and ``DIR``'s in turns, each in a fresh process, ``--rounds`` times, and
prints each corpus's median for both and their ratio (the median of the rounds'
ratios): figures of two commits measured under the same load.
"""

from __future__ import annotations

import argparse
import ast
import gc
import glob
import json
import os
import re
import statistics
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (ROOT, HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

if "--autoflow" in sys.argv:  # another checkout's autoflow, before any import of it
    sys.path.insert(0, os.path.abspath(sys.argv[sys.argv.index("--autoflow") + 1]))

import autoflow  # noqa: E402,F401
import autoflow._conversion as af_conversion  # noqa: E402

FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)


def _defs_of_file(path, name):
    """The top-level functions of the file ``path``, defined without running the
    rest of it (see the module)."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    try:
        tree = ast.parse(text, path)
    except SyntaxError:
        return []
    namespace = {"__name__": name, "__file__": path}
    found = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            piece = ast.Module(body=[stmt], type_ignores=[])
        elif isinstance(stmt, ast.FunctionDef):
            stmt.decorator_list = []
            piece = ast.Module(body=[stmt], type_ignores=[])
        else:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exec(compile(piece, path, "exec"), namespace)
        except Exception:  # an import this corpus cannot make: its functions stay out
            continue
        if isinstance(stmt, ast.FunctionDef):
            found.append(namespace[stmt.name])
    return found


def _module_functions(module_name):
    import importlib
    mod = importlib.import_module(module_name)
    return list(mod.FUNCTIONS)


def corpora(tmpdir):
    """``{corpus: [function]}``."""
    out = {"benchmarks": _module_functions("corpus")}
    try:
        out["numeric"] = _module_functions("corpus_numeric")
    except ImportError:
        pass
    fixtures = sorted(p for p in glob.glob(os.path.join(ROOT, "tests", "fixtures", "*.py"))
                      if not p.endswith(".after.py"))
    out["fixtures"] = [f for i, p in enumerate(fixtures)
                       for f in _defs_of_file(p, f"_fixture_{i}")]
    out["examples"] = [f for i, p in enumerate(sorted(glob.glob(os.path.join(ROOT, "examples",
                                                                             "*.py"))))
                       for f in _defs_of_file(p, f"_example_{i}")]
    site = []
    pages = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))) + [os.path.join(ROOT,
                                                                                 "README.md")]
    for page in pages:
        with open(page, encoding="utf-8") as fh:
            blocks = FENCE.findall(fh.read())
        for k, block in enumerate(blocks):
            if "def " not in block:
                continue
            path = os.path.join(tmpdir, f"{os.path.basename(page)[:-3]}_{k}.py")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(block)
            site.extend(_defs_of_file(path, f"_site_{len(site)}_{k}"))
    out["site"] = site
    return out


def _convertible(fn, options):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            af_conversion._by_code.clear()
            af_conversion._source(fn, options)
        return True
    except Exception:  # not converted by to_source (a refusal): not timed
        return False


def time_one(fn, options):
    """``(CPU seconds, wall seconds)`` of one uncached conversion of ``fn``."""
    af_conversion._by_code.clear()
    c, t = time.thread_time(), time.perf_counter()
    af_conversion._source(fn, options)
    return time.thread_time() - c, time.perf_counter() - t


def python_calls(fn, options):
    """Python function calls one uncached conversion of ``fn`` makes (``cProfile``'s
    count): the work, exactly, free of the machine's noise."""
    import cProfile
    import pstats
    af_conversion._by_code.clear()
    profile = cProfile.Profile()
    profile.enable()
    af_conversion._source(fn, options)
    profile.disable()
    return pstats.Stats(profile).total_calls


def measure(fns, options, turns):
    best_cpu = {fn: float("inf") for fn in fns}
    walls = {fn: [] for fn in fns}
    for r in range(turns):
        gc.collect()
        for fn in (fns if r % 2 == 0 else fns[::-1]):
            cpu, wall = time_one(fn, options)
            best_cpu[fn] = min(best_cpu[fn], cpu)
            walls[fn].append(wall)
    calls = sorted(python_calls(fn, options) for fn in fns)
    cpu_ms = sorted(v * 1e3 for v in best_cpu.values())
    wall_ms = sorted(statistics.median(v) * 1e3 for v in walls.values())
    slowest = max(fns, key=best_cpu.get)
    return {"functions": len(fns), "median_cpu_ms": statistics.median(cpu_ms),
            "median_wall_ms": statistics.median(wall_ms),
            "median_python_calls": statistics.median(calls), "p90_cpu_ms": cpu_ms[int(0.9 * (len(cpu_ms) - 1))],
            "slowest": [f"{slowest.__module__}.{slowest.__qualname__}",
                        best_cpu[slowest] * 1e3]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=7)
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--compare", help="an earlier --json: print the ratios to it")
    parser.add_argument("--only", action="append", help="only these corpora")
    parser.add_argument("--autoflow", help="convert with the autoflow of this checkout")
    parser.add_argument("--paired", metavar="DIR", help="against the checkout DIR, in turns")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if args.paired:
        return paired(args)
    options = af_conversion._transform_options(af_conversion._options(None, True, (), True, False))
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        found = corpora(tmp)
        for name, fns in found.items():
            if args.only and name not in args.only:
                continue
            kept = [f for f in fns if _convertible(f, options)]
            for f in kept:  # warm: linecache, the file's parse
                time_one(f, options)
            res = results[name] = measure(kept, options, args.turns)
            res["refused"] = len(fns) - len(kept)
    earlier = {}
    if args.compare:
        with open(args.compare, encoding="utf-8") as fh:
            earlier = json.load(fh)
    print(f"{'corpus':12} {'functions':>9} {'median CPU ms':>14} {'median wall ms':>15} "
          f"{'p90 CPU ms':>11} {'calls':>7}  slowest")
    for name, r in results.items():
        ratio = ""
        if name in earlier:
            ratio = f"  ({r['median_cpu_ms'] / earlier[name]['median_cpu_ms']:.2f}x of earlier)"
        print(f"{name:12} {r['functions']:9d} {r['median_cpu_ms']:14.3f} {r['median_wall_ms']:15.3f} "
              f"{r['p90_cpu_ms']:11.3f} {r['median_python_calls']:7.0f}  {r['slowest'][0]} {r['slowest'][1]:.2f} ms{ratio}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=1)
    return 0


def paired(args):
    """This checkout against ``args.paired``, in fresh processes, in turns."""
    import subprocess
    rounds = {"this": [], "other": []}
    for r in range(args.rounds):
        for side in (("this", "other") if r % 2 == 0 else ("other", "this")):
            with tempfile.NamedTemporaryFile(suffix=".json") as out:
                cmd = [sys.executable, os.path.abspath(__file__), "--turns", str(args.turns),
                       "--json", out.name] + sum((["--only", o] for o in args.only or ()), [])
                if side == "other":
                    cmd += ["--autoflow", args.paired]
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                with open(out.name, encoding="utf-8") as fh:
                    rounds[side].append(json.load(fh))
    print(f"{'corpus':12} {'this ms':>8} {'other ms':>9} {'this / other':>13} "
          f"{'calls: this / other':>20}   (median CPU per function; {args.rounds} rounds)")
    for name in rounds["this"][0]:
        mine = [r[name]["median_cpu_ms"] for r in rounds["this"]]
        theirs = [r[name]["median_cpu_ms"] for r in rounds["other"]]
        ratio = statistics.median(a / b for a, b in zip(mine, theirs))
        calls = (rounds["this"][0][name]["median_python_calls"]
                 / rounds["other"][0][name]["median_python_calls"])
        print(f"{name:12} {statistics.median(mine):8.3f} {statistics.median(theirs):9.3f} "
              f"{ratio:12.3f}x {calls:19.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
