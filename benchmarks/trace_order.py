"""Does a loop compile to the same program whatever was traced before it?

``PYTHONPATH=. python benchmarks/trace_order.py [NAME ...]``

A loop whose body binds a variable (the value of a ``return`` in it) remembers
that for its next trace (``loops.staging._DEFINED``). Before the loops that add such a
variable as they are traced stopped looking that up, a loop traced a second time
(``jax.vmap(f)`` after ``f`` itself) carried the variable in another place, a
program that XLA orders differently: on a 2-core CPU the batched BFGS of
``real_algorithms.py`` took 1.18x-1.34x the time of the library's traced after
its unbatched version, and 0.95x traced first.

For each real algorithm named (all by default), this compiles ``jax.vmap`` of
autoflow's version in a fresh process, once as the first thing traced and once
after the unbatched version, says whether the two compiled programs are the same
(operation for operation, names aside), and times each against the library's
(median of 11 interleaved rounds, as ``real_algorithms.py`` does).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ORDERS = ("vmap first", "vmap after the unbatched version")


def canonical(hlo_text):
    """The compiled program's text without names, metadata and source locations."""
    out = []
    for line in hlo_text.splitlines():
        if re.match(r"^(FileNames|FunctionNames|FileLocations|StackFrames|\d+ \{)", line):
            continue
        line = re.sub(r", metadata=\{[^}]*\}", "", line)
        out.append(re.sub(r"%[A-Za-z_][\w.\-]*", "%v", line))
    return sorted(out)


def child(name, order):
    import jax

    import autoflow
    from benchmarks import real_algorithms as ra

    p = ra._problems()[name]
    if order == ORDERS[1]:
        jax.block_until_ready(jax.jit(autoflow.convert(p["natural"]))(*p["args"]))
    mine = jax.jit(jax.vmap(autoflow.convert(p["natural"]), in_axes=p["in_axes"]))
    library = jax.jit(jax.vmap(p["library"], in_axes=p["in_axes"]))
    text = "\n".join(canonical(mine.lower(*p["batch"]).compile().as_text()))
    ratio, t_mine, t_lib = ra.steady(mine, library, p["batch"], 11)
    print(hash(text), ratio, t_mine, t_lib)


def main(argv):
    if argv[:1] == ["--child"]:
        return child(argv[1], ORDERS[int(argv[2])])
    from benchmarks import real_algorithms as ra

    names = argv or list(ra._problems())
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(
        __file__))) + os.pathsep + os.environ.get("PYTHONPATH", ""), PYTHONHASHSEED="0")
    for name in names:
        runs = []
        for i, order in enumerate(ORDERS):
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name,
                                  str(i)], capture_output=True, text=True, env=env, check=True)
            digest, ratio, t_mine, t_lib = out.stdout.split()[-4:]
            runs.append((order, digest, float(ratio), float(t_mine), float(t_lib)))
        same = "same program" if runs[0][1] == runs[1][1] else "DIFFERENT programs"
        print(f"{name}: {same}")
        for order, _, ratio, t_mine, t_lib in runs:
            print(f"  {order:34s} {ratio:.2f}x the library ({t_mine * 1e6:.0f} / "
                  f"{t_lib * 1e6:.0f} us best)")


if __name__ == "__main__":
    main(sys.argv[1:])
