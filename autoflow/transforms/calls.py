"""Calls, ``print`` and ``assert``.

* A call of a user-level callable, ``helper(x)`` or ``self.step(x)``, becomes
  ``af.call(helper, x)``: at run time the callee is converted too (lazily,
  once) unless it is library code; see ``runtime.calls``. Builtins that the
  function does not rebind, and calls on other attributes (``jnp.sin(x)``,
  ``x.sum()``), are left as written.
* A function handed to a JAX transformation or ``lax`` loop,
  ``jax.vmap(step)``, ``lax.scan(body, ...)``, is wrapped as
  ``af.converted(step)``, so its own control flow is converted too.
* ``print(...)`` becomes ``af.print(...)``: an ordinary print for concrete
  arguments, ``jax.debug.print`` (printed on every run) for traced ones.
* ``assert test, msg`` becomes ``af.assert_(test, msg)``: an ordinary assert
  when ``test`` is concrete, a check at run time when it is traced.
"""

from __future__ import annotations

import builtins

import gast

from ..core.nodes import Transformer
from ..core.templates import replace, replace_expr
from .util import stamp

_SELF_NAMES = ("self", "cls")
# JAX functions that take user functions as arguments (matched by the called
# attribute's name: `jax.vmap`, `lax.scan`, `jax.lax.fori_loop`...).
_HIGHER_ORDER = frozenset({
    "vmap", "pmap", "grad", "value_and_grad", "jacfwd", "jacrev", "hessian", "jvp", "vjp",
    "linearize", "checkpoint", "remat", "scan", "fori_loop", "while_loop", "cond", "switch",
    "map", "associative_scan", "custom_jvp", "custom_vjp", "shard_map", "jit"})


class Calls(Transformer):
    def __init__(self, ctx):
        self.ctx = ctx
        self.recursive = ctx.options.get("recursive", True)
        self.asserts = ctx.options.get("asserts", True)

    def _runtime_attr(self, attr, anchor):
        node = replace_expr("AF.attr", AF=self.ctx.af)
        node.attr = attr
        return stamp(node, anchor)

    def _function_arg(self, arg):
        if isinstance(arg, (gast.List, gast.Tuple)):
            arg.elts = [self._function_arg(e) for e in arg.elts]
            return arg
        is_user_name = isinstance(arg, gast.Name) and not (
            hasattr(builtins, arg.id) and self.ctx.builtin_available(arg.id))
        is_method = (isinstance(arg, gast.Attribute) and isinstance(arg.value, gast.Name)
                     and arg.value.id in _SELF_NAMES)
        if is_user_name or is_method:
            wrapped = replace_expr("AF.converted(F)", AF=self.ctx.af, F=arg)
            return stamp(wrapped, arg)
        return arg

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        if (self.recursive and isinstance(func, gast.Attribute) and func.attr in _HIGHER_ORDER
                and isinstance(func.value, (gast.Name, gast.Attribute))):
            node.args = [self._function_arg(a) for a in node.args]
            return node
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
