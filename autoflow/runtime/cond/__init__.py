"""The ``if``: its statements, its primitive, and the rule that picks ``lax.cond`` or a select.

* ``statements``: ``if``, ``if``/``elif`` chains and ``a if c else b`` (``af.if_stmt``,
  ``af.if_chain``, ``af.if_exp``), and how a traced one is staged (``traced_if``, with
  the state its branches change);
* ``primitive``: the ``if`` primitive, one staged ``if`` of two traced branches, with
  its rules for ``vmap``, ``jvp`` and ``grad`` (``stage_if``);
* ``select_or_cond``: the cost rule, ``lax.cond`` or a select of both branches
  (``decide``), and the gates it puts on the loops staged in a branch.
"""

from .statements import if_chain, if_exp, if_stmt

__all__ = ["if_chain", "if_exp", "if_stmt"]
