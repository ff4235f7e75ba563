"""What each while loop of a compiled program launches per iteration, on both sides.

For each program named (a real algorithm of ``real_algorithms.py`` or a program of
``programs.py``), autoflow's version and the library's (or the hand-written ``lax``
one) are compiled for the default device, and for every ``while`` of the compiled
HLO the instructions of its body and its condition that do work (fusions, copies,
conditionals, custom calls; not tuples, parameters or constants) are counted by
kind. On a GPU each is a kernel launch or a copy per iteration, which is what a
loop of small arrays costs there (``GPU.md``: the batched Mandelbrot loop).

    PYTHONPATH=. python benchmarks/loop_kernels.py mandelbrot_vmap bisection [--lines]

``--lines`` prints each counted instruction too.
"""

from __future__ import annotations

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

import autoflow  # noqa: E402
from benchmarks import programs  # noqa: E402
from benchmarks import real_algorithms as ra  # noqa: E402

# instructions that launch nothing
_FREE = {"parameter", "get-tuple-element", "tuple", "constant", "bitcast"}


def computations(hlo_text):
    """``{name: [(opcode, line)]}`` of an HLO module's text."""
    out, current = {}, None
    for line in hlo_text.splitlines():
        if line and not line.startswith(" ") and line.rstrip().endswith("{"):
            words = line.split()
            current = (words[1] if words[0] == "ENTRY" else words[0]).lstrip("%")
            out[current] = []
        elif current is not None and line.startswith("  ") and "=" in line:
            m = re.match(r"(\([^)]*\)|\S+)\s+([\w\-]+)\(", line.split("=", 1)[1].strip())
            if m:
                out[current].append((m.group(2), line.strip()))
    return out


def report(label, fn, args, lines=False):
    text = jax.jit(fn).lower(*args).compile().as_text()
    comps = computations(text)
    print(f"  {label}: {len(text.splitlines())} lines of HLO")
    for body in comps.values():
        for opcode, line in body:
            if opcode != "while":
                continue
            for part in ("body", "condition"):
                name = re.search(part + r"=%?([\w.\-]+)", line).group(1)
                ops = [(o, ln) for o, ln in comps.get(name, []) if o not in _FREE]
                kinds = {}
                for o, _ in ops:
                    kinds[o] = kinds.get(o, 0) + 1
                print(f"    while {part}: {len(ops)} "
                      + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
                if lines:
                    for _, ln in ops:
                        print("      " + ln.split(", metadata")[0][:160])


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    lines = "--lines" in argv
    names = [a for a in argv if a != "--lines"]
    problems = ra._problems()
    progs = {p.name: p for p in programs.PROGRAMS}
    print(f"jax {jax.__version__}, {jax.default_backend()}")
    for name in names:
        print(name)
        if name in problems:
            p = problems[name]
            report("autoflow", autoflow.convert(p["natural"]), p["args"], lines)
            report("library", p["library"], p["args"], lines)
        elif name in progs:
            p = progs[name]
            args = p.make_args(False)
            report("autoflow", autoflow.convert(p.py), args, lines)
            report("hand-written lax", p.lax, args, lines)
        else:
            raise SystemExit(f"unknown program {name!r}: one of {sorted(problems) + sorted(progs)}")


if __name__ == "__main__":
    main()
