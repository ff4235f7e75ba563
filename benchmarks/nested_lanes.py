"""A loop holding a loop under ``jax.vmap``: lockstep against flat lanes and the default.

In lockstep (``lanes="lockstep"``) every lane waits at each inner loop for that
iteration's slowest lane; flattened (``autoflow/runtime/loops/flat_lanes.py``,
``lanes="flat"``) each lane runs its own steps; with no option (``lanes="auto"``)
the compiled program starts in lockstep and goes on flat once its lanes wait.
For each program this prints the time per batched call of each form against the
lockstep, compiled in the same run, interleaved, as the median of per-round
ratios (CPU time of the process, and wall time: on a shared machine the CPU
time is the steadier figure).

    PYTHONPATH=. python benchmarks/nested_lanes.py            # writes NESTED_LANES.md
    PYTHONPATH=. python benchmarks/nested_lanes.py --quick
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

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


def compiled(fn, lanes):
    """The batched program, compiled; and how many nests it flattened (the flat
    machine compiled into it: for ``"auto"``, after its lockstep part)."""
    machine, made = flat_lanes.machine, []

    def counted(*a, **k):
        made.append(1)
        return machine(*a, **k)

    flat_lanes.machine = counted
    try:
        options = {} if lanes == "auto" else {"lanes": lanes}  # (auto: no option set)
        f = jax.jit(jax.vmap(autoflow.convert(fn, **options)))
        f.lower(*ARGS[fn]).compile()
        return f, len(made)
    finally:
        flat_lanes.machine = machine


ARGS = {}
FORMS = ("lockstep", "auto", "flat")


def _time(fn, args, reps):
    """(CPU seconds of this process, wall seconds) per call."""
    jax.block_until_ready(fn(*args))
    c, w = time.process_time(), time.perf_counter()
    for _ in range(reps):
        jax.block_until_ready(fn(*args))
    return (time.process_time() - c) / reps, (time.perf_counter() - w) / reps


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "NESTED_LANES.md"))
    args = ap.parse_args(argv)
    rounds = 5 if args.quick else 15
    load_start = os.getloadavg()[0]
    rows = []
    for name, (fn, xs) in programs().items():
        ARGS[fn] = xs
        built = {form: compiled(fn, form) for form in FORMS}
        fs = {form: f for form, (f, _) in built.items()}
        want = jax.tree.leaves(fs["lockstep"](*xs))
        same = all(np.array_equal(a, b) for form in FORMS
                   for a, b in zip(jax.tree.leaves(fs[form](*xs)), want))
        reps = max(1, min(100, int(0.05 / max(_time(fs["lockstep"], xs, 1)[1], 1e-6))))
        ratios = {form: ([], []) for form in FORMS[1:]}
        for r in range(rounds):
            order = FORMS if r % 2 == 0 else FORMS[::-1]
            t = {form: _time(fs[form], xs, reps) for form in order}
            for form in FORMS[1:]:
                for k in (0, 1):
                    ratios[form][k].append(t[form][k] / t["lockstep"][k])
        med = {form: tuple(statistics.median(v) for v in ratios[form]) for form in FORMS[1:]}
        rows.append((name, built["flat"][1], same, med, t))
        print(name, built["flat"][1], same, med, flush=True)
    lines = ["| program (batch) | nests | same results | auto (default) / lockstep: CPU, wall "
             "| flat / lockstep: CPU, wall | last round, wall (us): lockstep, auto, flat |",
             "|---|---|---|---|---|---|"]
    for name, nests, same, med, t in rows:
        if nests:
            a = f"{med['auto'][0]:.2f}x, {med['auto'][1]:.2f}x"
            f = f"{med['flat'][0]:.2f}x, {med['flat'][1]:.2f}x"
        else:
            a = f = "(the same program)"
        lines.append(f"| {name} | {nests} | {'yes' if same else 'NO'} | {a} | {f} | "
                     + ", ".join(f"{t[form][1] * 1e6:.0f}" for form in FORMS) + " |")
    table = "\n".join(lines)
    print(table)
    if not args.quick:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write("# Nested loops under vmap: lockstep, auto (the default) and flat lanes\n\n"
                     f"Generated by `benchmarks/nested_lanes.py` (jax {jax.__version__}, "
                     f"{jax.default_backend()}, {os.cpu_count()} CPU cores; load average "
                     f"{load_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end). "
                     "Ratios under 1 mean faster than lockstep (`lanes=\"lockstep\"`); auto is "
                     "the program with no option set, flat `lanes=\"flat\"`; medians of "
                     f"{rounds} interleaved rounds of the process's CPU time and of wall time "
                     "per call. Where no nest qualifies (the BFGS: its "
                     "line search's loop sits in a branch of the iteration's body, the "
                     "`if not broke:` its `break` makes) "
                     "all forms are the same program, and no ratio is given.\n\n"
                     f"{table}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
