"""Input that Python compiles converts, however deep (issue 22, item 4): long elif
chains and long sums used to hit "too deeply nested" in the parser/unparser."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import jax.numpy as jnp

import autoflow


def _elif(n):
    lines = ["def f(x):", "    if x < 0:", "        y = 0.0"]
    for i in range(1, n):
        lines += [f"    elif x < {i}:", f"        y = {i}.0 * x"]
    return "\n".join(lines + ["    else:", "        y = -1.0", "    return y"]) + "\n"


def _sum(n):
    terms = " + ".join(f"x * {i}" for i in range(n))
    return f"def f(x):\n    if x > 0:\n        x = {terms}\n    return x\n"


def _load(src, tmp_path, name):
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, path


def _cli(path):
    return subprocess.run([sys.executable, "-m", "autoflow", "convert", str(path)],
                          capture_output=True, text=True, timeout=600)


def test_long_sum_converts_and_runs(tmp_path):
    mod, path = _load(_sum(400), tmp_path, "total")
    compile(autoflow.to_source(mod.f), str(path), "exec")
    converted, jitted = autoflow.convert(mod.f), autoflow.jit(mod.f)
    for x in (-1.0, 2.0):
        assert converted(x) == mod.f(x)
        assert jnp.allclose(jitted(jnp.float32(x)), mod.f(x), rtol=1e-5)
    run = _cli(path)
    assert run.returncode == 0, run.stderr
    compile(run.stdout, str(path), "exec")


def test_long_elif_chain_converts(tmp_path):
    # 250 branches: the parser/unparser used to fail with "too deeply nested". (The
    # chain is cut into short chains, see transforms/chains.py and test_scaling.py.)
    mod, path = _load(_elif(250), tmp_path, "chain")
    assert "af.if_chain" in autoflow.to_source(mod.f)
    run = _cli(path)
    assert run.returncode == 0, run.stderr
    # every branch is a branch function of one of the flat chunks (af.if_chain),
    # its test printed on a line of its own
    assert run.stdout.count("lambda: x <") == 250
    assert max(len(line) for line in run.stdout.splitlines()) < 150
    # the printed module runs like the input, and converting it again changes nothing
    ns = {"__name__": "chain_out"}
    exec(compile(run.stdout, str(path), "exec"), ns)
    for x in (-1.0, 0.5, 7.5, 100.5, 248.5, 300.0):
        assert ns["f"](x) == mod.f(x)
    out = tmp_path / "chain_out.py"
    out.write_text(run.stdout)
    again = _cli(out)
    assert again.returncode == 0 and again.stdout == run.stdout
    compile(run.stdout, str(path), "exec")
