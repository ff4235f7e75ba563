"""Build generated code from small source templates with placeholders.

A template is ordinary Python source whose placeholder names are replaced by
user code or generated names::

    replace('''
        def NAME(PARAMS):
            BODY
            return OUTS
    ''', NAME='if_true', PARAMS=['n'], BODY=stmts, OUTS=expr)

Placeholders may stand for:

* an identifier (a ``str``): a variable, function or parameter name;
* an expression (a gast expression node);
* a list of statements, where the placeholder appears as a statement;
* a list of parameter names, where it appears as a parameter;
* ``None`` where it appears as ``return NAME`` (the return is dropped) or as
  a statement (the statement is dropped).

Every placeholder passed must be used, and every identifier in the template
that looks like a placeholder (all capitals) must be replaced; otherwise
``TemplateError`` is raised, so a typo cannot silently generate bad code.
"""

from __future__ import annotations

import re
import textwrap

import gast

from .nodes import append_children, clone

_PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*$")


class TemplateError(Exception):
    """A template was filled incorrectly (a bug in autoflow, not user code)."""


def _is_stmt_list(value):
    return isinstance(value, list) and all(isinstance(v, gast.stmt) for v in value)


def _is_placeholder(ident):
    return isinstance(ident, str) and _PLACEHOLDER.match(ident) is not None


# ---- positions ----------------------------------------------------------------
def placement(anchor) -> dict:
    """The attributes that place generated code at ``anchor``: its first line
    (a frame inside it then reports that line, the ``if``/``for`` itself),
    ending where the anchor ends when it is one line long, one column
    further otherwise; ``af_placed`` marks the node as placed."""
    lineno = anchor.lineno
    col = getattr(anchor, "col_offset", 0)
    same_line = getattr(anchor, "end_lineno", None) == lineno
    end_col = anchor.end_col_offset if same_line and anchor.end_col_offset is not None else col + 1
    return {"af_placed": True, "lineno": lineno, "col_offset": col, "end_lineno": lineno,
            "end_col_offset": end_col}


_LOCATED: dict = {}  # node class -> has it source positions?


def place(nodes, anchor=None, at=None):
    """Position generated ``nodes`` (a node or a list) at ``anchor`` (or with
    the ``placement`` ``at``); user nodes and nodes placed already keep their
    positions, and the walk does not enter them (``transforms.util.stamp``)."""
    # (placing runs for every piece of generated code: append_children reads each
    # node's __dict__ and child fields directly, as nodes.walk does)
    todo = list(nodes) if isinstance(nodes, list) else [nodes]
    while todo:
        n = todo.pop()
        d = n.__dict__
        if d.get("af_user") or d.get("af_placed"):
            continue
        cls = n.__class__
        append_children(n, todo)
        located = _LOCATED.get(cls)
        if located is None:
            located = _LOCATED[cls] = "lineno" in cls._attributes
        if located:
            if at is None:
                at = placement(anchor)
            d.update(at)
    return nodes


# ---- filling placeholders (called from the compiled builders) --------------
# ``P`` is the placement of the generated code (None: left unplaced): the
# nodes a template makes are placed as they are made, and what fills a
# placeholder is placed as ``place`` would, so a builder's result is what
# ``place(build(S, None), anchor)`` would make of it, without a walk over
# the template's own nodes.
def _make(cls, fields):
    node = cls.__new__(cls)
    node.__dict__.update(fields)
    return node


def _make_at(cls, fields, P):
    """``_make`` for a class with source positions."""
    node = cls.__new__(cls)
    d = node.__dict__
    d.update(fields)
    if P is not None:
        d.update(P)
    return node


def _name(id_, ctx, P):
    d = {"id": id_, "ctx": ctx, "annotation": None, "type_comment": None}
    if P is not None:
        d.update(P)
    return _make(gast.Name, d)


def _expr(subs, key, ctx, P):
    """The placeholder ``key`` where an expression stands, in context ``ctx``."""
    value = subs[key]
    if isinstance(value, str):
        return _name(value, ctx, P)
    if isinstance(value, gast.expr):
        new = clone(value)
        if hasattr(new, "ctx"):
            new.ctx = ctx
            if isinstance(new, (gast.Tuple, gast.List)):
                for elt in new.elts:
                    if hasattr(elt, "ctx"):
                        elt.ctx = ctx
        if P is not None:
            place(new, at=P)
        return new
    raise TemplateError(f"placeholder {key} cannot take {type(value).__name__} here")


def _stmts(subs, key, ctx, P):
    """The placeholder ``key`` standing as a statement: statements, or dropped."""
    value = subs[key]
    if value is None:
        return ()
    # Statements are moved into the template, not copied: each list is placed
    # once, and copying whole loop bodies at every nesting level would make
    # conversion quadratic.
    if _is_stmt_list(value):
        return value if P is None else place(value, at=P)
    if isinstance(value, gast.stmt):
        return (value if P is None else place(value, at=P),)
    return (_make_at(gast.Expr, {"value": _expr(subs, key, ctx, P)}, P),)


def _return(subs, key, ctx, P):
    """``return KEY``; dropped when ``KEY`` is None."""
    if subs[key] is None:
        return ()
    return (_make_at(gast.Return, {"value": _expr(subs, key, ctx, P)}, P),)


def _params(subs, key, ctx, P):
    """A placeholder among parameters: one name or a list of names."""
    value = subs[key]
    names = [value] if isinstance(value, str) else value
    return [_name(n, ctx, P) for n in names]


def _identifier(subs, key):
    value = subs[key]
    if not isinstance(value, str):
        raise TemplateError(f"placeholder {key} cannot take {type(value).__name__} here")
    return value


