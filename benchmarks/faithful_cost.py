"""What printing converted functions as written costs ``autoflow convert``.

For each function of ``benchmarks/corpus.py`` (its source alone, as a module),
``convert_module`` runs with the faithful printer
(``autoflow.transforms.module.FAITHFUL = True``, the command line's default)
and without it (the unparser's text with the comments put back), interleaved,
``--repeat`` times each; the best time of each is kept. It prints the added
time per function and the ratio of the totals, both measured in this run.
``autoflow.convert``/``autoflow.jit`` never call this printer (they compile
the unparser's text), so their speed is not affected.

    python benchmarks/faithful_cost.py [--repeat 5]
"""

import argparse
import inspect
import os
import sys
import textwrap
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    import corpus

    from autoflow.transforms import faithful, module

    sources = [(f.__name__, textwrap.dedent(inspect.getsource(f))) for f in corpus.FUNCTIONS]
    best = {name: [float("inf"), float("inf")] for name, _ in sources}
    for _ in range(args.repeat):
        for name, src in sources:
            for k, flag in enumerate((True, False)):
                module.FAITHFUL = flag
                t0 = time.perf_counter()
                module.convert_module(src, "corpus.py")
                best[name][k] = min(best[name][k], time.perf_counter() - t0)
    module.FAITHFUL = True
    with_f = sum(v[0] for v in best.values())
    without = sum(v[1] for v in best.values())
    added = sorted(((v[0] - v[1]) * 1e3, name) for name, v in best.items())
    n = len(best)
    print(f"{n} functions, best of {args.repeat} (interleaved)")
    print(f"convert_module, faithful printer:   {with_f * 1e3 / n:7.2f} ms per function")
    print(f"convert_module, unparser + comments: {without * 1e3 / n:7.2f} ms per function")
    print(f"added: {(with_f - without) * 1e3 / n:.2f} ms per function "
          f"(median {added[n // 2][0]:.2f}, max {added[-1][0]:.2f} in {added[-1][1]}); "
          f"ratio {with_f / without:.2f}x")
    print(f"fallbacks: {len(faithful.FALLBACKS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
