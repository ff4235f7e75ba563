"""Fast traversal, copying and rewriting of gast trees.

Conversion walks many small trees many times, and the generic helpers of
``ast``/``gast`` (``iter_child_nodes``, ``walk``, ``NodeTransformer``) spend
most of their time in generator layers and in looking at fields that never
hold nodes. Here each node class's fields that may hold child nodes are found
once; a node's fields live in its ``__dict__``, which is read directly.

Expression contexts (``Load``/``Store``/``Del``) are not children: they
carry nothing below them, no pass looks for them, and copies share them
(``clone``), as CPython's own parser does.
"""

from __future__ import annotations

import ast

import gast

AST = gast.AST

# Fields that hold identifiers, flags or contexts, never child nodes.
_NOT_CHILDREN = frozenset({"ctx", "id", "attr", "arg", "kind", "type_comment", "conversion",
                           "is_async", "simple", "level", "module"})

_CHILD_FIELDS: dict = {}


def _child_fields(cls) -> tuple:
    fields = tuple(f for f in cls._fields if f not in _NOT_CHILDREN
                   and not (cls is gast.Constant and f == "value"))
    _CHILD_FIELDS[cls] = fields
    return fields


for _cls in vars(gast).values():
    if isinstance(_cls, type) and issubclass(_cls, AST):
        _child_fields(_cls)


def child_fields(cls) -> tuple:
    """The names of ``cls``'s fields that may hold child nodes (or lists of them)."""
    try:
        return _CHILD_FIELDS[cls]
    except KeyError:
        return _child_fields(cls)


def _append_children(node, out):
    d = node.__dict__
    try:
        fields = _CHILD_FIELDS[node.__class__]
    except KeyError:
        fields = _child_fields(node.__class__)
    for f in fields:
        v = d.get(f)
        if v is None:
            continue
        if v.__class__ is list:
            for x in v:
                if isinstance(x, AST):
                    out.append(x)
        elif isinstance(v, AST):
            out.append(v)


def children(node) -> list:
    """``node``'s child nodes, in field order (``ast.iter_child_nodes`` without contexts)."""
    out = []
    _append_children(node, out)
    return out


def walk(node) -> list:
    """``node`` and all nodes below it, breadth first (``ast.walk``'s order)."""
    # The loop of _append_children inlined: walks are most of the rewriter's work.
    todo = [node]
    append = todo.append
    fields_of = _CHILD_FIELDS
    for n in todo:  # grows while it is iterated: breadth first
        d = n.__dict__
        try:
            fields = fields_of[n.__class__]
        except KeyError:
            fields = _child_fields(n.__class__)
        for f in fields:
            v = d.get(f)
            if v is None:
                continue
            if v.__class__ is list:
                for x in v:
                    if isinstance(x, AST):
                        append(x)
            elif isinstance(v, AST):
                append(v)
    return todo


def clone(node):
    """A deep copy of a gast tree or list of trees, annotations included."""
    if node.__class__ is list:
        return [clone(x) if isinstance(x, AST) else x for x in node]
    cls = node.__class__
    new = cls.__new__(cls)
    d = new.__dict__
    d.update(node.__dict__)
    for f in child_fields(cls):
        v = d.get(f)
        if v.__class__ is list:
            d[f] = [clone(x) if isinstance(x, AST) else x for x in v]
        elif isinstance(v, AST):
            d[f] = clone(v)
    return new


def mark_user(tree):
    """Mark every node of the user's parsed code, so stamping never moves it."""
    for n in walk(tree):
        if "lineno" in n._attributes:
            n.af_user = True


