"""How conversion time and work grow with nesting depth, elif chains, function
length and expression depth (issue 22, item 4).

For each generated function: ms per 1000 lines (best of a few uncached
conversions) and Python calls per line (cProfile's count of calls: free of the
machine's noise; flat calls per line means linear work), twice: for the
conversion ``autoflow.convert``/``to_source`` does, and for ``autoflow convert
FILE`` (``transforms.module.convert_module``: the same conversion, printed by
the faithful printer). Writes the tables to benchmarks/SCALING.md.

    PYTHONPATH=. python benchmarks/conversion_scaling.py [--quick] [--out PATH]
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import os
import pstats
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from autoflow import _conversion as af_conversion  # noqa: E402
from autoflow.core.deep import deep_call  # noqa: E402
from autoflow.transforms.module import convert_module  # noqa: E402


def depth_source(d):
    lines = ["def f(x, y):"]
    for i in range(d):
        ind = "    " * (i + 1)
        lines += [f"{ind}y = y + {i}", f"{ind}if x > {i}:"]
    lines += ["    " * (d + 1) + "y = y * 2"]
    return "\n".join(lines + ["    return y"]) + "\n"


def elif_source(n):
    lines = ["def f(x, y):", "    if x < 0:", "        y = 0.0"]
    for i in range(1, n):
        lines += [f"    elif x < {i}:", f"        y = y + {i}.0"]
    return "\n".join(lines + ["    else:", "        y = -1.0", "    return y"]) + "\n"


def length_source(n):
    lines = ["def f(x, y):"]
    for i in range(n):
        lines.append(f"    if x > {i}:\n        y = y + {i}" if i % 10 == 0 else f"    y = y * 1.0 + {i}")
    return "\n".join(lines + ["    return y"]) + "\n"


def sum_source(n):
    terms = " + ".join(f"x * {i}" for i in range(n))
    return f"def f(x, y):\n    if x > 0:\n        y = {terms}\n    return y\n"


CASES = [
    # 98 nested blocks in a def is Python's limit (100 levels of indentation)
    ("nesting depth", depth_source, (5, 10, 25, 50, 98)),
    ("elif branches", elif_source, (10, 20, 100, 1000)),
    ("statements", length_source, (10, 100, 1000, 5000)),
    ("expression terms", sum_source, (50, 250, 1000)),
]
QUICK = {"nesting depth": (5, 10, 25), "elif branches": (10, 100),
         "statements": (10, 100, 1000), "expression terms": (50, 250)}


def load(src, tmp, name):
    path = os.path.join(tmp, name + ".py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.f


def convert(fn):
    af_conversion._by_code.clear()  # the whole measurement runs in a deep thread (deep_call)
    return af_conversion._source(fn, af_conversion._transform_options(
        af_conversion._options(None, False, (), True, False)))


def measure(work, repeats):
    # CPU time of this thread (conversion is single-threaded Python): on a shared
    # machine it is what the conversion costs; wall time also counts the waits.
    t = time.thread_time()
    work()  # warm-up: templates, allocator, linecache
    # small functions convert in a few ms: repeat them for about half a second
    repeats = max(repeats, min(200, int(0.5 / max(time.thread_time() - t, 1e-4))))
    best = float("inf")
    for _ in range(repeats):
        t = time.thread_time()
        work()
        best = min(best, time.thread_time() - t)
    profile = cProfile.Profile()
    profile.enable()
    work()
    profile.disable()
    return best, pstats.Stats(profile).total_calls


def _table(rows, what):
    out = [f"| case | size | lines | {what} ms per 1000 lines | calls per line | time ratio "
           "| calls ratio |", "|---|---:|---:|---:|---:|---:|---:|"]
    first = {}
    for t, n, ln, ms, c in rows:
        ms0, c0 = first.setdefault(t, (ms, c))
        out.append(f"| {t} | {n} | {ln} | {ms:.1f} | {c:.0f} | {ms / ms0:.2f}x | {c / c0:.2f}x |")
    return out


# The reading of the last full run (benchmarks/SCALING.md): update it with the numbers.
READING = """\
Reading. The tables above are one run of 2026-11-25, after each chunk of a long chain
became one flat `af.if_chain`. The machine was not quiet (load about 1): the smallest
sizes moved by up to 30% between four runs of the same code (`statements` 10: 68 to 104 ms
per 1000 lines), so a ratio against them moves too; small functions are now timed as many
times as fit in half a second (best of at most 200), large ones best of 3-5.

