"""What the first conversion in a process costs more than later ones.

    python benchmarks/first_conversion.py            # 7 fresh processes
    python benchmarks/first_conversion.py --runs 15

Each run is a fresh interpreter that imports jax and autoflow, then converts
four corpus functions (``gcd`` first) and converts them again with the caches
cleared. It reports, as medians over the runs:

* ``to_source``: the rewriter alone (parsing, passes, unparsing); its first
  call also builds the templates it uses and reads the source file;
* ``convert``: what ``autoflow.convert`` adds on top, above all importing
  ``autoflow.runtime``, which the first ``convert`` does;
* the import of ``autoflow.runtime`` on its own.

Python compiles a module's source on every import when no ``.pyc`` can be
written (``PYTHONDONTWRITEBYTECODE=1``, or a read-only checkout): the figures
then include compiling autoflow's own sources. The output says which.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import sys, time
sys.path.insert(0, HERE)
import jax  # noqa: F401
import autoflow, autoflow._conversion as conversion
import corpus
mode = sys.argv[1]
fns = [corpus.gcd, corpus.newton_sqrt, corpus.welford, corpus.piecewise]
if mode == "runtime":
    t = time.perf_counter()
    import autoflow.runtime  # noqa: F401
    print((time.perf_counter() - t) * 1e3, 0.0)
    raise SystemExit
def once(f):
    conversion._by_code.clear(); conversion._by_function.clear()
    t = time.perf_counter()
    autoflow.convert(f) if mode == "convert" else autoflow.to_source(f)
    return (time.perf_counter() - t) * 1e3
first = once(fns[0])
for f in fns[1:]:
    once(f)
later = min(once(fns[0]) for _ in range(3))
print(first, later)
""".replace("HERE", repr(HERE))


def run(mode):
    # (run from this folder: `python -c` puts the working folder first on sys.path)
    out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True,
                         check=True, cwd=HERE).stdout.split()
    return float(out[0]), float(out[1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7, help="fresh processes per measurement")
    a = ap.parse_args(argv)
    pyc = "not written (PYTHONDONTWRITEBYTECODE)" if os.environ.get("PYTHONDONTWRITEBYTECODE") \
        else "written and reused"
    print(f"{a.runs} fresh processes each; .pyc files {pyc}")
    results = {m: [] for m in ("to_source", "convert", "runtime")}
    for _ in range(a.runs):  # interleaved, so that load changes hit all three alike
        for m in results:
            results[m].append(run(m))
    for m in ("to_source", "convert"):
        firsts = [f for f, _ in results[m]]
        extra = [f - later for f, later in results[m]]
        print(f"{m:10s} first {statistics.median(firsts):7.2f} ms, later "
              f"{statistics.median([lt for _, lt in results[m]]):5.2f} ms: the first costs "
              f"{statistics.median(extra):6.2f} ms more (min {min(extra):.2f}, max {max(extra):.2f})")
    rt = [t for t, _ in results["runtime"]]
    print(f"import autoflow.runtime alone: {statistics.median(rt):.2f} ms "
          f"(min {min(rt):.2f}, max {max(rt):.2f})")


if __name__ == "__main__":
    main()
