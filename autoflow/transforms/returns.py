"""Turn early ``return`` into ``if``/``else`` whose branches all return.

Runs after ``early_exits`` (no ``return`` is left inside a loop). The code
after an ``if`` that may return moves into the branches that fall through,
which is how a person writes it for ``lax.cond``::

    if x < 3:                         if x < 3:
        return 3 * x ** 2     ->          return 3 * x ** 2
    y = -4 * x                        else:
    return y                              y = -4 * x
                                          return y

A function that returns a value somewhere and can also fall off its end gets
an explicit ``return None``, so every path ends in a ``return`` and a traced
``if`` can compare what its branches return. When both branches fall through,
the remaining code is copied into each; ``MAX_COPY`` bounds that growth.
"""

from __future__ import annotations

import copy

import gast

from ..core.nodes import walk
from ..analysis.liveness import always_returns
from ..core.templates import replace
from .util import contains_return, stamp

MAX_COPY = 400  # statements copied per function before giving up on nesting


class Returns:
    def __init__(self, ctx):
        self.ctx = ctx
        self.copied = 0

    def lower(self, fn_node):
        body = fn_node.body
        if not any(contains_return(s) for s in body[:-1]) and not (
                body and not isinstance(body[-1], gast.Return) and contains_return(body[-1])):
            return  # at most a final return: nothing to do
        if not always_returns(body):
            body = body + stamp(replace("return None"), body[-1])
        fn_node.body = self._block(body)

    def _block(self, stmts):
        for k, s in enumerate(stmts):
            if isinstance(s, (gast.Return, gast.Raise)):
                return stmts[:k + 1]  # what follows is unreachable
            if isinstance(s, gast.If) and contains_return(s):
                rest = stmts[k + 1:]
                falls = [not always_returns(s.body), not always_returns(s.orelse)]
                if rest and all(falls):
                    size = sum(1 for r in rest for n in walk(r) if isinstance(n, gast.stmt))
                    if self.copied + size > MAX_COPY:
                        return stmts  # leave it: the if stays Python (see control_flow)
                    self.copied += size
                if falls[0]:
                    s.body = s.body + (copy.deepcopy(rest) if falls[1] else rest)
                if falls[1]:
                    s.orelse = s.orelse + rest
                s.body = self._block(s.body)
                s.orelse = self._block(s.orelse)
                return stmts[:k + 1]
        return stmts
