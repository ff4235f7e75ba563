"""Mutations as assignments: ``x[i] = v`` and ``ys.append(v)`` in loops.

Index assignment on arrays: ``x[i] = v`` -> ``x = af.setitem(x, i, v)``; into a
container held by ``x``: ``x[i][j] = v`` -> ``x = af.setitem_in(x, (i, j), v)``.

JAX arrays are immutable; ``af.setitem`` applies ``x.at[i].set(v)`` to them
and mutates Python lists, dicts and NumPy arrays in place as Python would.
Augmented forms pass the operator: ``x[i] += v`` ->
``x = af.setitem(x, i, v, '+')`` (``.at[i].add(v)`` on a JAX array).

``xs.sort(...)`` -> ``xs = af.sort(xs, ...)`` (a list of traced numbers sorts as
``sorted`` does, in place).

Inside a loop, ``ys.append(v)`` -> ``ys = af.append(ys, v)``: the list is
then a carried variable; a staged loop whose list grows each iteration runs
as Python when its trip count is concrete, and reports a clear error when
the loop cannot be unrolled.

Rewriting to an assignment of ``x`` makes ``x`` a variable the statement
modifies, so a loop or branch that updates an array carries it.
"""

from __future__ import annotations

import gast

from ..analysis.activity import bound_names, declared_nonlocal
from ..core.nodes import Transformer
from ..core.templates import replace
from .util import stamp

_OPS = {gast.Add: "+", gast.Sub: "-", gast.Mult: "*", gast.Div: "/", gast.FloorDiv: "//",
        gast.Mod: "%", gast.Pow: "**", gast.BitAnd: "&", gast.BitOr: "|", gast.BitXor: "^",
        gast.LShift: "<<", gast.RShift: ">>", gast.MatMult: "@"}


class IndexAssign(Transformer):
    """Only the function's own variables are rewritten: ``log[i] = v`` or
    ``log.append(v)`` on a global or closure list stays as written (an
    assignment would make ``log`` local), and changes the list in place."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.local = set()

    def _rewrite(self, target, value, op, anchor):
        if not isinstance(target, gast.Subscript):
            return None
        path = [target.slice]
        base = target.value
        while isinstance(base, gast.Subscript):  # `dp[i][j] = v`: a write into `dp`'s row
            path.insert(0, base.slice)
            base = base.value
        if not (isinstance(base, gast.Name) and base.id in self.local):
            return None
        name = base.id
        path = [_slices_to_calls(i) if isinstance(i, gast.Slice) or (isinstance(i, gast.Tuple) and any(
            isinstance(e, gast.Slice) for e in i.elts)) else i for i in path]
        # (`x[a:b]` as an expression: slices must be built with `slice(...)`.)
        if len(path) == 1:
            subs = dict(AF=self.ctx.af, X=name, INDEX=path[0], VALUE=value)
            template = "X = AF.setitem(X, INDEX, VALUE"
        else:
            subs = dict(AF=self.ctx.af, X=name, VALUE=value,
                        PATH=gast.Tuple(elts=path, ctx=gast.Load()))
            template = "X = AF.setitem_in(X, PATH, VALUE"
        if op is None:
            stmts = replace(template + ")", **subs)
        else:
            stmts = replace(template + ", OP)", OP=gast.Constant(value=op, kind=None), **subs)
        return stamp(stmts, anchor)

    def visit_Assign(self, node):
        if len(node.targets) == 1:
            new = self._rewrite(node.targets[0], node.value, None, node)
            if new is not None:
                return new
            new = self._unpack(node)
            if new is not None:
                return new
        return node

    def _unpack(self, node):
        """``xs[i], xs[j] = xs[j], xs[i]`` -> the values into temporaries first (Python
        evaluates the right side, then assigns left to right), then each target:
        ``value, value_1 = (xs[j], xs[i])``, ``xs = af.setitem(xs, i, value)``..."""
        target = node.targets[0]
        if not isinstance(target, (gast.Tuple, gast.List)) or any(
                isinstance(e, gast.Starred) for e in target.elts):
            return None
        probes = [self._rewrite(e, gast.Constant(value=None, kind=None), None, node)
                  for e in target.elts]
        if all(p is None for p in probes):
            return None
        names = [self.ctx.namer.unique("value") for _ in target.elts]
        temps = gast.Tuple(elts=[gast.Name(id=n, ctx=gast.Store(), annotation=None,
                                           type_comment=None) for n in names], ctx=gast.Store())
        out = [stamp(gast.Assign(targets=[temps], value=node.value, type_comment=None), node)]
        for elt, name in zip(target.elts, names):
            value = gast.Name(id=name, ctx=gast.Load(), annotation=None, type_comment=None)
            new = self._rewrite(elt, value, None, node)
            out += new if new is not None else [
                stamp(gast.Assign(targets=[elt], value=value, type_comment=None), node)]
        return out

    def visit_AugAssign(self, node):
        op = _OPS.get(type(node.op))
        if op is not None:
            new = self._rewrite(node.target, node.value, op, node)
            if new is not None:
                return new
        return node

    def visit_FunctionDef(self, node):
        saved, self.loop_depth = getattr(self, "loop_depth", 0), 0
        saved_local = self.local
        a = node.args
        params = {x.id for x in a.posonlyargs + a.args + a.kwonlyargs}
        params |= {x.id for x in (a.vararg, a.kwarg) if x is not None}
        self.local = (set(bound_names(node.body)) | params) - declared_nonlocal(node.body)
        self.generic_visit(node)
        self.loop_depth, self.local = saved, saved_local
        return node

    def _loop(self, node):
        self.loop_depth = getattr(self, "loop_depth", 0) + 1
        self.generic_visit(node)
        self.loop_depth -= 1
        return node

    visit_For = visit_While = _loop

    def visit_Expr(self, node):
        call = node.value
        if (isinstance(call, gast.Call) and isinstance(call.func, gast.Attribute)
                and call.func.attr == "sort" and isinstance(call.func.value, gast.Name)
                and call.func.value.id in self.local
                and not any(isinstance(a, gast.Starred) for a in call.args)):
            # `xs.sort()` -> `xs = af.sort(xs)`: a list of traced numbers is sorted as
            # `sorted` sorts it, in place, and a staged statement carries it
            name = call.func.value.id
            new = replace("X = AF.sort(X)", AF=self.ctx.af, X=name, at=node)
            new[0].value.args += call.args
            new[0].value.keywords = call.keywords
            return new
        if (getattr(self, "loop_depth", 0) and isinstance(call, gast.Call)
                and isinstance(call.func, gast.Attribute) and call.func.attr == "append"
                and isinstance(call.func.value, gast.Name) and call.func.value.id in self.local
                and len(call.args) == 1
                and not call.keywords):
            name = call.func.value.id
            return replace("X = AF.append(X, VALUE)", AF=self.ctx.af, X=name,
                           VALUE=call.args[0], at=node)
        return node


def _slices_to_calls(index):
    def conv(e):
        if isinstance(e, gast.Slice):
            parts = [p if p is not None else gast.Constant(value=None, kind=None)
                     for p in (e.lower, e.upper, e.step)]
            if e.step is None:
                parts = parts[:2]
            return gast.Call(func=gast.Name(id="slice", ctx=gast.Load(), annotation=None,
                                            type_comment=None), args=parts, keywords=[])
        return e

    if isinstance(index, gast.Tuple):
        return gast.Tuple(elts=[conv(e) for e in index.elts], ctx=gast.Load())
    return conv(index)
