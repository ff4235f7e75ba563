"""A loop body that prints, against the same loop with hand-written ``jax.debug.print``.

    python benchmarks/effects.py            # the table (about a minute)
    python benchmarks/effects.py --quick    # a smoke run

autoflow makes ``print`` in converted code an ordered run-time effect (one
``jax.debug.callback(..., ordered=True)`` per ``print``, gated by the path
condition; see ``autoflow/runtime/effects/later.py``). The baseline is what a JAX user
writes by hand: ``lax.while_loop`` with ``jax.debug.print(..., ordered=True)``.
Both print the same lines (to ``os.devnull`` while timed). The second table
is the same loops without a print: code without effects must cost what it
did. Per-call times are min / median over interleaved repeats of steady-state
calls (compiled code only), in one process.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
from jax import lax

import autoflow


def printing_loop(x, n):
    i = 0
    while i < n:
        x = x * 0.99 + 1.0
        print("step", i, x)
        i += 1
    return x


def printing_branch_loop(x, n):
    i = 0
    while i < n:
        x = x * 0.99 + 1.0
        if i % 10 == 0:
            print(f"step {i}: x={x:.4f}")
        i += 1
    return x


def quiet_loop(x, n):
    i = 0
    while i < n:
        x = x * 0.99 + 1.0
        i += 1
    return x


@jax.jit
def hand_printing_loop(x, n):
    def body(c):
        i, x = c
        x = x * 0.99 + 1.0
        jax.debug.print("step {} {}", i, x, ordered=True)
        return i + 1, x
    return lax.while_loop(lambda c: c[0] < n, body, (0, x))[1]


@jax.jit
def hand_printing_branch_loop(x, n):
    def body(c):
        i, x = c
        x = x * 0.99 + 1.0
        lax.cond(i % 10 == 0, lambda: jax.debug.print("step {}: x={:.4f}", i, x, ordered=True),
                 lambda: None)
        return i + 1, x
    return lax.while_loop(lambda c: c[0] < n, body, (0, x))[1]


@jax.jit
def hand_quiet_loop(x, n):
    def body(c):
        i, x = c
        return i + 1, x * 0.99 + 1.0
    return lax.while_loop(lambda c: c[0] < n, body, (0, x))[1]


PAIRS = [
    ("print every iteration", autoflow.jit(printing_loop), hand_printing_loop),
    ("print every 10th (traced if)", autoflow.jit(printing_branch_loop),
     hand_printing_branch_loop),
    ("no print (no effects)", autoflow.jit(quiet_loop), hand_quiet_loop),
]


def _time(fn, args, calls):
    t = time.perf_counter()
    for _ in range(calls):
        jax.block_until_ready(fn(*args))
    jax.effects_barrier()
    return (time.perf_counter() - t) / calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    opts = ap.parse_args()
    n = 20 if opts.quick else 200
    repeats, calls = (3, 3) if opts.quick else (15, 10)
    args = (jnp.float32(1.0), n)
    rows = []
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
        for name, ours, theirs in PAIRS:
            a, b = float(ours(*args)), float(theirs(*args))  # compile both
            jax.effects_barrier()
            assert abs(a - b) <= 1e-4 * abs(b), (name, a, b)
            ta, tb = [], []
            for r in range(repeats):
                pair = [(ours, ta), (theirs, tb)]
                for fn, out in (pair if r % 2 == 0 else pair[::-1]):
                    out.append(_time(fn, args, calls))
            rows.append((name, ta, tb))
    print(f"Loop of {n} iterations, per call (JAX {jax.__version__}, "
          f"{jax.devices()[0].platform}):\n")
    print("| loop | autoflow (min / median) | hand-written lax (min / median) | "
          "ratio of medians |")
    print("|---|---|---|---|")
    for name, ta, tb in rows:
        ma, mb = statistics.median(ta), statistics.median(tb)
        print(f"| {name} | {min(ta) * 1e3:.3f} / {ma * 1e3:.3f} ms | "
              f"{min(tb) * 1e3:.3f} / {mb * 1e3:.3f} ms | {ma / mb:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
