"""``match`` statements.

Every ``match`` becomes the ``if``/``elif`` chain Python would run, so a traced
subject stages like any ``if`` (the same carries, early ``return`` and branch
temporaries)::

    match mode:                      if mode == 0 or mode == 1:
        case 0 | 1:                      y = x
            y = x                    elif mode == 2 and scale > 1:
        case 2 if scale > 1:             y = 2 * x
            y = 2 * x        ->      else:
        case n:                          n = mode
            y = n * x                    y = n * x

Python's rules are kept: the subject is evaluated once (held in a variable
when it is not a plain name), value patterns compare with ``==``, singletons
with ``is``, alternatives are tried left to right (a name captured inside them
takes the first matching alternative's value), a guard runs only after its
pattern matched and its captures are bound (a flag then says whether the case
ran, so a false guard goes on to the next case).

Sequence, mapping and class patterns test their structure with
``af.match_sequence``/``match_mapping``/``match_class`` (Python's own rules, on
the tuple, dict or object that holds traced values; a traced array there is
autoflow's error at its case) and then their leaves, ``subject[i]``,
``subject[key]`` or an attribute, like any value. A pattern this module does not
know stays a Python ``match`` behind ``af.match_subject``.
"""

from __future__ import annotations

import copy

import gast

from ..analysis.liveness import always_returns
from ..core.templates import replace_expr
from .util import stamp


_MATCH = getattr(gast, "Match", None)


def _name(id_, ctx=None):
    return gast.Name(id=id_, ctx=ctx or gast.Load(), annotation=None, type_comment=None)


def _place(node, anchor):
    return stamp(node, anchor)


def _subscript(subject, index):
    """``subject[index]`` built afresh (a node may sit in one place only)."""
    return lambda: gast.Subscript(value=subject(), slice=gast.Constant(value=index, kind=None),
                                  ctx=gast.Load())


def _call(af, fn, *args):
    return gast.Call(func=gast.Attribute(value=_name(af), attr=fn, ctx=gast.Load()),
                     args=list(args), keywords=[])


def _const(value):
    return gast.Constant(value=value, kind=None)


def _where(pattern):
    return _const(pattern.lineno), _const(pattern.col_offset)


def _all(tests):
    tests = [t for t in tests if t is not None]
    return tests[0] if len(tests) == 1 else gast.BoolOp(op=gast.And(), values=tests)


def _test(pattern, subject, af, binds):
    """The expression testing ``pattern`` against ``subject`` (a function building
    the subject's expression), or ``None`` for an irrefutable pattern; the names it
    captures go to ``binds`` as (name, expression builder). Raises ``_Unstageable``
    for a pattern kept as Python."""
    if isinstance(pattern, gast.MatchValue):
        return gast.Compare(left=subject(), ops=[gast.Eq()], comparators=[pattern.value])
    if isinstance(pattern, gast.MatchSingleton):
        value = _const(pattern.value)
        if pattern.value is None:
            return gast.Compare(left=subject(), ops=[gast.Is()], comparators=[value])
        # `is True`/`is False`: a traced boolean subject compares its value.
        return _call(af, "match_is", subject(), value)
    if isinstance(pattern, gast.MatchOr):
        return _alternatives(pattern, subject, af, binds)
    if isinstance(pattern, gast.MatchAs):
        test = None if pattern.pattern is None else _test(pattern.pattern, subject, af, binds)
        if pattern.name is not None:
            binds.append((pattern.name, subject))
        return test
    if isinstance(pattern, gast.MatchSequence):
        return _sequence(pattern, subject, af, binds)
    if isinstance(pattern, gast.MatchMapping):
        return _mapping(pattern, subject, af, binds)
    if isinstance(pattern, gast.MatchClass):
        return _class(pattern, subject, af, binds)
    raise _Unstageable(pattern)


def _alternatives(pattern, subject, af, binds):
    """``P1 | P2 | ...``: tried left to right. Python has every alternative bind the
    same names; each name takes the value of the first alternative that matched."""
    parts = []
    for p in pattern.patterns:
        inner = []
        parts.append((_test(p, subject, af, inner), dict(inner)))
        if parts[-1][0] is None:  # irrefutable: Python allows it last only
            break
    for name in parts[0][1]:
        def value(name=name):
            out = parts[-1][1][name]()
            for test, inner in reversed(parts[:-1]):
                out = gast.IfExp(test=copy.deepcopy(test), body=inner[name](), orelse=out)
            return out
        binds.append((name, value))
    if any(t is None for t, _ in parts):
        return None
    return gast.BoolOp(op=gast.Or(), values=[copy.deepcopy(t) for t, _ in parts])


