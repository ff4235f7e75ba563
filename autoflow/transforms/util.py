"""Small helpers shared by the passes."""

from __future__ import annotations

import builtins

import gast

from ..core.methods import IN_PLACE_METHODS, STATEFUL_BUILTINS, VALUE_METHODS
from ..core.nodes import append_children, children, walk
from ..core.templates import place
from ..analysis.activity import BLOCK_FIELDS, SCOPES as _SCOPES, holds_blocks  # noqa: F401 - (transforms use them from here)
_LOOPS = (gast.For, gast.While, gast.AsyncFor)


def param_names(fn) -> list[str]:
    """The names of the parameters of ``fn`` (a ``def`` or ``lambda``), in order."""
    a = fn.args
    names = [x.id for x in a.posonlyargs + a.args + a.kwonlyargs]
    return names + [x.id for x in (a.vararg, a.kwarg) if x is not None]


def walk_local(node, stop_at_loops=False):
    """Walk ``node``'s subtree without entering nested scopes (or loops)."""
    todo = list(children(node))
    while todo:
        n = todo.pop()
        yield n
        if isinstance(n, _SCOPES):
            continue
        if stop_at_loops and isinstance(n, _LOOPS):
            continue
        append_children(n, todo)


def contains(node_or_list, types, stop_at_loops=False):
    nodes = node_or_list if isinstance(node_or_list, list) else [node_or_list]
    for node in nodes:
        if isinstance(node, types):
            return True
        if isinstance(node, _SCOPES):  # a nested def's `return` is its own
            continue
        for n in walk_local(node, stop_at_loops=stop_at_loops):
            if isinstance(n, types):
                return True
    return False


def append_blocks(node, out):
    """Append to ``out`` what ``node``'s statement-list fields hold: its
    statements, except clauses and match cases (nothing for an expression)."""
    d = node.__dict__
    for f in BLOCK_FIELDS:
        v = d.get(f)
        if v.__class__ is list:
            out.extend(v)


def contains_return(node_or_list):
    """``contains(node_or_list, gast.Return)``, looking only where a statement
    can be: in statement lists (an expression holds none outside lambdas,
    which are scopes of their own), not at every node of every expression."""
    nodes = node_or_list if isinstance(node_or_list, list) else [node_or_list]
    todo = []
    for node in nodes:
        if isinstance(node, gast.Return):
            return True
        if isinstance(node, _SCOPES):
            continue
        append_blocks(node, todo)
        while todo:
            n = todo.pop()
            if isinstance(n, gast.Return):
                return True
            if not isinstance(n, _SCOPES):
                append_blocks(n, todo)
    return False


def stamp(nodes, anchor):
    """Position template-made ``nodes`` at ``anchor``; user nodes keep theirs.

    Call on the template's output *before* splicing user code into it, or on
    nodes made purely from templates. (``replace(T, at=anchor, ...)`` places
    a template's output as it makes it.)
    """
    # Generated nodes are stamped when they are made, so the walk stops at
    # user nodes and at nodes already placed: it does not re-walk the user
    # code spliced into each level of generated functions.
    return place(nodes, anchor)


def marked_as_is(fn) -> bool:
    """Is def ``fn`` decorated ``@autoflow.do_not_convert`` (or ``@do_not_convert``)?"""
    for d in fn.decorator_list:
        target = d.func if isinstance(d, gast.Call) else d
        name = target.attr if isinstance(target, gast.Attribute) else getattr(target, "id", "")
        if name == "do_not_convert":
            return True
    return False


def is_generator(fn) -> bool:
    """Does function ``fn`` (a gast def) contain ``yield`` (its own, not a nested scope's)?"""
    return any(isinstance(n, (gast.Yield, gast.YieldFrom)) for n in walk_local(fn))


def pure_test(test, ctx, lambdas=False):
    """Does evaluating ``test`` only compute: it binds nothing, suspends nothing,
    and calls only library code and autoflow's vocabulary (no user function,
    whose call could print, raise or change state)? ``lambdas``: the thunks the
    ``logical`` pass makes are allowed."""
    for n in walk(test):
        if isinstance(n, (gast.NamedExpr, gast.Yield, gast.YieldFrom, gast.Await)) or (
                isinstance(n, gast.Lambda) and not lambdas):
            return False
        if isinstance(n, gast.Call):
            f = n.func
            if isinstance(f, gast.Attribute) and isinstance(f.value, gast.Name) \
                    and f.value.id == ctx.af:
                if f.attr in ("call", "converted", "print", "fstring"):
                    return False
                continue
            if isinstance(f, gast.Attribute) and f.attr in IN_PLACE_METHODS:
                return False  # `stack.pop()`
            if isinstance(f, gast.Attribute) and f.attr in VALUE_METHODS:
                continue  # `x.sum()`, `jnp.abs(d).max()`
            root = f
            while isinstance(root, gast.Attribute):
                root = root.value
            if not isinstance(root, gast.Name):
                return False
            if root is f and (f.id in STATEFUL_BUILTINS or not (
                    hasattr(builtins, f.id) and ctx.builtin_available(f.id))):
                return False
            if root is not f and root.id not in ctx.library_names:
                return False
    return True
