"""What printing converted functions as written costs ``autoflow convert``.

For each function of ``benchmarks/corpus.py`` (its source alone, as a module),
``convert_module`` runs with the faithful printer
(``convert_module(..., faithful=True)``, the command line's default)
and without it (the unparser's text with the comments put back), interleaved,
``--repeat`` times each (the order alternating between repeats). It prints the
added time per function and the ratio of the corpus totals, median (min, max)
over the repeats, both sides measured in this run.
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
    for _, src in sources:  # warm up
        module.convert_module(src, "corpus.py")
    totals = []  # per repeat: (faithful seconds, plain seconds) over the corpus
    fallbacks = []
    for r in range(args.repeat):
        t_f = t_p = 0.0
        for name, src in sources:
            order = (True, False) if (r % 2 == 0) else (False, True)  # alternate
            for flag in order:
                with faithful.fallbacks() as found:
                    t0 = time.perf_counter()
                    module.convert_module(src, "corpus.py", faithful=flag)
                    dt = time.perf_counter() - t0
                fallbacks += found
                if flag:
                    t_f += dt
                else:
                    t_p += dt
        totals.append((t_f, t_p))
    n = len(sources)
    ratios = sorted(f / p for f, p in totals)
    added = sorted((f - p) * 1e3 / n for f, p in totals)
    plain = sorted(p * 1e3 / n for _, p in totals)
    med = len(totals) // 2
    print(f"{n} functions of benchmarks/corpus.py, {args.repeat} interleaved repeats")
    print(f"convert_module without the faithful printer: {plain[med]:.2f} ms per function "
          f"(median over repeats)")
    print(f"added by the faithful printer: {added[med]:.2f} ms per function "
          f"(min {added[0]:.2f}, max {added[-1]:.2f})")
    print(f"ratio faithful / plain: {ratios[med]:.2f}x (min {ratios[0]:.2f}, max {ratios[-1]:.2f})")
    print(f"fallbacks: {len(fallbacks)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
