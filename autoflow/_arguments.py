"""Lists and dicts passed to ``autoflow.jit`` and changed in place: written back.

``jax.jit`` flattens a call's arguments and hands the function lists and dicts of its
own, built from the leaves: a change the function makes to one in place
(``out.append(v)``, ``d[k] = v``, ``xs += [v]``) would be lost, where Python makes it
in the caller's object. ``autoflow.jit`` of a function whose code changes a parameter
so (``changed_parameters``, read from its source) returns, beside its result, the
arguments its trace changed, and writes them into the caller's objects after the call
(``write_back``: the same list and dict objects, nested ones included, so aliases see
it). Any other function is watched while it is traced (``watching``): a change made
to an argument where the source did not show it (in a helper it calls) is autoflow's
error, before anything runs, not a change silently lost. Neither costs a call anything
at steady state but the write-back itself.
"""

from __future__ import annotations

import functools
import inspect

from .errors import ConversionError

# Methods that change a list or dict in place.
MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update",
                      "setdefault", "popitem", "sort", "reverse", "__setitem__",
                      "__delitem__", "__iadd__"})


_read: dict = {}  # id(code) -> (code, its globals, changed_parameters of it)


def changed_parameters(fn, _seen=None) -> frozenset:
    """``_changed_parameters``, remembered per code object and globals (``autoflow.jit``
    of the same function made again costs no second reading)."""
    fn = inspect.unwrap(getattr(fn, "__func__", fn))
    code = getattr(fn, "__code__", None)
    hit = _read.get(id(code)) if _seen is None else None
    if hit is not None and hit[0] is code and hit[1] is getattr(fn, "__globals__", None):
        return hit[2]
    out = _changed_parameters(fn, _seen)
    if code is not None and _seen is None:
        if len(_read) > 512:
            _read.clear()
        _read[id(code)] = (code, getattr(fn, "__globals__", None), out)
    return out


def _changed_parameters(fn, _seen=None) -> frozenset:
    """The parameters of ``fn`` whose object its code (nested functions included) may
    change in place: a subscript assigned or deleted, ``+=`` of the name, a mutating
    method called on it, or passed to a function of the user's (named as a global) that
    changes the parameter it is passed to. Empty where the source cannot be read."""
    import gast

    from .core.libraries import is_library_file
    from .core.parsing import SourceUnavailable, parse_function
    from .transforms.util import param_names
    from .core.nodes import walk

    fn = inspect.unwrap(getattr(fn, "__func__", fn))
    seen = _seen if _seen is not None else set()
    seen.add(id(fn))
    try:
        node = parse_function(fn)[0]
    except (SourceUnavailable, OSError, TypeError, SyntaxError):
        return frozenset()
    params = set(param_names(node))
    space = getattr(fn, "__globals__", {})

    def passed_to_a_changer(call):
        target = space.get(call.func.id) if isinstance(call.func, gast.Name) else None
        code = getattr(target, "__code__", None)
        if code is None or id(target) in seen or is_library_file(code.co_filename):
            return ()
        names = code.co_varnames[:code.co_argcount]
        changed = changed_parameters(target, seen)
        return [a.id for a, p in zip(call.args, names)
                if isinstance(a, gast.Name) and p in changed]

    def root(n):
        while isinstance(n, (gast.Subscript, gast.Attribute)):
            n = n.value
        return n.id if isinstance(n, gast.Name) else None

    out = set()
    for n in walk(node):
        if isinstance(n, gast.Subscript) and isinstance(n.ctx, (gast.Store, gast.Del)):
            out.add(root(n.value))
        elif isinstance(n, gast.AugAssign) and isinstance(n.target, gast.Name):
            out.add(n.target.id)
        elif isinstance(n, gast.Call) and isinstance(n.func, gast.Attribute) \
                and n.func.attr in MUTATORS:
            out.add(root(n.func.value))
        elif isinstance(n, gast.Call) and any(isinstance(a, gast.Name) and a.id in params
                                              for a in n.args):
            out.update(passed_to_a_changer(n))
    return frozenset(out & params)


def _holds_container(x) -> bool:
    if type(x) in (list, dict):
        return True
    return type(x) is tuple and any(_holds_container(v) for v in x)


class _Same:
    """In a value written back: the caller's item at this place stays as it is (the call
    left it so); an empty pytree node, so that ``jax.jit`` returns it as it is."""

    __slots__ = ()


