"""``python benchmarks/run.py --quick`` runs end to end (a smoke test, not a performance check).

The smoke run writes its JSON and Markdown to a temporary directory, so it
never touches ``benchmarks/results*.json`` or ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("conversion", "compile", "runtime", "overhead", "import")


def test_benchmarks_quick(tmp_path):
    out_json = tmp_path / "results.json"
    out_md = tmp_path / "RESULTS.md"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick",
         "--json", str(out_json), "--markdown", str(out_md)],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads(out_json.read_text())
    for section in SECTIONS:
        assert results[section], section
    assert results["env"]["quick"] is True
    text = out_md.read_text()
    for heading in ("### 1. Conversion", "### 2. Compile", "### 3. Runtime", "### 4. Call overhead",
                    "### 5. Import"):
        assert heading in text
    assert "| --- |" in proc.stdout  # the Markdown table is printed too
    # The rewriter must not import jax.
    assert results["import"]["autoflow.transforms.module"]["imports_jax"] is False


def test_loop_kernels_counts_what_a_loop_body_launches(capsys):
    """``benchmarks/loop_kernels.py`` finds the loop of a compiled program and what its
    body does: a ``lax.cond`` in the body is a conditional, and the program's other
    computations (the branches) are not counted as the body."""
    sys.path.insert(0, str(ROOT))
    import jax
    import jax.numpy as jnp
    from jax import lax

    from benchmarks import loop_kernels

    def f(x):
        def body(c):
            i, v = c
            v = lax.cond(v[0] > 0, lambda v: jnp.sin(v) * 2.0, lambda v: v - 1.0, v)
            return i + 1, v
        return lax.while_loop(lambda c: c[0] < 10, body, (0, x))[1]

    loop_kernels.report("f", f, (jnp.ones(64),), lines=True)
    out = capsys.readouterr().out
    body = [ln for ln in out.splitlines() if "while body:" in ln]
    assert len(body) == 1 and "conditional 1" in body[0], out
    comps = loop_kernels.computations(jax.jit(f).lower(jnp.ones(64)).compile().as_text())
    assert sum(op == "while" for c in comps.values() for op, _ in c) == 1


def test_table_lookup_quick():
    """``benchmarks/table_lookup.py --quick`` runs (a smoke run: it checks no figure)."""
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "table_lookup.py"), "--quick"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "| 1,000 |" in proc.stdout


def test_the_benchmark_programs_hold_no_host_callback():
    """The real algorithms and nested loops of ``benchmarks/`` have no ``print``, ``raise``
    or ``assert``: their programs hold no host callback, under a bare ``jax.jit`` and under
    ``vmap`` (a check staged where nothing can fail is an ordered callback there, and JAX
    dispatches a program holding one the slow way: the Gamma sampler took 262 us a call
    instead of 13)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import jax

    import autoflow
    from benchmarks import nested_lanes, real_algorithms

    held = {}
    for name, p in real_algorithms._problems().items():
        fn = autoflow.convert(p["natural"])
        held[name] = (len(jax.make_jaxpr(fn)(*p["args"]).effects),
                      len(jax.make_jaxpr(jax.vmap(fn, in_axes=p["in_axes"]))(*p["batch"]).effects))
    for name, (fn, args) in nested_lanes.programs().items():
        held[f"nested: {name}"] = (len(jax.make_jaxpr(jax.vmap(autoflow.convert(fn)))(*args).effects),)
    assert all(n == 0 for counts in held.values() for n in counts), held
