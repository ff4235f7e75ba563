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

A write whose root is a module global, and a rebinding of a name the function
declares ``global`` or ``nonlocal``, get markers that say so::

    af.mutates_global('u', u)           # `u[0] += 1`, `u.append(v)` (u a module global)
    af.mutates_global('cfg', cfg, 'a')  # `cfg.a = v`
    af.rebinds_global('counter')        # `counter += 1` after `global counter`
    af.rebinds_nonlocal('n', lambda: n) # `n += 1` after `nonlocal n` (the lambda
                                        # holds the cell)

Module state outlives every call: a staged branch or loop body (traced once,
for every path and iteration) cannot change it as Python would at each call,
so there the runtime raises an error naming it and this line, unless the
statement carries it (``runtime.state``).
"""

from __future__ import annotations

import gast

from ..analysis.activity import MUTATING_METHODS, SCOPES, bound_names, chain_text, target_names
from ..core.nodes import append_children
from ..core.templates import replace
from .util import param_names, walk_local


def _getitem_of(node, af):
    """``x`` of ``af.getitem(x, k)`` (a subscript the rewriter made a call), or None."""
    if af is not None and isinstance(node, gast.Call) and len(node.args) == 2 \
            and not node.keywords and isinstance(node.func, gast.Attribute) \
            and node.func.attr == "getitem" and isinstance(node.func.value, gast.Name) \
            and node.func.value.id == af:
        return node.args[0]
    return None


def _root_chain(node, af=None):
    while isinstance(node, gast.Subscript) or _getitem_of(node, af) is not None:
        node = node.value if isinstance(node, gast.Subscript) else _getitem_of(node, af)
    parts = []
    while isinstance(node, gast.Attribute):
        parts.append(node)
        node = node.value
    if isinstance(node, gast.Call) and isinstance(node.func, gast.Name) \
            and node.func.id == "type" and len(node.args) == 1:
        return _root_chain(node.args[0], af)  # (`type(self).total`: reached from `self`)
    return node if isinstance(node, gast.Name) else None


class Writes:
    def __init__(self, ctx):
        self.ctx = ctx

    def run(self, fn, enclosing=frozenset()):
        """Mark the writes of user function ``fn``; ``enclosing``: the names local
        to the functions ``fn`` is nested in (within the converted tree)."""
        if not getattr(fn, "af_user", False):
            return
        params = set(param_names(fn))
        self.globals, self.nonlocals = _declared(fn.body)
        # `x = af.setitem(x, ...)` rebinds a parameter in form only: still outside.
        rebound = {n for n in bound_names(fn.body) if n not in params} \
            - self.globals - self.nonlocals
        self.outside = lambda name: name not in rebound
        free = set(self.ctx.free_names) | set(enclosing) | self.nonlocals | params | rebound
        self.is_global = lambda name: name in self.globals or name not in free
        # a `for` loop's variables: `for p in pts: p.v = ...` writes objects that
        # existed before the loop (the statement's own state cannot name them)
        self.loop_names = {n for s in walk_local(fn) if isinstance(s, (gast.For, gast.AsyncFor))
                           for n in target_names(s.target)}
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

    def _rebinds(self, s):
        """Markers for the names declared ``global``/``nonlocal`` that ``s`` rebinds."""
        if not (self.globals or self.nonlocals):
            return []
        names = []
        if isinstance(s, gast.Assign):
            for t in s.targets:
                names += target_names(t)
        elif isinstance(s, (gast.AugAssign, gast.AnnAssign)) and (
                not isinstance(s, gast.AnnAssign) or s.value is not None):
            names += target_names(s.target)
        elif isinstance(s, gast.Delete):
            for t in s.targets:
                names += target_names(t)
        elif isinstance(s, (gast.For, gast.AsyncFor)):
            names += target_names(s.target)
        out = []
        for n in dict.fromkeys(names):
            name = gast.Constant(value=n, kind=None)
            if n in self.globals:
                out += replace("AF.rebinds_global(NAME)", AF=self.ctx.af, NAME=name, at=s)
            elif n in self.nonlocals:
                out += replace("AF.rebinds_nonlocal(NAME, lambda: VAR)", AF=self.ctx.af,
                               NAME=name, VAR=gast.Name(id=n, ctx=gast.Load(), annotation=None,
                                                        type_comment=None), at=s)
        return out

    def _mark(self, obj, root, s, name=None):
        """``af.mutates(obj[, name])``, or ``af.mutates_global(...)`` when the
        root of ``obj`` is a module global (``name``: an attribute's name, or the
        expression that gives it, ``setattr(o, key, v)``)."""
        extra = {} if name is None else {
            "NAME": name if isinstance(name, gast.AST) else gast.Constant(value=name, kind=None)}
        tail = ", NAME)" if name is not None else ")"
        if self.is_global(root.id):
            label = gast.Constant(value=chain_text(obj) if isinstance(obj, (gast.Name, gast.Attribute))
                                  else f"{root.id}[...]", kind=None)
            return replace("AF.mutates_global(LABEL, OBJ" + tail, AF=self.ctx.af, LABEL=label,
                           OBJ=_load(obj), at=s, **extra)
        return replace("AF.mutates(OBJ" + tail, AF=self.ctx.af, OBJ=_load(obj), at=s, **extra)

    def _markers(self, s):
        """Markers for the writes ``s`` itself makes (not its nested blocks)."""
        return self._rebinds(s) + self._writes(s)

    def _writes(self, s):
        targets = []
        if isinstance(s, gast.Assign):
            # (`self.n, z = ...`, `[self.n] = ...`, `self.d["k"], *rest = ...` write too)
            targets = [t for t in _unpacked(s.targets)
                       if isinstance(t, (gast.Attribute, gast.Subscript))]
        elif isinstance(s, (gast.AugAssign, gast.AnnAssign)) and isinstance(
                s.target, (gast.Attribute, gast.Subscript)):
            targets = [s.target]
        elif isinstance(s, gast.Delete):
            targets = [t for t in s.targets if isinstance(t, gast.Subscript)]
        expr = s.value if isinstance(s, gast.Expr) else None
        if isinstance(expr, gast.Call) and isinstance(expr.func, gast.Name) \
                and expr.func.id == "setattr" and len(expr.args) == 3 \
                and isinstance(expr.args[1], gast.Constant) \
                and isinstance(expr.args[1].value, str) and _pure(expr.args[0]):
            # setattr(o, "key", v) is `o.key = v`, marked as that is
            targets = [gast.Attribute(value=expr.args[0], attr=expr.args[1].value,
                                      ctx=gast.Store())]
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
                out += self._mark(obj, root, s)
        targets = [t for t in targets if isinstance(t, gast.Attribute)]
        for t in targets:
            root = _root_chain(t.value, self.ctx.af)
            if root is None or root.id == self.ctx.af:
                continue
            if isinstance(t.value, (gast.Name, gast.Attribute)):
                if not (self.outside(root.id) or root.id in self.loop_names):
                    continue  # (the statement's own state names it: `runtime.state`)
                key = chain_text(t)
            elif _pure(t.value, self.ctx.af):  # `items[0].v = x`: an object reached by index
                key = gast.dump(t)
            else:
                continue
            if key in seen:
                continue
            seen.add(key)
            out += self._mark(t.value, root, s, t.attr)
        if isinstance(expr, gast.Call) and isinstance(expr.func, gast.Name) \
                and expr.func.id == "setattr" and len(expr.args) == 3 \
                and not isinstance(expr.args[1], gast.Constant) and _pure(expr.args[0]) \
                and _pure(expr.args[1]):
            # setattr(o, key, v) with the name in a variable (a constant one is
            # `o.key = v` to the statement's own state)
            root = _root_chain(expr.args[0])
            if root is not None and root.id != self.ctx.af:
                out += self._mark(expr.args[0], root, s, _load(expr.args[1]))
        if isinstance(expr, gast.Call) and isinstance(expr.func, gast.Attribute) \
                and expr.func.attr in MUTATING_METHODS:
            obj = expr.func.value
            root = _root_chain(obj)
            # (A global list or dict counts as a library value, being a builtin's
            # instance: only modules, classes and functions are left out.)
            if root is not None and root.id != self.ctx.af and self.outside(root.id) \
                    and isinstance(obj, (gast.Name, gast.Attribute)) \
                    and not self.ctx.is_module_name(root.id):
                out += self._mark(obj, root, s)
        return out


def _unpacked(targets):
    """The targets an assignment's ``targets`` bind, tuples, lists and ``*rest`` opened."""
    out, todo = [], list(targets)
    while todo:
        t = todo.pop(0)
        if isinstance(t, (gast.Tuple, gast.List)):
            todo[:0] = t.elts
        elif isinstance(t, gast.Starred):
            todo.insert(0, t.value)
        else:
            out.append(t)
    return out


