"""The same programs compiled by two checkouts, timed in one process, in turns.

On a shared machine a figure moves by 10-30% from one process to the next (the
host's load changes from minute to minute), more than most changes to the
runtime move it. Here each checkout compiles the programs in a process of its own
(``--compile``: its ``autoflow`` on ``sys.path``) and serializes the compiled
executables (``jax.experimental.serialize_executable``); one process loads both
sets and times them in turns, so that both meet the same load:

* the samplers of ``nested_lanes.py`` under ``vmap`` (``gamma_sample``,
  ``tail_normal``), with ``lanes="auto"`` (the default) and ``lanes="lockstep"``;
* the convergence loops of ``grad_programs.py`` (``cg``, ``odeint``, ``newton``): the
  forward pass and ``jax.grad`` (FISTA's forward program crashes the loader of
  serialized executables on JAX 0.10.2: left out).

    .venv/bin/python benchmarks/paired_programs.py OTHER_CHECKOUT [--rounds 31]

Per executable: the median over rounds of the wall time per call (synchronous
dispatch, 30 calls a round after 10 untimed ones: the first calls after another
program's run slower, its code and data out of the caches; not the process's CPU time, which counts XLA's worker
threads spinning after a call, and so depends on the program timed before); per
program, the ratio that the issue's targets name (auto / lockstep, grad / forward)
for both checkouts.
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SAMPLERS = ("gamma_sample", "tail_normal")
GRADS = ("cg", "odeint", "newton")


def compile_all(root, out):
    """(In a process of its own) compile the programs with ``root``'s autoflow, and
    write ``{name: (serialized executable, arguments)}`` to ``out``."""
    sys.path[:0] = [root, HERE]
    import jax
    from jax.experimental.serialize_executable import serialize

    import autoflow
    import grad_programs
    import nested_lanes
    assert os.path.abspath(autoflow.__file__).startswith(os.path.abspath(root)), autoflow.__file__
    made = {}
    programs = nested_lanes.programs()
    for name in SAMPLERS:
        fn, xs = programs[name]
        for lanes in ("auto", "lockstep"):
            options = {} if lanes == "auto" else {"lanes": lanes}
            made[f"{name}/{lanes}"] = (serialize(jax.jit(jax.vmap(autoflow.convert(
                fn, **options))).lower(*xs).compile()), xs)
    for name in GRADS:
        fn, args = grad_programs.PROGRAMS[name], grad_programs.inputs(name)
        made[f"{name}/forward"] = (serialize(autoflow.jit(fn).lower(*args).compile()), args)
        made[f"{name}/grad"] = (serialize(jax.jit(jax.grad(
            autoflow.convert(fn), argnums=(0, 1))).lower(*args).compile()), args)
    with open(out, "wb") as fh:
        pickle.dump(made, fh)


def _compiled(root, tmp, tag):
    out = os.path.join(tmp, f"{tag}.pkl")
    subprocess.run([sys.executable, __file__, "--compile", root, out], check=True,
                   stderr=subprocess.DEVNULL)
    with open(out, "rb") as fh:
        return pickle.load(fh)


def timed(sides, rounds, calls=30, warm=10):
    """``{(side, name): median wall microseconds a call}``, all timed in turns."""
    import jax
    import numpy as np
    from jax.experimental.serialize_executable import deserialize_and_load
    jax.config.update("jax_cpu_enable_async_dispatch", False)
    loaded = {}
    for side, made in sides.items():
        for name, (ser, args) in made.items():
            fn = deserialize_and_load(*ser)
            jax.block_until_ready(fn(*args))
            loaded[(side, name)] = (fn, args)
    keys = list(loaded)
    times = {k: [] for k in keys}
    for r in range(rounds):
        for k in (keys if r % 2 == 0 else keys[::-1]):
            fn, args = loaded[k]
            for _ in range(warm):  # (the first calls after another program's run cold)
                jax.block_until_ready(fn(*args))
            start = time.perf_counter()
            for _ in range(calls):
                jax.block_until_ready(fn(*args))
            times[k].append((time.perf_counter() - start) / calls * 1e6)
    return {k: float(np.median(v)) for k, v in times.items()}


def markdown(t, labels):
    this, other = labels
    out = [f"| program | ratio | {this} | {other} | {this}: us a call | {other}: us a call |",
           "|---|---|---:|---:|---|---|"]
    pairs = [(n, "auto", "lockstep") for n in SAMPLERS] + [(n, "grad", "forward") for n in GRADS]
    for name, a, b in pairs:
        cells = []
        for side in labels:
            cells.append((t[(side, f"{name}/{a}")], t[(side, f"{name}/{b}")]))
        out.append(f"| {name} | {a} / {b} | " + " | ".join(f"{x / y:.3f}x" for x, y in cells)
                   + " | " + " | ".join(f"{x:.0f}, {y:.0f}" for x, y in cells) + " |")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("other", help="the other checkout (a worktree of another commit)")
    p.add_argument("--rounds", type=int, default=31)
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        sides = {"this": _compiled(ROOT, tmp, "this"),
                 "other": _compiled(os.path.abspath(a.other), tmp, "other")}
    t = timed(sides, a.rounds)
    print(markdown(t, ("this", "other")))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--compile"]:
        compile_all(sys.argv[2], sys.argv[3])
    else:
        main()
