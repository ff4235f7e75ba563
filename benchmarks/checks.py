"""What a run-time check costs a call: the same small function with and without it.

    python benchmarks/checks.py            # the table (about a minute)
    python benchmarks/checks.py --quick    # a smoke run

Each program is a loop of about 10 us on a CPU. Its checked form adds one
run-time check of one kind (a traced ``assert``, the read of a variable a loop
may leave unbound, a ``range`` with a traced step, a traced index into a Python
table, which Python bounds-checks). The baselines, in the same process: the same
program without the check under ``autoflow.jit``, and the loop hand-written with
``lax.while_loop``/``fori_loop`` (no check). Times are per call at steady state,
medians over interleaved repeats, in two ways of calling: calls issued back to
back (JAX dispatches asynchronously; one wait at the end), and each call waited
for (``block_until_ready``). See ``autoflow/runtime/effects/checks.py`` (``fast_checks``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import jax
import jax.numpy as jnp
from jax import lax

import autoflow

TABLE = [0.5, 1.5, 2.5, 3.5]


def plain(x, n):
    i = 0
    while i < n:
        x = jnp.sin(x) * 0.9 + 0.1
        i += 1
    return x


def asserted(x, n):
    assert n >= 0, "n must be non-negative"
    i = 0
    while i < n:
        x = jnp.sin(x) * 0.9 + 0.1
        i += 1
    return x


def unbound_read(x, n):
    for i in range(n):
        y = jnp.sin(x) * 0.9 + 0.1
        x = y
    return y  # (Python raises UnboundLocalError where n == 0)


def bound_before(x, n):
    y = x  # (bound before the loop: no check, the same two carries)
    for i in range(n):
        y = jnp.sin(x) * 0.9 + 0.1
        x = y
    return y


def traced_step(x, n):
    for i in range(0, 2 * n, n // n + 1):
        x = jnp.sin(x) * 0.9 + 0.1
    return x


def table_index(x, n):
    i = 0
    while i < n:
        x = jnp.sin(x) * 0.9 + 0.1
        i += 1
    return x * TABLE[n % 4]


def table_plain(x, n):
    i = 0
    while i < n:
        x = jnp.sin(x) * 0.9 + 0.1
        i += 1
    return x * jnp.asarray(TABLE)[n % 4]


@jax.jit
def hand(x, n):
    return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, jnp.sin(c[1]) * 0.9 + 0.1),
                          (0, x))[1]


ROWS = [  # (check, checked program, the same without the check)
    ("traced `assert`", asserted, plain),
    ("read a loop may leave unbound", unbound_read, bound_before),
    ("`range` with a traced step", traced_step, plain),
    ("traced index into a Python list", table_index, table_plain),
]


def _time(fn, args, calls, wait_each):
    t = time.perf_counter()
    for _ in range(calls):
        out = fn(*args)
        if wait_each:
            out.block_until_ready()
    jax.block_until_ready(out)
    return (time.perf_counter() - t) / calls


def _measure(fns, args, repeats, calls, wait_each):
    times = [[] for _ in fns]
    for r in range(repeats):
        order = list(range(len(fns)))
        if r % 2:
            order.reverse()
        for k in order:
            times[k].append(_time(fns[k], args, calls, wait_each))
    return [statistics.median(t) for t in times]


def _ordered(fn):
    """``autoflow.jit(fn)`` with its checks staged as they were before: ordered callbacks."""
    from autoflow.runtime.effects import checks

    jitted = jax.jit(autoflow.convert(fn))

    def call(*args):
        fast, checks._fast_checks_here = checks._fast_checks_here, lambda: False
        try:
            return jitted(*args)
        finally:
            checks._fast_checks_here = fast
    return call


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    opts = ap.parse_args()
    repeats, calls = (3, 20) if opts.quick else (41, 200)
    x, n = jnp.full((64,), 0.5, jnp.float32), jnp.int32(20)
    print(f"Per call, a loop of {int(n)} steps on 64 floats (JAX {jax.__version__}, "
          f"{jax.devices()[0].platform}); medians of {repeats} interleaved repeats of "
          f"{calls} calls.\n")
    print("| check | calls | with the check | without | hand-written `lax` | "
          "with / without | with / `lax` | the check as an ordered callback (before) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, checked, unchecked in ROWS:
        a, b = autoflow.jit(checked), autoflow.jit(unchecked)
        for f in (a, b, hand):
            jax.block_until_ready(f(x, n))
        assert not a.trace(x, n).jaxpr.effects, name
        before = _ordered(checked)
        jax.block_until_ready(before(x, n))
        for wait_each in (False, True):
            ta, tb, th, to = _measure([a, b, hand, before], (x, n), repeats, calls, wait_each)
            print(f"| {name} | {'each waited' if wait_each else 'back to back'} | "
                  f"{ta * 1e6:.1f} us | {tb * 1e6:.1f} us | {th * 1e6:.1f} us | "
                  f"{ta / tb:.2f}x | {ta / th:.2f}x | {to * 1e6:.1f} us ({to / tb:.1f}x) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