# Sequence, mapping and class patterns: the structure (a sequence of this length,
# these keys, an instance with these attributes) is Python's test, on the Python
# containers that hold traced leaves; the leaves' patterns stage like any case.

def _sequence(pattern, subject, af, binds):
    pats = pattern.patterns
    star = next((i for i, p in enumerate(pats) if isinstance(p, gast.MatchStar)), None)
    fixed = len(pats) - (star is not None)
    tests = [_call(af, "match_sequence", subject(), _const(fixed), _const(star is not None),
                   *_where(pattern))]
    for i, p in enumerate(pats):
        if i == star:
            if p.name is not None:
                after = len(pats) - i - 1
                binds.append((p.name, lambda i=i, after=after: _call(
                    af, "match_rest", subject(), _const(i), _const(after))))
            continue
        index = i if star is None or i < star else i - len(pats)  # after a star: from the end
        tests.append(_test(p, _subscript(subject, index), af, binds))
    return _all(tests)


def _mapping(pattern, subject, af, binds):
    def keys():
        return gast.Tuple(elts=[copy.deepcopy(k) for k in pattern.keys], ctx=gast.Load())

    tests = [_call(af, "match_mapping", subject(), keys(), *_where(pattern))]
    for key, p in zip(pattern.keys, pattern.patterns):
        item = (lambda key: lambda: gast.Subscript(value=subject(), slice=copy.deepcopy(key),
                                                   ctx=gast.Load()))(key)
        tests.append(_test(p, item, af, binds))
    if pattern.rest is not None:
        binds.append((pattern.rest, lambda: _call(af, "match_mapping_rest", subject(), keys())))
    return _all(tests)


def _class(pattern, subject, af, binds):
    def cls():
        return copy.deepcopy(pattern.cls)

    names = gast.Tuple(elts=[_const(a) for a in pattern.kwd_attrs], ctx=gast.Load())
    tests = [_call(af, "match_class", subject(), cls(), _const(len(pattern.patterns)), names,
                   *_where(pattern))]
    for i, p in enumerate(pattern.patterns):
        attr = (lambda i: lambda: _call(af, "match_attribute", subject(), cls(), _const(i)))(i)
        tests.append(_test(p, attr, af, binds))
    for name, p in zip(pattern.kwd_attrs, pattern.kwd_patterns):
        attr = (lambda name: lambda: gast.Attribute(value=subject(), attr=name,
                                                    ctx=gast.Load()))(name)
        tests.append(_test(p, attr, af, binds))
    return _all(tests)


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
    """(test or None, [(captured name, expression builder)]) of one case."""
    binds = []
    test = _test(case.pattern, lambda: _name(subject), af, binds)
    return test, binds


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
        for case, (test, binds) in reversed(list(zip(m.cases, parts))):
            anchor = case.pattern
            bind = [_place(gast.Assign(targets=[_name(n, gast.Store())], value=value(),
                                       type_comment=None), anchor) for n, value in binds]
            guard = case.guard
            if guard is None:
                rest = bind + case.body if test is None else \
                    [_place(gast.If(test=_place(test, anchor), body=bind + case.body,
                                    orelse=rest), anchor)]
            elif not bind:
                cond = guard if test is None else gast.BoolOp(op=gast.And(), values=[test, guard])
                rest = [_place(gast.If(test=_place(cond, anchor), body=case.body, orelse=rest),
                               anchor)]
            elif test is None:  # `case n if g`: n binds, then the guard runs
                rest = bind + [_place(gast.If(test=guard, body=case.body, orelse=rest), anchor)]
            elif always_returns(case.body):
                # The case's body returns or raises: what follows runs only where it did
                # not run, with no flag (one would leave a path that falls off the end)
                rest = [_place(gast.If(test=_place(test, anchor), body=bind + [
                    _place(gast.If(test=guard, body=case.body, orelse=[]), anchor)],
                    orelse=[]), anchor)] + rest
            else:
                # The guard reads what the pattern captured, and a false guard goes on
                # to the next case: a flag says whether this case ran.
                ran = self.ctx.namer.unique("matched")
                rest = [
                    _place(gast.Assign(targets=[_name(ran, gast.Store())], value=_const(False),
                                       type_comment=None), anchor),
                    _place(gast.If(test=_place(test, anchor), body=bind + [
                        _place(gast.If(test=guard, body=[_place(gast.Assign(
                            targets=[_name(ran, gast.Store())], value=_const(True),
                            type_comment=None), anchor)] + case.body, orelse=[]), anchor)],
                        orelse=[]), anchor),
                ] + ([_place(gast.If(test=gast.UnaryOp(op=gast.Not(), operand=_name(ran)),
                                     body=rest, orelse=[]), anchor)] if rest else [])
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

