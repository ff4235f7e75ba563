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
_GAST_CLASSES = frozenset(_CHILD_FIELDS)  # gast's own node classes (not ast's)


def child_fields(cls) -> tuple:
    """The names of ``cls``'s fields that may hold child nodes (or lists of them)."""
    try:
        return _CHILD_FIELDS[cls]
    except KeyError:
        return _child_fields(cls)


def append_children(node, out):
    """Append ``node``'s child nodes to ``out``, in field order."""
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
    append_children(node, out)
    return out


def walk(node) -> list:
    """``node`` and all nodes below it, breadth first (``ast.walk``'s order)."""
    # The loop of append_children inlined: walks are most of the rewriter's work.
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
    try:
        fields = _CHILD_FIELDS[cls]
    except KeyError:
        fields = _child_fields(cls)
    for f in fields:
        v = d.get(f)
        if v is None:
            continue
        if v.__class__ is list:
            # (a loop, not a comprehension: on 3.11 each comprehension is a call)
            out = []
            for x in v:
                out.append(clone(x) if isinstance(x, AST) else x)
            d[f] = out
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
    _own_visit = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._dispatch = {}
        # generic_visit calls a child's visit_<Class> (or itself) directly,
        # saving a call of `visit` per node, unless the class has a `visit` of
        # its own to go through.
        cls._own_visit = cls.visit is not Transformer.visit

    def _method(self, cls):
        method = getattr(type(self), "visit_" + cls.__name__, None)
        if method is None:
            try:
                fields = _CHILD_FIELDS[cls]
            except KeyError:
                fields = _child_fields(cls)
            # A node that cannot hold nodes (a Constant, an operator), or a
            # Name (whose only child is a parameter's annotation), is left as
            # it is: generic_visit would return it unchanged.
            method = (_leaf if not fields else _name if cls is gast.Name
                      else Transformer.generic_visit)
        self._dispatch[cls] = method
        return method

    def visit(self, node):
        method = self._dispatch.get(node.__class__)
        if method is None:
            method = self._method(node.__class__)
        return method(self, node)

    def generic_visit(self, node):
        dispatch = self._dispatch
        own_visit = self._own_visit
        d = node.__dict__
        cls = node.__class__
        try:
            fields = _CHILD_FIELDS[cls]
        except KeyError:
            fields = _child_fields(cls)
        for f in fields:
            v = d.get(f)
            if v.__class__ is list:
                # Most visits return the node they were given: the list is
                # rebuilt only from the first item that a visit replaced.
                new = None
                for i, x in enumerate(v):
                    if isinstance(x, AST):
                        if own_visit:
                            y = self.visit(x)
                        else:
                            method = dispatch.get(x.__class__)
                            if method is None:
                                method = self._method(x.__class__)
                            if method is _leaf or method is _name and \
                                    x.__dict__.get("annotation") is None:
                                y = x  # (what the call would return)
                            else:
                                y = method(self, x)
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
                if own_visit:
                    d[f] = self.visit(v)
                else:
                    method = dispatch.get(v.__class__)
                    if method is None:
                        method = self._method(v.__class__)
                    if not (method is _leaf or method is _name and
                            v.__dict__.get("annotation") is None):
                        d[f] = method(self, v)
        return node


def _leaf(self, node):
    return node


def _name(self, node):
    if node.__dict__.get("annotation") is None:
        return node
    return Transformer.generic_visit(self, node)


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


# --------------------------------------------------------------------------
# gast -> ast, in place
# --------------------------------------------------------------------------
# gast's node classes derive from ast's (``gast.Name`` is an ``ast.expr``)
# and keep their fields in ``__dict__`` as ast's do, so a node can become its
# ast twin by taking its class: no copy of the node and of its fields.
_PLANS: dict = {}


def _plan(cls):
    """For gast class ``cls``: (its ast twin, the twin's fields that may hold
    nodes, whether it has ``ctx``, its other fields, whether it has positions)."""
    acls = getattr(ast, cls.__name__)
    kids = set(child_fields(cls))
    fields = acls._fields
    hit = _PLANS[cls] = (acls, tuple(f for f in fields if f in kids), "ctx" in fields,
                         tuple(f for f in fields if f not in kids and f != "ctx"),
                         "lineno" in acls._attributes)
    return hit


def _into(node, loc):
    """``node`` (a gast node, or an ast node made by a pass) made its ast twin in place."""
    into = _INTO.get(node.__class__)
    if into is None:
        into = _into_function(node.__class__)
    return into(node, loc)


