"""Calls, ``print`` and ``assert``.

* A call of a user-level callable, ``helper(x)`` or ``self.step(x)``, becomes
  ``af.call(helper, x)``: at run time the callee is converted too (lazily,
  once) unless it is library code; see ``runtime.calls``. Builtins that the
  function does not rebind, and calls on other attributes (``jnp.sin(x)``,
  ``x.sum()``), are left as written.
* ``print(...)`` becomes ``af.print(...)``: an ordinary print for concrete
  arguments, ``jax.debug.print`` (printed on every run) for traced ones.
* ``assert test, msg`` becomes ``af.assert_(test, msg)``: an ordinary assert
  when ``test`` is concrete, a check at run time when it is traced.
"""

from __future__ import annotations

import builtins

import gast

from ..core.templates import replace, replace_expr
from .util import stamp

_SELF_NAMES = ("self", "cls")


class Calls(gast.NodeTransformer):
    def __init__(self, ctx):
        self.ctx = ctx
        self.recursive = ctx.options.get("recursive", True)
        self.asserts = ctx.options.get("asserts", True)

    def _runtime_attr(self, attr, anchor):
        node = replace_expr("AF.attr", AF=self.ctx.af)
        node.attr = attr
        return stamp(node, anchor)

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        if isinstance(func, gast.Name):
            if func.id == "print" and self.ctx.builtin_available("print"):
                node.func = self._runtime_attr("print", func)
                return node
            if hasattr(builtins, func.id) and self.ctx.builtin_available(func.id):
                return node
            if func.id == self.ctx.af:
                return node
        elif not (isinstance(func, gast.Attribute) and isinstance(func.value, gast.Name)
                  and func.value.id in _SELF_NAMES):
            return node
        if not self.recursive:
            return node
        node.args = [func] + node.args
        node.func = self._runtime_attr("call", func)
        return node

    def visit_Assert(self, node):
        self.generic_visit(node)
        if not self.asserts:
            return None
        if node.msg is None:
            msg = gast.Constant(value=None, kind=None)
        elif isinstance(node.msg, gast.Constant):
            msg = node.msg
        else:
            msg = gast.Lambda(args=gast.arguments(args=[], posonlyargs=[], vararg=None,
                                                  kwonlyargs=[], kw_defaults=[], kwarg=None,
                                                  defaults=[]), body=node.msg)
        call = replace("AF.assert_(TEST, MSG)", AF=self.ctx.af, TEST=node.test, MSG=msg)
        return stamp(call, node)

    # Nested function and class definitions are converted with their parent:
    # visiting them is the default behaviour.
