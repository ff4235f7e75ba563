"""Liveness and definedness on structured code.

Control flow inside a function reaching the rewriter has been lowered to
``if``/``while``/``for`` without ``break``/``continue``, and ``return`` only
ends blocks, so a structured (per-statement, backwards) analysis is exact
enough and much simpler than a control-flow graph.

``annotate(body, live_out, params)`` sets on every statement of the body
(recursively, not inside nested functions):

* ``af_live_out``: names that may be read after the statement,
* ``af_live_in``: names that may be read from the statement on,
* ``af_maybe_before``: names bound on some path to the statement,
* ``af_def_before``: names bound on every path to the statement,

and on loops ``af_live_head``: names live at the loop's test.
"""

from __future__ import annotations

import gast

from ..core.nodes import walk
from .activity import TRY_TYPES as _TRY
from .activity import bound_names, expr_reads, target_names, walrus_targets



def _target_reads(target):
    """Names an assignment target reads (``a[i] = v`` reads ``a`` and ``i``)."""
    if isinstance(target, gast.Name):
        return []
    if isinstance(target, (gast.Tuple, gast.List)):
        out = []
        for elt in target.elts:
            out += _target_reads(elt)
        return out
    if isinstance(target, gast.Starred):
        return _target_reads(target.value)
    return expr_reads(target)


def always_returns(stmts) -> bool:
    """Does every path through ``stmts`` end in ``return`` or ``raise``?"""
    for s in stmts:
        if isinstance(s, (gast.Return, gast.Raise)):
            return True
        if isinstance(s, gast.If) and s.orelse and always_returns(s.body) and always_returns(s.orelse):
            return True
    return False


def suppresses(s) -> bool:
    """Is ``s`` a ``with`` whose context manager may swallow an exception
    (``contextlib.suppress(...)``), so that the code after it may run from any
    point of its body?"""
    for item in s.items:
        e = item.context_expr
        if isinstance(e, gast.Call):
            f = e.func
            name = f.attr if isinstance(f, gast.Attribute) else getattr(f, "id", None)
            if name == "suppress":
                return True
    return False


def live_block(stmts, live_out, leak=None) -> set:
    # The sets are shared, not copied, per statement (copying made the
    # analysis quadratic in long functions): _live_stmt never mutates its
    # argument, and readers treat the annotations as read-only.
    # ``leak``: names live after every statement (an exception may leave the
    # block anywhere for code that reads them: a suppressing ``with``).
    live = set(live_out)
    for s in reversed(stmts):
        s.af_live_out = live
        live = _live_stmt(s, live)
        if leak:
            live = live | leak
        s.af_live_in = live
    return live


def _live_stmt(s, L):
    if isinstance(s, gast.Assign):
        # A walrus in the value binds too (`broke = not ((v := f()) > 0)`).
        kills = set(walrus_targets(s.value))
        gen = set(expr_reads(s.value))
        for t in s.targets:
            kills.update(target_names(t))
            gen.update(_target_reads(t))
        return (L - kills) | gen
    if isinstance(s, gast.AugAssign):
        return L | set(expr_reads(s.value)) | set(target_names(s.target)) | set(_target_reads(s.target))
    if isinstance(s, gast.AnnAssign):
        if s.value is None:
            return set(L)
        return (L - set(target_names(s.target))) | set(expr_reads(s.value)) | set(_target_reads(s.target))
    if isinstance(s, gast.Return):
        return set(expr_reads(s.value)) if s.value is not None else set()
    if isinstance(s, gast.Raise):
        out = set()
        for e in (s.exc, s.cause):
            if e is not None:
                out |= set(expr_reads(e))
        return out
    if isinstance(s, gast.If):
        return set(expr_reads(s.test)) | live_block(s.body, L) | live_block(s.orelse, L)
    if isinstance(s, gast.While):
        after = live_block(s.orelse, L) if s.orelse else set(L)
        test = set(expr_reads(s.test))
        head = after | test
        while True:
            new = after | test | live_block(s.body, head)
            if new == head:
                break
            head = new
        s.af_live_head = head
        return head
    if isinstance(s, (gast.For, gast.AsyncFor)):
        after = live_block(s.orelse, L) if s.orelse else set(L)
        tnames = set(target_names(s.target))
        head = set(after)
        extra = getattr(s, "af_extra_test", None)  # `not broke`, tested before each item
        if extra is not None:
            head |= set(expr_reads(extra))
        while True:
            new = after | (live_block(s.body, head) - tnames) | set(_target_reads(s.target))
            if extra is not None:
                new |= set(expr_reads(extra))
            if new == head:
                break
            head = new
        s.af_live_head = head
        return head | set(expr_reads(s.iter))
    if isinstance(s, (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef)):
        live_block_nested_ok = (L - {s.name}) | set(expr_reads(s))
        return live_block_nested_ok
    if isinstance(s, (gast.Import, gast.ImportFrom)):
        return L - set(bound_names([s]))
    if isinstance(s, (gast.With, gast.AsyncWith)):
        inner = live_block(s.body, L, leak=L if suppresses(s) else None)
        for item in reversed(s.items):
            if item.optional_vars is not None:
                inner = (inner - set(target_names(item.optional_vars))) | set(_target_reads(item.optional_vars))
            inner |= set(expr_reads(item.context_expr))
        return inner
    if _TRY and isinstance(s, _TRY):
        after = live_block(s.finalbody, L) if s.finalbody else set(L)
        handlers = set()
        for h in s.handlers:
            hl = set(live_block(h.body, after))
            if isinstance(h.name, gast.Name):
                hl.discard(h.name.id)
            if h.type is not None:
                hl |= set(expr_reads(h.type))
            handlers |= hl
        orelse = live_block(s.orelse, after) if s.orelse else set(after)
        # An exception may leave the body anywhere: what handlers read is live throughout.
        body = live_block(s.body, orelse | handlers)
        return body | handlers | (after if s.finalbody else set())
    if type(s).__name__ == "Match":
        out = set(expr_reads(s.subject))
        for case in s.cases:
            bound = {getattr(n, "name", None) for n in walk(case.pattern)} - {None}
            cl = live_block(case.body, L) - bound
            if case.guard is not None:
                cl |= set(expr_reads(case.guard))
            cl |= set(expr_reads(case.pattern))
            out |= cl
        return out | L
    if isinstance(s, gast.Delete):
        # `del x` needs `x` bound (Python raises otherwise): it reads its binding
        out = set(L)
        for t in s.targets:
            out -= set(target_names(t))
            out |= set(_target_reads(t)) | set(target_names(t))
        return out
    return L | set(expr_reads(s))