def _pure(node, af=None) -> bool:
    """Is ``node`` names, attributes, constants and subscripts of them only (evaluated
    twice, before a write and in it, with no effect)? (``af``: the runtime's name, whose
    ``getitem`` is a subscript.)"""
    todo = [node]
    while todo:
        n = todo.pop()
        inner = _getitem_of(n, af)
        if inner is not None:
            todo += n.args
            continue
        if isinstance(n, gast.Call) and isinstance(n.func, gast.Name) and n.func.id == "type" \
                and len(n.args) == 1 and not n.keywords:
            todo.append(n.args[0])  # (`type(self).total = v`: the class's attribute)
            continue
        if not isinstance(n, (gast.Name, gast.Attribute, gast.Subscript, gast.Constant,
                              gast.Tuple, gast.Slice, gast.expr_context, gast.UnaryOp,
                              gast.USub, gast.BinOp, gast.Add, gast.Sub, gast.Mult,
                              gast.Mod, gast.FloorDiv)):  # (`boxes[i % 2].v = x`)
            return False
        append_children(n, todo)
    return True


def _declared(stmts):
    """``(global names, nonlocal names)`` declared in this scope (not nested ones)."""
    glob, nonloc = set(), set()
    todo = list(stmts)
    while todo:
        n = todo.pop()
        if isinstance(n, SCOPES):
            continue
        if isinstance(n, gast.Global):
            glob.update(n.names)
        elif isinstance(n, gast.Nonlocal):
            nonloc.update(n.names)
        append_children(n, todo)
    return glob, nonloc


