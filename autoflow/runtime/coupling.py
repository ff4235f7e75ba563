"""What a traced ``if`` and a staged loop tell each other, in one place.

A loop staged in a branch of a traced ``if``, and an ``if`` traced in a loop
body, are traced by nested calls of the runtime with the user's code in
between, so no argument can carry what one needs from the other. All of it is
the one object ``now`` (a ``Coupling``, one per thread); its docstring lists
each field, who writes it and who reads it.
"""

from __future__ import annotations

import threading
import weakref


class Coupling(threading.local):
    """What the ``if`` and the loops being traced on this thread share.

    ``gates``: ``[(trace, predicate, negate)]``, one per branch being traced of
        a traced ``if`` whose predicate is not batched. Written by
        ``cond_cost.gating`` around each branch (``cond_prim.stage_if``); read by
        ``cond_cost.loop_gate``, called by ``loop_staging.stage_loop``: a loop
        staged in the branch (at its trace level) runs only where the branch
        is taken, so a select of both branches runs no iteration of it.
    ``lanes``: how many branches of ``if``s under a batched predicate are being
        traced. Written by ``cond_cost.in_lanes`` (``cond_prim.stage_if``); read
        by ``cond_cost.under_lanes`` (``cond_prim.stage_if``): in them no gate is
        made (``lanes.py`` masks the loops by lane instead).
    ``choice``: what the last traced ``if`` lowered to (``"select"``,
        ``"lax.cond"``, ``cond_cost.GPU_SELECT``; None: it was not staged, every
        path raising). Written by ``cond_prim.stage_if`` and
        ``cond._stage_branches``; read by ``cond._lowered_as``, for the events of
        ``autoflow explain``.
    ``fill_logs``: ``[set]``, one per loop body being traced. Opened by
        ``loop_staging.stage_loop`` (``carries.logging_fills``); written by
        ``carries.log_fills``, from ``cond`` (the variables a path of a traced
        ``if`` left unbound and the ``if`` filled) and from ``loop_staging`` (its
        own fills, and ``carries.LOOP`` for each loop staged, for the loops
        around it); read by ``loop_staging``: a variable first bound in the body
        and never filled there is bound on every path through it.
    ``placeholders``: the ``carries.Placeholders`` (or None) of the loop bodies
        being traced, innermost last. Pushed by ``loop_staging`` (``carries.
        placing``); read by ``carries.fill``, from ``cond``: a path that leaves a
        variable unbound gives it the loop body's input for it, not zeros.

    And, shared by all threads (jaxprs, not tracing state):

    ``gated_conds`` (a class attribute): the condition jaxprs of gated loops
        staged as plain ``while`` equations (``autoflow explain``), held weakly.
        Written by ``while_prim.while_loop``; read by ``cond_cost`` (a loop that
        runs only where its branch is taken costs the branch nothing), as the
        ``gated`` flag of autoflow's own loop primitive is.
    """

    gated_conds: weakref.WeakSet = weakref.WeakSet()

    def __init__(self):
        self.gates: list = []
        self.lanes = 0
        self.choice = None
        self.fill_logs: list = []
        self.placeholders: list = []


now = Coupling()