def _into_function(cls):
    """The function that makes a node of class ``cls`` its ast twin: straight-line code
    made once per class (one step per field, no loop over a plan), as templates are."""
    if cls not in _GAST_CLASSES:
        # Not a gast node (an ast node made by a pass, or a node met a second
        # time): copied, as to_ast does.
        _INTO[cls] = _to_ast
        return _to_ast
    if cls is gast.arguments:
        _INTO[cls] = _into_arguments
        return _into_arguments
    acls, kids, has_ctx, others, located = _plan(cls)
    lines = ["def into(node, loc):", "    d = node.__dict__"]
    if located:  # missing positions are the parent's (as in _to_ast)
        lines += ["    here = (d.get('lineno'), d.get('col_offset'), d.get('end_lineno'), "
                  "d.get('end_col_offset'))",
                  "    if None in here:",
                  "        here = _positions(d, loc)"]
    else:
        lines.append("    here = loc")
    for f in kids:
        lines += [f"    v = d.get({f!r})",
                  "    if v.__class__ is list:",
                  "        out = []",  # (a loop: a comprehension would be a call more)
                  "        for x in v:",
                  "            if isinstance(x, AST):",
                  "                x = (_INTO.get(x.__class__) or _into)(x, here)",
                  "            out.append(x)",
                  f"        d[{f!r}] = out",
                  "    elif v is None:",
                  f"        d[{f!r}] = None",
                  "    elif isinstance(v, AST):",
                  f"        d[{f!r}] = (_INTO.get(v.__class__) or _into)(v, here)"]
    if has_ctx:
        lines += ["    v = d.get('ctx')",
                  "    ctx = _CONTEXTS.get(v.__class__)",
                  "    d['ctx'] = ctx if ctx is not None else "
                  "(_to_ast(v, here) if isinstance(v, AST) else v)"]
    for f in others:  # the fields an ast node must have, as _to_ast gives them
        lines += [f"    if {f!r} not in d:", f"        d[{f!r}] = None"]
    if cls is gast.ExceptHandler:
        lines += ["    if isinstance(d.get('name'), ast.Name):", "        d['name'] = d['name'].id"]
    lines += ["    node.__class__ = ACLS", "    return node"]
    namespace = {"_into": _into, "_INTO": _INTO, "_positions": _positions, "_to_ast": _to_ast,
                 "_CONTEXTS": _CONTEXTS, "AST": AST, "ast": ast, "ACLS": acls}
    exec(compile("\n".join(lines), f"<autoflow into_ast {cls.__name__}>", "exec"), namespace)
    into = _INTO[cls] = namespace["into"]
    return into


_INTO: dict = {}


def _positions(d, loc):
    """A node's (its ``__dict__`` ``d``) positions, the missing ones set to its parent's
    ``loc``: ``(lineno, col_offset, end_lineno, end_col_offset)``."""
    here = (d.get("lineno"), d.get("col_offset"), d.get("end_lineno"), d.get("end_col_offset"))
    if None in here:
        here = tuple(p if x is None else x for x, p in zip(here, loc))
        d["lineno"], d["col_offset"], d["end_lineno"], d["end_col_offset"] = here
    return here


def _into_arg(name, loc):
    """A gast parameter (a ``Name``) made the ``ast.arg`` that ``_arg`` builds."""
    if name is None:
        return None
    d = name.__dict__
    here = _positions(d, loc)
    d["arg"] = d.pop("id")
    d.pop("ctx", None)
    annotation = d.get("annotation")
    d["annotation"] = _into(annotation, here) if isinstance(annotation, AST) else annotation
    d.setdefault("type_comment", None)
    name.__class__ = ast.arg
    return name


def _into_arguments(node, loc):
    """``arguments``: its parameters become ``ast.arg`` (in gast they are Names)."""
    d = node.__dict__
    for f in ("posonlyargs", "args", "kwonlyargs"):
        d[f] = [_into_arg(a, loc) for a in d[f]]
    d["vararg"] = _into_arg(d.get("vararg"), loc)
    d["kwarg"] = _into_arg(d.get("kwarg"), loc)
    d["kw_defaults"] = [None if x is None else _into(x, loc) for x in d["kw_defaults"]]
    d["defaults"] = [_into(x, loc) for x in d["defaults"]]
    node.__class__ = ast.arguments
    return node


def into_ast(node):
    """``to_ast`` for a tree that is not used again: its gast nodes become the
    ``ast`` nodes (each takes its ast class) instead of being copied, which
    saves a new node and a copy of its fields per node. The result is the
    tree ``to_ast`` returns, with the same positions; the nodes keep their
    gast-only fields and the passes' annotations as extra attributes, which
    ``compile`` and ``ast.unparse`` do not read."""
    return _into(node, (1, 0, 1, 0))
