"""A Python table read at a traced index: the first call against ``jnp.asarray(table)[i]``.

``TABLE[i]`` with ``TABLE`` a module-level Python list of numbers and ``i`` traced is
read as one stacked array (``af.getitem``). Before issue 43 the stack was one scalar
constant per item and an N-way concatenate, which takes time quadratic in N to trace
(a 100,000-entry table did not finish its first call in 400 s); now a table of Python
numbers is one array constant. This measures, for tables of N entries:

* the first call of ``autoflow.jit`` of ``lambda i: TABLE[i] * 2 + 1`` (conversion,
  tracing, lowering, compiling and one run) against the same written by hand,
  ``jax.jit(lambda i: jnp.asarray(TABLE)[i] * 2 + 1)``;
* each sample in a fresh process, after a warm-up call of a small function of the
  same kind on each side there (so that neither side's one-time costs in a process,
  such as importing autoflow's runtime, are counted), the two sides alternating
  which goes first from round to round; the ratio is taken per round
  (autoflow ÷ hand) and reported as median (min-max);
* the jaxpr's equation count and size of the constants, and the time to trace alone
  (``jax.make_jaxpr``), which must grow linearly with N.

    PYTHONPATH=. python benchmarks/table_lookup.py            # writes TABLE_LOOKUP.md
    PYTHONPATH=. python benchmarks/table_lookup.py --quick
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

_CHILD = r"""
import json, sys, time
import jax, jax.numpy as jnp
import autoflow

side, n = sys.argv[1], int(sys.argv[2])
WARM = [(k * 31) % 97 for k in range(50)]
TABLE = [(k * 7919) % 1000 for k in range(n)]

def warm_af(i):
    return WARM[i] * 2 + 1

def lookup(i):
    return TABLE[i] * 2 + 1

def warm_hand(i):
    return jnp.asarray(WARM)[i] * 2 + 1

def hand(i):
    return jnp.asarray(TABLE)[i] * 2 + 1

i = jnp.int32(n // 3)
if side == "autoflow":
    autoflow.jit(warm_af)(jnp.int32(3)).block_until_ready()
    f = autoflow.jit(lookup)
else:
    jax.jit(warm_hand)(jnp.int32(3)).block_until_ready()
    f = jax.jit(hand)
t = time.perf_counter()
out = f(i).block_until_ready()
first = time.perf_counter() - t
assert int(out) == TABLE[n // 3] * 2 + 1, (int(out), TABLE[n // 3] * 2 + 1)
print(json.dumps({"first": first}))
"""

_TRACE = r"""
import json, sys, time
import jax, jax.numpy as jnp, numpy as np
import autoflow

n = int(sys.argv[1])
TABLE = [(k * 7919) % 1000 for k in range(n)]

def lookup(i):
    return TABLE[i] * 2 + 1

def warm(i):
    return [1, 2, 3][i]

f = autoflow.convert(lookup)
jax.make_jaxpr(autoflow.convert(warm))(jnp.int32(1))
t = time.perf_counter()
closed = jax.make_jaxpr(f)(jnp.int32(1))  # (the first trace: later ones are cached)
trace = time.perf_counter() - t
consts = sum(int(np.size(c)) for c in closed.consts)
print(json.dumps({"trace": trace, "eqns": len(closed.jaxpr.eqns),
                  "constvars": len(closed.jaxpr.constvars), "const_items": consts}))
"""


def _run(code, *args):
    """Run ``code`` in a fresh interpreter (from a file: autoflow reads the source of the
    functions it converts) and return the JSON it prints last."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(HERE)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "table_lookup_child.py")
        with open(path, "w") as fh:
            fh.write(code)
        out = subprocess.run([sys.executable, path, *map(str, args)], capture_output=True,
                             text=True, env=env)
    if out.returncode:
        raise RuntimeError(f"the child process failed:\n{out.stdout}{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def first_calls(n, rounds):
    rows = []
    for r in range(rounds):
        order = ("hand", "autoflow") if r % 2 == 0 else ("autoflow", "hand")
        got = {side: _run(_CHILD, side, n)["first"] for side in order}
        rows.append(got)
    ratios = [g["autoflow"] / g["hand"] for g in rows]
    return {
        "n": n,
        "hand_ms": statistics.median(g["hand"] for g in rows) * 1e3,
        "autoflow_ms": statistics.median(g["autoflow"] for g in rows) * 1e3,
        "ratio": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small tables, 1 round: a smoke run")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--markdown", default=os.path.join(HERE, "TABLE_LOOKUP.md"))
    a = p.parse_args(argv)
    sizes = [1000] if a.quick else [1000, 10000, 100000]
    trace_sizes = [1000, 4000] if a.quick else [1000, 10000, 100000]
    rounds = 1 if a.quick else a.rounds
    load0 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    traces = [dict(n=n, **_run(_TRACE, n)) for n in trace_sizes]
    firsts = [first_calls(n, rounds) for n in sizes]
    load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")

    import jax

    lines = [
        "# A Python table read at a traced index",
        "",
        f"`benchmarks/table_lookup.py` ({'--quick, ' if a.quick else ''}{rounds} rounds; "
        f"JAX {jax.__version__}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs; load average {load0:.2f} at the start, {load1:.2f} at the end).",
        "",
        "First call (fresh process each sample, after a warm-up call on each side) of "
        "`autoflow.jit(lambda i: TABLE[i] * 2 + 1)` against "
        "`jax.jit(lambda i: jnp.asarray(TABLE)[i] * 2 + 1)`; ratio = autoflow ÷ hand, per round, "
        "median (min-max). Target: at most 1.2x at N = 100,000.",
        "",
        "| N | hand (ms) | autoflow (ms) | ratio | verdict |",
        "|---:|---:|---:|---:|---|",
    ]
    for f in firsts:
        verdict = "ok" if f["ratio"] <= 1.2 else "OUTSIDE"
        lines.append(f"| {f['n']:,} | {f['hand_ms']:.1f} | {f['autoflow_ms']:.1f} | "
                     f"{f['ratio']:.2f} ({f['ratio_min']:.2f}-{f['ratio_max']:.2f}) | {verdict} |")
    lines += [
        "",
        "Before issue 43 (commit 91dc653, the same machine, one first call each in a fresh process, without the warm-up): 0.42 s at "
        "N = 1,000 and 4.1 s at N = 4,000 (one constant per item and an N-way concatenate: "
        "time quadratic in N); a 100,000-entry table did not finish in 400 s.",
    ]
    lines += [
        "",
        "Tracing alone (the first `jax.make_jaxpr` of the converted function in a fresh "
        "process, after a warm-up trace of a 3-item table): the table is "
        "one constant of N items, and the time grows linearly with N (converting the list to "
        "an array).",
        "",
        "| N | trace (ms) | equations | constants | items in constants |",
        "|---:|---:|---:|---:|---:|",
    ]
    for t in traces:
        lines.append(f"| {t['n']:,} | {t['trace'] * 1e3:.1f} | {t['eqns']} | {t['constvars']} | "
                     f"{t['const_items']:,} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if not a.quick:
        with open(a.markdown, "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
