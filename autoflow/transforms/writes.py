"""Writes to state that outlives a call: ``af.mutates(...)`` before them.

A converted function may be called inside another function's staged branch or
loop body (``st.nudge(0.25)`` in a traced ``while``). Its plain statements
then run once, while tracing, and a write to an object that outlives the body
(``self.a = ...`` on an object of the caller) must become part of what the
caller's staged statement carries, or the object would keep the one traced
iteration's value. Before each such write the rewriter puts a marker::

    af.mutates(self, 'a')        # an attribute of a parameter or a global
    self.a = self.a * 0.5 + v
    af.mutates(self.items)       # a list or dict changed in place
    self.items.append(v)

(``d[k] = v`` needs no marker: ``af.setitem`` tells the enclosing statement
itself.)

``af.mutates`` does nothing outside a staged body; inside one it tells the
enclosing staged statement, which then carries that state and traces again
(see ``runtime.state``). Only writes whose root is a parameter, a global or a
closure variable are marked: an object the function makes itself is new on
every call.
"""

from __future__ import annotations

import gast

from ..analysis.activity import MUTATING_METHODS, SCOPES, bound_names, chain_text
from ..core.nodes import children
from ..core.templates import replace


def _params(fn):
    a = fn.args
    names = {x.id for x in a.posonlyargs + a.args + a.kwonlyargs}
    return names | {x.id for x in (a.vararg, a.kwarg) if x is not None}


def _root_chain(node):
    while isinstance(node, gast.Subscript):
        node = node.value
    parts = []
    while isinstance(node, gast.Attribute):
        parts.append(node)
        node = node.value
    return node if isinstance(node, gast.Name) else None


class Writes:
    def __init__(self, ctx):
        self.ctx = ctx

    def run(self, fn):
        if not getattr(fn, "af_user", False):
            return
        params = _params(fn)
        # `x = af.setitem(x, ...)` rebinds a parameter in form only: still outside.
        rebound = {n for n in bound_names(fn.body) if n not in params}
        self.outside = lambda name: name not in rebound
        fn.body = self._block(fn.body)

    def _block(self, stmts):
        out = []
        for s in stmts:
            if isinstance(s, SCOPES):
                out.append(s)
                continue
            out += self._markers(s)
            for field in ("body", "orelse", "finalbody"):
                val = getattr(s, field, None)
                if isinstance(val, list) and val and isinstance(val[0], gast.stmt):
                    setattr(s, field, self._block(val))
            for h in getattr(s, "handlers", None) or []:
                h.body = self._block(h.body)
            for c in getattr(s, "cases", None) or []:
                c.body = self._block(c.body)
            out.append(s)
        return out

    def _markers(self, s):
        """Markers for the writes ``s`` itself makes (not its nested blocks)."""
        targets = []
        if isinstance(s, gast.Assign):
            targets = [t for t in s.targets if isinstance(t, (gast.Attribute, gast.Subscript))]
        elif isinstance(s, (gast.AugAssign, gast.AnnAssign)) and isinstance(
                s.target, (gast.Attribute, gast.Subscript)):
            targets = [s.target]
        elif isinstance(s, gast.Delete):
            targets = [t for t in s.targets if isinstance(t, gast.Subscript)]
        out, seen = [], set()
        for t in [t for t in targets if isinstance(t, gast.Subscript)]:
            # `d[k] = v` on a closure's or a global's container (not rewritten to
            # af.setitem, which would make `d` local): the container changes.
            obj = t.value
            while isinstance(obj, gast.Subscript):
                obj = obj.value
            root = _root_chain(obj)
            if root is not None and root.id != self.ctx.af and self.outside(root.id) \
                    and isinstance(obj, (gast.Name, gast.Attribute)) \
                    and chain_text(obj) not in seen:
                seen.add(chain_text(obj))
                out += replace("AF.mutates(OBJ)", AF=self.ctx.af, OBJ=_load(obj), at=s)
        targets = [t for t in targets if isinstance(t, gast.Attribute)]
        for t in targets:
            root = _root_chain(t.value)
            if root is not None and self.outside(root.id) and root.id != self.ctx.af:
                key = chain_text(t) if isinstance(t.value, (gast.Name, gast.Attribute)) else None
                if key is None or key in seen:
                    continue
                seen.add(key)
                out += replace("AF.mutates(OBJ, NAME)", AF=self.ctx.af,
                               OBJ=_load(t.value), NAME=gast.Constant(value=t.attr,
                                                                      kind=None), at=s)
        expr = s.value if isinstance(s, gast.Expr) else None
        if isinstance(expr, gast.Call) and isinstance(expr.func, gast.Attribute) \
                and expr.func.attr in MUTATING_METHODS:
            obj = expr.func.value
            root = _root_chain(obj)
            if root is not None and root.id != self.ctx.af and self.outside(root.id) \
                    and root.id not in self.ctx.library_names and isinstance(
                        obj, (gast.Name, gast.Attribute)) \
                    and not self.ctx.is_module_name(root.id):
                out += replace("AF.mutates(OBJ)", AF=self.ctx.af, OBJ=_load(obj), at=s)
        return out


def _load(node):
    from ..core.nodes import clone
    new = clone(node)
    todo = [new]
    while todo:
        n = todo.pop()
        if hasattr(n, "ctx"):
            n.ctx = gast.Load()
        todo.extend(children(n))
    return new
