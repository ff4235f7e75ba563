"""Lower ``return`` inside loops, ``break`` and ``continue`` to boolean flags.

Runs first, so that later passes only see ``if`` and loops without jumps.

``return`` inside a loop::

    for x in xs:                      returned = False
        if x > 0:                     retval = af.Undefined('retval')
            return x          ->      for x in xs:
    return -1                             if x > 0:
                                              retval = x
                                              returned = True
                                              break
                                      if returned:
                                          return retval
                                      return -1

``break`` / ``continue`` (after the above)::

    while c:                          broke = False
        A                             while not broke and c:
        if p:                 ->          A
            break                         if p:
        B                                     broke = True
    else:                                 if not broke:
        E                                     B
                                      if not broke:
                                          E

The statements after one that may jump are guarded by ``if not flag:``. A
``for`` loop with a ``break`` also gets ``af_extra_test`` (``not broke``): the
loop stops before taking its next item, exactly as Python's ``break`` does.
"""

from __future__ import annotations

import gast

from ..core.nodes import children, walk
from ..core.templates import replace, replace_expr
from ..analysis.activity import TRY_TYPES as _TRY
from .util import _LOOPS, _SCOPES, contains_return, stamp



def _has(node_or_list, types):
    """Does the code contain ``types`` outside nested loops and scopes?"""
    nodes = node_or_list if isinstance(node_or_list, list) else [node_or_list]
    todo = list(nodes)
    while todo:
        n = todo.pop()
        if isinstance(n, types):
            return True
        if isinstance(n, _SCOPES + _LOOPS):
            continue
        todo.extend(children(n))
    return False


def _is_boolean(test):
    """Is ``test`` a comparison (or a boolean combination of them), so ``bool`` is a no-op?"""
    if isinstance(test, gast.Compare):
        return True
    if isinstance(test, gast.BoolOp):
        return all(_is_boolean(v) for v in test.values)
    if isinstance(test, gast.UnaryOp) and isinstance(test.op, gast.Not):
        return True
    return False


def _blocks(stmt):
    """The statement lists directly inside a compound statement."""
    out = []
    for field in ("body", "orelse", "finalbody"):
        val = getattr(stmt, field, None)
        if isinstance(val, list) and val and isinstance(val[0], gast.stmt):
            out.append((stmt, field))
    if _TRY and isinstance(stmt, _TRY):
        for h in stmt.handlers:
            out.append((h, "body"))
    if type(stmt).__name__ == "Match":
        for case in stmt.cases:
            out.append((case, "body"))
    return out


