"""The rest of a loop body after a ``break``: ``lax.cond`` or a select? (sets
cond.select_or_cond.GUARD_SELECT_BUDGET)

A ``break`` in the middle of a loop body becomes ``broke = c`` and ``if not
broke:`` around the rest of the body. That ``if`` skips its block in one
iteration only, the one that leaves the loop, so as a select the block runs
once more per run of the loop, where a ``lax.cond`` costs a conditional in
every iteration. This measures both on a loop whose guarded block does
``size`` element operations, for a few trip counts, in one process: each side
traced and compiled afresh under its own rule, rounds interleaved, ratios of
medians (select / cond: below 1 means the select is faster).

It also runs the natural real algorithms whose loops have such a ``break``
(``real_algorithms.py``: cg, bicgstab), against their library versions, under
both rules.

    PYTHONPATH=. python benchmarks/guard_select.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import scalar_select  # noqa: E402
from real_algorithms import _time  # noqa: E402
from scalar_select import _fresh  # noqa: E402

RULES = {"cond": -1, "select": float("inf")}

if __name__ == "__main__" and "--sync-dispatch" in sys.argv:
    jax.config.update("jax_cpu_enable_async_dispatch", False)


def damped(x, limit, n):
    """A loop that leaves in its middle: the work after the `break` is guarded."""
    for _ in range(n):
        x = x * 0.999 + 0.0005
        if x[0] > limit:
            break
        x = jnp.sin(x) * 0.5 + jnp.cos(x) * 0.25 + 0.3
    return x


def _build(make, args):
    return scalar_select._build(make, args, "GUARD_SELECT_BUDGET", RULES)


def _medians(sides, args, rounds):
    """Each side's median time over ``rounds`` interleaved rounds (order alternating)."""
    reps = max(3, min(300, int(0.05 / max(_time(sides["cond"], args, 2), 1e-6))))
    got = {k: [] for k in sides}
    for r in range(rounds):
        for k in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
            got[k].append(_time(sides[k], args, reps))
    return {k: statistics.median(v) for k, v in got.items()}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--sizes", type=int, nargs="*",
                    default=[64, 1024, 16384, 262144, 1 << 20, 1 << 23])
    ap.add_argument("--sync-dispatch", action="store_true",
                    help="run every call on the calling thread (see real_algorithms.py)")
    args = ap.parse_args(argv)
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.2f}")
    print("| block (element operations) | iterations | cond | select | select / cond |")
    print("|---:|---:|---:|---:|---:|")
    for size in args.sizes:
        # (each element of the block does about 8 operations)
        x = jnp.linspace(0.0, 1.0, size // 8 or 1, dtype=jnp.float32)
        for n in (4, 64):
            a = (x, jnp.float32(1e9), n)  # never leaves early: n iterations
            sides = _build(lambda: _fresh(damped), a)
            m = _medians(sides, a, args.rounds)
            print(f"| {size} | {n} | {m['cond'] * 1e6:.1f} us | {m['select'] * 1e6:.1f} us "
                  f"| {m['select'] / m['cond']:.2f}x |", flush=True)
    import real_algorithms as ra

    print()
    print("| algorithm | against | cond | select |")
    print("|---|---|---:|---:|")
    for name, p in ra._problems().items():
        if name not in ("cg", "bicgstab"):
            continue
        sides = _build(lambda p=p: _fresh(p["natural"]), p["args"])
        sides["library"] = jax.jit(p["library"])
        m = _medians(sides, p["args"], args.rounds)
        print(f"| {name} | library | {m['cond'] / m['library']:.3f}x "
              f"| {m['select'] / m['library']:.3f}x |", flush=True)


if __name__ == "__main__":
    main()
