"""Reverse-mode gradients through data-dependent loops: what they cost.

``python benchmarks/grad_loops.py [--sizes 100,1000,10000] [--repeats 5] [--markdown PATH]
[--no-convergence]``

The program is an explicit Euler integrator written in plain Python: it steps
``y`` until the time ``t`` reaches ``T`` (a ``while`` whose trip count is data:
``N = T / h`` steps). For ``N`` in 100, 1,000, 10,000 steps, ``jax.jit(jax.grad(...))``
is compiled and timed for:

* ``autoflow``: ``autoflow.jit(integrate)`` with the default checkpoint
  budget (the loop is a ``loops.while_primitive.while_loop``, no bound given);
* ``max_loop_iterations``: ``autoflow.jit(integrate, max_loop_iterations=N + 2)``,
  the masked scan sized to fit;
* ``lax.scan``: the same integrator written by hand as a ``lax.scan`` of ``N``
  steps (the trip count given to it);
* ``equinox``: the same integrator written by hand with Equinox's online-checkpointed
  loop, ``eqx.internal.while_loop(..., kind="checkpointed", checkpoints=K)``
  (what diffrax's ``RecursiveCheckpointAdjoint`` uses), with autoflow's default
  budget ``K`` and no ``max_steps`` (like autoflow, it is given no bound). Left out
  when Equinox is not installed.

Memory is XLA's own figure for the compiled gradient (``memory_analysis()``:
temporaries + arguments + outputs), so it does not depend on the machine's load.
Times are the minimum over interleaved repeats (the sides alternate in each
repeat), reported with their ratio to ``lax.scan``; the last table compares
autoflow's checkpointed loop with Equinox's directly (autoflow / equinox).

The convergence loops (``benchmarks/grad_programs.py``: conjugate gradient, an adaptive
ODE integrator, FISTA, Newton's method; trip counts of 6 to 54) are compared with
their own forward pass: ``jax.jit(jax.grad(...))`` against ``autoflow.jit(...)``
(target: at most 3x where the trip count fits the stored steps), beside the same
gradient with no stored steps (``checkpointed only``, the reverse mode before
``runtime/loops/stored.py``), with XLA's temporary memory of each compiled program
(``memory_analysis().temp_size_in_bytes``), and beside JAX's own cost of storing every
step: grad / forward of the program written with the trip count known, as a
``lax.scan`` (``grad_programs.SCANNED``).

The forward-only check compares ``autoflow.jit(integrate)`` (not differentiated)
with ``jax.jit`` of the same integrator written with ``lax.while_loop``, interleaved;
target: within 5%.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import re
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import autoflow  # noqa: E402
from autoflow.runtime.loops import stored  # noqa: E402
from autoflow.runtime.loops.while_primitive import DEFAULT_CHECKPOINTS  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grad_programs  # noqa: E402

DIM = 64


def integrate(y, w, T, h):
    t = 0.0
    while t < T:
        y = y + h * jnp.tanh(w @ y)
        t = t + h
    return jnp.sum(y * y)


def integrate_while(y, w, T, h):
    def body(c):
        t, y = c
        return t + h, y + h * jnp.tanh(w @ y)
    _, y = lax.while_loop(lambda c: c[0] < T, body, (jnp.float32(0.0), y))
    return jnp.sum(y * y)


def integrate_equinox(y, w, T, h):
    import equinox.internal as eqxi

    def body(c):
        t, y = c
        return t + h, y + h * jnp.tanh(w @ y)
    _, y = eqxi.while_loop(lambda c: c[0] < T, body, (jnp.float32(0.0), y),
                           kind="checkpointed",
                           checkpoints=DEFAULT_CHECKPOINTS)
    return jnp.sum(y * y)


def _have_equinox():
    try:
        import equinox  # noqa: F401
    except ImportError:
        return False
    return True


def integrate_scan(n):
    def f(y, w, T, h):
        def body(y, _):
            return y + h * jnp.tanh(w @ y), None
        y, _ = lax.scan(body, y, None, length=n)
        return jnp.sum(y * y)
    return f


def _args(n):
    key = jax.random.PRNGKey(0)
    y = jax.random.normal(key, (DIM,), jnp.float32)
    w = jax.random.normal(jax.random.PRNGKey(1), (DIM, DIM), jnp.float32) / np.sqrt(DIM)
    T = jnp.float32(1.0)
    # h a little under 1/n so that float rounding of t gives exactly n steps
    h = jnp.float32(1.0 / (n - 0.5))
    return y, w, T, h


def _memory(compiled):
    m = compiled.memory_analysis()
    if m is None:
        return float("nan")
    return (m.temp_size_in_bytes + m.argument_size_in_bytes + m.output_size_in_bytes
            - m.alias_size_in_bytes)


def _ops(compiled):
    """The compiled program's instructions, counted by kind."""
    return collections.Counter(m.group(1) for m in
                               re.finditer(r"= \S+ ([a-z\-]+)\(", compiled.as_text()))


def _timed(fn, args):
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start


