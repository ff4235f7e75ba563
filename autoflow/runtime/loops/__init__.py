"""``while`` and ``for``: their statements, iterables, staging, primitive and lanes.

* ``statements``: ``af.while_stmt``, ``af.for_stmt`` over explicit carries, run as
  Python or staged (``_loop_with_state``, with the state the body changes);
* ``iterables``: what a ``for`` loop can stage (``enumerate``, ``zip``, ``reversed``,
  arrays, ``autoflow.unroll``/``roll``); ``ranges``: ``range`` with traced bounds;
* ``staging``: a loop staged as one ``lax`` loop (``stage_loop``: carry types,
  restarts, scans, bounded loops), tracing its ``body`` with the ``flags`` it carries
  besides the user's variables;
* ``while_primitive``: the loop primitive, a ``lax.while_loop`` that ``jax.grad`` can
  differentiate, with ``checkpointing`` for reverse mode through unbounded loops;
* ``lanes``: masks of the lanes still running under ``vmap``; ``lane_loop``: how the
  lanes of a loop under ``vmap`` run (``lanes=``: lockstep, flat, compacted), with
  ``flat_lanes``: a loop holding a loop under ``vmap`` as one flat loop;
* ``debug``: ``debug_loops=True``, staged loops that say where they are.
"""

from . import lane_loop  # noqa: F401 - (installs the lanes' scheduling in while_primitive)
from .iterables import enumerate, reversed, roll, unroll, zip  # noqa: A004
from .ranges import range  # noqa: A004
from .statements import for_stmt, while_stmt

__all__ = ["enumerate", "for_stmt", "range", "reversed", "roll", "unroll", "while_stmt", "zip"]
