"""What code can reach: module state, closure cells, objects held.

``module_state`` finds the module state functions and the user code running can
reach (what a staged statement must not change); ``closure_cells``,
``entry_values`` and ``reachable`` what existed before a statement and what its
values hold (what it may carry).
"""

from __future__ import annotations

from ..common.values import DICTS

import functools
import sys
import types

from ...core.caches import Bounded
from ...core.libraries import is_library_file
from ...core.origin import _is_internal


_ATOMS = (int, float, complex, str, bytes, bool, type(None), types.ModuleType)
_ABSENT = object()
_code_names = Bounded(4096)  # code object -> the global names it reads


def _names_of(code):
    """The global names ``code`` (and the code nested in it) reads."""
    hit = _code_names.get(code)
    if hit is None:
        hit = set(code.co_names)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                hit |= _names_of(const)
        hit = _code_names[code] = frozenset(hit)
    return hit


def _user_class(cls):
    module = sys.modules.get(getattr(cls, "__module__", None) or "")
    filename = getattr(module, "__file__", None)
    return filename is not None and not is_library_file(filename)


def module_state(fns, frame=None, limit=20_000):
    """``{id: label}`` of the module state that functions ``fns`` and the user
    code running from ``frame`` outwards can reach: the globals their code
    reads (and the code of the user functions and classes found there,
    transitively), what those hold (three levels of items and attributes down),
    and the closure cells (and contents) of the functions found there. The
    closures of ``fns`` themselves are not module state."""
    out = {}
    funcs = [(f, False) for f in fns]  # (function, found in module state?)
    seen_fns = set()
    values = []
    while frame is not None:
        code = frame.f_code
        if not _is_internal(code.co_filename) and not is_library_file(code.co_filename):
            namespace = frame.f_globals
            for name in _names_of(code):
                value = namespace.get(name, _ABSENT)
                if value is not _ABSENT:
                    values.append((value, name, 0))
        frame = frame.f_back
    while funcs or values:
        while funcs:
            fn, owned = funcs.pop()
            fn = getattr(fn, "__func__", fn)
            code = getattr(fn, "__code__", None)
            if not isinstance(code, types.CodeType) or id(fn) in seen_fns \
                    or len(seen_fns) > 2000:
                continue
            seen_fns.add(id(fn))
            for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
                if owned:
                    out[id(cell)] = name
                try:
                    value = cell.cell_contents
                except ValueError:
                    continue
                if owned:
                    values.append((value, name, 0))
                elif callable(value):
                    funcs.append((value, False))
            if is_library_file(code.co_filename):
                continue
            namespace = getattr(fn, "__globals__", None) or {}
            for name in _names_of(code):
                value = namespace.get(name, _ABSENT)
                if value is not _ABSENT:
                    values.append((value, name, 0))
            wrapped = getattr(fn, "__wrapped__", None)
            if wrapped is not None:
                funcs.append((wrapped, owned))
        while values and len(out) < limit:
            value, label, depth = values.pop()
            if isinstance(value, _ATOMS) or id(value) in out:
                continue
            if isinstance(value, type):
                if _user_class(value):
                    funcs.extend((getattr(v, "__func__", v), True) for v in vars(value).values()
                                 if isinstance(v, (types.FunctionType, staticmethod,
                                                   classmethod)))
                continue
            out[id(value)] = label
            if isinstance(value, (types.FunctionType, types.MethodType)):
                funcs.append((value, True))
                continue
            if depth >= 3:
                continue
            if type(value) in (list, tuple):
                values.extend((v, f"{label}[{i}]", depth + 1) for i, v in enumerate(value))
            elif type(value) in DICTS:
                values.extend((v, f"{label}[{k!r}]", depth + 1) for k, v in value.items())
            elif type(value) is types.SimpleNamespace or _user_class(type(value)):
                d = getattr(value, "__dict__", None)
                if isinstance(d, dict):
                    values.extend((v, f"{label}.{k}", depth + 1) for k, v in d.items())
                values.append((type(value), label, depth + 1))
    return out


def names_of(names, values):
    """``{id(value): name}`` for the statement's variables (``names``) and the
    closure variables of its functions."""
    out = {}
    if names and len(names) == len(values):
        for n, v in zip(names, values):
            out.setdefault(id(v), n)
    return out


def entry_values(fns, values):
    """What a staged statement sees from outside as it starts: ``values`` and
    the closure variables of ``fns`` (taken now: tracing rebinds cells)."""
    # (the functions these close over, too: taken now as well)
    return list(values) + [v for _, _, v in closure_cells(fns, 2) if v is not EMPTY]


EMPTY = object()  # the value ``closure_cells`` gives for a cell not assigned yet