def _interleaved(fns, args, repeats):
    times = {k: [] for k in fns}
    keys = list(fns)
    for r in range(repeats):
        for k in (keys if r % 2 == 0 else keys[::-1]):
            times[k].append(_timed(fns[k], args))
    return {k: min(v) for k, v in times.items()}


def _fmt_mem(b):
    return f"{b / 2**20:.2f} MiB" if b >= 2**20 else f"{b / 2**10:.0f} KiB"


def gradients(sizes, repeats):
    rows = []
    for n in sizes:
        args = _args(n)
        sides = {
            "autoflow": jax.jit(jax.grad(autoflow.jit(integrate), argnums=(0, 1))),
            "max_loop_iterations": jax.jit(jax.grad(
                autoflow.jit(integrate, max_loop_iterations=n + 2), argnums=(0, 1))),
            "lax.scan": jax.jit(jax.grad(integrate_scan(n), argnums=(0, 1))),
        }
        if _have_equinox():
            sides["equinox"] = jax.jit(jax.grad(integrate_equinox, argnums=(0, 1)))
        compiled = {k: f.lower(*args).compile() for k, f in sides.items()}
        grads = {k: c(*args) for k, c in compiled.items()}
        for k, g in grads.items():  # all sides compute the same gradient
            for a, b in zip(g, grads["lax.scan"]):
                np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-3, err_msg=k)
        t = _interleaved(compiled, args, repeats)
        mem = {k: _memory(c) for k, c in compiled.items()}
        for k in sides:
            rows.append((n, k, t[k], t[k] / t["lax.scan"], mem[k], mem[k] / mem["lax.scan"]))
        print(f"N={n}: " + ", ".join(f"{k} {t[k] * 1e3:.2f} ms {_fmt_mem(mem[k])}"
                                     for k in sides), file=sys.stderr)
    return rows


def _temp(compiled):
    m = compiled.memory_analysis()
    return float("nan") if m is None else m.temp_size_in_bytes


def _checkpointed_only(build):
    """``build()`` with no stored steps (every loop's plan: ``R = 0``)."""
    fewest = stored.FEWEST
    stored.FEWEST = 1 << 30
    try:
        return build()
    finally:
        stored.FEWEST = fewest


def convergence(repeats):
    rows = []
    for name, fn in grad_programs.PROGRAMS.items():
        args = grad_programs.inputs(name)
        plans = []
        plan = stored.plan
        stored.plan = lambda *a: plans.append(plan(*a)) or plans[-1]
        try:
            grad = jax.jit(jax.grad(autoflow.convert(fn), argnums=(0, 1))).lower(*args).compile()
        finally:
            stored.plan = plan
        steps = grad_programs.trips(name)
        scanned = functools.partial(grad_programs.SCANNED[name], n=steps)
        sides = {"forward": autoflow.jit(fn).lower(*args).compile(), "grad": grad,
                 "checkpointed": _checkpointed_only(lambda: jax.jit(jax.grad(
                     autoflow.convert(fn), argnums=(0, 1))).lower(*args).compile()),
                 "scan forward": jax.jit(scanned).lower(*args).compile(),
                 "scan grad": jax.jit(jax.grad(scanned, argnums=(0, 1))).lower(*args).compile()}
        want = jax.grad(fn, argnums=(0, 1))(*args)  # (eager Python)
        for k in ("grad", "checkpointed", "scan grad"):
            for a, b in zip(sides[k](*args), want):
                np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-3 * float(jnp.max(abs(b))),
                                           err_msg=f"{name} {k}")
        t = _interleaved(sides, args, repeats * 20)
        rows.append((name, steps, plans[0].slots, t["forward"], t["grad"], t["checkpointed"],
                     t["scan grad"] / t["scan forward"],
                     *(_temp(sides[k]) for k in ("forward", "grad", "checkpointed"))))
        print(f"{name}: forward {t['forward'] * 1e3:.3f} ms, grad {t['grad'] * 1e3:.3f} ms "
              f"({t['grad'] / t['forward']:.2f}x), checkpointed only "
              f"{t['checkpointed'] * 1e3:.3f} ms, lax.scan of {steps} steps: grad / forward "
              f"{t['scan grad'] / t['scan forward']:.2f}x", file=sys.stderr)
    return rows


def forward(sizes, repeats):
    rows = []
    for n in sizes:
        args = _args(n)
        sides = {"autoflow.jit (checkpointed form)": autoflow.jit(integrate),
                 "jax.jit(lax.while_loop)": jax.jit(integrate_while)}
        compiled = {k: f.lower(*args).compile() for k, f in sides.items()}
        vals = [c(*args) for c in compiled.values()]
        np.testing.assert_allclose(vals[0], vals[1], rtol=1e-5)
        t = _interleaved(compiled, args, repeats * 10)
        a, b = t["autoflow.jit (checkpointed form)"], t["jax.jit(lax.while_loop)"]
        same = _ops(compiled["autoflow.jit (checkpointed form)"]) == \
            _ops(compiled["jax.jit(lax.while_loop)"])
        rows.append((n, a, b, a / b, same))
        print(f"forward N={n}: {a * 1e3:.3f} ms vs {b * 1e3:.3f} ms ({a / b:.3f}x)",
              file=sys.stderr)
    return rows


