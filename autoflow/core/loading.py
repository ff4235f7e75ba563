"""Compiling converted code into a function that shares the original's state.

The converted ``def`` is compiled inside a factory whose parameters are the
runtime alias and the original function's free variables::

    def __autoflow_factory__(af, helper, scale):
        def f(x): ...          # converted; reads helper, scale, af
        return f

Only the inner code object is used: it is bound to the original function's
globals (a global updated later is seen later) and to the original closure
cells (plus one new cell for the runtime), so the converted function sees
exactly the state the original sees.
"""

from __future__ import annotations

import ast
import re
import types
import weakref

FACTORY = "__autoflow_factory__"
INNER = "__autoflow_function__"


def _none_at(node):
    return ast.copy_location(ast.Constant(value=None), node)


def _strip_evaluated_parts(fn_node):
    """Defaults, annotations: evaluated by ``def``; taken from the original instead."""
    a = fn_node.args
    a.defaults = [_none_at(d) for d in a.defaults]
    a.kw_defaults = [None if d is None else _none_at(d) for d in a.kw_defaults]
    for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
        if arg is not None:
            arg.annotation = None
    fn_node.returns = None
    # PEP 695 (`def f[T](x: T)`): the type parameters only feed annotations,
    # which are taken from the original. A body that reads `T` gets it as a
    # free variable, from the original's closure like any other.
    if getattr(fn_node, "type_params", None):
        fn_node.type_params = []


def compile_function(fn_node, filename, freevars, alias, own=frozenset()):
    """Compile ``fn_node`` (an ``ast.FunctionDef``); return its code object.

    Its free variables are among ``freevars`` and ``alias``. ``own``: the names of the
    functions the user's own code defines in it (an ``if_true`` of code autoflow
    converted before, run again: not renamed as one the rewriter made).
    """
    _strip_evaluated_parts(fn_node)
    # Compiled under a name of its own: inside the factory, `def f` would bind
    # `f` there, and the function's own references to `f` (recursion,
    # `return f`) would become closure reads of the factory's variable
    # instead of the global the original reads.
    name = fn_node.name
    fn_node.name = INNER
    params = [alias] + [v for v in freevars if v != alias]
    factory = ast.FunctionDef(
        name=FACTORY,
        args=ast.arguments(args=[ast.arg(arg=p) for p in params], posonlyargs=[], vararg=None,
                           kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        body=[fn_node, ast.Return(value=ast.Name(id=fn_node.name, ctx=ast.Load()))],
        decorator_list=[], returns=None, type_comment=None, type_params=[])
    # Place the factory's own nodes at the ``def`` (the converted function
    # has all its positions already; a full fix_missing_locations walk
    # would cost as much as the compile).
    for node in (factory, *factory.args.args, *factory.body[1:], factory.body[1].value):
        ast.copy_location(node, fn_node)
    module = ast.Module(body=[factory], type_ignores=[])
    code = compile(module, filename, "exec", dont_inherit=True)
    factory_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    inner = next(c for c in factory_code.co_consts
                 if isinstance(c, types.CodeType) and c.co_name == INNER)
    fn_node.name = name
    return _renamed(inner, INNER, name, own=own)


# The functions the rewriter makes for branches and loop bodies (`if_true`,
# `loop_body_2`...). Compiled, they take the name of the user's function that
# holds them, so a traceback reads `in collatz`, not `in loop_body`; their
# code objects are kept here, so autoflow still tells them apart (`generated`).
_GENERATED_NAME = re.compile(r"^(if_true|if_false|loop_test|loop_body)(_\d+)?$")
_generated_codes: weakref.WeakSet = weakref.WeakSet()  # (a code object goes with its functions)
_converted_codes: weakref.WeakSet = weakref.WeakSet()  # every code object compiled here
_loop_bodies: weakref.WeakSet = weakref.WeakSet()  # those of loop bodies among them


def generated(code) -> bool:
    """Is ``code`` a function the rewriter made for a branch or a loop body?"""
    return code in _generated_codes


def loop_body(code) -> bool:
    """Is ``code`` a function the rewriter made for a loop's body?"""
    return code in _loop_bodies


def converted(code) -> bool:
    """Is ``code`` converted code (a converted function, or a function defined in one)?"""
    return code in _converted_codes


def _renamed(code, old, new, outer=None, own=frozenset()):
    """``code`` (and the code nested in it) with the function name ``old`` -> ``new``,
    and the functions made for branches and loop bodies named after the user's
    function that holds them (``outer``: its ``(name, qualname)``)."""
    qualname = getattr(code, "co_qualname", None)
    changes = {}
    if code.co_name == old:
        changes["co_name"] = new
    if qualname is not None:
        changes["co_qualname"] = qualname = qualname.replace(f"{FACTORY}.<locals>.{old}", new, 1)
    made = outer is not None and _GENERATED_NAME.match(code.co_name) \
        and code.co_name not in own
    if made:
        changes["co_name"] = outer[0]
        if qualname is not None:
            changes["co_qualname"] = outer[1]
    else:
        outer = (changes.get("co_name", code.co_name), qualname)
    changes["co_consts"] = tuple(_renamed(c, old, new, outer, own)
                                 if isinstance(c, types.CodeType) else c for c in code.co_consts)
    out = code.replace(**changes)
    _converted_codes.add(out)
    if made:
        _generated_codes.add(out)
        if code.co_name.startswith("loop_body"):
            _loop_bodies.add(out)
    return out


def make_function(code, original, runtime, alias):
    """A function running ``code`` with ``original``'s globals, closure and defaults."""
    orig_free = original.__code__.co_freevars
    cells = []
    for name in code.co_freevars:
        if name == alias and name not in orig_free:
            cells.append(types.CellType(runtime))
        else:
            cells.append(original.__closure__[orig_free.index(name)])
    new = types.FunctionType(code, original.__globals__, original.__name__,
                             original.__defaults__, tuple(cells) or None)
    new.__kwdefaults__ = original.__kwdefaults__
    new.__annotations__ = dict(getattr(original, "__annotations__", {}) or {})
    new.__qualname__ = original.__qualname__
    new.__doc__ = original.__doc__
    new.__module__ = original.__module__
    new.__dict__.update(original.__dict__)
    return new
