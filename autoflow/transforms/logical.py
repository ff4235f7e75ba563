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

A walrus (``:=``) in an operand that would go into a lambda would bind its
name in the lambda instead of the function. Such an expression stays Python;
for ``and``/``or``/``if-else`` the operands that decide are wrapped in
``af.python_operand``, which passes concrete values through and reports a
traced one (whose branches cannot both bind the name)::

    a and (y := f(x))  ->  af.python_operand(a, REASON) and (y := f(x))

The ``if`` of a comprehension (``[x for x in xs if x > 0]``) decides the
result's length, so it must be concrete: it goes through
``af.python_condition``, which reports a traced test at its line.
"""

from __future__ import annotations

import gast

from ..analysis.activity import target_names
from ..core.nodes import Transformer, clone
from ..core.templates import replace_expr
from .util import contains, stamp, walk_local


def walrus_targets_local(exprs):
    """Names bound by walruses in ``exprs`` outside nested lambdas, in order."""
    out = []
    for e in exprs:
        for n in [e, *walk_local(e)]:
            if isinstance(n, gast.NamedExpr):
                out += [t for t in target_names(n.target) if t not in out]
    return out


def _lambda(expr):
    return gast.Lambda(
        args=gast.arguments(args=[], posonlyargs=[], vararg=None, kwonlyargs=[],
                            kw_defaults=[], kwarg=None, defaults=[]),
        body=expr)


_OP_NAMES = {gast.Lt: "<", gast.LtE: "<=", gast.Gt: ">", gast.GtE: ">=", gast.Eq: "==",
             gast.NotEq: "!=", gast.Is: "is", gast.IsNot: "is not", gast.In: "in",
             gast.NotIn: "not in"}


_FILTER_REASON = ("a comprehension's `if` keeps or drops items, so the result's length would "
                  "depend on a traced value")
_FILTER_ADVICE = ("Keep every item and mask instead, as in `jnp.where(cond, x, 0)` (then sum), "
                  "or use a `for` loop, which autoflow converts.")


class Logical(Transformer):
    def __init__(self, ctx):
        self.ctx = ctx
        # Can an operand hold a walrus? Only the user's code makes them.
        inv = getattr(ctx, "inventory", None)
        self.walrus = inv is None or inv.has(gast.NamedExpr)

    def _call(self, op, first, rest, anchor):
        call = replace_expr("AF.OP(FIRST)", AF=self.ctx.af, FIRST=first, at=anchor)
        call.func.attr = op
        call.args += [stamp(_lambda(r), anchor) for r in rest]
        return call

    def _python_operand(self, operand, kind, walrus_in):
        names = ", ".join(f"`{n}`" for n in walrus_targets_local(walrus_in))
        where = "a branch" if kind == "if-else" else "a later operand"
        reason = (f"this `{kind}` stays Python: {where} assigns {names} with `:=`, "
                  "which a staged branch cannot do")
        return replace_expr("AF.python_operand(OPERAND, REASON)", AF=self.ctx.af,
                            OPERAND=operand, REASON=gast.Constant(value=reason, kind=None), at=operand)

    def visit_For(self, node):
        # `af_extra_test` (`not broke`): set by early_exits on a `for` with a break,
        # including the breaks it makes of returns (and caught raises) inside loops
        self.generic_visit(node)
        extra = node.__dict__.get("af_extra_test")
        if extra is not None:
            node.af_extra_test = self.visit(extra)
        return node

    visit_AsyncFor = visit_For

    def visit_comprehension(self, node):
        # A filter keeps or drops items: the result's length cannot depend on
        # a traced value, so each test must be concrete (and is reported if not).
        self.generic_visit(node)
        node.ifs = [replace_expr(
            "AF.python_condition(TEST, REASON, ADVICE)", AF=self.ctx.af, TEST=test,
            REASON=gast.Constant(value=_FILTER_REASON, kind=None),
            ADVICE=gast.Constant(value=_FILTER_ADVICE, kind=None), at=test) for test in node.ifs]
        return node

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        kind = "and" if isinstance(node.op, gast.And) else "or"
        walrus = [v for v in node.values[1:] if self.walrus and contains(v, gast.NamedExpr)]
        if walrus:
            node.values[:-1] = [self._python_operand(v, kind, walrus) for v in node.values[:-1]]
            return node
        return self._call(kind + "_", node.values[0], node.values[1:], node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, gast.Not):
            return self._call("not_", node.operand, [], node)
        return node

    def visit_IfExp(self, node):
        self.generic_visit(node)
        walrus = [v for v in (node.body, node.orelse) if self.walrus and contains(v, gast.NamedExpr)]
        if walrus:
            node.test = self._python_operand(node.test, "if-else", walrus)
            return node
        return self._call("if_exp", node.test, [node.body, node.orelse], node)

    def _membership(self, item, op, container, anchor):
        """``item in container`` -> ``AF.contains(item, container)``: with a traced
        operand Python's ``in`` needs the truth of each ``==`` (``x in (1, 2, 3)``)."""
        call = replace_expr("AF.contains(ITEM, CONTAINER)", AF=self.ctx.af, ITEM=item,
                            CONTAINER=container, at=anchor)
        if isinstance(op, gast.NotIn):
            call.args.append(gast.Constant(value=True, kind=None))
        return stamp(call, anchor)

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) == 1 and isinstance(node.ops[0], (gast.In, gast.NotIn)):
            return self._membership(node.left, node.ops[0], node.comparators[0], node)
        if len(node.ops) < 2 or self.walrus and any(contains(c, gast.NamedExpr)
                                                    for c in node.comparators):
            # (A walrus in a comparator stays in Python's own chained comparison.)
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
            if isinstance(op, (gast.In, gast.NotIn)):
                part = self._membership(left, op, right, node)
            else:
                part = gast.Compare(left=left, ops=[op], comparators=[right])
                gast.copy_location(part, node)
            part.af_placed = True
            parts.append(part)
            left = right

        parts = [parts[0]] + [clone(p) for p in parts[1:]]
        return self._call("and_", parts[0], parts[1:], node)