_SAME = _Same()
_registered: list = []


def _tree_util():
    """``jax.tree_util``, with ``_Same`` registered (imported when first traced: importing
    autoflow imports no JAX)."""
    import jax

    if not _registered:
        jax.tree_util.register_pytree_node(_Same, lambda s: ((), None),
                                           lambda aux, children: _SAME)
        _registered.append(True)
    return jax.tree_util


def _snapshot(args, kwargs):
    """``{key: (treedef, {leaf path: leaf})}`` of the arguments that hold a list or
    dict (key: the position, or the keyword)."""
    out = {}
    for key, value in list(enumerate(args)) + list(kwargs.items()):
        if _holds_container(value):
            pairs, tree = _tree_util().tree_flatten_with_path(value)
            out[key] = (tree, dict(pairs))  # (the leaves held: their ids stay theirs)
    return out


def _changed(before, args, kwargs):
    """``{key: value}`` of the arguments ``before`` saw that are not as they were, each
    leaf that is still the one it was at its place replaced by ``_SAME``."""
    out = {}
    for key, (was, leaves) in before.items():
        value = args[key] if isinstance(key, int) else kwargs[key]
        tree_util = _tree_util()
        pairs, tree = tree_util.tree_flatten_with_path(value)
        if tree != was or any(leaves.get(path) is not v for path, v in pairs):
            out[key] = tree_util.tree_unflatten(
                tree, [_SAME if leaves.get(path) is v else v for path, v in pairs])
    return out


def watching(fn, write: bool):
    """``fn`` as ``jax.jit`` traces it for ``autoflow.jit``: with ``write``, it returns
    ``(result, {argument key: its value after the call})`` for the arguments it changed
    in place; without, such a change is autoflow's error."""

    @functools.wraps(fn)
    def traced(*args, **kwargs):
        before = _snapshot(args, kwargs)
        out = fn(*args, **kwargs)
        changed = _changed(before, args, kwargs) if before else {}
        if write:
            return out, changed
        if changed:
            raise _lost(fn, next(iter(changed)))
        return out

    return traced


def _lost(fn, key):
    from .core.origin import Site, message

    target = inspect.unwrap(fn)
    code = getattr(target, "__code__", None)
    name = getattr(target, "__qualname__", "the function")
    if isinstance(key, int):
        try:
            params = list(inspect.signature(target).parameters)
            label = f"`{params[key]}`" if key < len(params) else f"argument {key + 1}"
        except (TypeError, ValueError):
            label = f"argument {key + 1}"
    else:
        label = f"`{key}`"
    site = Site(code.co_filename, code.co_firstlineno, None) if code is not None else None
    text = (f"{label} (an argument of `{name}`) is a list or dict that this call changes "
            "in place through a function it calls: `autoflow.jit` (as `jax.jit`) hands "
            f"`{name}` a copy of each list and dict argument, so the change would be lost "
            "where Python makes it in the caller's object")
    advice = (f"Return the changed value instead, or make the change in `{name}` itself "
              "(`autoflow.jit` writes back what the function's own code changes in place).")
    return ConversionError(message(site, text, advice) if site is not None
                           else f"{text}. {advice}")


def write_back(args, kwargs, changed):
    """Write each changed argument's value into the caller's object (``_into``)."""
    for key, value in changed.items():
        _into(args[key] if isinstance(key, int) else kwargs[key], value)


def _into(old, new):
    """Make the list or dict ``old`` hold ``new``'s items, in place; a list or dict in
    it that ``new`` holds at the same place (same type) keeps its identity and is filled
    the same way, and so does an item ``new`` marks ``_SAME``. A tuple (which cannot
    change) passes this on to its items."""
    if type(old) is list and type(new) is list:
        kept = [_kept(o, n) for o, n in zip(old, new)]
        old[:] = kept + new[len(kept):]
    elif type(old) is dict and type(new) is dict:
        items = [(k, _kept(old[k], v) if k in old else v) for k, v in new.items()]
        old.clear()
        old.update(items)
    elif type(old) is tuple and type(new) is tuple and len(old) == len(new):
        for o, n in zip(old, new):
            _into(o, n)


def _kept(old, new):
    if new is _SAME:
        return old
    if type(old) is type(new) and type(old) in (list, dict):
        _into(old, new)
        return old
    return new
