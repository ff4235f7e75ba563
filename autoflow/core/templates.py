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

from .nodes import Transformer, clone, walk

_PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*$")


class TemplateError(Exception):
    """A template was filled incorrectly (a bug in autoflow, not user code)."""


def _is_stmt_list(value):
    return isinstance(value, list) and all(isinstance(v, gast.stmt) for v in value)


class _Filler(Transformer):
    def __init__(self, subs):
        self.subs = subs
        self.used = set()

    def _lookup(self, name):
        if name in self.subs:
            self.used.add(name)
            return True
        return False

    # Statements standing alone: `BODY` or `return OUTS`.
    def visit_Expr(self, node):
        if isinstance(node.value, gast.Name) and self._lookup(node.value.id):
            value = self.subs[node.value.id]
            if value is None:
                return None
            # Statements are moved into the template, not copied: each list is
            # placed once, and copying whole loop bodies at every nesting level
            # would make conversion quadratic.
            if _is_stmt_list(value):
                return list(value)
            if isinstance(value, gast.stmt):
                return value
        return self.generic_visit(node)

    def visit_Return(self, node):
        if isinstance(node.value, gast.Name) and self._lookup(node.value.id):
            if self.subs[node.value.id] is None:
                return None
        return self.generic_visit(node)

    def visit_FunctionDef(self, node):
        if self._lookup(node.name):
            node.name = self.subs[node.name]
        return self.generic_visit(node)

    def visit_arguments(self, node):
        new_args = []
        for arg in node.args:
            if self._lookup(arg.id):
                value = self.subs[arg.id]
                names = [value] if isinstance(value, str) else list(value)
                new_args.extend(
                    gast.Name(id=n, ctx=gast.Param(), annotation=None, type_comment=None)
                    for n in names
                )
            else:
                new_args.append(arg)
        node.args = new_args
        return node

    def visit_Name(self, node):
        if self._lookup(node.id):
            value = self.subs[node.id]
            if isinstance(value, str):
                node.id = value
                return node
            if isinstance(value, gast.expr):
                new = clone(value)
                if hasattr(new, "ctx"):
                    new.ctx = node.ctx
                    if isinstance(new, (gast.Tuple, gast.List)):
                        for elt in new.elts:
                            if hasattr(elt, "ctx"):
                                elt.ctx = node.ctx
                return new
            raise TemplateError(f"placeholder {node.id} cannot take {type(value).__name__} here")
        return node


_parsed = {}


def _parse(template):
    """The template's tree and its placeholder names (parsed once, copied per use)."""
    hit = _parsed.get(template)
    if hit is None:
        tree = gast.parse(textwrap.dedent(template))
        names = set()
        for node in walk(tree):
            ident = node.id if isinstance(node, gast.Name) else getattr(node, "name", None)
            if isinstance(ident, str) and _PLACEHOLDER.match(ident):
                names.add(ident)
        hit = _parsed[template] = (tree, frozenset(names))
    return clone(hit[0]), hit[1]


def replace(template: str, **subs) -> list:
    """Parse ``template``, fill its placeholders from ``subs``, return statements."""
    tree, placeholders = _parse(template)
    # Check the template's own names, not user code spliced in: user code may
    # well use capitalised names (`K`, `MAX_ITER`).
    missing = placeholders - set(subs)
    if missing:
        raise TemplateError(f"placeholder {sorted(missing)[0]} was never replaced")
    filler = _Filler(subs)
    tree = filler.visit(tree)
    unused = set(subs) - filler.used
    if unused:
        raise TemplateError(f"placeholders not in template: {sorted(unused)}")
    return tree.body


def replace_expr(template: str, **subs):
    """Like ``replace`` for a template that is a single expression."""
    (stmt,) = replace(template, **subs)
    if not isinstance(stmt, gast.Expr):
        raise TemplateError("template is not an expression")
    return stmt.value


def name(id_, ctx=None):
    """A gast Name node (helper for the few places a template is overkill)."""
    return gast.Name(id=id_, ctx=ctx or gast.Load(), annotation=None, type_comment=None)


def names_tuple(ids, ctx=None):
    """``a`` for one name, ``(a, b)`` for several, ``()`` for none."""
    ctx = ctx or gast.Load()
    if len(ids) == 1:
        return name(ids[0], ctx)
    return gast.Tuple(elts=[name(i, ctx) for i in ids], ctx=ctx)


def str_tuple(values):
    """``('a', 'b')`` as an expression node."""
    return gast.Tuple(elts=[gast.Constant(value=v, kind=None) for v in values], ctx=gast.Load())


def operand_tuple(ids):
    """``(a, b)``, ``(a,)`` or ``()`` as an expression node (always a tuple)."""
    return gast.Tuple(elts=[name(i) for i in ids], ctx=gast.Load())
