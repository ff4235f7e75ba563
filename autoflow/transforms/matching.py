"""``match`` statements.

A ``match`` whose cases compare values only (literal and dotted-name value
patterns, ``None``/``True``/``False``, ``|`` alternatives, ``as`` names, a
capture or ``_`` at the end, guards) becomes the ``if``/``elif`` chain Python
would run, so a traced subject stages like any ``if`` (the same carries,
early ``return`` and branch temporaries)::

    match mode:                      if mode == 0 or mode == 1:
        case 0 | 1:                      y = x
            y = x                    elif mode == 2 and scale > 1:
        case 2 if scale > 1:             y = 2 * x
            y = 2 * x        ->      else:
        case n:                          n = mode
            y = n * x                    y = n * x

Python's rules are kept: the subject is evaluated once (held in a variable
when it is not a plain name), value patterns compare with ``==``, singletons
with ``is``, alternatives are tried left to right, a guard runs only after its
pattern matched, and a capture with a guard binds before the guard runs.

Any other ``match`` (class, mapping or sequence patterns, captures inside
alternatives...) stays a Python ``match``: its subject goes through
``af.match_subject``, which passes a concrete value through and raises a
clear error, at the first case that cannot be staged, when it is traced.
"""

from __future__ import annotations

import gast

from ..core.templates import replace_expr
from .util import stamp

_MATCH = getattr(gast, "Match", None)


def _name(id_, ctx=None):
    return gast.Name(id=id_, ctx=ctx or gast.Load(), annotation=None, type_comment=None)


def _place(node, anchor):
    return stamp(node, anchor)


def _test(pattern, subject, af):
    """The expression testing ``pattern`` against ``subject`` (a name), or
    ``None`` for an irrefutable pattern; raises ``_Unstageable`` otherwise."""
    if isinstance(pattern, gast.MatchValue):
        return gast.Compare(left=_name(subject), ops=[gast.Eq()], comparators=[pattern.value])
    if isinstance(pattern, gast.MatchSingleton):
        value = gast.Constant(value=pattern.value, kind=None)
        if pattern.value is None:
            return gast.Compare(left=_name(subject), ops=[gast.Is()], comparators=[value])
        # `is True`/`is False`: a traced boolean subject compares its value.
        return replace_expr("AF.match_is(SUBJECT, VALUE)", AF=af, SUBJECT=subject, VALUE=value)
    if isinstance(pattern, gast.MatchOr):
        tests = []
        for p in pattern.patterns:
            if isinstance(p, gast.MatchAs) and p.name is not None:
                raise _Unstageable(p)  # a capture inside an alternative
            t = _test(p, subject, af)
            if t is None:
                return None
            tests.append(t)
        return gast.BoolOp(op=gast.Or(), values=tests)
    if isinstance(pattern, gast.MatchAs):
        if pattern.pattern is None:
            return None
        if pattern.pattern is not None and isinstance(pattern.pattern, gast.MatchAs):
            raise _Unstageable(pattern)
        return _test(pattern.pattern, subject, af)
    raise _Unstageable(pattern)


class _Unstageable(Exception):
    def __init__(self, pattern):
        super().__init__()
        self.pattern = pattern


def stageable(match, af="af") -> bool:
    try:
        for case in match.cases:
            _case_parts(case, "_", af)
    except _Unstageable:
        return False
    return True


def _case_parts(case, subject, af):
    """(test or None, captured name or None) of one case."""
    p = case.pattern
    name = p.name if isinstance(p, gast.MatchAs) else None
    test = _test(p, subject, af)
    if name is not None and p.pattern is not None and case.guard is not None:
        raise _Unstageable(p)  # `case P as k if g`: k binds only when P matched
    return test, name


class Matching:
    def __init__(self, ctx):
        self.ctx = ctx

    def run(self, tree):
        if _MATCH is None:
            return tree
        self._blocks(tree)
        return tree

    def _blocks(self, node):
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            val = getattr(node, field, None)
            if isinstance(val, list):
                if val and isinstance(val[0], gast.stmt):
                    setattr(node, field, self._block(val))
                for item in val:
                    if not isinstance(item, gast.stmt):  # handlers, match cases
                        self._blocks(item)

    def _block(self, stmts):
        out = []
        for s in stmts:
            self._blocks(s)
            if isinstance(s, _MATCH):
                out += self._match(s)
            else:
                out.append(s)
        return out

    def _match(self, m):
        if isinstance(m.subject, gast.Name):
            subject, pre = m.subject.id, []
        else:
            subject = self.ctx.namer.unique("subject")
            pre = [_place(gast.Assign(targets=[_name(subject, gast.Store())], value=m.subject,
                                      type_comment=None), m)]
        try:
            parts = [_case_parts(c, subject, self.ctx.af) for c in m.cases]
        except _Unstageable as e:
            return [self._python_match(m, e.pattern)]
        rest = []
        for case, (test, name) in reversed(list(zip(m.cases, parts))):
            anchor = case.pattern
            bind = [] if name is None else [_place(gast.Assign(
                targets=[_name(name, gast.Store())], value=_name(subject), type_comment=None),
                anchor)]
            guard = case.guard
            if test is None and guard is None:
                rest = bind + case.body
            elif test is None and name is not None:
                rest = bind + [_place(gast.If(test=guard, body=case.body, orelse=rest), anchor)]
            else:
                if test is None:
                    cond = guard
                elif guard is None:
                    cond = test
                else:
                    cond = gast.BoolOp(op=gast.And(), values=[test, guard])
                rest = [_place(gast.If(test=_place(cond, anchor), body=bind + case.body,
                                       orelse=rest), anchor)]
        if not rest:
            rest = [_place(gast.Pass(), m)]
        return pre + rest

    def _python_match(self, m, pattern):
        """Keep ``m`` as Python; a traced subject is reported at ``pattern``'s case."""
        line = getattr(pattern, "lineno", m.lineno)
        col = getattr(pattern, "col_offset", m.col_offset)
        m.subject = replace_expr("AF.match_subject(SUBJECT, LINE, COL)", AF=self.ctx.af,
                                 SUBJECT=m.subject,
                                 LINE=gast.Constant(value=line, kind=None),
                                 COL=gast.Constant(value=col, kind=None), at=m)
        return m

