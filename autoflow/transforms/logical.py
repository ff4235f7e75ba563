"""``and``/``or``/``not``, chained comparisons and ``a if c else b``.

Each becomes a runtime operator that keeps Python's meaning on concrete
values (short-circuit, returning an operand) and works on traced ones::

    a and b            ->  af.and_(a, lambda: b)
    a or b or c        ->  af.or_(a, lambda: b, lambda: c)
    not a              ->  af.not_(a)
    a < b < c          ->  af.and_(a < b, lambda: b < c)
    a < f(b) < c       ->  af.compare(a, '<', lambda: f(b), '<', lambda: c)
    x if c else y      ->  af.if_exp(c, lambda: x, lambda: y)

Operands after the first are wrapped in lambdas so that, as in Python, they
are only evaluated when needed. A chained comparison is rewritten only when
its middle operands are names or constants (evaluating them twice is then
harmless); otherwise ``af.compare`` evaluates each operand once.
"""

from __future__ import annotations

import gast

from ..core.nodes import Transformer, clone
from ..core.templates import replace_expr
from .util import stamp


def _lambda(expr):
    return gast.Lambda(
        args=gast.arguments(args=[], posonlyargs=[], vararg=None, kwonlyargs=[],
                            kw_defaults=[], kwarg=None, defaults=[]),
        body=expr)


_OP_NAMES = {gast.Lt: "<", gast.LtE: "<=", gast.Gt: ">", gast.GtE: ">=", gast.Eq: "==",
             gast.NotEq: "!=", gast.Is: "is", gast.IsNot: "is not", gast.In: "in",
             gast.NotIn: "not in"}


class Logical(Transformer):
    def __init__(self, ctx):
        self.ctx = ctx

    def _call(self, op, first, rest, anchor):
        call = replace_expr("AF.OP(FIRST)", AF=self.ctx.af, FIRST=first)
        call.func.attr = op
        call.args += [_lambda(r) for r in rest]
        return stamp(call, anchor)

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        op = "and_" if isinstance(node.op, gast.And) else "or_"
        return self._call(op, node.values[0], node.values[1:], node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, gast.Not):
            return self._call("not_", node.operand, [], node)
        return node

    def visit_IfExp(self, node):
        self.generic_visit(node)
        return self._call("if_exp", node.test, [node.body, node.orelse], node)

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) < 2:
            return node
        middle = node.comparators[:-1]
        if not all(isinstance(m, (gast.Name, gast.Constant)) for m in middle):
            # A middle operand that must be evaluated once: af.compare evaluates
            # each operand at most once, left to right, as Python does.
            call = replace_expr("AF.compare(LEFT)", AF=self.ctx.af, LEFT=node.left)
            for op, right in zip(node.ops, node.comparators):
                call.args += [gast.Constant(value=_OP_NAMES[type(op)], kind=None), _lambda(right)]
            return stamp(call, node)
        parts = []
        left = node.left
        for op, right in zip(node.ops, node.comparators):
            part = gast.Compare(left=left, ops=[op], comparators=[right])
            gast.copy_location(part, node)
            part.af_placed = True
            parts.append(part)
            left = right

        parts = [parts[0]] + [clone(p) for p in parts[1:]]
        return self._call("and_", parts[0], parts[1:], node)