- Work: calls per line stay within 1.2x over issue 22's sizes in both tables: nesting
  depth 5 -> 98 (Python's own limit: 100 levels of indentation in a file) 1.18x / 1.13x
  (conversion / `autoflow convert`), elif branches 10 -> 1000 1.01x / 0.99x, statements
  10 -> 5000 1.11x / 1.08x. `tests/test_scaling.py` asserts the conversion's three ratios.
- Time: within 1.5x in every case. Depth 98 is the closest, 1.44x / 1.49x here (1.16x to
  1.49x over the four runs; 1.37x / 1.29x in the previous quiet run): at 1.18x the calls,
  each call costs more in a tree 98 levels deep. Elif chains 1.16x / 1.19x at 1000
  branches (0.94x to 1.19x over the runs), statements 0.86x / 1.20x at 5000.
- Elif chains: a chain of more than 16 branches is cut into chunks of 16 run one after
  another under a flag (`transforms/chains.py`), and each chunk is one flat
  `af.if_chain` whose branch functions sit side by side. Before, each chunk was 16 nested
  levels of `if_true`/`if_false`, every level carrying the flag: 1.49x calls and 1.93x time
  per line from 10 to 1000 branches (the previous quiet run). A long chain now costs fewer
  calls per line than a 10-branch one (1058 at 20 branches against 1152: a chain of at
  most 16 branches stays nested); from 100 to 1000 branches time grows about 1.2x at 1.02x
  the calls: each call costs more in a 2,000-line tree.
- `autoflow convert` pauses the cyclic GC while it converts, as `autoflow.convert` does
  (with the GC on, a 1000-branch chain took 1.6x the time per line).
- Expression rows have 4 lines: their work is linear in the number of terms.
"""


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "SCALING.md"))
    args = ap.parse_args(argv)
    rows, cli_rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for title, make, sizes in CASES:
            if args.quick:
                sizes = QUICK[title]
            for n in sizes:
                src = make(n)
                lines = len(src.splitlines())
                fn = load(src, tmp, f"case_{abs(hash((title, n)))}")
                repeats = 3 if lines > 2000 else 5
                for out, what, work in (
                        (rows, "convert", lambda: convert(fn)),
                        (cli_rows, "CLI", lambda: convert_module(src, "<scaling>"))):
                    secs, calls = deep_call(measure, work, repeats)
                    out.append((title, n, lines, 1e6 * secs / lines, calls / lines))
                    print(f"{what:8} {title:18} {n:6} {lines:6} lines {1e6 * secs / lines:9.1f} "
                          f"ms/1000 lines {calls / lines:9.0f} calls/line", flush=True)
    out = ["# Conversion scaling", "",
           "Generated by `benchmarks/conversion_scaling.py`" + (" --quick" if args.quick else "")
           + ": one function per row, converted uncached.",
           "Calls per line is cProfile's count of Python calls: flat means linear work.",
           "Times are CPU time of the converting thread, best of 5 (3 above 2000 lines; small",
           "functions as many times as fit in about half a second, at most 200) after a warm-up,",
           "on the machine it ran on; the ratios compare each size with the smallest",
           "size of its case (flat within 1.5x is the target of issue 22).", "",
           "## `autoflow.convert` / `to_source` (the conversion, no compile)", ""]
    out += _table(rows, "convert")
    out += ["", "## `autoflow convert FILE` (`convert_module`: the conversion printed by the "
            "faithful printer)", ""]
    out += _table(cli_rows, "CLI")
    out += ["", READING]
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")
    return rows, cli_rows


if __name__ == "__main__":
    main()
