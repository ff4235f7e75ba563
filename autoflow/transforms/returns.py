"""Turn early ``return`` into ``if``/``else`` whose branches all return.

Runs after ``early_exits`` (no ``return`` is left inside a loop). When only
one branch of an ``if`` that may return falls through, the code after the
``if`` moves into that branch, which is how a person writes it for
``lax.cond``::

    if x < 3:                         if x < 3:
        return 3 * x ** 2     ->          return 3 * x ** 2
    y = -4 * x                        else:
    return y                              y = -4 * x
                                          return y

When both branches fall through, moving the code would copy it into each, and
the copies double per nested block. Instead the returns inside the ``if``
become flags, as for returns in loops (``early_exits``), and the code after a
statement that may have returned is guarded by ``if not returned:``::

    if c:                             returned = False
        if d:                         retval = af.Undefined('retval', guarded=True)
            return 1                  if c:
        y = 2             ->              if d:
    else:                                     retval = 1
        y = 3                                 returned = True
    return y                              if not returned:
                                              y = 2
                                      else:
                                          y = 3
                                      if returned:
                                          return retval
                                      else:
                                          return y

Each statement is placed once, so the output grows linearly with the input.
A function that returns a value somewhere and can also fall off its end gets
an explicit ``return None``, so every path ends in a ``return`` and a traced
``if`` can compare what its branches return.
"""

from __future__ import annotations

import gast

from ..analysis.activity import bound_falling
from ..analysis.liveness import always_returns
from ..core.templates import replace
from .util import contains_return


class _Left(gast.Break):
    """Marks where a lowered ``return`` was (removed by ``_guard``)."""


class Returns:
    def __init__(self, ctx):
        self.ctx = ctx
        self._falling = {}

    def lower(self, fn_node):
        body = fn_node.body
        if not any(contains_return(s) for s in body[:-1]) and not (
                body and not isinstance(body[-1], gast.Return) and contains_return(body[-1])):
            return  # at most a final return: nothing to do
        if not always_returns(body):
            body = body + replace("return None", at=body[-1])
        fn_node.body = self._block(body)

    def _block(self, stmts):
        out = []
        while True:
            for k, s in enumerate(stmts):
                if isinstance(s, (gast.Return, gast.Raise)):
                    return out + stmts[:k + 1]  # what follows is unreachable
                if isinstance(s, gast.If) and contains_return(s):
                    rest = stmts[k + 1:]
                    falls = [not always_returns(s.body), not always_returns(s.orelse)]
                    if rest and all(falls):
                        # Both paths fall through: flags instead of copies. The
                        # `if returned: return retval` that follows has one path
                        # that falls through, so the rest moves into its `else`.
                        out += stmts[:k] + self._flagged(s)
                        stmts = replace("if RETURNED:\n    return RETVAL",
                                        RETURNED=self._returned, RETVAL=self._retval, at=s) + rest
                        break
                    if falls[0]:
                        s.body = s.body + rest
                    if falls[1]:
                        s.orelse = s.orelse + rest
                    s.body = self._block(s.body)
                    s.orelse = self._block(s.orelse)
                    return out + stmts[:k + 1]
            else:
                return out + stmts

    def _flagged(self, s):
        """``s`` with its returns lowered to ``retval = ...; returned = True``."""
        namer = self.ctx.namer
        self._returned = returned = namer.unique("returned")
        self._retval = retval = namer.unique("retval")
        init = replace(
            "RETURNED = False\nRETVAL = AF.Undefined(RETVAL_NAME, guarded=True)",
            RETURNED=returned, RETVAL=retval, AF=self.ctx.af,
            RETVAL_NAME=gast.Constant(value=retval, kind=None), at=s)
        # A traced `if` may fill with zeros what is bound on every path through
        # `s` that does not return: it is read only where `returned` is false.
        guard = self._bound_falling([s]) or set()
        before = getattr(s, "af_exit_guard", ())  # a chunk of a long chain (chains.py)
        s.af_exit_guard = True if before is True else guard | set(before)
        return init + self._guard([s], returned, retval)

    def _bound_falling(self, stmts):
        """Names bound on every path through ``stmts`` that falls through
        (``None``: every path returns or raises)."""
        return bound_falling(stmts, memo=self._falling)

    def _guard(self, stmts, returned, retval):
        """Lower the returns in ``stmts``; guard what follows one with ``if not returned:``."""
        out = []
        for i, s in enumerate(stmts):
            if isinstance(s, gast.Return):
                value = s.value if s.value is not None else gast.Constant(value=None, kind=None)
                out += replace("RETVAL = VALUE\nRETURNED = True",
                               RETVAL=retval, VALUE=value, RETURNED=returned, at=s)
                return out  # the rest is unreachable
            if isinstance(s, gast.If) and contains_return(s):
                s.body = self._guard(s.body, returned, retval) or [gast.Pass()]
                s.orelse = self._guard(s.orelse, returned, retval)
                out.append(s)
                rest = stmts[i + 1:]
                if rest:
                    safe = self._bound_falling(rest) or set()
                    guard = replace("if not RETURNED:\n    REST", RETURNED=returned,
                                    REST=self._guard(rest, returned, retval), at=s)
                    # What the guarded code binds on all its falling paths is read
                    # only where nothing returned: a traced `if` may fill it elsewhere.
                    guard[0].af_exit_guard = safe
                    out += guard
                return out
            out.append(s)
        return out
