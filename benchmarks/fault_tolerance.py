"""Steady-state speed of a converted loop on a JAX whose private API changed.

    python benchmarks/fault_tolerance.py            # every fault of tests/jax_faults.py
    python benchmarks/fault_tolerance.py none lowering_helper_deleted
    python benchmarks/fault_tolerance.py --corpus   # benchmarks/corpus.py's programs under each fault

For each fault (a fresh process each, the fault applied before autoflow is
imported), times calls of ``autoflow.jit`` of a natural ``while`` loop with an ``if``
against the same loop written by hand with ``lax.while_loop`` and ``lax.cond``, the
two interleaved in one process, and prints the ratio (median of the per-round
ratios, min-max). Target: within 1.5x whatever the fault (the issue: with hijax's
private lowering helper deleted, a converted loop ran 10-18x slower, silently).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests")


def collatz_like(x, n):
    steps = 0
    while x > 1.0 and steps < n:
        if x > 50.0:
            x = x * 0.5
        else:
            x = x * 0.9 - 0.01
        steps += 1
    return x, steps


def child(fault, rounds=15, calls=200):
    sys.path.insert(0, TESTS)
    import jax_faults

    if fault != "none":
        jax_faults.FAULTS[fault]()
    import warnings

    import jax
    import jax.numpy as jnp
    from jax import lax

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import autoflow

        ours = autoflow.jit(collatz_like)

    def by_hand(x, n):
        def cond(c):
            return (c[0] > 1.0) & (c[1] < n)

        def body(c):
            x, s = c
            x = lax.cond(x > 50.0, lambda: x * 0.5, lambda: x * 0.9 - 0.01)
            return x, s + 1
        return lax.while_loop(cond, body, (x, jnp.int32(0)))
    theirs = jax.jit(by_hand)
    args = (jnp.float32(1000.0), jnp.int32(60))
    for f in (ours, theirs):
        jax.block_until_ready(f(*args))

    def timed(f):
        t = time.perf_counter()
        for _ in range(calls):
            out = f(*args)
        jax.block_until_ready(out)
        return (time.perf_counter() - t) / calls

    ratios = []
    for r in range(rounds):
        pair = (ours, theirs) if r % 2 == 0 else (theirs, ours)
        t = {id(f): timed(f) for f in pair}
        ratios.append(t[id(ours)] / t[id(theirs)])
    print(json.dumps({"fault": fault, "median": statistics.median(ratios),
                      "min": min(ratios), "max": max(ratios),
                      "ours_us": 1e6 * timed(ours), "lax_us": 1e6 * timed(theirs)}))


def corpus_child(fault):
    """``corpus.check()`` (eager == autoflow.jit on every corpus program) under ``fault``."""
    sys.path.insert(0, TESTS)
    sys.path.append(HERE)
    import jax_faults

    if fault != "none":
        jax_faults.FAULTS[fault]()
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        import corpus

        bad = corpus.check()
    said = [str(w.message) for w in seen if "lacks private APIs" in str(w.message)]
    print(json.dumps({"fault": fault, "programs": len(corpus.FUNCTIONS), "bad": bad,
                      "warnings": len(said)}))


def _child(flag, fault):
    """What this script's ``flag`` mode printed for ``fault`` in a fresh process (a
    dict), or the last line of its error."""
    out = subprocess.run([sys.executable, __file__, flag, fault], capture_output=True,
                         text=True, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    if out.returncode:
        return out.stderr.strip().splitlines()[-1]
    return json.loads(out.stdout.strip().splitlines()[-1])


def corpus_main(faults):
    sys.path.insert(0, TESTS)
    import jax_faults

    faults = faults or ["none", *jax_faults.FAULTS]
    print("| fault | corpus programs right | autoflow's warnings |")
    print("|---|---|---|")
    for fault in faults:
        d = _child("--corpus-child", fault)
        if isinstance(d, str):
            print(f"| {fault} | failed: {d} | |")
            continue
        wrong = f" (wrong: {', '.join(d['bad'])})" if d["bad"] else ""
        print(f"| {fault} | {d['programs'] - len(d['bad'])} of {d['programs']}{wrong} | "
              f"{d['warnings']} |")


def main(faults):
    sys.path.insert(0, TESTS)
    import jax_faults

    faults = faults or ["none", *jax_faults.FAULTS]
    print("| fault | autoflow / lax.while_loop (median, min-max) | autoflow | lax |")
    print("|---|---|---|---|")
    for fault in faults:
        d = _child("--child", fault)
        if isinstance(d, str):
            print(f"| {fault} | failed: {d} | | |")
            continue
        print(f"| {fault} | {d['median']:.2f}x ({d['min']:.2f}-{d['max']:.2f}) | "
              f"{d['ours_us']:.1f} us | {d['lax_us']:.1f} us |")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2])
    elif len(sys.argv) > 2 and sys.argv[1] == "--corpus-child":
        corpus_child(sys.argv[2])
    elif sys.argv[1:2] == ["--corpus"]:
        corpus_main(sys.argv[2:])
    else:
        main(sys.argv[1:])
