"""Where a first call's time goes: autoflow against the library, per algorithm.

    PYTHONPATH=. python benchmarks/first_call.py               # all, writes FIRST_CALL.md
    PYTHONPATH=. python benchmarks/first_call.py --only cg --procs 3 --no-write

For each algorithm of ``real_algorithms.py`` (its problems, imported, not
restated), each side (``natural``: the natural version through autoflow;
``library``: the JAX library's own) runs in fresh processes, 5 by default,
interleaved side by side. A process imports ``jax``, ``autoflow`` and the
libraries and builds the problems (which starts JAX's CPU backend), then times
the first call in stages with JAX's ahead-of-time API:

* ``convert``: ``autoflow.convert`` (the library: nothing);
* ``trace``: ``jax.jit(f).trace(*args)``, Python to jaxpr;
* ``lower``: ``.lower()``, jaxpr to StableHLO;
* ``compile``: ``.compile()``, XLA;
* ``run``: the first execution, to a result on the host.

Two measurements, each its own set of processes:

* **cold** (``--mode cold``): nothing else first; the natural side's
  ``convert`` then holds autoflow's one-time costs in a process (loading
  ``autoflow.runtime``, building the rewriter's templates), and both sides'
  ``trace`` holds JAX's first tracing of its own primitives;
* **warm** (``--mode warm``): as ``real_algorithms.py`` measures: first a
  function of another file (``examples/collatz.py``) is converted and traced,
  on both sides, so that only the algorithm's own costs remain.

``--before DIR`` adds a third side: the natural version through the autoflow of
``DIR`` (a checkout of an earlier commit), in the same rounds.

Counts, taken after the timings: the equations of the jaxpr (sub-jaxprs
included), and the computations and instructions of the optimized HLO
(``.compile().as_text()``). Totals and stages are medians over the processes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STAGES = ("convert", "trace", "lower", "compile", "run")


def _eqns(closed):
    """Equations of a jaxpr, those of its sub-jaxprs included: the lines of its printed
    form that bind a result (autoflow's primitives keep their jaxprs in their own
    parameters, which only the printer walks)."""
    return sum(1 for line in str(closed).splitlines() if " = " in line)


def _hlo_counts(text):
    """(computations, instructions) of an HLO module's text."""
    comps = ops = 0
    for line in text.splitlines():
        s = line.strip()
        if re.match(r"^(ENTRY )?%?[\w.\-]+ .*\{$", s) and not s.startswith("HloModule"):
            comps += 1
        elif re.match(r"^(ROOT )?%?[\w.\-]+ = ", s):
            ops += 1
    return comps, ops


def _warmup():
    """Convert and trace a function of another file (``examples/collatz.py``)."""
    import importlib.util

    import jax

    import autoflow

    spec = importlib.util.spec_from_file_location(
        "collatz_warmup", os.path.join(ROOT, "examples", "collatz.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    jax.make_jaxpr(autoflow.convert(module.collatz_steps))(3)


def child(name, which, mode):
    import jax

    t_import = time.perf_counter()
    import autoflow  # noqa: F401  (the import the user's program has)

    t_import = time.perf_counter() - t_import

    sys.path.insert(0, HERE)
    import real_algorithms as ra

    p = ra._problems()[name]
    args = p["args"]
    if which == "library":
        # (what the library's function imports when first called, optimistix, is
        # imported before the clock, as the natural side's imports are)
        import optimistix  # noqa: F401
    jax.block_until_ready(args)
    if mode == "warm":
        _warmup()
    t = {}
    t0 = time.perf_counter()
    fn = autoflow.convert(p["natural"]) if which == "natural" else p["library"]
    t1 = time.perf_counter()
    traced = jax.jit(fn).trace(*args)
    t2 = time.perf_counter()
    lowered = traced.lower()
    t3 = time.perf_counter()
    compiled = lowered.compile()
    t4 = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    t5 = time.perf_counter()
    t.update(convert=t1 - t0, trace=t2 - t1, lower=t3 - t2, compile=t4 - t3, run=t5 - t4)
    comps, ops = _hlo_counts(compiled.as_text())
    t.update(eqns=_eqns(traced.jaxpr), comps=comps, ops=ops, import_autoflow=t_import)
    return t


def _env():
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def measure(name, mode, procs, before=None):
    """Medians per side; ``before``: also the natural side with autoflow imported from
    that folder (an earlier version's checkout), as a third side of the same rounds."""
    got = {"natural": [], "library": []}
    if before:
        got["before"] = []
    for i in range(procs):
        order = list(got) if i % 2 == 0 else list(got)[::-1]
        for side in order:
            env = _env() if side != "before" else dict(
                os.environ, PYTHONPATH=before + os.pathsep + os.environ.get("PYTHONPATH", ""))
            which = "natural" if side == "before" else side
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name,
                                  which, mode], capture_output=True, text=True, env=env)
            if out.returncode:
                raise RuntimeError(out.stderr)
            got[side].append(json.loads(out.stdout.strip().splitlines()[-1]))
    res = {}
    for which, runs in got.items():
        r = {s: statistics.median(x[s] for x in runs) for s in STAGES}
        totals = [sum(x[s] for s in STAGES) for x in runs]
        r["total"], r["best"], r["totals"] = statistics.median(totals), min(totals), totals
        for k in ("eqns", "comps", "ops"):
            r[k] = runs[0][k]
        r["import_autoflow"] = statistics.median(x.get("import_autoflow", 0.0) for x in runs)
        res[which] = r
    return res