def _convergence_markdown(rows):
    out = ["", "Convergence loops (`benchmarks/grad_programs.py`; `jax.jit(jax.grad(...))` "
           "w.r.t. both arguments against `autoflow.jit(...)`, same run, minimum of "
           "interleaved repeats). R: the steps whose residuals the forward pass stores "
           "(`runtime/loops/stored.py`; the default budget of "
           f"{DEFAULT_CHECKPOINTS} carries allows at most {DEFAULT_CHECKPOINTS} steps, and at "
           f"most {stored.STORED * DEFAULT_CHECKPOINTS} carries' worth of residuals). "
           "'checkpointed only': the same gradient with no stored steps (the reverse mode "
           "before). 'lax.scan': grad / forward of the same program written for JAX with "
           "the trip count known (`grad_programs.SCANNED`: a `lax.scan` of `steps` steps, "
           "which stores every step's residuals), the same run. Memory: XLA's temporaries "
           "(`memory_analysis().temp_size_in_bytes`).", "",
           "| program | steps | R | forward | grad | grad / forward | lax.scan: grad / forward "
           "| checkpointed only | its ratio | forward temp | grad temp | checkpointed-only temp |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, n, r, tf, tg, tc, scan, mf, mg, mc in rows:
        out.append(f"| {name} | {n} | {r} | {tf * 1e3:.3f} ms | {tg * 1e3:.3f} ms | "
                   f"{tg / tf:.2f}x | {scan:.2f}x | {tc * 1e3:.3f} ms | {tc / tf:.2f}x | {_fmt_mem(mf)} | "
                   f"{_fmt_mem(mg)} | {_fmt_mem(mc)} |")
    return out


def markdown(grad_rows, fwd_rows, conv_rows=()):
    out = ["# Gradients through data-dependent loops", "",
           f"`python benchmarks/grad_loops.py` (explicit Euler, state of {DIM} floats, "
           f"`jax.jit(jax.grad(...))` w.r.t. the state and a {DIM}x{DIM} matrix; "
           f"JAX {jax.__version__}, {jax.devices()[0].platform}; default checkpoint budget "
           f"{DEFAULT_CHECKPOINTS}).", "",
           "Memory: XLA's figure for the compiled gradient (temporaries + arguments + "
           "outputs). Time: minimum of interleaved repeats; ratios against the "
           "hand-written `lax.scan` in the same run.", "",
           "| steps | form | time | vs lax.scan | memory | vs lax.scan |",
           "|---:|---|---:|---:|---:|---:|"]
    for n, k, t, tr, m, mr in grad_rows:
        out.append(f"| {n:,} | {k} | {t * 1e3:.2f} ms | {tr:.2f}x | {_fmt_mem(m)} | {mr:.2f}x |")
    by = {(n, k): (t, m) for n, k, t, _, m, _ in grad_rows}
    if any(k == "equinox" for _, k, *_ in grad_rows):
        out += ["", "autoflow's loop (its first steps stored, the rest checkpointed) against "
                "Equinox's "
                "(`eqx.internal.while_loop(kind=\"checkpointed\")`, same budget of "
                f"{DEFAULT_CHECKPOINTS} carries, no `max_steps`), "
                "same run:", "",
                "| steps | autoflow time | equinox time | autoflow / equinox | autoflow memory "
                "| equinox memory | autoflow / equinox |",
                "|---:|---:|---:|---:|---:|---:|---:|"]
        for n in dict.fromkeys(n for n, *_ in grad_rows):
            (ta, ma), (te, me) = by[(n, "autoflow")], by[(n, "equinox")]
            out.append(f"| {n:,} | {ta * 1e3:.2f} ms | {te * 1e3:.2f} ms | {ta / te:.2f}x | "
                       f"{ma:,.0f} B | {me:,.0f} B | {ma / me:.3f}x |")
    if conv_rows:
        out += _convergence_markdown(conv_rows)
    out += ["", "Forward only (not differentiated): the checkpointed form against a plain "
            "`lax.while_loop` (target: within 5%). 'same compiled ops': the two compiled "
            "programs hold the same instructions, kind by kind (they differ only in the "
            "order of the loop's carried values), so a ratio away from 1 is the machine's "
            "noise.", "",
            "| steps | autoflow.jit | jax.jit(lax.while_loop) | ratio | same compiled ops |",
            "|---:|---:|---:|---:|---|"]
    for n, a, b, r, same in fwd_rows:
        out.append(f"| {n:,} | {a * 1e3:.3f} ms | {b * 1e3:.3f} ms | {r:.3f}x | "
                   f"{'yes' if same else 'no'} |")
    return "\n".join(out) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="100,1000,10000")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--markdown", default=None)
    p.add_argument("--no-convergence", dest="convergence", action="store_false")
    a = p.parse_args(argv)
    sizes = [int(s) for s in a.sizes.split(",")]
    text = markdown(gradients(sizes, a.repeats), forward(sizes, a.repeats),
                    convergence(a.repeats) if a.convergence else ())
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
