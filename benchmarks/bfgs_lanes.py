"""How much work each lane of the batched BFGS of ``real_algorithms.py`` does.

Under ``jax.vmap`` a traced loop runs until its slowest lane is done, so a
batch can cost more than its lanes' own work. This counts, for each lane of
the benchmark's batch, the natural BFGS's steps and function evaluations
(run eagerly: plain Python on concrete values, so the counts are exact), and
the evaluations a lockstep batch makes: per BFGS step, its slowest lane's
bracketing iterations plus its slowest lane's zoom. It prints the library's
own counts (``minimize`` reports ``nit`` and ``nfev`` per lane) beside them.

If the lockstep count is close to the library's slowest lane, the batch does
the same number of evaluations as the library's, and a gap under ``vmap``
comes from the cost of each iteration, not from lanes waiting.

    PYTHONPATH=. python benchmarks/bfgs_lanes.py
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.scipy.optimize import minimize  # noqa: E402

import real_algorithms as ra  # noqa: E402


def lane_steps(x0):
    """Per BFGS step of one lane: its line search's evaluations, and how many
    of them its zoom made."""
    calls, events = [0], []
    zoom, search = ra._zoom, ra._line_search

    def fun(x):
        calls[0] += 1
        return ra._smooth(x)

    def counted_zoom(*a, **k):
        start = calls[0]
        out = zoom(*a, **k)
        events.append(("zoom", calls[0] - start))
        return out

    def counted_search(*a, **k):
        events.append(("search",))
        start = calls[0]
        out = search(*a, **k)
        events.append(("end", calls[0] - start))
        return out

    ra._zoom, ra._line_search = counted_zoom, counted_search
    try:
        with jax.disable_jit():
            ra.bfgs(fun, x0, gtol=1e-3)
    finally:
        ra._zoom, ra._line_search = zoom, search
    steps = []
    for e in events:
        if e[0] == "search":
            steps.append({"evals": 0, "zoom": 0})
        elif e[0] == "zoom":
            steps[-1]["zoom"] = e[1]
        else:
            steps[-1]["evals"] = e[1]
    return steps


def main():
    batch = ra._problems()["bfgs"]["batch"][0]
    lanes = [lane_steps(x0) for x0 in batch]
    lockstep = 0
    for k in range(max(len(s) for s in lanes)):
        active = [s[k] for s in lanes if k < len(s)]
        lockstep += (max(t["evals"] - t["zoom"] for t in active)
                     + max(t["zoom"] for t in active))
    res = jax.vmap(lambda x0: minimize(ra._smooth, x0, method="BFGS",
                                       options=dict(maxiter=200, gtol=1e-3)))(batch)
    print("natural: BFGS steps per lane      ", [len(s) for s in lanes])
    print("natural: evaluations per lane     ", [sum(t["evals"] for t in s) for s in lanes])
    print("natural: zooms per lane           ", [sum(t["zoom"] > 0 for t in s) for s in lanes])
    print("natural: lockstep evaluations     ", lockstep)
    print("library: iterations per lane      ", [int(v) for v in np.asarray(res.nit)])
    print("library: evaluations per lane     ", [int(v) for v in np.asarray(res.nfev)])
    print("library: slowest lane's evaluations", int(np.max(res.nfev)))


if __name__ == "__main__":
    main()
