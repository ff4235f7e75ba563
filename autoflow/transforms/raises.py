"""``raise`` and ``try`` in converted code.

* ``raise EXC`` inside an ``if`` or a loop becomes
  ``raise af.exception(lambda: EXC)``: on a concrete path the user's
  exception is raised as written; on a traced path the branch does not fall
  through and the raise becomes a check that runs with the compiled code
  (see ``runtime.effects.raising``). Inside the body of a ``try`` whose ``except``
  clauses could catch it, the clauses' types come along
  (``lambda: (ZeroDivisionError,)``): Python's meaning cannot be kept for a
  traced one, and that is reported at the ``raise``.
* Every ``try`` with ``except`` clauses gets a first clause
  ``except af.internal_errors: raise``: autoflow's trace-time signals and
  errors (and JAX's errors about traced values) are not the user's, and a
  user's ``except Exception`` must not swallow them.
"""

from __future__ import annotations

import gast

from ..analysis.activity import TRY_TYPES
from ..core.nodes import Transformer
from ..core.templates import replace, replace_expr
from .util import stamp

_BRANCHES = (gast.If, gast.For, gast.While, gast.AsyncFor)


def _lambda(body):
    return gast.Lambda(args=gast.arguments(args=[], posonlyargs=[], vararg=None, kwonlyargs=[],
                                           kw_defaults=[], kwarg=None, defaults=[]), body=body)


class Raises(Transformer):
    def __init__(self, ctx):
        self.ctx = ctx
        self.depth = 0       # enclosing if/loops in this function
        self.handlers = []   # handler types of the enclosing `try` bodies

    def visit_FunctionDef(self, node):
        saved = self.depth, self.handlers
        self.depth, self.handlers = 0, []
        self.generic_visit(node)
        self.depth, self.handlers = saved
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        return node

    def visit_ClassDef(self, node):
        saved = self.depth, self.handlers
        self.depth, self.handlers = 0, []
        self.generic_visit(node)
        self.depth, self.handlers = saved
        return node

    def _branch(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1
        return node

    visit_If = visit_For = visit_While = visit_AsyncFor = _branch

    def _try(self, node):
        types = []
        for h in node.handlers:
            if h.type is None:
                types.append(gast.Name(id="BaseException", ctx=gast.Load(), annotation=None,
                                       type_comment=None))
            elif isinstance(h.type, gast.Tuple):
                types.extend(h.type.elts)
            else:
                types.append(h.type)
        self.handlers.append(types)
        node.body = self._visit_list(node.body)
        self.handlers.pop()
        for field in ("orelse", "finalbody"):
            setattr(node, field, self._visit_list(getattr(node, field)))
        for h in node.handlers:
            h.body = self._visit_list(h.body)
        if node.handlers and type(node).__name__ == "Try":
            guard = replace("try:\n    pass\nexcept AF.internal_errors:\n    raise",
                            AF=self.ctx.af)[0].handlers[0]
            node.handlers.insert(0, stamp(guard, node))
        if node.finalbody and type(node).__name__ == "Try":
            # a check staged in the body raises after the `finally` clause, which runs
            # on every path (runtime.effects.raising.checks_after_finally)
            outer = stamp(replace("with AF.checks_after_finally():\n    pass",
                                  AF=self.ctx.af)[0], node)
            inner = stamp(replace("with AF.finally_part():\n    pass", AF=self.ctx.af)[0], node)
            inner.body, node.finalbody = node.finalbody, [inner]
            outer.body = [node]
            return outer
        return node

    def _visit_list(self, stmts):
        out = []
        for s in stmts:
            new = self.visit(s)
            if isinstance(new, list):
                out.extend(new)
            elif new is not None:
                out.append(new)
        return out

    def visit_Raise(self, node):
        if node.exc is None or not self.depth:
            return node
        types = [t for level in self.handlers for t in level]
        if types:
            value = replace_expr("AF.exception(MAKE, TYPES)", AF=self.ctx.af,
                                 MAKE=_lambda(node.exc), TYPES=_lambda(
                                     gast.Tuple(elts=types, ctx=gast.Load())))
        else:
            value = replace_expr("AF.exception(MAKE)", AF=self.ctx.af, MAKE=_lambda(node.exc))
        if node.cause is not None:  # `raise E from C`: C made with E, where E is made
            value.keywords.append(gast.keyword(arg="cause", value=_lambda(node.cause)))
            node.cause = None
        node.exc = stamp(value, node)
        return node


for _t in TRY_TYPES:
    setattr(Raises, f"visit_{_t.__name__}", Raises._try)