class EarlyExits:
    def __init__(self, ctx):
        self.ctx = ctx

    # ---- return inside loops -------------------------------------------
    def lower_loop_returns(self, body):
        """Rewrite ``return`` in loops of this function body (not nested defs)."""
        self._returned = None
        self._retval = None
        return self._loop_returns_block(body)

    def _flags(self):
        if self._returned is None:
            self._returned = self.ctx.namer.unique("returned")
            self._retval = self.ctx.namer.unique("retval")
        return self._returned, self._retval

    def _loop_returns_block(self, stmts):
        out = []
        for s in stmts:
            if isinstance(s, _SCOPES):  # nested functions are lowered on their own
                out.append(s)
                continue
            if isinstance(s, _LOOPS) and any(
                    not isinstance(b, _SCOPES) and contains_return(b) for b in s.body):
                returned, retval = self._flags()
                init = stamp(replace(
                    "RETURNED = False\nRETVAL = AF.Undefined(RETVAL_NAME, guarded=True)",
                    RETURNED=returned, RETVAL=retval, AF=self.ctx.af,
                    RETVAL_NAME=gast.Constant(value=retval, kind=None),
                ), s)
                self._replace_returns_in_loop(s)
                if s.orelse:  # runs after the loop, at this level
                    s.orelse = self._loop_returns_block(s.orelse)
                after = stamp(replace("if RETURNED:\n    return RETVAL",
                                      RETURNED=returned, RETVAL=retval), s)
                out += init + [s] + after
            else:
                for owner, field in _blocks(s):
                    setattr(owner, field, self._loop_returns_block(getattr(owner, field)))
                out.append(s)
        return out

    def _replace_returns_in_loop(self, loop, nested=False):
        """Returns in ``loop`` become ``retval = ...; returned = True; break``.

        A loop's ``else`` runs after the loop, so a return there leaves the
        enclosing loop when there is one (``nested``) and is left as it is
        otherwise.
        """
        returned, retval = self._flags()

        def block(stmts):
            new = []
            for s in stmts:
                if isinstance(s, gast.Return):
                    value = s.value if s.value is not None else gast.Constant(value=None, kind=None)
                    new += stamp(replace("RETVAL = VALUE\nRETURNED = True\nbreak",
                                         RETVAL=retval, VALUE=value, RETURNED=returned), s)
                    break  # the rest is unreachable
                if isinstance(s, _LOOPS) and contains_return(s):
                    self._replace_returns_in_loop(s, nested=True)
                    new.append(s)
                    new += stamp(replace("if RETURNED:\n    break", RETURNED=returned), s)
                    continue
                if not isinstance(s, _SCOPES):
                    for owner, field in _blocks(s):
                        setattr(owner, field, block(getattr(owner, field)))
                new.append(s)
            return new

        loop.body = block(loop.body)
        if loop.orelse and nested:
            loop.orelse = block(loop.orelse)

    # ---- break / continue -----------------------------------------------
    def lower_jumps(self, stmts):
        """Lower break/continue in every loop of ``stmts`` (innermost first)."""
        out = []
        for s in stmts:
            if isinstance(s, _SCOPES):
                out.append(s)
                continue
            if (isinstance(s, gast.While) and not s.orelse
                    and any(isinstance(n, gast.NamedExpr) for n in walk(s.test))):
                # `while (v := f()) > 0:` binds `v` for the body: test at the top of
                # the body instead (`while True: if not test: break`), so the
                # binding happens where the body can see it.
                guard = stamp(replace("if not TEST:\n    break", TEST=s.test), s)
                s.body = guard + s.body
                s.test = stamp(gast.Constant(value=True, kind=None), s)
            for owner, field in _blocks(s):
                setattr(owner, field, self.lower_jumps(getattr(owner, field)))
            if isinstance(s, _LOOPS):
                out += self._lower_loop(s)
            else:
                out.append(s)
        return out

    def _lower_loop(self, loop):
        before, after = [], []
        if _has(loop.body, gast.Continue):
            flag = self.ctx.namer.unique("continued")
            body = self._guard(loop.body, gast.Continue, flag)
            loop.body = stamp(replace("FLAG = False", FLAG=flag), loop) + body
        if _has(loop.body, gast.Break):
            flag = self.ctx.namer.unique("broke")
            loop.body = self._guard(loop.body, gast.Break, flag)
            before = stamp(replace("FLAG = False", FLAG=flag), loop)
            if isinstance(loop, gast.While):
                if isinstance(loop.test, gast.Constant) and loop.test.value is True:
                    loop.test = stamp(replace_expr("not FLAG", FLAG=flag), loop)
                else:
                    loop.test = stamp(replace_expr("not FLAG and TEST", FLAG=flag, TEST=loop.test), loop)
            else:
                loop.af_extra_test = stamp(replace_expr("not FLAG", FLAG=flag), loop)
            if loop.orelse:
                after = stamp(replace("if not FLAG:\n    ORELSE", FLAG=flag, ORELSE=loop.orelse), loop)
        elif loop.orelse:
            after = loop.orelse
        loop.orelse = []
        return before + [loop] + after

    def _guard(self, stmts, kind, flag):
        out = []
        for i, s in enumerate(stmts):
            if (isinstance(s, gast.If) and len(s.body) == 1 and isinstance(s.body[0], kind)
                    and not s.orelse and _is_boolean(s.test)):
                # `if c: break` -> `broke = c`: a flag needs no branch of its own.
                out += stamp(replace("FLAG = TEST", FLAG=flag, TEST=s.test), s)
                rest = stmts[i + 1:]
                if rest:
                    out += stamp(replace("if not FLAG:\n    REST", FLAG=flag,
                                         REST=self._guard(rest, kind, flag)), s)
                return out
            if isinstance(s, kind):
                out += stamp(replace("FLAG = True", FLAG=flag), s)
                return out
            if _has(s, kind):
                for owner, field in _blocks(s):
                    setattr(owner, field, self._guard(getattr(owner, field), kind, flag))
                out.append(s)
                rest = stmts[i + 1:]
                if rest:
                    out += stamp(replace("if not FLAG:\n    REST", FLAG=flag,
                                         REST=self._guard(rest, kind, flag)), s)
                return out
            out.append(s)
        return out
