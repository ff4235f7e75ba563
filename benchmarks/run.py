"""autoflow benchmarks: conversion, compile time, runtime, call overhead, import time.

    python benchmarks/run.py            # full run (several minutes)
    python benchmarks/run.py --quick    # smoke run (a few seconds)

Prints a Markdown table per section and writes every measurement to
``benchmarks/results.json`` (``results-quick.json`` with ``--quick``) and the
tables to ``benchmarks/RESULTS.md`` (full run only).  See
``benchmarks/README.md`` for what each section measures.

Every comparison is taken within one run, with the two sides' repeats
interleaved (and their order alternated) so that drift in machine load hits
both sides alike; figures are min / median / max over the repeats.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import importlib.util
import inspect
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import autoflow  # noqa: E402
import autoflow._conversion as af_conversion  # noqa: E402
import corpus  # noqa: E402
import programs  # noqa: E402

# Reference points (measured elsewhere on this machine kind; not re-measured here).
AUTOGRAPH_MS_PER_FUNCTION = 44.0   # TensorFlow AutoGraph `to_graph`, median per small function
CATALYST_MS_PER_LINE = 6.0         # Catalyst AutoGraph, per source line
TARGET_CONVERT_MS = 2.2            # median per corpus function
TARGET_COMPILE_SPEEDUP = 20.0      # jax.jit / autoflow.jit first call at N = 1000
TARGET_RUNTIME_RATIO = 1.05        # autoflow.jit(py) / jax.jit(lax)
TARGET_OVERHEAD_RATIO = 1.10       # tiny inputs
JAX_SKIP_SECONDS = 60.0            # skip an unrolled jax.jit compile estimated to take longer

PROBLEMS: list[str] = []


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------
def stats(xs):
    xs = list(xs)
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs), "n": len(xs)}


def fmt_time(s):
    if s >= 1.0:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms" if s < 0.1 else f"{s * 1e3:.0f} ms"
    return f"{s * 1e6:.1f} µs"


def fmt_ratio(st, digits=2):
    return f"{st['median']:.{digits}f}x ({st['min']:.{digits}f}–{st['max']:.{digits}f})"


def fmt_ms(st, digits=2):
    return f"{st['median']:.{digits}f} ({st['min']:.{digits}f}–{st['max']:.{digits}f})"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def block(x):
    return jax.block_until_ready(x)


def loadavg():
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:  # pragma: no cover - not on Linux
        return None


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def sample(fn, args, k):
    """(wall, CPU) seconds per call of ``fn(*args)``, blocking on every result, over ``k`` calls.

    CPU time is the process's (all threads); on a machine shared with other
    jobs it is less disturbed by waiting for a core than wall time is.
    """
    c, t = time.process_time(), time.perf_counter()
    for _ in range(k):
        block(fn(*args))
    return (time.perf_counter() - t) / k, (time.process_time() - c) / k


def interleaved(fa, fb, args, repeats, sample_s):
    """Per-call (wall, CPU) times of ``fa`` and ``fb`` over ``repeats`` interleaved samples.

    Each repeat times ``fa`` then ``fb`` (``fb`` then ``fa`` on odd repeats),
    ``k`` calls each, ``k`` chosen so that a sample takes about ``sample_s``.
    """
    sample(fa, args, 3)
    t1 = sample(fb, args, 3)[0]
    k = max(1, int(sample_s / max(t1, 1e-7)))
    ta, tb = [], []
    for r in range(repeats):
        first, second = ((fa, ta), (fb, tb)) if r % 2 == 0 else ((fb, tb), (fa, ta))
        first[1].append(sample(first[0], args, k))
        second[1].append(sample(second[0], args, k))
    return ta, tb, k


def count_eqns(jaxpr):
    """(top-level equations, equations including every nested jaxpr)."""
    def subjaxprs(v):
        if hasattr(v, "eqns"):
            yield v
        elif hasattr(v, "jaxpr") and hasattr(v, "consts"):
            yield v.jaxpr
        elif isinstance(v, (tuple, list)):
            for u in v:
                yield from subjaxprs(u)

    def total(j):
        n = 0
        for e in j.eqns:
            n += 1
            for v in e.params.values():
                for sub in subjaxprs(v):
                    n += total(sub)
        return n

    j = jaxpr.jaxpr
    return len(j.eqns), total(j)


# --------------------------------------------------------------------------
# 0. correctness checks before timing
# --------------------------------------------------------------------------
def check_programs(quick, sections):
    """Eager Python == jax.jit(lax) for every program, eager == autoflow.jit for the corpus.

    Skipped by ``--quick`` (it compiles every program); the timed sections
    still compare ``autoflow.jit(f_py)`` with ``jax.jit(f_lax)`` on their inputs.
    """
    if quick:
        return {"validate": "skipped (--quick)", "corpus_check": "skipped (--quick)"}
    result = {}
    if "runtime" in sections or "overhead" in sections:
        log("checking programs.validate() (eager Python == jax.jit(lax)) ...")
        try:
            programs.validate(quick=True, verbose=False)
            result["validate"] = True
        except AssertionError as e:
            PROBLEMS.append(f"programs.validate() failed: {e}")
            result["validate"] = False
    if "conversion" in sections:
        log("checking the conversion corpus (eager == autoflow.jit) ...")
        bad = corpus.check()
        PROBLEMS.extend(f"corpus: {b}" for b in bad)
        result["corpus_check"] = bad or "all match"
    return result


# --------------------------------------------------------------------------
# 1. conversion time
# --------------------------------------------------------------------------
def _to_source_options():
    return af_conversion._transform_options(af_conversion._options(None, True, (), True, False))


def convert_uncached(fn, options):
    """Seconds to convert ``fn`` as ``to_source`` does, bypassing its per-code cache.

    Returns ``(wall, CPU, compile wall)``: the first two time the work of
    ``to_source`` (source, parse, passes, unparse); the third times the
    compile that ``convert``/``jit`` add on top. CPU time is this thread's
    (``time.thread_time``): conversion is pure single-threaded Python, so on
    an idle machine the two agree, and on a shared one the CPU time is what
    the conversion costs.
    """
    af_conversion._by_code.clear()
    c, t = time.thread_time(), time.perf_counter()
    af_conversion._source(fn, options)
    wall, cpu = time.perf_counter() - t, time.thread_time() - c
    t = time.perf_counter()
    af_conversion._convert_code(fn, options)
    return wall, cpu, time.perf_counter() - t


def python_calls(fn, options):
    """Python function calls made by one uncached ``to_source`` conversion of ``fn``.

    A count of the work done, free of the machine's noise and of cache
    effects: constant calls per line means the algorithm is linear.
    """
    import cProfile
    import pstats
    af_conversion._by_code.clear()
    profile = cProfile.Profile()
    profile.enable()
    af_conversion._source(fn, options)
    profile.disable()
    return pstats.Stats(profile).total_calls


def load_generated(n_lines, tmpdir):
    src = corpus.generated_source(n_lines, name=f"generated_{n_lines}")
    path = os.path.join(tmpdir, f"generated_{n_lines}.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(f"generated_{n_lines}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, f"generated_{n_lines}"), len(src.splitlines())


def _verdict(wall, cpu, limit):
    if wall <= limit:
        return "met"
    if cpu <= limit:
        return "met on CPU time (wall time inflated by load)"
    return "MISSED"


def bench_conversion(quick):
    log("1. conversion time ...")
    options = _to_source_options()
    fns = corpus.FUNCTIONS[::4] if quick else corpus.FUNCTIONS
    lines = {f.__name__: len(inspect.getsource(f).splitlines()) for f in fns}
    for f in fns:  # warm-up: imports, linecache, gast
        convert_uncached(f, options)
    repeats = 1 if quick else 7
    per_fn = {f.__name__: [] for f in fns}
    medians = {"wall": [], "cpu": [], "with_compile": []}
    for r in range(repeats):
        order = fns if r % 2 == 0 else fns[::-1]
        this = []
        for f in order:
            dt = convert_uncached(f, options)
            per_fn[f.__name__].append(dt)
            this.append(dt)
        medians["wall"].append(statistics.median(w for w, _, _ in this) * 1e3)
        medians["cpu"].append(statistics.median(c for _, c, _ in this) * 1e3)
        medians["with_compile"].append(statistics.median(w + k for w, _, k in this) * 1e3)
    best = {k: min(c for _, c, _ in v) * 1e3 for k, v in per_fn.items()}
    best_wall = {k: min(w for w, _, _ in v) * 1e3 for k, v in per_fn.items()}
    slowest = max(best, key=best.get)
    total_lines = sum(lines.values())
    corpus_res = {
        "method": "autoflow._conversion._source(fn, to_source options) after clearing autoflow._conversion._by_code "
                  "(source from linecache + parse + all rewriter passes + unparse: the work of to_source); "
                  "median_ms_with_compile adds the compile that convert/jit do on top",
        "functions": len(fns),
        "lines": lines,
        "lines_min": min(lines.values()), "lines_max": max(lines.values()),
        "lines_median": statistics.median(lines.values()),
        "median_ms_per_function": stats(medians["wall"]),
        "median_cpu_ms_per_function": stats(medians["cpu"]),
        "median_ms_with_compile": stats(medians["with_compile"]),
        "best_cpu_ms_per_function": best,
        "best_wall_ms_per_function": best_wall,
        "slowest_by_cpu": [slowest, best[slowest], lines[slowest]],
        "cpu_ms_per_line_corpus": sum(best.values()) / total_lines,
    }

    sizes = [100] if quick else [100, 500, 1000]
    gen_repeats = 1 if quick else 7
    gen = {}
    with tempfile.TemporaryDirectory() as tmp:
        loaded = {n: load_generated(n, tmp) for n in sizes}
        times = {n: [] for n in sizes}
        for r in range(gen_repeats):
            for n in (sizes if r % 2 == 0 else sizes[::-1]):
                gc.collect()
                times[n].append(convert_uncached(loaded[n][0], options)[:2])
        calls = {n: python_calls(loaded[n][0], options) for n in sizes}
        for n in sizes:
            nl = loaded[n][1]
            gen[n] = {"lines": nl, "python_calls": calls[n], "python_calls_per_line": calls[n] / nl,
                      "ms": stats(w * 1e3 for w, _ in times[n]),
                      "cpu_ms": stats(c * 1e3 for _, c in times[n]),
                      "ms_per_line": stats(w * 1e3 / nl for w, _ in times[n]),
                      "cpu_ms_per_line": stats(c * 1e3 / nl for _, c in times[n])}
    growth = growth_wall = calls_growth = None
    if len(sizes) > 1:
        calls_growth = gen[sizes[-1]]["python_calls_per_line"] / gen[sizes[0]]["python_calls_per_line"]
        # Best of repeats: the work is deterministic, so the fastest repeat is
        # the one least disturbed by the machine's other load.
        growth = gen[sizes[-1]]["cpu_ms_per_line"]["min"] / gen[sizes[0]]["cpu_ms_per_line"]["min"]
        growth_wall = gen[sizes[-1]]["ms_per_line"]["min"] / gen[sizes[0]]["ms_per_line"]["min"]
    af_conversion._by_code.clear()

    med, cmed = corpus_res["median_ms_per_function"], corpus_res["median_cpu_ms_per_function"]
    rows = [[f"corpus: {len(fns)} functions, {corpus_res['lines_min']}–{corpus_res['lines_max']} lines "
             f"(median {corpus_res['lines_median']:g}); median per function",
             fmt_ms(med), fmt_ms(cmed), f"{corpus_res['cpu_ms_per_line_corpus']:.2f}",
             f"TF AutoGraph `to_graph`: {AUTOGRAPH_MS_PER_FUNCTION:g} ms/function = "
             f"{AUTOGRAPH_MS_PER_FUNCTION / med['median']:.1f}x autoflow (wall), "
             f"{AUTOGRAPH_MS_PER_FUNCTION / cmed['median']:.1f}x (CPU)",
             f"≤ {TARGET_CONVERT_MS} ms: {_verdict(med['median'], cmed['median'], TARGET_CONVERT_MS)}"],
            ["corpus: median per function including the compile that `convert`/`jit` add",
             fmt_ms(corpus_res["median_ms_with_compile"]), "", "", "", ""],
            [f"corpus: slowest function (`{slowest}`, {lines[slowest]} lines), best of repeats",
             f"{best_wall[slowest]:.2f}", f"{best[slowest]:.2f}", f"{best[slowest] / lines[slowest]:.2f}", "", ""]]
    for n in sizes:
        g = gen[n]
        rows.append([f"generated function, {g['lines']} lines", fmt_ms(g["ms"], 0), fmt_ms(g["cpu_ms"], 0),
                     fmt_ms(g["cpu_ms_per_line"]),
                     f"Catalyst AutoGraph: ~{CATALYST_MS_PER_LINE:g} ms/line = "
                     f"{CATALYST_MS_PER_LINE / g['ms_per_line']['median']:.1f}x autoflow (wall), "
                     f"{CATALYST_MS_PER_LINE / g['cpu_ms_per_line']['median']:.1f}x (CPU)", ""])
    if growth is not None:
        big, small = gen[sizes[-1]], gen[sizes[0]]
        rows.append([f"growth of the work: Python function calls per line at {big['lines']} lines "
                     f"({big['python_calls_per_line']:.0f}) ÷ at {small['lines']} lines "
                     f"({small['python_calls_per_line']:.0f})",
                     "", f"{calls_growth:.2f}x", "", "1.00x = linear",
                     "linear" if calls_growth <= 1.10 else "SUPERLINEAR"])
        rows.append([f"growth of the time: ms/line at {big['lines']} lines ÷ ms/line at "
                     f"{small['lines']} lines (best of repeats)",
                     f"{growth_wall:.2f}x", f"{growth:.2f}x", "", "1.00x = linear", ""])
    md = ("### 1. Conversion time (`to_source`, uncached)\n\n"
          + table(["workload", "wall ms median (min–max)", "CPU ms median (min–max)", "CPU ms/line",
                   "reference", "target"], rows))
    return {"corpus": corpus_res, "generated": {str(k): v for k, v in gen.items()},
            "growth_cpu_ms_per_line_ratio": growth, "growth_wall_ms_per_line_ratio": growth_wall,
            "growth_python_calls_per_line_ratio": calls_growth}, md


# --------------------------------------------------------------------------
# 2. compile time of a static-range loop
# --------------------------------------------------------------------------
def make_static_loop(n):
    def static_loop(x):
        for i in range(n):
            x = jnp.sin(x) * 1.01 + i
        return x
    return static_loop


def first_call(side, n, x):
    """Seconds for the first call (trace + convert + lower + compile + run) of a fresh function."""
    jax.clear_caches()
    af_conversion._by_code.clear()
    af_conversion._by_function.clear()
    gc.collect()
    f = make_static_loop(n)
    t = time.perf_counter()
    g = autoflow.jit(f) if side == "autoflow" else jax.jit(f)
    block(g(x))
    return time.perf_counter() - t


def bench_compile(quick):
    log("2. compile time ...")
    x = jnp.ones((8,), jnp.float32)
    first_call("autoflow", 3, x)
    first_call("jax", 3, x)
    sizes = [10, 100] if quick else [10, 100, 1000, 10000]
    reps = {10: 1 if quick else 7, 100: 1 if quick else 5, 1000: 3, 10000: 1}
    res = {}
    rows = []
    for n in sizes:
        log(f"   N = {n}")
        fa = autoflow.convert(make_static_loop(n))
        eq_af = count_eqns(jax.make_jaxpr(fa)(x))
        skip = None
        if n >= 10000 and "1000" in res:
            est = res["1000"]["jax_s"]["median"] * n / 1000
            if est > JAX_SKIP_SECONDS:
                skip = f"skipped: estimated {est:.0f} s (> {JAX_SKIP_SECONDS:g} s)"
        eq_jax = None
        ta, tj = [], []
        for r in range(reps[n]):
            order = ("autoflow", "jax") if r % 2 == 0 else ("jax", "autoflow")
            for side in order:
                if side == "jax" and skip:
                    continue
                (ta if side == "autoflow" else tj).append(first_call(side, n, x))
        if not skip:
            eq_jax = count_eqns(jax.make_jaxpr(make_static_loop(n))(x))
        entry = {"autoflow_s": stats(ta), "eqns_autoflow": eq_af}
        if tj:
            entry.update(jax_s=stats(tj), eqns_jax=eq_jax,
                         speedup=stats(b / a for a, b in zip(ta, tj)))
        else:
            entry["jax_skipped"] = skip
        res[str(n)] = entry
        if tj:
            sp = entry["speedup"]
            target = ""
            if n == 1000:
                target = (f"≥ {TARGET_COMPILE_SPEEDUP:g}x: "
                          f"{'met' if sp['median'] >= TARGET_COMPILE_SPEEDUP else 'MISSED'}")
            rows.append([f"{n}", fmt_time(entry["autoflow_s"]["median"]), fmt_time(entry["jax_s"]["median"]),
                         fmt_ratio(sp, 1), f"{eq_af[0]} / {eq_af[1]}", f"{eq_jax[0]} / {eq_jax[1]}",
                         len(ta), target])
        else:
            rows.append([f"{n}", fmt_time(entry["autoflow_s"]["median"]), skip, "", f"{eq_af[0]} / {eq_af[1]}",
                         "", len(ta), ""])
    jax.clear_caches()
    md = ("### 2. Compile time: first call of `for i in range(N): x = jnp.sin(x) * 1.01 + i` (x: f32[8])\n\n"
          + table(["N", "autoflow.jit", "jax.jit (unrolled)", "speed-up median (min–max)",
                   "eqns autoflow (top / nested)", "eqns jax.jit (top / nested)", "repeats", "target"], rows))
    return res, md


# --------------------------------------------------------------------------
# 3. runtime of the programs, 4. call overhead on tiny inputs
# --------------------------------------------------------------------------
def autoflow_version(p, args):
    """``autoflow.jit(p.py)``, or the documented workaround if that fails (reported)."""
    try:
        f = autoflow.jit(p.py)
        out = block(f(*args))
        return f, out, None
    except Exception as e:  # noqa: BLE001
        why = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        if p.name == "mandelbrot_vmap":
            # autoflow does not convert a function passed to jax.vmap (it only
            # converts functions that converted code calls); convert it by hand.
            f = jax.jit(jax.vmap(autoflow.convert(programs.escape_time_py)))
            return f, block(f(*args)), (f"autoflow.jit({p.py.__name__}) fails ({why}); "
                                        "timed jax.jit(jax.vmap(autoflow.convert(escape_time_py))) instead")
        raise


def compare(progs, quick, repeats, sample_s, what, target):
    res = {}
    rows = []
    for p in progs:
        log(f"   {p.name}")
        args = p.make_args(quick)
        lx = jax.jit(p.lax)
        ref = block(lx(*args))
        try:
            fa, got, note = autoflow_version(p, args)
        except Exception as e:  # noqa: BLE001
            PROBLEMS.append(f"{what} {p.name}: autoflow.jit fails: {type(e).__name__}: {e}")
            rows.append([p.name, "FAILS", "", "", "", "", "", ""])
            continue
        if note:
            PROBLEMS.append(f"{p.name}: {note}")
        try:
            programs.assert_tree_close(ref, got, p.rtol, p.atol, p.name, p.mismatch)
            match = True
        except AssertionError as e:
            PROBLEMS.append(f"{what} {p.name}: autoflow.jit result differs from lax: {e}")
            match = False
        ta, tl, k = interleaved(fa, lx, args, repeats, sample_s)
        ratio = stats(a[0] / b[0] for a, b in zip(ta, tl))
        ratio_cpu = stats(a[1] / b[1] for a, b in zip(ta, tl))
        res[p.name] = {"autoflow_s": stats(a[0] for a in ta), "lax_s": stats(b[0] for b in tl),
                       "autoflow_cpu_s": stats(a[1] for a in ta), "lax_cpu_s": stats(b[1] for b in tl),
                       "ratio": ratio, "ratio_cpu": ratio_cpu,
                       "calls_per_sample": k, "matches_lax": match, "note": note}
        best = res[p.name]["autoflow_s"]["min"] / res[p.name]["lax_s"]["min"]
        res[p.name]["ratio_of_best"] = best
        if ratio["median"] <= target:
            verdict = "ok"
        elif best <= target and ratio_cpu["median"] <= target:
            verdict = "ok except wall median (load noise)"
        else:
            verdict = "OUTSIDE"
        res[p.name]["verdict"] = verdict
        rows.append([p.name + (" †" if note else ""), fmt_time(res[p.name]["autoflow_s"]["median"]),
                     fmt_time(res[p.name]["lax_s"]["median"]), fmt_ratio(ratio, 3), fmt_ratio(ratio_cpu, 3),
                     f"{best:.3f}x", f"{len(ta)}×{k}", verdict + ("" if match else ", MISMATCH")])
    return res, rows


def bench_runtime(quick):
    log("3. runtime ...")
    progs = programs.PROGRAMS
    if quick:
        progs = [p for p in progs if p.name in ("collatz", "first_above_return")]
    res, rows = compare(progs, quick, 3 if quick else 51, 0.005 if quick else 0.02,
                        "runtime", TARGET_RUNTIME_RATIO)
    size = "quick" if quick else "full"
    md = (f"### 3. Runtime: steady-state time per call, `autoflow.jit(f_py)` vs `jax.jit(f_lax)` ({size} inputs)\n\n"
          + table(["program", "autoflow.jit", "jax.jit (hand-written lax)", "ratio, wall: median (min–max)",
                   "ratio, CPU time", "best ÷ best (wall)", "samples×calls", f"within {round((TARGET_RUNTIME_RATIO - 1) * 100)}%"], rows))
    if any(r[0].endswith("†") for r in rows):
        md += ("\n\n† `jax.vmap(escape_time_py)` inside the function is not converted by autoflow; "
               "timed `jax.jit(jax.vmap(autoflow.convert(escape_time_py)))`.")
    return res, md


def bench_overhead(quick):
    log("4. call overhead ...")
    progs = programs.TINY[:1] if quick else programs.TINY
    res, rows = compare(progs, quick, 3 if quick else 61, 0.002 if quick else 0.01,
                        "overhead", TARGET_OVERHEAD_RATIO)
    md = ("### 4. Call overhead on scalar inputs: `autoflow.jit(f_py)` vs `jax.jit(f_lax)`\n\n"
          + table(["program", "autoflow.jit", "jax.jit", "ratio, wall: median (min–max)", "ratio, CPU time",
                   "best ÷ best (wall)", "samples×calls",
                   f"≤ {TARGET_OVERHEAD_RATIO:.2f}x"], rows))
    return res, md


# --------------------------------------------------------------------------
# 5. import time
# --------------------------------------------------------------------------
IMPORTS = {
    "autoflow": "import autoflow",
    "autoflow.transforms.module": "import autoflow.transforms.module",
    "jax": "import jax",
}


def import_once(module):
    code = f"{IMPORTS[module]}; import sys; print('JAX_LOADED' if 'jax' in sys.modules else 'JAX_ABSENT')"
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code],
                          capture_output=True, text=True, cwd=ROOT, check=True)
    cumulative = None
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)$", line)
        if m and m.group(4) == module and len(m.group(3)) == 1:  # top level import
            cumulative = int(m.group(2)) / 1e3
    if cumulative is None:
        raise RuntimeError(f"no importtime line for {module}:\n{proc.stderr[-2000:]}")
    return cumulative, "JAX_LOADED" in proc.stdout


def bench_import(quick):
    log("5. import time ...")
    mods = ["autoflow", "autoflow.transforms.module"] + ([] if quick else ["jax"])
    for m in mods:  # warm-up: byte-code caches, file system
        import_once(m)
    repeats = 1 if quick else 7
    times = {m: [] for m in mods}
    jax_loaded = {}
    for r in range(repeats):
        for m in (mods if r % 2 == 0 else mods[::-1]):
            t, loaded = import_once(m)
            times[m].append(t)
            jax_loaded[m] = loaded
    res = {m: {"ms": stats(times[m]), "imports_jax": jax_loaded[m]} for m in mods}
    rows = []
    for m in mods:
        ratio = ""
        if "jax" in times and m != "jax":
            st = stats(a / b for a, b in zip(times[m], times["jax"]))
            res[m]["ratio_to_jax"] = st
            ratio = fmt_ratio(st, 3)
        rows.append([f"`{IMPORTS[m]}`", fmt_ms(res[m]["ms"], 1), "yes" if jax_loaded[m] else "no", ratio])
    for m in ("autoflow", "autoflow.transforms.module"):
        if jax_loaded.get(m):
            PROBLEMS.append(f"`{IMPORTS[m]}` imports jax")
    md = ("### 5. Import time (`python -X importtime`, cumulative, fresh interpreter)\n\n"
          + table(["statement", "ms median (min–max)", "imports jax", "÷ `import jax`"], rows))
    return res, md


# --------------------------------------------------------------------------
SECTIONS = {
    "conversion": bench_conversion,
    "compile": bench_compile,
    "runtime": bench_runtime,
    "overhead": bench_overhead,
    "import": bench_import,
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: few sizes, few repeats (seconds)")
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help=f"comma-separated subset of {','.join(SECTIONS)}")
    ap.add_argument("--json", help="where to write the JSON (default benchmarks/results.json, "
                                   "or results-quick.json with --quick)")
    ap.add_argument("--markdown", help="where to write the Markdown tables "
                                       "(default benchmarks/RESULTS.md for a full run of every section; "
                                       "not written otherwise)")
    a = ap.parse_args(argv)
    sections = [s.strip() for s in a.sections.split(",") if s.strip()]
    for s in sections:
        if s not in SECTIONS:
            ap.error(f"unknown section {s!r}")

    t0 = time.perf_counter()
    env = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "quick": a.quick,
        "python": platform.python_version(),
        "jax": jax.__version__,
        "autoflow": autoflow.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "machine": platform.machine(),
        "processor": _cpu_name(),
        "cpus": os.cpu_count(),
        "loadavg_start": loadavg(),
        "sections": sections,
    }
    results = {"env": env, "checks": check_programs(a.quick, sections)}
    mds = []
    for s in sections:
        ts = time.perf_counter()
        res, md = SECTIONS[s](a.quick)
        log(f"   ({s}: {time.perf_counter() - ts:.1f} s)")
        results[s] = res
        mds.append(md)
        results.setdefault("loadavg_after", {})[s] = loadavg()
    env["loadavg_end"] = loadavg()
    env["seconds"] = round(time.perf_counter() - t0, 1)
    results["problems"] = PROBLEMS

    head = (f"autoflow {env['autoflow']}, jax {env['jax']} ({env['backend']}: {env['processor']}, "
            f"{env['cpus']} CPUs), Python {env['python']}; {env['date']}; "
            f"{'quick smoke run' if a.quick else 'full run'}"
            f"{'' if sections == list(SECTIONS) else ' of ' + ', '.join(sections)} in {env['seconds']} s; "
            f"load average {env['loadavg_start'][0] if env['loadavg_start'] else '?'} at start, "
            f"{env['loadavg_end'][0] if env['loadavg_end'] else '?'} at end.")
    md = head + "\n\n" + "\n\n".join(mds)
    if PROBLEMS:
        md += "\n\n### Problems found\n\n" + "\n".join(f"- {p}" for p in PROBLEMS)
    md += "\n"
    print(md)

    json_path = a.json or os.path.join(HERE, "results-quick.json" if a.quick else "results.json")
    with open(json_path, "w") as f:
        json.dump(results, f, indent=1, default=str)
    md_path = a.markdown
    if md_path is None and not a.quick and sections == list(SECTIONS):
        md_path = os.path.join(HERE, "RESULTS.md")
    if md_path:
        with open(md_path, "w") as f:
            f.write("# autoflow benchmark results\n\n"
                    "Generated by `python benchmarks/run.py`; see `benchmarks/README.md`.\n\n" + md)
    log(f"wrote {json_path}" + (f" and {md_path}" if md_path else ""))
    return 0


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


if __name__ == "__main__":
    sys.exit(main())