class _Compiler:
    """Turns a parsed template into Python code that builds its tree directly.

    Filling a template is then one call that makes exactly the nodes needed,
    instead of copying the parsed template and walking the copy to find the
    placeholders. Positions are those of the user code the generated code
    replaces: given by ``replace(..., at=node)`` or by ``transforms.util.stamp``.
    """

    def __init__(self):
        self.constants = []
        self.placeholders = set()

    def const(self, value):
        self.constants.append(value)
        return f"K[{len(self.constants) - 1}]"

    def node(self, n):
        if isinstance(n, gast.Name) and _is_placeholder(n.id):
            self.placeholders.add(n.id)
            return f"_expr(S, {n.id!r}, {self.const(n.ctx)}, P)"
        fields = []
        for f in n._fields:
            v = getattr(n, f, None)
            if isinstance(v, list):
                code = self.params(v) if isinstance(n, gast.arguments) and f in (
                    "args", "posonlyargs", "kwonlyargs") else self.seq(v)
            elif isinstance(v, gast.AST):
                code = self.node(v)
            elif f == "name" and _is_placeholder(v):
                self.placeholders.add(v)
                code = f"_identifier(S, {v!r})"
            else:
                code = self.const(v)
            fields.append(f"{f!r}: {code}")
        if "lineno" in type(n)._attributes:  # placed as it is made
            return f"_make_at({self.const(type(n))}, {{{', '.join(fields)}}}, P)"
        return f"_make({self.const(type(n))}, {{{', '.join(fields)}}})"

    def seq(self, items):
        parts = []
        for x in items:
            if isinstance(x, gast.Expr) and isinstance(x.value, gast.Name) \
                    and _is_placeholder(x.value.id):
                self.placeholders.add(x.value.id)
                parts.append(f"*_stmts(S, {x.value.id!r}, {self.const(x.value.ctx)}, P)")
            elif isinstance(x, gast.Return) and isinstance(x.value, gast.Name) \
                    and _is_placeholder(x.value.id):
                self.placeholders.add(x.value.id)
                parts.append(f"*_return(S, {x.value.id!r}, {self.const(x.value.ctx)}, P)")
            elif isinstance(x, gast.AST):
                parts.append(self.node(x))
            else:
                parts.append(self.const(x))
        return f"[{', '.join(parts)}]"

    def params(self, names):
        parts = []
        for x in names:
            if isinstance(x, gast.Name) and _is_placeholder(x.id):
                self.placeholders.add(x.id)
                parts.append(f"*_params(S, {x.id!r}, {self.const(x.ctx)}, P)")
            else:
                parts.append(self.node(x))
        return f"[{', '.join(parts)}]"


_HELPERS = {"_make": _make, "_make_at": _make_at, "_expr": _expr, "_stmts": _stmts, "_return": _return,
            "_params": _params, "_identifier": _identifier}
_builders = {}


def _builder(template):
    """``(build, placeholders)`` for ``template``: compiled on first use."""
    hit = _builders.get(template)
    if hit is None:
        tree = gast.parse(textwrap.dedent(template))
        compiler = _Compiler()
        body = compiler.seq(tree.body)
        namespace = dict(_HELPERS, K=compiler.constants)
        exec(compile(f"def build(S, P):\n    return {body}\n", "<autoflow template>", "exec"),
             namespace)
        hit = _builders[template] = (namespace["build"], frozenset(compiler.placeholders))
    return hit


def replace(template: str, at=None, **subs) -> list:
    """Fill ``template``'s placeholders from ``subs``; return its statements.

    With ``at`` (a node), the result is placed there: ``replace(T, at=node,
    ...)`` is ``transforms.util.stamp(replace(T, ...), node)``, made faster.
    """
    build, placeholders = _builder(template)
    # Check the template's own names, not user code spliced in: user code may
    # well use capitalised names (`K`, `MAX_ITER`).
    if placeholders != subs.keys():
        missing = placeholders - set(subs)
        if missing:
            raise TemplateError(f"placeholder {sorted(missing)[0]} was never replaced")
        raise TemplateError(f"placeholders not in template: {sorted(set(subs) - placeholders)}")
    return build(subs, None if at is None else placement(at))


def replace_expr(template: str, at=None, **subs):
    """Like ``replace`` for a template that is a single expression."""
    (stmt,) = replace(template, at, **subs)
    if not isinstance(stmt, gast.Expr):
        raise TemplateError("template is not an expression")
    return stmt.value


# The helpers below fill the nodes' fields directly (as the template builders
# do) instead of calling gast's constructors, a Python call per node; their
# expression contexts are shared, as ``clone`` shares them.
_LOAD = gast.Load()


def name(id_, ctx=None):
    """A gast Name node (helper for the few places a template is overkill)."""
    return _make(gast.Name, {"id": id_, "ctx": ctx or _LOAD, "annotation": None,
                             "type_comment": None})


def names_tuple(ids, ctx=None):
    """``a`` for one name, ``(a, b)`` for several, ``()`` for none."""
    ctx = ctx or _LOAD
    if len(ids) == 1:
        return name(ids[0], ctx)
    return _make(gast.Tuple, {"elts": [name(i, ctx) for i in ids], "ctx": ctx})


def str_tuple(values):
    """``('a', 'b')`` as an expression node."""
    return _make(gast.Tuple, {"elts": [_make(gast.Constant, {"value": v, "kind": None})
                                       for v in values], "ctx": _LOAD})


def operand_tuple(ids):
    """``(a, b)``, ``(a,)`` or ``()`` as an expression node (always a tuple)."""
    return _make(gast.Tuple, {"elts": [name(i) for i in ids], "ctx": _LOAD})
