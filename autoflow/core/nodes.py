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


def children(node) -> list:
    """``node``'s child nodes, in field order (``ast.iter_child_nodes`` without contexts)."""
    out = []
    d = node.__dict__
    for f in child_fields(node.__class__):
        v = d.get(f)
        if v.__class__ is list:
            for x in v:
                if isinstance(x, AST):
                    out.append(x)
        elif isinstance(v, AST):
            out.append(v)
    return out


def walk(node) -> list:
    """``node`` and all nodes below it, breadth first (``ast.walk``'s order)."""
    todo = [node]
    i = 0
    while i < len(todo):
        d = todo[i].__dict__
        for f in child_fields(todo[i].__class__):
            v = d.get(f)
            if v.__class__ is list:
                for x in v:
                    if isinstance(x, AST):
                        todo.append(x)
            elif isinstance(v, AST):
                todo.append(v)
        i += 1
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
                new = []
                for x in v:
                    if isinstance(x, AST):
                        x = self.visit(x)
                        if x is None:
                            continue
                        if x.__class__ is list:
                            new.extend(x)
                            continue
                    new.append(x)
                v[:] = new
            elif isinstance(v, AST):
                d[f] = self.visit(v)
        return node
