"""Converting one function's code: the options, the caches, parsing and transforming.

``_options`` turns ``convert``'s keyword arguments into the hashable tuple every cache
is keyed by (``strict=``, ``lanes=`` and ``debug_loops=`` default from the environment,
read once when autoflow is imported: ``_environment``); ``_transformed`` parses and
transforms a function's code once per code object, options and globals (``_by_code``),
``_convert_code`` compiles it, and ``_source`` prints it; ``_by_function`` holds each
function's converted function. A function that cannot be converted runs as it is,
with a warning, or an error under ``strict`` (``_fallback``).
"""

from __future__ import annotations

import builtins
import os
import sys
import threading
import types
import warnings
import weakref
from typing import Any

from .core.caches import Bounded
from .core.deep import paused_gc, run_deep
from .core.libraries import is_library_value
from .core.loading import compile_function
from .core.naming import Namer
from .core.origin import PACKAGE_DIR
from .core.parsing import parse_function
from .core.unparse import unparse
from .errors import ConversionError, ConversionWarning
from .transforms import pipeline
from .transforms.context import Context


_DO_NOT_CONVERT = "__autoflow_do_not_convert__"
_CONVERTED = "__autoflow_converted__"


_lock = threading.RLock()
# original function -> {options: (code, converted function)}
_by_function: weakref.WeakKeyDictionary[Any, dict[Any, Any]] = weakref.WeakKeyDictionary()
_by_code: dict[Any, Any] = Bounded(8192)  # (code object id, options, rebound builtins) -> _Converted
_warned: dict[Any, bool] = Bounded(1024)  # what a fallback warning named already


def _strict(strict):
    if strict is not None:
        return bool(strict)
    return os.environ.get("AUTOFLOW_STRICT", "") not in ("", "0")


_LANES = ("auto", "lockstep", "flat")
_LANE_ALIASES = {"nested": "lockstep"}  # (the name "lockstep" had before issue 47)
_REPORT_EVERY = 10000  # iterations between loop reports when `debug_loops=True`


def _lanes(lanes):
    """The ``lanes=`` option: ``"auto"``, ``"lockstep"`` (also spelled ``"nested"``) or
    ``"flat"`` (None: ``"auto"``, or the deprecated ``AUTOFLOW_LANES``'s)."""
    if lanes is None:
        return _ENVIRONMENT["lanes"]
    lanes = _LANE_ALIASES.get(lanes, lanes)
    if lanes not in _LANES:
        raise ValueError(f"lanes={lanes!r}: expected one of {', '.join(map(repr, _LANES))}")
    return lanes


def _debug_loops(debug_loops):
    """The ``debug_loops=`` option as the iterations between two reports of a staged
    loop, or None for no reports (None given: the environment's)."""
    if debug_loops is None:
        return _ENVIRONMENT["debug_loops"]
    if isinstance(debug_loops, bool) or debug_loops in (0, 1):
        return _REPORT_EVERY if debug_loops else None
    if not isinstance(debug_loops, int) or debug_loops < 0:
        raise ValueError(f"debug_loops={debug_loops!r}: expected True, False or a number of "
                         "iterations")
    return int(debug_loops)


def _environment(environ=os.environ) -> dict[str, Any]:
    """The defaults that environment variables give ``convert``'s and ``jit``'s
    options, read once, here, when autoflow is imported: ``AUTOFLOW_DEBUG_LOOPS=1`` (``debug_loops=True``; a
    number larger than 1: the iterations between reports). ``AUTOFLOW_LANES`` (one of
    the values of ``lanes=``) is deprecated: the option is per program now; where it is
    set it still gives the default, with a ``DeprecationWarning``."""
    every = environ.get("AUTOFLOW_DEBUG_LOOPS", "").strip()
    try:
        n = int(every or "0")
    except ValueError:  # (any other text turns the reports on)
        n = _REPORT_EVERY
    lanes = environ.get("AUTOFLOW_LANES", "").strip()
    if lanes:
        warnings.warn("AUTOFLOW_LANES is deprecated: pass lanes=... to autoflow.jit/convert "
                      "(default \"auto\")", DeprecationWarning, stacklevel=2)
        lanes = _LANE_ALIASES.get(lanes, lanes)
    return {"lanes": lanes if lanes in _LANES else "auto",
            "debug_loops": None if every in ("", "0") else n if n > 1 else _REPORT_EVERY}


_ENVIRONMENT = _environment()


def _global_names(code):
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _global_kinds(fn):
    """``(builtins the module rebinds, names bound to library code, names bound
    to the user's code, names bound to modules, classes and functions)`` among
    the global and closure names ``fn`` uses."""
    rebound, library, user, modules = set(), set(), set(), set()
    namespace = fn.__globals__
    for n in _global_names(fn.__code__):
        if n in namespace:
            if hasattr(builtins, n):
                rebound.add(n)
            value = namespace[n]
            (library if is_library_value(value) else user).add(n)
            if isinstance(value, (types.ModuleType, type, types.FunctionType,
                                  types.BuiltinFunctionType)):
                modules.add(n)
    # Closure variables too (`np` imported in an enclosing function).
    for n, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            value = cell.cell_contents
        except ValueError:  # not assigned yet
            continue
        (library if is_library_value(value) else user).add(n)
        if isinstance(value, (types.ModuleType, type, types.FunctionType)):
            modules.add(n)
    return frozenset(rebound), frozenset(library), frozenset(user), frozenset(modules)