def closure_cells(fns, depth, partials=False):
    """``(name, cell, value)`` for each closure cell of the functions ``fns``
    and of the functions those cells hold, ``depth`` closures down, level by
    level, each function once. ``name``: the free variable's name (None where
    the function has no code); ``value``: the cell's contents, ``EMPTY`` where
    it is not assigned yet. With ``partials``, a ``functools.partial`` stands
    for the function it wraps."""
    seen = set()
    fns = list(fns)
    for _ in range(depth + 1):
        more = []
        for fn in fns:
            fn = _unwalked(fn, seen, partials)
            if fn is None:
                continue
            code = getattr(fn, "__code__", None)
            names = code.co_freevars if code is not None else ()
            for i, cell in enumerate(getattr(fn, "__closure__", None) or ()):
                try:
                    value = cell.cell_contents
                except ValueError:
                    value = EMPTY
                yield (names[i] if i < len(names) else None), cell, value
                if value is not EMPTY and callable(value) and (
                        getattr(value, "__closure__", None)
                        or partials and isinstance(value, functools.partial)):
                    more.append(value)
        fns = more


def _unwalked(fn, seen, partials):
    """``fn`` (with ``partials``, the function a ``functools.partial`` wraps), noted
    in ``seen``; None when it was walked already."""
    while id(fn) not in seen:
        seen.add(id(fn))
        if not (partials and isinstance(fn, functools.partial)):
            return fn
        fn = fn.func
    return None


_FUNCTIONS = (types.FunctionType, types.MethodType, types.BuiltinFunctionType,
              functools.partial)


def reachable(todo):
    """Ids of the objects reachable from ``todo`` (``entry_values``): what they
    hold, three levels of attributes, items and closures down."""
    seen = set()
    for _ in range(4):
        nxt = []
        for v in todo:
            if id(v) in seen or isinstance(v, (int, float, str, bytes, bool, type(None),
                                                 types.ModuleType, type)):
                continue
            seen.add(id(v))
            if type(v) in (list, tuple):
                nxt.extend(v)
            elif type(v) in DICTS:
                nxt.extend(v.values())
            elif isinstance(v, _FUNCTIONS):
                continue  # closures were taken at entry (tracing rebinds cells)
            else:  # (an object, a callable one too: an NNX or Equinox module)
                d = getattr(v, "__dict__", None)
                if isinstance(d, dict):
                    nxt.extend(d.values())
        todo = nxt
    return seen


def left_traced(fn):
    """At the end of tracing ``fn`` for ``autoflow.jit``: an attribute of an object of the
    user's that outlives the call (the object a method is bound to, one a closure or a
    ``functools.partial`` holds) left holding a traced value (``self.n = self.n + 1`` in a
    jitted method) is autoflow's error, not a tracer that fails later, far away."""
    import jax

    from ...core.origin import Site, message
    from ...errors import ConversionError
    from .. import jax as jx
    from ..common.values import Tracer

    holders, target = [], fn
    for _ in range(8):
        if isinstance(target, functools.partial):
            holders += [(v, "of an object passed to `functools.partial`") for v in
                        (*target.args, *target.keywords.values())]
            target = target.func
        elif getattr(target, "__self__", None) is not None \
                and not isinstance(target.__self__, types.ModuleType):
            holders.append((target.__self__, "of the object the method is bound to"))
            target = target.__func__
        elif getattr(target, "__wrapped__", None) is not None:  # (autoflow's own wrappers)
            target = target.__wrapped__
        else:
            break
    code = getattr(target, "__code__", None)
    holders += [(value, "of an object the function closes over")
                for _, _, value in closure_cells([target], 0) if value is not EMPTY]
    # the user's classes (class attributes: `type(self).total = ...`) and objects that
    # the function's module holds
    space = getattr(target, "__globals__", None) or {}
    holders += [(v, "of a class or an object its module holds") for v in list(space.values())
                if isinstance(v, type) and _user_class(v)
                or not isinstance(v, (type, types.ModuleType, types.FunctionType))
                and _user_class(type(v))]
    for obj, how in holders:
        if isinstance(obj, type):
            if not _user_class(obj):
                continue
        elif isinstance(obj, (types.ModuleType, types.FunctionType)) \
                or not _user_class(type(obj)):
            continue
        for attr, value in list(getattr(obj, "__dict__", {}).items()):
            if attr.startswith("__") or callable(value) or isinstance(value, (
                    property, staticmethod, classmethod)):
                continue
            try:
                leaves = jax.tree_util.tree_leaves(value)
            except Exception:  # noqa: BLE001 - not a pytree: nothing traced in it
                continue
            # (a tracer of this trace, or of one that has ended; one of a trace around
            # this one was there before the call)
            if any(isinstance(x, Tracer) and not jx.of_traces_around(x) for x in leaves):
                label = f"{(obj if isinstance(obj, type) else type(obj)).__name__}.{attr}"
                site = Site(code.co_filename, code.co_firstlineno, None) if code else None
                raise ConversionError(message(
                    site, f"`{label}` (an attribute {how}) holds a traced "
                    "value when the jitted function returns: the object outlives the call, "
                    "and a traced value is not valid after it (JAX would raise "
                    "`UnexpectedTracerError` where it is next used)",
                    f"Return the new value from the function and assign `{attr}` outside the "
                    "jitted call, or pass the object in as an argument (a pytree: "
                    "`jax.tree_util.register_dataclass`) and return it."))