class Transformer:
    """``ast.NodeTransformer`` with cached dispatch and no visits of contexts.

    ``visit_<Class>`` methods return a node, a list of nodes (spliced into
    the enclosing list) or ``None`` (removed from a list; a single field is
    set to ``None``), as with ``NodeTransformer``.
    """

    _dispatch: dict

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._dispatch = {}

    def visit(self, node):
        try:
            method = self._dispatch[node.__class__]
        except KeyError:
            method = getattr(type(self), "visit_" + node.__class__.__name__, Transformer.generic_visit)
            self._dispatch[node.__class__] = method
        return method(self, node)

    def generic_visit(self, node):
        d = node.__dict__
        for f in child_fields(node.__class__):
            v = d.get(f)
            if v.__class__ is list:
                # Most visits return the node they were given: the list is
                # rebuilt only from the first item that a visit replaced.
                new = None
                for i, x in enumerate(v):
                    if isinstance(x, AST):
                        y = self.visit(x)
                        if new is None:
                            if y is x:
                                continue
                            new = v[:i]
                        if y is None:
                            continue
                        if y.__class__ is list:
                            new.extend(y)
                            continue
                        x = y
                    if new is not None:
                        new.append(x)
                if new is not None:
                    v[:] = new
            elif isinstance(v, AST):
                d[f] = self.visit(v)
        return node


# --------------------------------------------------------------------------
# gast -> ast
# --------------------------------------------------------------------------
_CONTEXTS = {gast.Load: ast.Load(), gast.Store: ast.Store(), gast.Del: ast.Del()}
_TARGETS: dict = {}


def _target(cls):
    """``cls``'s ``ast`` twin, its fields, and whether it has positions."""
    acls = getattr(ast, cls.__name__)
    hit = _TARGETS[cls] = (acls, acls._fields, "lineno" in acls._attributes)
    return hit


def _arg(name, loc):
    """A gast parameter (a ``Name``) as an ``ast.arg``."""
    if name is None:
        return None
    return _to_ast(ast.arg(arg=name.id, annotation=name.annotation, type_comment=name.type_comment,
                           **{k: v for k, v in name.__dict__.items() if k in _POSITIONS}), loc,
                   convert_self=False)


_POSITIONS = ("lineno", "col_offset", "end_lineno", "end_col_offset")


def _to_ast(node, loc, convert_self=True):
    cls = node.__class__
    gd = node.__dict__
    if convert_self:
        ctx = _CONTEXTS.get(cls)
        if ctx is not None:
            return ctx
        try:
            acls, fields, located = _TARGETS[cls]
        except KeyError:
            acls, fields, located = _target(cls)
        if cls is gast.arguments:
            new = ast.arguments(posonlyargs=[_arg(a, loc) for a in node.posonlyargs],
                                args=[_arg(a, loc) for a in node.args],
                                vararg=_arg(node.vararg, loc),
                                kwonlyargs=[_arg(a, loc) for a in node.kwonlyargs],
                                kw_defaults=[None if d is None else _to_ast(d, loc)
                                             for d in node.kw_defaults],
                                kwarg=_arg(node.kwarg, loc),
                                defaults=[_to_ast(d, loc) for d in node.defaults])
            return new
        new = acls.__new__(acls)
        d = new.__dict__
    else:  # an ast node made here from gast parts: fill in place
        new, d, located, fields = node, gd, True, node._fields
    if located:
        lineno, col, end, end_col = (gd.get("lineno"), gd.get("col_offset"),
                                     gd.get("end_lineno"), gd.get("end_col_offset"))
        loc = (loc[0] if lineno is None else lineno, loc[1] if col is None else col,
               loc[2] if end is None else end, loc[3] if end_col is None else end_col)
        d["lineno"], d["col_offset"], d["end_lineno"], d["end_col_offset"] = loc
    for f in fields:
        v = gd.get(f)
        if v.__class__ is list:
            d[f] = [_to_ast(x, loc) if isinstance(x, AST) else x for x in v]
        elif isinstance(v, AST):
            d[f] = _to_ast(v, loc)
        else:
            d[f] = v
    if cls is gast.ExceptHandler and isinstance(d.get("name"), ast.Name):
        d["name"] = d["name"].id
    return new


def to_ast(node):
    """A gast tree as a new ``ast`` tree, ready for ``compile`` and ``unparse``.

    A node without a position takes its parent's, as with
    ``ast.fix_missing_locations`` (which this saves a second walk for).
    """
    return _to_ast(node, (1, 0, 1, 0))