def enclosing_names(tree):
    """``{id(def): names local to the functions it is nested in}`` for the
    ``def``s of ``tree`` (parameters and bound names, less declared ones)."""
    out = {}

    def own(fn):  # a def's local names
        glob, nonloc = _declared(fn.body)
        return (set(bound_names(fn.body)) | set(param_names(fn))) - glob - nonloc

    if isinstance(tree, (gast.FunctionDef, gast.AsyncFunctionDef)):
        out[id(tree)] = frozenset()
        outer = frozenset(own(tree))
    else:
        outer = frozenset()
    # (a loop over the nodes below, each with the names of the scopes around it)
    kids = []
    todo = [(tree, outer)]
    while todo:
        node, outer = todo.pop()
        append_children(node, kids)
        for child in kids:
            cls = child.__class__
            if cls is gast.FunctionDef or cls is gast.AsyncFunctionDef:
                out[id(child)] = outer
                todo.append((child, outer | frozenset(own(child))))
            elif cls is gast.Lambda:
                todo.append((child, outer | frozenset(param_names(child))))
            else:
                todo.append((child, outer))
        kids.clear()
    return out


def _load(node):
    from ..core.nodes import clone
    new = clone(node)
    todo = [new]
    while todo:
        n = todo.pop()
        if hasattr(n, "ctx"):
            n.ctx = gast.Load()
        append_children(n, todo)
    return new
