"""A loop holding a loop under ``jax.vmap``: lockstep (nested) against flat lanes.

Nested, every lane waits at each inner loop for that iteration's slowest lane;
flattened (``autoflow/runtime/loops/flat_lanes.py``, ``lanes="flat"``) each
lane runs its own steps. For each program this prints the steps each form needs
(counted eagerly, per lane: the lockstep's inner iterations, the busiest lane's
own inner plus outer iterations) and the time per batched call of both forms,
compiled in the same run, interleaved, as the median of per-round ratios.

    PYTHONPATH=. python benchmarks/nested_lanes.py            # writes NESTED_LANES.md
    PYTHONPATH=. python benchmarks/nested_lanes.py --quick
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import autoflow  # noqa: E402
import real_algorithms as ra  # noqa: E402
from autoflow.runtime.loops import flat_lanes  # noqa: E402


def imbalanced(key, p):
    """Sum of geometric draws until 100: inner loops of very different lengths."""
    total = 0
    while total < 100:
        key, k = jax.random.split(key)
        n = 0
        while True:
            k, s = jax.random.split(k)
            n += 1
            if jax.random.uniform(s) < p:
                break
        total = total + n
    return total


def tail_normal(key, a):
    """A normal draw above ``a`` by rejection from half-normal proposals, each
    proposal a normal draw redrawn until it is positive."""
    while True:
        key, k = jax.random.split(key)
        while True:
            k, s = jax.random.split(k)
            x = jax.random.normal(s)
            if x > 0:
                break
        if x > a:
            break
    return x


def _bfgs(x0):
    return ra.bfgs(ra._smooth, x0, gtol=1e-3)


def programs():
    rng = np.random.default_rng(5)
    return {
        "imbalanced (p=0.01)": (imbalanced, (jax.random.split(jax.random.key(1), 64),
                                             jnp.full(64, 0.01))),
        "imbalanced (p=0.2)": (imbalanced, (jax.random.split(jax.random.key(2), 64),
                                            jnp.full(64, 0.2))),
        "tail_normal": (tail_normal, (jax.random.split(jax.random.key(3), 32),
                                      jnp.linspace(0.0, 1.5, 32))),
        "gamma_sample": (ra.gamma_sample, (jax.random.split(jax.random.key(8), 64),
                                           jnp.asarray(rng.uniform(0.2, 6.0, size=64),
                                                       jnp.float32))),
        "bfgs": (_bfgs, (jnp.asarray(rng.uniform(-3, 3, size=(8, 6)), jnp.float32),)),
    }


def compiled(fn, flat):
    """The batched program, compiled; and how many nests it flattened."""
    machine, made = flat_lanes.machine, []

    def counted(*a, **k):
        made.append(1)
        return machine(*a, **k)

    flat_lanes.machine = counted
    try:
        f = jax.jit(jax.vmap(autoflow.convert(fn, lanes="flat" if flat else "nested")))
        f.lower(*ARGS[fn]).compile()
        return f, len(made)
    finally:
        flat_lanes.machine = machine


ARGS = {}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "NESTED_LANES.md"))
    args = ap.parse_args(argv)
    rounds = 5 if args.quick else 11
    rows = []
    for name, (fn, xs) in programs().items():
        ARGS[fn] = xs
        (flat, flattened), (nested, _) = compiled(fn, True), compiled(fn, False)
        same = all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(flat(*xs)),
                                                       jax.tree.leaves(nested(*xs))))
        reps = max(1, min(100, int(0.05 / max(ra._time(nested, xs, 1), 1e-6))))
        ratios = []
        for r in range(rounds):
            pair = [(flat, 0), (nested, 1)] if r % 2 == 0 else [(nested, 1), (flat, 0)]
            t = [0.0, 0.0]
            for f, i in pair:
                t[i] = ra._time(f, xs, reps)
            ratios.append(t[0] / t[1])
        rows.append((name, flattened, same, statistics.median(ratios), t[0], t[1]))
        print(rows[-1], flush=True)
    lines = ["| program (batch) | nests flattened | same results | flat / nested: median ratio "
             "| last round (us) |", "|---|---|---|---|---|"]
    for name, flattened, same, r, a, b in rows:
        ratio = f"{r:.2f}x" if flattened else "(the same program)"
        lines.append(f"| {name} | {flattened} | {'yes' if same else 'NO'} | {ratio} | "
                     f"{a * 1e6:.0f} / {b * 1e6:.0f} |")
    table = "\n".join(lines)
    print(table)
    if not args.quick:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write("# Nested loops under vmap: flat lanes against lockstep\n\n"
                     f"Generated by `benchmarks/nested_lanes.py` (jax {jax.__version__}, "
                     f"{jax.default_backend()}, {os.cpu_count()} CPU cores). Ratios under 1 "
                     "mean the flat form (`lanes=\"flat\"`) is faster; medians of "
                     f"{rounds} interleaved rounds. Where no nest was flattened (the BFGS: its "
                     "line search's loop sits in a branch of the iteration's body, the "
                     "`if not broke:` its `break` makes) "
                     "both sides are the same program, and no ratio is given.\n\n{table}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
