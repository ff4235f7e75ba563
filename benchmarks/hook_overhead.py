"""What converting everything costs on code with no traced control flow.

``python benchmarks/hook_overhead.py`` imports ``benchmarks/hook_pkg/work.py``
plainly and through ``autoflow.install_import_hook`` and reports, as ratios
taken in the same run: the import time, and the time of ``workload()`` (plain
Python loops and branches on concrete values: Collatz, primes, Newton, a
class). Converted code on concrete values is the same Python, run through the
runtime's operators; this measures what that costs.
"""

from __future__ import annotations

import importlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import autoflow  # noqa: E402


def _fresh_import(hooked):
    for name in [m for m in sys.modules if m.startswith("hook_pkg")]:
        del sys.modules[name]
    start = time.perf_counter()
    if hooked:
        with autoflow.install_import_hook("hook_pkg"):
            module = importlib.import_module("hook_pkg.work")
    else:
        module = importlib.import_module("hook_pkg.work")
    return module, time.perf_counter() - start


def _best(fn, repeats=7):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    plain, t_plain = min((_fresh_import(False) for _ in range(5)), key=lambda r: r[1])
    hooked, t_hooked = min((_fresh_import(True) for _ in range(5)), key=lambda r: r[1])
    assert plain.workload() == hooked.workload()
    w_plain = _best(plain.workload)
    w_hooked = _best(hooked.workload)
    print(f"import: plain {t_plain * 1e3:.1f} ms, hooked {t_hooked * 1e3:.1f} ms "
          f"(+{(t_hooked - t_plain) * 1e3:.1f} ms for 9 functions)")
    print(f"workload (concrete Python): plain {w_plain * 1e3:.1f} ms, converted "
          f"{w_hooked * 1e3:.1f} ms, ratio {w_hooked / w_plain:.2f}x")


if __name__ == "__main__":
    main()
