"""What a ``lax.cond`` branch that is never taken costs a call on XLA:CPU, and why
``lanes="auto"`` costs samplers more than lockstep (``NESTED_LANES.md``).

The CPU client makes, at every call, one buffer for each buffer allocation of the
compiled program: constants, the scalars of each reduction's combiner
("thread-local"), temporaries; those of branches that are not taken included. So
a branch that is never taken still costs a call in proportion to its reductions
and array constants. Part 1 measures that on plain JAX programs (sin of 64 numbers,
then a ``cond`` whose other branch holds 50 operations of one kind); part 2 counts
the allocations of the Gamma sampler of ``nested_lanes.py`` compiled in lockstep
and with ``lanes="auto"`` (the flat loop behind its ``cond``), from XLA's dump.

    .venv/bin/python benchmarks/untaken_branch.py

Calls are timed with synchronous dispatch (``jax_cpu_enable_async_dispatch``
off), so that the figure is the call's own work: the median of 9 rounds of the
process's CPU time.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
K = 50  # operations in the branch


def _branch_program(kind):
    import jax.numpy as jnp
    from jax import lax

    def heavy(y):
        acc = y
        for j in range(K):
            if kind == "reductions":
                acc = acc + jnp.sum(acc * (j + 1.5))
            elif kind == "elementwise":
                acc = jnp.cos(acc * (j + 1.5))
            elif kind == "array constants":
                acc = acc * jnp.linspace(1.0, 2.0 + j, acc.shape[0])
        return acc

    def f(x):
        y = jnp.sin(x)
        if kind == "none":
            return y
        return lax.cond(jnp.any(y > 1e9), heavy, lambda y: y, y)
    return f


def part1():
    import jax
    import jax.numpy as jnp
    x = jnp.linspace(0.0, 1.0, 64)
    kinds = ("none", "elementwise", "array constants", "reductions")
    fs = {k: jax.jit(_branch_program(k)) for k in kinds}
    for f in fs.values():
        f(x).block_until_ready()
    times = {k: [] for k in kinds}
    for r in range(9):
        for k in (kinds if r % 2 == 0 else kinds[::-1]):
            c = time.process_time()
            for _ in range(1000):
                fs[k](x).block_until_ready()
            times[k].append((time.process_time() - c) / 1000 * 1e6)
    base = sorted(times["none"])[4]
    print(f"| the untaken branch holds ({K} of them) | us a call | over no branch |")
    print("|---|---:|---:|")
    for k in kinds:
        t = sorted(times[k])[4]
        print(f"| {k} | {t:.1f} | {t - base:+.1f} |")


def _allocations(dump_dir):
    """``{kind: count}`` of the buffer allocations of the largest program in the dump."""
    files = glob.glob(os.path.join(dump_dir, "*gamma_sample*buffer-assignment.txt"))
    text = open(max(files, key=os.path.getsize), encoding="utf-8").read()
    lines = [line for line in text.splitlines() if line.startswith("allocation ")]
    counts = {"all": len(lines)}
    for kind in ("constant", "thread-local"):
        counts[kind] = sum(kind in line for line in lines)
    return counts


def part2():
    print()
    print("| gamma_sample, 64 lanes | buffer allocations | constants | thread-local "
          "(reductions' scalars) | reduce ops in the HLO |")
    print("|---|---:|---:|---:|---:|")
    for lanes in ("lockstep", "auto"):
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={d} --xla_dump_hlo_as_text",
                       PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), HERE]))
            subprocess.run([sys.executable, __file__, "--compile", lanes], env=env, check=True)
            a = _allocations(d)
            hlo = max(glob.glob(os.path.join(d, "*gamma_sample*after_optimizations.txt")),
                      key=os.path.getsize)
            text = open(hlo, encoding="utf-8").read()
            reduces = text.count(" reduce(") + text.count(" reduce-window(")
        print(f"| {lanes} | {a['all']} | {a['constant']} | {a['thread-local']} | {reduces} |")


def _compile(lanes):
    import jax
    import autoflow
    import nested_lanes
    fn, xs = nested_lanes.programs()["gamma_sample"]
    options = {} if lanes == "auto" else {"lanes": lanes}
    jax.jit(jax.vmap(autoflow.convert(fn, **options))).lower(*xs).compile()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--compile"]:
        _compile(sys.argv[2])
    else:
        import jax
        jax.config.update("jax_cpu_enable_async_dispatch", False)
        part1()
        part2()
