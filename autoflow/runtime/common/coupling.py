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
        ``cond.select_or_cond.gating`` around each branch (``cond.primitive.stage_if``); read by
        ``cond.select_or_cond.loop_gate``, called by ``loops.staging.stage_loop``: a loop
        staged in the branch (at its trace level) runs only where the branch
        is taken, so a select of both branches runs no iteration of it.
    ``lanes``: how many branches of ``if``s under a batched predicate are being
        traced. Written by ``cond.select_or_cond.in_lanes`` (``cond.primitive.stage_if``); read
        by ``cond.select_or_cond.under_lanes`` (``cond.primitive.stage_if``): in them no gate is
        made (``lanes.py`` masks the loops by lane instead).
    ``choice``: what the last traced ``if`` lowered to (``"select"``,
        ``"lax.cond"``, ``cond.select_or_cond.GPU_SELECT``; None: it was not staged, every
        path raising). Written by ``cond.primitive.stage_if`` and
        ``cond.statements._stage_branches``; read by ``cond.statements._lowered_as``, for the events of
        ``autoflow explain``.
    ``fill_logs``: ``[set]``, one per loop body being traced. Opened by
        ``loops.staging.stage_loop`` (``common.carries.logging_fills``); written by
        ``common.carries.log_fills``, from ``cond`` (the variables a path of a traced
        ``if`` left unbound and the ``if`` filled) and from ``loops.staging`` (its
        own fills, and ``common.carries.LOOP`` for each loop staged, for the loops
        around it); read by ``loops.staging``: a variable first bound in the body
        and never filled there is bound on every path through it.
    ``placeholders``: the ``common.carries.Placeholders`` (or None) of the loop bodies
        being traced, innermost last. Pushed by ``loops.staging`` (``carries.
        placing``); read by ``common.carries.fill``, from ``cond``: a path that leaves a
        variable unbound gives it the loop body's input for it, not zeros.

    And, shared by all threads (jaxprs, not tracing state):

    ``gated_conds`` (a class attribute): the condition jaxprs of gated loops
        staged as plain ``while`` equations (``autoflow explain``), held weakly.
        Written by ``loops.while_primitive.while_loop``; read by ``cond.select_or_cond`` (a loop that
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