class _Converted:
    """One conversion of a code object: its tree until compiled, then its code;
    its source text once asked for (``to_source``: converting does not need it)."""

    __slots__ = ("original", "alias", "source", "tree", "filename", "code")

    def __init__(self, original, alias, tree, filename):
        self.original, self.alias, self.source = original, alias, None
        self.tree, self.filename, self.code = tree, filename, None


def _transformed(fn, options) -> _Converted:
    """Parse and transform ``fn``'s code; cached per code object.

    The key is the code object's identity (equal code objects may come from
    different files) and what ``fn``'s globals hold (the same code run with
    other globals may mean another ``range``, or a library module where a
    user's module was). Compiling is left to ``_convert_code``: ``to_source``
    needs only the text.
    """
    kinds = _global_kinds(fn)
    key = (id(fn.__code__), options, kinds)
    hit = _by_code.get(key)
    if hit is not None and hit.original is fn.__code__:
        return hit
    # (pausing the cyclic GC also makes conversion ~20% faster on small functions)
    with paused_gc():
        entry = _by_code[key] = run_deep(_transform_uncached, fn, options, kinds)
    return entry


def _transform_uncached(fn, options, kinds) -> _Converted:
    node, filename, _ = parse_function(fn)
    reserved = node.af_names | set(fn.__code__.co_freevars) | set(fn.__code__.co_names)
    namer = Namer(reserved)
    alias = namer.reusable("af")
    shadowed = frozenset(n for n in reserved if hasattr(builtins, n)
                         and (n in fn.__globals__ or n in fn.__code__.co_freevars
                              or n in fn.__code__.co_varnames))
    ctx = Context(namer=namer, af=alias, shadowed=shadowed, filename=filename,
                  options=dict(options), library_names=kinds[1], user_names=kinds[2],
                  module_names=kinds[3], free_names=frozenset(fn.__code__.co_freevars))
    pipeline.run(node, ctx)
    return _Converted(fn.__code__, alias, pipeline.to_ast(node), filename)


def _source(fn, options):
    """The converted source of ``fn`` (converted again if it was compiled already)."""
    entry = _transformed(fn, options)
    if entry.source is None:
        tree = entry.tree
        with paused_gc():
            if tree is None:  # compiled already: the tree is gone
                tree = run_deep(_transform_uncached, fn, options, _global_kinds(fn)).tree
            entry.source = run_deep(unparse, tree)
    return entry.source


def _own_functions(code):
    """The names of the functions ``code`` (a user function's) defines, at any depth."""
    names, todo = set(), [code]
    while todo:
        for c in todo.pop().co_consts:
            if isinstance(c, types.CodeType):
                names.add(c.co_name)
                todo.append(c)
    return frozenset(names)


def _convert_code(fn, options):
    """``(code, alias)`` of ``fn`` converted: transformed, then compiled once."""
    entry = _transformed(fn, options)
    if entry.code is None:
        entry.code = compile_function(entry.tree, entry.filename, entry.original.co_freevars,
                                      entry.alias, _own_functions(entry.original))
        entry.tree = None  # compiling strips parts of it; the code is what is kept
    return entry.code, entry.alias


def _stacklevel():
    """The ``warnings`` stack level of the innermost caller outside autoflow."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return level


def _fallback(fn, reason, strict):
    where = f"{fn.__code__.co_filename}:{fn.__code__.co_firstlineno}: " if hasattr(fn, "__code__") else ""
    text = (f"{where}autoflow cannot convert `{getattr(fn, '__qualname__', fn)}`: {reason}, "
            "so it runs unconverted (Python control flow on traced values in it will fail "
            "under jit).")
    if strict:
        raise ConversionError(text + " Strict mode makes this an error: define the function "
                              "in a file (a `def` autoflow can read), or mark it with "
                              "`autoflow.do_not_convert` to run it as it is.")
    if fn not in _warned:
        _warned[fn] = True
        warnings.warn(text + " Silence this with `autoflow.do_not_convert` on the function.",
                      ConversionWarning, stacklevel=_stacklevel())
    return fn


def _options(strict, recursive, include, asserts, debug, max_loop_iterations=None,
             checkpoints=None, lanes=None, debug_loops=None):
    return (("asserts", bool(asserts)),
            ("checkpoints", None if checkpoints is None else int(checkpoints)),
            ("debug", bool(debug)),
            ("debug_loops", _debug_loops(debug_loops)),
            ("include", tuple(include or ())),
            ("lanes", _lanes(lanes)),
            ("max_loop_iterations", None if max_loop_iterations is None
             else int(max_loop_iterations)),
            ("recursive", bool(recursive)), ("strict", _strict(strict)))


def _transform_options(options):
    """The options that change the generated code (the rest are run-time)."""
    return tuple(kv for kv in options if kv[0] in ("asserts", "debug", "recursive"))
