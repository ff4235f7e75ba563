"""Lists and dicts passed to ``autoflow.jit`` and changed in place: written back.

``jax.jit`` flattens a call's arguments and hands the function lists and dicts of its
own, built from the leaves: a change the function makes to one in place
(``out.append(v)``, ``d[k] = v``, ``xs += [v]``) would be lost, where Python makes it
in the caller's object. ``autoflow.jit`` of a function whose code changes a parameter
so (``changed_parameters``, read from its source) returns, beside its result, the
arguments its trace changed, and writes them into the caller's objects after the call
(``write_back``: the same list and dict objects, nested ones included, so aliases see
it; a dict keeps its keys' order). Any other function is watched while it is traced
(``watching``): a change made to an argument where the source did not show it (in a
helper it cannot read) is autoflow's error, before anything runs, not a change silently
lost; so is a change to a list a ``functools.partial`` holds (``_held``). At steady state
a call costs nothing more, but where it writes back: the write-back, and a look for one
list passed twice (``refuse_aliases``).
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


def _fresh():
    import gast

    return (gast.List, gast.Dict, gast.Set, gast.ListComp, gast.DictComp, gast.SetComp,
            gast.Constant, gast.BinOp)


_FRESH_CALLS = frozenset({"list", "dict", "set", "sorted", "tuple", "len", "range"})


def changed_parameters(fn, _seen=None) -> frozenset:
    """``_changed_parameters``, remembered per code object and globals (``autoflow.jit``
    of the same function made again costs no second reading; a ``functools.partial``:
    its function's)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    fn = inspect.unwrap(getattr(fn, "__func__", fn))
    code = getattr(fn, "__code__", None)
    hit = _read.get(id(code)) if _seen is None else None
    if hit is not None and hit[0] is code and hit[1] is getattr(fn, "__globals__", None):
        return hit[2]
    from .core.deep import run_deep

    out = run_deep(_changed_parameters, fn, _seen)  # (a 1,000-branch `elif` chain nests)
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

    nodes = walk(node)
    # The parameters each name may hold a part of (an alias `a = out`, a loop's item
    # `for row in rows`, `for l in lists`): a new container made from them is not one.
    held = {p: {p} for p in params}
    bindings = [(t, n.value) for n in nodes if isinstance(n, gast.Assign) for t in n.targets] \
        + [(n.target, n.iter) for n in nodes if isinstance(n, (gast.For, gast.comprehension))]
    for _ in range(3):
        for target, value in bindings:
            if isinstance(value, _fresh()) or isinstance(value, gast.Call) and isinstance(
                    value.func, gast.Name) and value.func.id in _FRESH_CALLS:
                continue
            reached = set().union(*(held.get(v.id, ()) for v in walk(value)
                                    if isinstance(v, gast.Name)))
            for t in walk(target):
                if isinstance(t, gast.Name) and reached:
                    held.setdefault(t.id, set()).update(reached)
    out = set()
    for n in nodes:
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
    return frozenset(set().union(*(held.get(n, ()) for n in out if n is not None)) & params)


def _holds_container(x) -> bool:
    if type(x) in (list, dict):
        return True
    return type(x) is tuple and any(_holds_container(v) for v in x)


class _Same:
    """In a value written back: the caller's item at this place stays as it is (the call
    left it so); an empty pytree node, so that ``jax.jit`` returns it as it is."""

    __slots__ = ()


_SAME = _Same()


class _Ordered:
    """A dict in a value written back, its keys in their order (``jax.jit`` would return
    a dict's keys sorted, and cannot sort keys of mixed types): a pytree whose static
    part is the keys."""

    __slots__ = ("keys", "values")

    def __init__(self, keys, values):
        self.keys, self.values = tuple(keys), list(values)


class _Python:
    """In a value written back: a Python number or string the call put there (``lst.append(
    1.0)``), a constant while tracing: an empty pytree node whose static part is the
    value, so that the caller gets the Python value back, not an array."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


_PYTHON_SCALARS = (bool, int, float, complex, str)
_registered: list = []


def _tree_util():
    """``jax.tree_util``, with ``_Same`` and ``_Ordered`` registered (imported when first
    traced: importing autoflow imports no JAX)."""
    import jax

    if not _registered:
        jax.tree_util.register_pytree_node(_Same, lambda s: ((), None),
                                           lambda aux, children: _SAME)
        jax.tree_util.register_pytree_node(_Ordered, lambda o: (o.values, o.keys),
                                           lambda keys, values: _Ordered(keys, values))
        jax.tree_util.register_pytree_node(_Python, lambda p: ((), p.value),
                                           lambda value, children: value)
        _registered.append(True)
    return jax.tree_util


def _walk(value, path, leaves, tree_util):
    """The structure of ``value`` (its lists', tuples' and dicts' layout, keys in their
    order: no key is sorted), its leaves put in ``leaves`` by path."""
    if type(value) is dict:
        return ("dict", tuple(value), tuple(_walk(v, path + (("key", k),), leaves, tree_util)
                                            for k, v in value.items()))
    if type(value) in (list, tuple):
        return (type(value).__name__, tuple(_walk(v, path + (("item", i),), leaves, tree_util)
                                            for i, v in enumerate(value)))
    pairs, tree = tree_util.tree_flatten_with_path(value)
    leaves.update((path + p, v) for p, v in pairs)
    return tree


def _snapshot(args, kwargs):
    """``{key: (structure, {leaf path: leaf})}`` of the arguments that hold a list or
    dict (key: the position, or the keyword; see ``_walk``)."""
    out = {}
    tree_util = _tree_util()
    for key, value in list(enumerate(args)) + list(kwargs.items()):
        if _holds_container(value):
            leaves: dict = {}  # (the leaves held: their ids stay theirs)
            out[key] = (_walk(value, (), leaves, tree_util), leaves)
    return out


def _changed(before, args, kwargs):
    """``{key: value}`` of the arguments ``before`` saw that are not as they were (as
    ``_returned`` gives it back)."""
    out = {}
    tree_util = _tree_util()
    for key, (was, leaves) in before.items():
        value = args[key] if isinstance(key, int) else kwargs[key]
        now: dict = {}
        if _walk(value, (), now, tree_util) != was or any(
                leaves.get(path) is not v for path, v in now.items()):
            out[key] = _returned(value, leaves, (), tree_util)
    return out


def _returned(value, leaves, path, tree_util):
    """``value`` as it goes back: its dicts ``_Ordered``, each leaf that is still the
    one at its place (``leaves``: path -> leaf before the call) ``_SAME``."""
    if type(value) is dict:
        return _Ordered(value, [_returned(v, leaves, path + (("key", k),), tree_util)
                                for k, v in value.items()])
    if type(value) in (list, tuple):
        return type(value)(_returned(v, leaves, path + (("item", i),), tree_util)
                           for i, v in enumerate(value))
    return tree_util.tree_map_with_path(
        lambda p, v: _SAME if leaves.get(path + p) is v else _Python(v)
        if type(v) in _PYTHON_SCALARS else v, value)


def watching(fn, write: bool):
    """``fn`` as ``jax.jit`` traces it for ``autoflow.jit``: with ``write``, it returns
    ``(result, {argument key: its value after the call})`` for the arguments it changed
    in place; without, such a change is autoflow's error."""

    held = _held(fn)

    @functools.wraps(fn)
    def traced(*args, **kwargs):
        before = _snapshot(args, kwargs)
        kept = _snapshot((), held) if held else {}
        saved = [_save(v) for v in held.values()]
        out = fn(*args, **kwargs)
        touched = _changed(kept, (), held) if kept else {}
        if touched:
            for s in saved:  # (the caller's objects as they were: no tracer left in them)
                _restore(s)
            raise _held_changed(fn, next(iter(touched)))
        changed = _changed(before, args, kwargs) if before else {}
        if write:
            return out, changed
        if changed:
            raise _lost(fn, next(iter(changed)))
        return out

    return traced


def _held(fn):
    """``{label: value}`` of the lists and dicts a ``functools.partial`` holds (in ``fn``,
    or around it): the function's state, which outlives a call."""
    out = {}
    while isinstance(fn, functools.partial):
        out.update((f"argument {i + 1}", v) for i, v in enumerate(fn.args) if _holds_container(v))
        out.update((k, v) for k, v in fn.keywords.items() if _holds_container(v))
        fn = fn.func
    return out


def _save(v):
    """What ``_restore`` needs to put the lists and dicts of ``v`` back as they are now."""
    if type(v) is list:
        return (v, [_save(x) for x in v])
    if type(v) is dict:
        return (v, [(k, _save(x)) for k, x in v.items()])
    if type(v) is tuple:
        return (v, [_save(x) for x in v])
    return (v, None)


def _restore(saved):
    obj, parts = saved
    if type(obj) is list:
        obj[:] = [_restore(p) for p in parts]
    elif type(obj) is dict:
        obj.clear()
        obj.update((k, _restore(p)) for k, p in parts)
    elif type(obj) is tuple:
        for p in parts:
            _restore(p)
    return obj


def _held_changed(fn, label):
    text = (f"`{label}` is a list or dict that the `functools.partial` given to "
            "`autoflow.jit` holds, and this call changes it in place: the compiled code "
            "cannot change it at each call as Python would (it is changed once, while "
            "tracing, with traced values)")
    return ConversionError(f"{text}.\nPass it as an argument instead (`autoflow.jit` writes "
                           "back the lists and dicts a call changes), or return the new "
                           "value.")


def _lost(fn, key):
    from .core.origin import Site, message

    target = inspect.unwrap(fn)
    code = getattr(target, "__code__", None)
    name = getattr(target, "__qualname__", "the function")
    label = _label(fn, key)
    site = Site(code.co_filename, code.co_firstlineno, None) if code is not None else None
    text = (f"{label} (an argument of `{name}`) is a list or dict that this call changes "
            "in place in a way its source does not show (through a function autoflow "
            "cannot read, or an object that holds it): `autoflow.jit` (as `jax.jit`) hands "
            f"`{name}` a copy of each list and dict argument, so the change would be lost "
            "where Python makes it in the caller's object")
    advice = (f"Return the changed value instead, or make the change in `{name}` itself "
              "(`autoflow.jit` writes back what the function's own code changes in place).")
    return ConversionError(message(site, text, advice) if site is not None
                           else f"{text}. {advice}")


def refuse_aliases(fn, args, kwargs):
    """autoflow's error where one list or dict is passed twice (``f(x, a, a)``, or one
    holds the other): ``jax.jit`` hands the function a copy of each, so a change made
    through one would not show through the other, as it does in Python."""
    import collections

    _refuse_numpy(fn, args, kwargs)
    seen: dict = {}
    todo = collections.deque(list(enumerate(args)) + list(kwargs.items()))
    while todo:
        key, value = todo.popleft()
        if type(value) in (list, dict):
            if id(value) in seen and seen[id(value)][1] is value:
                first = seen[id(value)][0]
                raise ConversionError(
                    f"{_label(fn, first)} and {_label(fn, key)} are the same "
                    f"{type(value).__name__} (or one holds the other), which the call "
                    "changes in place: `autoflow.jit` (as `jax.jit`) hands the function a "
                    "copy of each argument, so a change through one would not show through "
                    "the other as it does in Python.\nPass it once.")
            seen[id(value)] = (key, value)
            todo.extend((key, v) for v in (value.values() if type(value) is dict else value))
        elif type(value) is tuple:
            todo.extend((key, v) for v in value)


def _refuse_numpy(fn, args, kwargs):
    """autoflow's error where a NumPy array is passed for a parameter the function changes
    in place (``a[j], a[j + 1] = a[j + 1], a[j]``): under ``jit`` it is an immutable copy,
    whose changes make new arrays in the function, and the caller's array would be left
    as it was (Python changes it)."""
    import sys

    np = sys.modules.get("numpy")
    if np is None:
        return
    arrays = [(k, v) for k, v in list(enumerate(args)) + list(kwargs.items())
              if type(v) is np.ndarray]  # (before reading the function: most calls have none)
    changed = changed_parameters(fn) if arrays else ()
    for key, _ in arrays:
        if _label(fn, key).strip("`") in changed:
            raise ConversionError(
                f"{_label(fn, key)} is a NumPy array, which the function changes in place: "
                "`autoflow.jit` (as `jax.jit`) hands the function an immutable copy, so the "
                "caller's array would stay as it was, where Python changes it.\nPass a list "
                "(`xs = a.tolist()`, then `f(xs)`: a list is written back), or return the "
                "array from the function and pass a JAX array (`a = np.asarray(f(jnp.asarray("
                "a)))`).")


def _label(fn, key):
    if isinstance(key, int):
        try:
            params = list(inspect.signature(inspect.unwrap(fn)).parameters)
            return f"`{params[key]}`" if key < len(params) else f"argument {key + 1}"
        except (TypeError, ValueError):
            return f"argument {key + 1}"
    return f"`{key}`"


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
        old[:] = kept + [_plain(n) for n in new[len(kept):]]
    elif type(old) is dict and type(new) is _Ordered:
        # (the keys it had keep their places, as Python keeps them: `jax.jit` handed the
        # function its dict with sorted keys; new ones follow in the order it added them)
        values = dict(zip(new.keys, new.values))
        items = [(k, _kept(v, values[k])) for k, v in old.items() if k in values]
        items += [(k, _plain(v)) for k, v in values.items() if k not in old]
        old.clear()
        old.update(items)
    elif type(old) is tuple and type(new) is tuple and len(old) == len(new):
        for o, n in zip(old, new):
            _into(o, n)


def _kept(old, new):
    if new is _SAME:
        return old
    if type(new) is _Python:  # (not unflattened by `jax.jit`: under `jax.disable_jit()`)
        return new.value
    if type(old) is list and type(new) is list or type(old) is dict and type(new) is _Ordered:
        _into(old, new)
        return old
    return _plain(new)


def _plain(new):
    """A new item as the caller gets it: its ``_Ordered`` dicts made dicts again."""
    if type(new) is _Ordered:
        return {k: _plain(v) for k, v in zip(new.keys, new.values)}
    if type(new) is _Python:
        return new.value
    if type(new) in (list, tuple):
        return type(new)(_plain(v) for v in new)
    return new
