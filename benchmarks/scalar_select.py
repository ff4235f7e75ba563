"""Scalar branches: ``lax.cond`` or a select? (sets select_or_cond.SCALAR_SELECT_BUDGET)

A traced ``if`` whose branches compute only scalars, with at most
``SCALAR_SELECT_BUDGET`` operations between them, becomes a select of the
outputs (``runtime/cond/select_or_cond.py``). This measures that choice against the
alternative, a ``lax.cond`` for every scalar ``if`` (the budget set to -1),
in one process, rounds interleaved, each side compiled afresh:

* the natural-Python real algorithms of ``real_algorithms.py`` (ratio to the
  library's own implementation, steady state and under ``jax.vmap``);
* the programs of ``programs.py`` (ratio to their hand-written ``lax`` twins).

    PYTHONPATH=. python benchmarks/scalar_select.py [--rounds N] [--only NAME ...] [--outputs K]

``--outputs K`` tries another ``SCALAR_SELECT_OUTPUTS`` on the select side.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

import autoflow  # noqa: E402
from autoflow.runtime.cond import select_or_cond  # noqa: E402
from real_algorithms import _time  # noqa: E402

RULES = {"cond": -1, "select": select_or_cond.SCALAR_SELECT_BUDGET}
if "--outputs" in sys.argv:  # try another SCALAR_SELECT_OUTPUTS
    select_or_cond.SCALAR_SELECT_OUTPUTS = int(sys.argv[sys.argv.index("--outputs") + 1])
    del sys.argv[sys.argv.index("--outputs"):sys.argv.index("--outputs") + 2]


def _build(make, args, knob="SCALAR_SELECT_BUDGET", rules=None):
    """``make()`` traced and compiled under each rule: ``runtime.cond.select_or_cond``'s ``knob``
    set to each value of ``rules`` (each its own function, so that no trace is
    shared through JAX's caches)."""
    out = {}
    default = getattr(select_or_cond, knob)
    for name, budget in (rules or RULES).items():
        setattr(select_or_cond, knob, budget)
        try:
            f = make()
            jax.block_until_ready(f(*args))  # traced now, under this rule
        finally:
            setattr(select_or_cond, knob, default)
        out[name] = f
    return out


def _ratios(sides, base, args, rounds):
    """Median over rounds of each side's time / ``base``'s time; the sides'
    order alternates between rounds."""
    reps = max(3, min(300, int(0.02 / max(_time(base, args, 2), 1e-6))))
    got = {k: [] for k in sides}
    order = list(sides)
    for r in range(rounds):
        b = _time(base, args, reps)
        for k in (order if r % 2 == 0 else order[::-1]):
            got[k].append(_time(sides[k], args, reps) / b)
    return {k: statistics.median(v) for k, v in got.items()}


def _fresh(fn, vmap_axes=None):
    conv = autoflow.convert(fn)
    g = (lambda *a: conv(*a)) if vmap_axes is None else jax.vmap(lambda *a: conv(*a),
                                                                  in_axes=vmap_axes)
    return jax.jit(g)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args(argv)
    import programs
    import real_algorithms as ra

    print("| program | against | cond for every scalar `if` | select when cheap |")
    print("|---|---|---:|---:|")
    for name, p in ra._problems().items():
        if args.only and name not in args.only:
            continue
        lib, vlib = jax.jit(p["library"]), jax.jit(jax.vmap(p["library"], in_axes=p["in_axes"]))
        nat = _build(lambda p=p: _fresh(p["natural"]), p["args"])
        vnat = _build(lambda p=p: _fresh(p["natural"], p["in_axes"]), p["batch"])
        for label, sides, base, a in (("steady", nat, lib, p["args"]),
                                      ("vmap", vnat, vlib, p["batch"])):
            r = _ratios(sides, base, a, args.rounds)
            print(f"| {name} ({label}) | library | {r['cond']:.3f}x | {r['select']:.3f}x |",
                  flush=True)
    for p in programs.PROGRAMS:
        if args.only and p.name not in args.only or p.name == "mandelbrot_vmap":
            continue
        a = p.make_args(False)
        sides = _build(lambda p=p: _fresh(p.py), a)
        r = _ratios(sides, jax.jit(p.lax), a, args.rounds)
        print(f"| {p.name} | hand-written lax | {r['cond']:.3f}x | {r['select']:.3f}x |",
              flush=True)


if __name__ == "__main__":
    main()
