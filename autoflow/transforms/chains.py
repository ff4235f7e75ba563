"""Long ``if``/``elif`` chains -> a flat sequence of short chains.

An ``elif`` is an ``if`` inside the ``else`` of the one before, and every
converted ``if`` becomes a branch function: a chain of ``n`` branches would
become ``n`` nested functions. Past about 95 levels Python cannot read the
printed code back ("too many levels of indentation") and deep nests of
operator calls exhaust the stack when they run. Python itself compiles chains
of any length, so autoflow must convert them too.

A chain longer than ``CHUNK`` branches is cut into chunks of ``CHUNK``
branches, run one after the other under a flag that says no branch ran yet::

    if x < 0:                      chain = False
        y = 0                      if x < 0:
    elif x < 1:            ->          y = 0
        y = 1                      elif x < 1:
    ...                                y = 1
    elif x < 99:                   ...
        y = 99                     else:
    else:                              chain = True
        y = -1                     if chain:
                                       chain = False
                                       if x < 16: ...

Each chunk then becomes one flat ``af.if_chain`` (``control_flow._if``): its
tests as thunks and its branches as functions side by side, instead of a
branch function nested in the ``else`` of the one before. Converting it is
work per branch, not per level of nesting, and a traced chunk stages the
same nested ``lax.cond``s (``runtime.operators.if_chain``). A chunk one of
whose tests binds a name (``:=``) stays a nested chain.

The tests are evaluated exactly when Python evaluates them (a test of a later
chunk only runs if no earlier branch did) and each branch runs in the same
cases, so on concrete values the result is Python's. When a test is traced,
the flag becomes traced after its chunk and the later chunks are staged under
``if chain:``; a test of a later chunk is then traced with the variables as
the earlier chunk's staged branches merged them (the same values, promoted as
for any traced ``if``). Chains of at most ``CHUNK`` branches are left as they
are.
"""

from __future__ import annotations

import gast

from ..analysis.activity import bound_falling, expr_reads
from ..analysis import summaries
from ..analysis.summaries import Summaries
from ..core.templates import replace

CHUNK = 16

_SCOPES = (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef)
_TRY = tuple(t for t in (getattr(gast, "Try", None), getattr(gast, "TryStar", None)) if t)


def _guarded(s, branches, final):
    """What the chain starting at ``s`` binds on every path that falls through
    and does not read before binding it: ``bound_falling([s])`` less
    ``Summaries().live_in([s], set())``.

    The liveness of an ``if`` is the union of its test's reads and its two
    blocks' (a walrus in a test binds nothing for it), so the chain's is the
    union of every test's reads and every block's own: computed branch by
    branch, it stops as soon as no candidate is left (an accumulator that
    the first branches read), instead of analysing the whole chain once more
    before ``control_flow`` analyses it.
    """
    names = bound_falling([s])
    if not names:
        return set()
    sums = Summaries()
    for b in branches:
        names.difference_update(expr_reads(b.test))
        if names:
            names -= sums.live_in(b.body, set())
        if not names:
            return names
    return names - sums.live_in(final, set())


def _branches(s):
    """The ``if`` nodes of the chain starting at ``s``, and its final ``else``."""
    out = [s]
    while len(out[-1].orelse) == 1 and isinstance(out[-1].orelse[0], gast.If):
        out.append(out[-1].orelse[0])
    return out, out[-1].orelse


class Chains:
    def __init__(self, ctx):
        self.ctx = ctx

    def run(self, fn):
        todo = [fn.body]
        while todo:
            stmts = todo.pop()
            new = []
            for s in stmts:
                if isinstance(s, gast.If):
                    branches, final = _branches(s)
                    todo.extend(b.body for b in branches)
                    todo.append(final)
                    if len(branches) > CHUNK:
                        new += self._split(s, branches, final)
                        continue
                else:
                    for field in ("body", "orelse", "finalbody"):
                        v = getattr(s, field, None)
                        if isinstance(v, list) and v and isinstance(v[0], gast.stmt):
                            todo.append(v)
                    if isinstance(s, _TRY):
                        todo.extend(h.body for h in s.handlers)
                    for case in getattr(s, "cases", None) or []:
                        todo.append(case.body)
                new.append(s)
            stmts[:] = new

    def _split(self, s, branches, final):
        flag = self.ctx.namer.unique("chain")
        # A chunk whose branches were not taken leaves unbound what a later
        # chunk binds. What the chain binds on every path that falls through,
        # and does not read before binding it, is read only after the chain,
        # where it is bound: a traced chunk may fill it with zeros meanwhile
        # (see Undefined.guarded), as the nested chain needed no value there.
        safe = _guarded(s, branches, final)
        if summaries.checks():  # the whole chain's analysis, as it was computed before
            plain = (bound_falling([s]) or set()) - Summaries().live_in([s], set())
            assert safe == plain, ("chain guard", safe, plain)
        out = replace("FLAG = False", FLAG=flag, at=s)
        groups = [branches[i:i + CHUNK] for i in range(0, len(branches), CHUNK)]
        for j, group in enumerate(groups):
            last = j == len(groups) - 1
            for k, b in enumerate(group):
                if k + 1 < len(group):
                    b.orelse = [group[k + 1]]
                elif last:
                    b.orelse = final
                else:  # no branch of this chunk ran: the next chunk's turn
                    b.orelse = replace("FLAG = True", FLAG=flag, at=b)
                b.af_exit_guard = safe
                b.af_chain_link = k > 0
            head = group[0]
            head.af_chain = len(group)  # control_flow makes it one flat `af.if_chain`
            if j == 0:
                out.append(head)
            else:
                wrapper = replace("if FLAG:\n    FLAG = False\n    CHAIN", FLAG=flag,
                                  CHAIN=[head], at=head)
                wrapper[0].af_exit_guard = safe
                out += wrapper
        return out
