"""``debug_loops=True``: staged loops that say where they are while they run.

A ``while`` whose condition is traced becomes one ``lax.while_loop`` that runs
inside the compiled code; if it never ends, the program just hangs. With
``autoflow.jit(f, debug_loops=True)`` (or ``convert``; the default comes from
``AUTOFLOW_DEBUG_LOOPS=1`` in the environment, read when autoflow is
imported), every staged ``while`` (and every loop with a traced trip count or
``max_loop_iterations``) prints, every ``N`` iterations, which loop is
running and how many iterations it has done::

    autoflow: loop at model.py:12:5 (`while x > 0:`): 10000 iterations

``N`` is 10000, or the option's value when it is a number larger than 1
(``debug_loops=500``; ``AUTOFLOW_DEBUG_LOOPS=500``). The report is a
``jax.debug.callback`` staged under a ``lax.cond`` on the counter, so the loop
pays one comparison per iteration and a host call every ``N``; without the
option nothing is staged at all.

Ctrl-C: Python runs its ``KeyboardInterrupt`` handler only between bytecodes
of the main thread, and that thread is inside XLA while a compiled loop
runs, so Ctrl-C alone takes effect only when the compiled call returns
(never, for a loop that does not end). Each report is Python code: once
Ctrl-C was pressed, the next report raises ``KeyboardInterrupt`` inside
the callback, which stops the computation (JAX reports it as a
``JaxRuntimeError``). So with ``debug_loops`` on, Ctrl-C stops a runaway
loop within ``N`` iterations.
"""

from __future__ import annotations

import functools
import sys

import jax
import jax.numpy as jnp
from jax import lax


def _report(where, site, k):
    try:
        print(f"autoflow: loop at {where}: {int(k)} iterations", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        # Ctrl-C pressed while the compiled loop ran: Python's handler runs
        # here, in the first Python code since. Stop the loop with it.
        from ..effects.checks import fail

        raise fail(KeyboardInterrupt(f"autoflow stopped the loop at {site} after {int(k)} "
                                     "iterations"), site) from None


def tick(k, site, n):
    """Stage the periodic report, every ``n`` iterations (None: no report), for
    the loop at ``site`` (a function giving the site, called only when reports
    are on) whose counter is ``k``."""
    if n is None:
        return
    site = site() if callable(site) else site
    line = site.source_line().split("  #")[0].strip() if site is not None else ""
    where = f"{site} (`{line}`)" if line else str(site)
    k = jnp.asarray(k)
    lax.cond(jnp.logical_and(k > 0, k % n == 0),
             lambda: jax.debug.callback(functools.partial(_report, where, site), k),
             lambda: None)