def defined_block(stmts, maybe, definitely):
    """Forward pass: returns (maybe, definitely) bound after ``stmts``."""
    maybe, definitely = set(maybe), set(definitely)
    for s in stmts:
        s.af_maybe_before = maybe  # shared; updated below only by rebinding
        s.af_def_before = definitely
        if isinstance(s, gast.If):
            m1, d1 = defined_block(s.body, maybe, definitely)
            m2, d2 = defined_block(s.orelse, maybe, definitely)
            r1, r2 = always_returns(s.body), always_returns(s.orelse)
            maybe = (set() if r1 else m1) | (set() if r2 else m2) | maybe
            if r1 and r2:
                definitely = d1 | d2
            elif r1:
                definitely = d2
            elif r2:
                definitely = d1
            else:
                definitely = d1 & d2
        elif isinstance(s, (gast.While, gast.For, gast.AsyncFor)):
            inner = set(bound_names(s.body))
            if not isinstance(s, gast.While):
                inner |= set(target_names(s.target))
            defined_block(s.body, maybe | inner, definitely | (set(target_names(s.target)) if not isinstance(s, gast.While) else set()))
            maybe = maybe | inner
            if s.orelse:
                maybe, definitely = defined_block(s.orelse, maybe, definitely)
        elif isinstance(s, (gast.With, gast.AsyncWith)):
            own = set()
            for item in s.items:
                if item.optional_vars is not None:
                    own |= set(target_names(item.optional_vars))
            maybe, definitely = defined_block(s.body, maybe | own, definitely | own)
        elif _TRY and isinstance(s, _TRY):
            allb = set(bound_names([s]))
            defined_block(s.body, maybe, definitely)
            for h in s.handlers:
                defined_block(h.body, maybe | allb, definitely)
            # (`else` runs once the body has finished: what the body binds may be
            # bound before it, not what `else` itself binds)
            defined_block(s.orelse, maybe | set(bound_names(s.body)), definitely)
            m, d = defined_block(s.finalbody, maybe | allb, definitely)
            maybe, definitely = m, d
        elif type(s).__name__ == "Match":
            allb = set(bound_names([s]))
            for case in s.cases:
                defined_block(case.body, maybe | allb, definitely)
            maybe = maybe | allb
        elif isinstance(s, gast.Delete):
            gone = {n for t in s.targets for n in target_names(t)}
            if gone & definitely:
                definitely = definitely - gone
        else:
            b = set(bound_names([s], include_nested=False))
            if not b <= maybe:
                maybe = maybe | b
            if not b <= definitely:
                definitely = definitely | b
    return maybe, definitely


def annotate(body, live_out=(), params=()):
    """Annotate a function body in place (see the module docstring)."""
    live_block(body, set(live_out))
    defined_block(body, set(params), set(params))