def _row(name, mode, res):
    n, lb = res["natural"], res["library"]
    ms = lambda x: f"{x * 1e3:.0f}"  # noqa: E731
    stages = " | ".join(f"{ms(n[s])} / {ms(lb[s])}" for s in STAGES)
    was = (f"; before: {res['before']['total'] / lb['total']:.2f}x "
           f"({ms(res['before']['total'])} ms), best {res['before']['best'] / lb['best']:.2f}x"
           if "before" in res else "")
    was_import = f" (before: {ms(res['before']['import_autoflow'])})" if "before" in res else ""
    return (f"| {name} | {mode} | **{n['total'] / lb['total']:.2f}x** "
            f"({ms(n['total'])} / {ms(lb['total'])}), best {n['best'] / lb['best']:.2f}x{was} "
            f"| {ms(n['import_autoflow'])}{was_import} | {stages} | {n['eqns']} / {lb['eqns']} "
            f"| {n['comps']} / {lb['comps']} | {n['ops']} / {lb['ops']} |")


HEADER = ("| algorithm | measurement | first call: median ratio (ms autoflow / library), "
          "ratio of the best processes | `import autoflow` (not in the first call) | convert | "
          "trace | lower | compile | run | jaxpr equations | HLO computations | HLO "
          "instructions |\n|---|---|---|---|---|---|---|---|---|---|---|---|")


def _pyc_state():
    """Whether autoflow's modules load from fresh ``.pyc`` files or are compiled from
    source in each process (``PYTHONDONTWRITEBYTECODE=1`` with none written yet)."""
    import importlib.util

    folder = os.path.join(ROOT, "autoflow", "runtime")
    fresh = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            src = os.path.join(folder, name)
            pyc = importlib.util.cache_from_source(src)
            fresh.append(os.path.exists(pyc) and os.path.getmtime(pyc) >= os.path.getmtime(src))
    if all(fresh):
        return "present (autoflow's modules load compiled)"
    if not any(fresh):
        return "absent (autoflow's modules are compiled from source in each process)"
    return "present for some modules only"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", nargs=3)
    ap.add_argument("--only", action="append")
    ap.add_argument("--procs", type=int, default=5)
    ap.add_argument("--mode", choices=("cold", "warm", "both"), default="both")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--json", help="also write the medians to this file")
    ap.add_argument("--before", help="a folder holding an earlier autoflow (a checkout of an "
                    "earlier commit): its first calls too, in the same rounds")
    ap.add_argument("--before-label", help="what --before holds, for FIRST_CALL.md")
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(*a.child)))
        return
    import jax

    sys.path.insert(0, HERE)
    import real_algorithms as ra

    names = a.only or list(ra._problems())
    modes = ("cold", "warm") if a.mode == "both" else (a.mode,)
    pyc = _pyc_state()
    load0 = os.getloadavg()[0]
    rows, data = [], {}
    print(HEADER)
    for name in names:
        for mode in modes:
            res = measure(name, mode, a.procs, a.before)
            data[f"{name}/{mode}"] = res
            rows.append(_row(name, mode, res))
            print(rows[-1], flush=True)
    load1 = os.getloadavg()[0]
    if a.json:
        with open(a.json, "w") as f:
            json.dump(data, f, indent=1)
    if a.no_write or a.only:
        return
    before = ("" if not a.before else "\n\n*before*: the first call of autoflow's previous "
              f"version (`--before`, {a.before_label or a.before}), a third side of the same "
              "rounds, over the same library medians.")
    text = f"""# First calls: where the time goes, autoflow against the library

Generated by `benchmarks/first_call.py` (jax {jax.__version__}, {jax.default_backend()},
{os.cpu_count()} CPU cores; .pyc files {pyc}; load average {load0:.2f} at the start,
{load1:.2f} at the end). Medians of {a.procs} fresh processes per side, the two sides
interleaved. Each stage in milliseconds (medians), autoflow / library; "best": the ratio of
each side's fastest process (on a loaded machine the steadier figure: compile times of the
same program vary by 1.5x between processes here). **cold**: right after
`import jax, autoflow` and the libraries, autoflow's one-time costs in a process included
(in `convert`); **warm**: after a function of another file was converted and traced (as
`real_algorithms.py` measures). HLO counts are of the optimized program. `import autoflow`
(after `import jax`, before the clock; autoflow side) is where autoflow loads its runtime
when JAX is loaded already.{before}

{HEADER}
""" + "\n".join(rows) + "\n"
    path = os.path.join(HERE, "FIRST_CALL.md")
    notes = ""
    if os.path.exists(path):  # (the notes written by hand below the tables are kept)
        with open(path) as f:
            old = f.read()
        if "\n## Notes" in old:
            notes = "\n## Notes" + old.split("\n## Notes", 1)[1]
    with open(path, "w") as f:
        f.write(text + notes)


if __name__ == "__main__":
    main()
