"""Reductions over a filtered comprehension, and ``operator.truth``.

A comprehension's ``if`` keeps or drops items, so on a traced test the
length of what it makes is unknown (``logical`` reports it). Reduced at once
by ``sum``/``any``/``all``/``max``/``min``/``len``, its items need no length:
the test becomes a mask. The reduction is handed each test with a thunk for
its item, in Python's order: for one ``for`` over a name, as a function of
the item (which the runtime maps over a traced array at once), else as a
generator of pairs::

    sum(x for x in xs if x > t)      ->  af.sum(af.filtered(lambda x: (x > t, lambda: x), xs))
    len([f(x) for x in xs if p(x)])  ->  af.len(af.filtered(lambda x: (p(x), lambda: f(x)), xs, True))
    sum(x * i for i, x in enumerate(xs) if x > t)
        ->  af.sum(af.filtered(((x > t, lambda: x * i) for i, x in enumerate(xs))))

(``True``: a list comprehension, whose items are all made before the
reduction starts, as Python makes the list.) Several ``if``s are joined with
``and``, which evaluates them as Python does. ``runtime.python.builtins`` keeps
an item whose test is concrete as Python does, and masks one whose test is
traced (``jnp.where``).

A comprehension without an ``if`` over one name (``sum(f(i) for i in range(n))``)
becomes ``AF.generated(lambda i: f(i), range(n), LISTED)``: Python's own generator
(or list), except over a ``range`` with a traced bound, whose items the reduction
folds in one staged loop.

Left as written: a comprehension with an ``if`` before its last ``for``
(it decides how often the later ``for`` runs), with ``:=``, ``await`` or
``yield``, or ``async``.

``operator.truth(x)`` (or ``truth(x)`` after ``from operator import truth``,
which ``calls`` made ``af.call(truth, x)``) becomes ``af.truth(operator.truth,
x)``: ``bool(x)`` when the callee is
``operator.truth`` (a traced boolean for a traced scalar, so ``while
operator.truth(p):`` stages like ``while p:``), the call as written otherwise.
"""

from __future__ import annotations

import gast

from ..core.nodes import Transformer, walk
from ..core.templates import replace_expr

REDUCERS = frozenset({"sum", "any", "all", "max", "min"})
_NOT_IN_THUNK = (gast.NamedExpr, gast.Yield, gast.YieldFrom, gast.Await)


class Reductions(Transformer):
    def __init__(self, ctx):
        self.ctx = ctx

    def _reducer(self, func):
        """``'sum'``... for ``af.sum`` (what ``calls`` made of the builtin), ``'len'``
        for the builtin ``len``; else None."""
        if isinstance(func, gast.Attribute) and isinstance(func.value, gast.Name) \
                and func.value.id == self.ctx.af and (func.attr in REDUCERS or func.attr == "len"):
            return func.attr
        if isinstance(func, gast.Name) and func.id == "len" \
                and self.ctx.builtin_available("len"):
            return "len"
        return None

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        args = node.args
        if isinstance(func, gast.Attribute) and func.attr == "call" \
                and isinstance(func.value, gast.Name) and func.value.id == self.ctx.af:
            func, args = args[0], args[1:]  # `af.call(truth, x)`: what `calls` made of `truth(x)`
        if (isinstance(func, gast.Attribute) and func.attr == "truth"
                or isinstance(func, gast.Name) and func.id == "truth") \
                and len(args) == 1 and not node.keywords \
                and not isinstance(args[0], gast.Starred):
            return replace_expr("AF.truth(F, X)", AF=self.ctx.af, F=func, X=args[0], at=node)
        kind = self._reducer(func)
        if kind is None or not node.args or isinstance(node.args[0], gast.Starred):
            return node
        comp = node.args[0]
        listed = isinstance(comp, gast.ListComp)
        if not (listed or kind != "len" and isinstance(comp, gast.GeneratorExp)):
            return node
        if kind == "len" and (len(node.args) != 1 or node.keywords):
            return node
        *outer, last = comp.generators
        if not last.ifs and not outer and kind != "len" and isinstance(last.target, gast.Name) \
                and not last.is_async and not any(isinstance(n, _NOT_IN_THUNK) for n in walk(comp)):
            # `sum(f(i) for i in range(n))`: Python's generator, or over a range with a
            # traced bound, items the reduction folds in one staged loop
            fn = replace_expr("lambda NAME: ELT", NAME=last.target.id, ELT=comp.elt, at=comp)
            node.args[0] = replace_expr("AF.generated(FN, XS, LISTED)", AF=self.ctx.af, FN=fn,
                                        XS=last.iter, LISTED=gast.Constant(value=listed, kind=None),
                                        at=comp)
            return node
        if not last.ifs or any(g.ifs or g.is_async for g in comp.generators[:-1]) \
                or last.is_async or any(isinstance(n, _NOT_IN_THUNK) for n in walk(comp)):
            return node
        if len(last.ifs) == 1:
            test = last.ifs[0]
        else:
            test = gast.BoolOp(op=gast.And(), values=list(last.ifs))
            gast.copy_location(test, last.ifs[0])
        last.ifs = []
        pair = replace_expr("(TEST, lambda: ELT)", TEST=test, ELT=comp.elt, at=comp.elt)
        if not outer and isinstance(last.target, gast.Name):
            # one `for name in xs`: a function of the item, which the runtime
            # can map over a traced array at once (`jax.vmap`) instead of unrolling
            items = replace_expr("lambda NAME: PAIR", NAME=last.target.id, PAIR=pair, at=comp)
            items = replace_expr("AF.filtered(ITEMS, XS)", AF=self.ctx.af, ITEMS=items,
                                 XS=last.iter, at=comp)
        else:
            gen = gast.GeneratorExp(elt=pair, generators=comp.generators)
            gast.copy_location(gen, comp)
            items = replace_expr("AF.filtered(GEN)", AF=self.ctx.af, GEN=gen, at=comp)
        if listed:
            items.args.append(replace_expr("True", at=comp))
            if len(items.args) == 2:
                items.args.insert(1, replace_expr("None", at=comp))
        filtered = items
        node.args[0] = filtered
        if kind == "len":
            node.func = replace_expr("AF.len", AF=self.ctx.af, at=func)
        return node
