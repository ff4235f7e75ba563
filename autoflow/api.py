"""Public entry points: convert, jit, to_source, do_not_convert."""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import os
import sys
import threading
import types
import warnings
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from . import _pickling, _registry
from .core.caches import Bounded
from .core.deep import paused_gc, run_deep
from .core.libraries import is_library_value
from .core.loading import compile_function, make_function
from .core.naming import Namer
from .core.origin import PACKAGE_DIR
from .core.parsing import SourceUnavailable, parse_function
from .errors import ConversionError, ConversionWarning
from .transforms import pipeline
from .transforms.context import Context

_DO_NOT_CONVERT = "__autoflow_do_not_convert__"
_CONVERTED = "__autoflow_converted__"

if TYPE_CHECKING:
    import jax.stages

# Whatever ``convert``/``do_not_convert`` are given (a function, a method, a
# ``functools.partial``, a callable object, a class) comes back as the same kind.
F = TypeVar("F", bound=Callable[..., Any])

_lock = threading.RLock()
# original function -> {options: (code, converted function)}
_by_function: weakref.WeakKeyDictionary[Any, dict[Any, Any]] = weakref.WeakKeyDictionary()
_by_code: dict[Any, Any] = Bounded(8192)  # (code object id, options, rebound builtins) -> _Converted
_warned: dict[Any, bool] = Bounded(1024)  # what a fallback warning named already


def _strict(strict):
    if strict is not None:
        return bool(strict)
    return os.environ.get("AUTOFLOW_STRICT", "") not in ("", "0")


_LANES = ("nested", "flat")
_REPORT_EVERY = 10000  # iterations between loop reports when `debug_loops=True`


def _lanes(lanes):
    """The ``lanes=`` option: ``"nested"`` or ``"flat"`` (None: the environment's)."""
    if lanes is None:
        return _ENVIRONMENT["lanes"]
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
    options, read once, here, when autoflow is imported: ``AUTOFLOW_LANES=flat``
    (``lanes="flat"``) and ``AUTOFLOW_DEBUG_LOOPS=1`` (``debug_loops=True``; a
    number larger than 1: the iterations between reports)."""
    every = environ.get("AUTOFLOW_DEBUG_LOOPS", "").strip()
    try:
        n = int(every or "0")
    except ValueError:  # (any other text turns the reports on)
        n = _REPORT_EVERY
    return {"lanes": "flat" if environ.get("AUTOFLOW_LANES", "") == "flat" else "nested",
            "debug_loops": None if every in ("", "0") else n if n > 1 else _REPORT_EVERY}


_ENVIRONMENT = _environment()


def do_not_convert(fn: F) -> F:
    """Mark ``fn`` so that autoflow never converts it (it runs as written).

    ```python
    @autoflow.do_not_convert
    def python_only(x):
        ...
    ```
    """
    try:
        setattr(fn, _DO_NOT_CONVERT, True)
    except AttributeError:
        pass
    return fn


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
            entry.source = run_deep(ast.unparse, tree)
    return entry.source


def _convert_code(fn, options):
    """``(code, alias)`` of ``fn`` converted: transformed, then compiled once."""
    entry = _transformed(fn, options)
    if entry.code is None:
        entry.code = compile_function(entry.tree, entry.filename, entry.original.co_freevars,
                                      entry.alias)
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


@overload
def convert(fn: F, *, strict: bool | None = None, recursive: bool = True,
            include: Iterable[str] = (), asserts: bool = True,
            max_loop_iterations: int | None = None, checkpoints: int | None = None,
            lanes: str | None = None, debug_loops: bool | int | None = None,
            debug: bool = False) -> F: ...
@overload
def convert(fn: None = None, *, strict: bool | None = None, recursive: bool = True,
            include: Iterable[str] = (), asserts: bool = True,
            max_loop_iterations: int | None = None, checkpoints: int | None = None,
            lanes: str | None = None, debug_loops: bool | int | None = None,
            debug: bool = False) -> Callable[[F], F]: ...
def convert(fn: Any = None, *, strict: bool | None = None, recursive: bool = True,
            include: Iterable[str] = (), asserts: bool = True,
            max_loop_iterations: int | None = None, checkpoints: int | None = None,
            lanes: str | None = None, debug_loops: bool | int | None = None,
            debug: bool = False) -> Any:
    """Return ``fn`` with its Python control flow converted (not jitted).

    The result runs ``if``/``while``/``for`` as Python on concrete values and
    as ``lax.cond``/``lax.while_loop``/``lax.fori_loop``... on traced ones, so
    it composes with ``jax.jit``, ``jax.grad`` and ``jax.vmap``:

    ```python
    f = autoflow.convert(f)
    jax.vmap(f)(xs)
    jax.grad(f)(x)
    ```

    Options:

    * ``strict`` (default: ``AUTOFLOW_STRICT=1`` in the environment): every
      fallback to unconverted code is a ``ConversionError`` instead of a
      ``ConversionWarning``.
    * ``recursive=False``: do not convert the user functions ``fn`` calls.
    * ``include``: module names whose functions are converted even though
      they are installed packages (library code is otherwise left alone).
    * ``asserts=False``: drop ``assert`` statements.
    * ``max_loop_iterations=N``: stage loops with a data-dependent trip count
      as a masked ``lax.scan`` of ``N`` steps, so ``jax.grad`` can
      differentiate them (a loop still running after ``N`` steps is an error
      at run time).
    * ``checkpoints=K`` (default 64): how many copies of a loop's carries
      ``jax.grad`` may keep when it differentiates a loop with a
      data-dependent trip count (the backward pass recomputes the rest from
      them: memory grows with ``K``, not with the trip count).
    * ``lanes="flat"`` (default ``"nested"``, or ``"flat"`` where the environment
      has ``AUTOFLOW_LANES=flat``): under ``jax.vmap``, a loop with a
      data-dependent trip count whose body holds one such loop runs as one flat
      loop in which each lane advances through its own inner loop, instead of
      every lane waiting for the slowest lane's inner loop at each outer
      iteration (faster where inner loops are long and of very different lengths
      per lane; slower where lanes hardly wait: see ``runtime/lane_machine.py``).
    * ``debug_loops=True`` (default: off, or on where the environment has
      ``AUTOFLOW_DEBUG_LOOPS=1``): each staged loop with a data-dependent trip
      count prints, every 10000 iterations while the compiled code runs, where it
      is and how many iterations it has done, and Ctrl-C stops it at the next
      report; ``debug_loops=N`` reports every ``N`` iterations.
    * ``debug``: print the source after each pass of the rewriter.

    The environment variables are read once, when autoflow is imported.
    Conversion is cached per function (code object, closure) and options.
    Applied to a class (``@autoflow.convert`` on ``class Model(eqx.Module)``), it
    converts the methods the class defines, in place, and returns the class.
    """
    if fn is None:
        return functools.partial(convert, strict=strict, recursive=recursive, include=include,
                                 asserts=asserts, max_loop_iterations=max_loop_iterations,
                                 checkpoints=checkpoints, lanes=lanes, debug_loops=debug_loops,
                                 debug=debug)
    options = _options(strict, recursive, include, asserts, debug, max_loop_iterations,
                       checkpoints, lanes, debug_loops)
    kw = dict(options)
    if inspect.isfunction(fn):  # a user method made to dispatch (runtime.through): the method
        fn = getattr(fn, "__autoflow_dispatch__", fn)
    if getattr(fn, _DO_NOT_CONVERT, False) or getattr(fn, _CONVERTED, False):
        return fn
    if isinstance(fn, functools.partial):
        return functools.partial(convert(fn.func, **kw), *fn.args, **fn.keywords)
    if inspect.ismethod(fn):
        return type(fn)(convert(fn.__func__, **kw), fn.__self__)
    if isinstance(fn, (staticmethod, classmethod)):
        return type(fn)(convert(fn.__func__, **kw))
    if isinstance(fn, type):
        return _convert_class(fn, kw)
    rebuilt = _through_wrapper(fn, kw)
    if rebuilt is not None:
        return rebuilt
    if not inspect.isfunction(fn):
        call = getattr(type(fn), "__call__", None)
        if callable(fn) and inspect.isfunction(call):
            view = _converted_view(fn, convert(call, **kw), options)
            if view is not None:
                return view
            # A bound method: its signature is the call the user makes (no `self`).
            return types.MethodType(convert(call, **kw), fn)
        return _fallback(fn, "it is not a Python function", kw["strict"])
    if inspect.isgeneratorfunction(fn) or inspect.iscoroutinefunction(fn) \
            or inspect.isasyncgenfunction(fn):
        return fn  # generators and coroutines run as they are
    with _lock:
        cached = _by_function.get(fn)
        if cached is not None:
            hit = cached.get(options)
            if hit is not None and hit[0] is fn.__code__:
                return hit[1]
        try:
            code, alias = _convert_code(fn, _transform_options(options))
        except SourceUnavailable as e:
            return _fallback(fn, str(e), kw["strict"])
        if kw["asserts"] and _uses_no_runtime(code, alias):
            # Nothing to convert (no control flow, no user calls): the original
            # runs exactly the same, without a second function object.
            _by_function.setdefault(fn, {})[options] = (fn.__code__, fn)
            return fn
        from . import runtime
        new = make_function(code, fn, runtime.bound(options), alias)
        functools.update_wrapper(new, fn)
        setattr(new, _CONVERTED, True)
        # `pickle` by reference, even kept under another name than `fn` (_pickling)
        new.__module__ = _pickling.module_name(fn, options) or new.__module__
        _by_function.setdefault(fn, {})[options] = (fn.__code__, new)
        return new


# class -> {options: its subclass whose `__call__` is converted}
_view_classes: weakref.WeakKeyDictionary[type, dict[Any, type]] = weakref.WeakKeyDictionary()


def _converted_view(obj, call, options):
    """``obj`` as an instance of a subclass of its class whose ``__call__`` is the
    converted ``call``, sharing ``obj``'s ``__dict__`` (the same attributes, the same
    NNX Variables): a module still, so ``nnx.jit``, ``nnx.grad``, ``eqx.filter_jit``
    take it as they take ``obj``, and what it writes lands in ``obj``. ``None`` when
    ``obj`` keeps no ``__dict__`` (``__slots__``) or its class refuses a subclass."""
    cls = type(obj)
    state = getattr(obj, "__dict__", None)
    if call is getattr(cls, "__call__", None) or not isinstance(state, dict) \
            or any(getattr(c, "__slots__", ()) not in ((), ("__weakref__",), ("__dict__",))
                   and c is not object for c in cls.__mro__ if "__slots__" in vars(c)):
        return None
    with _lock:
        sub = _view_classes.setdefault(cls, {}).get(options)
        if sub is None:
            try:
                sub = type(cls)(cls.__name__, (cls,), {
                    "__call__": call, "__module__": cls.__module__,
                    "__qualname__": cls.__qualname__, _CONVERTED: True,
                    "__reduce_ex__": _view_reduce, "__reduce__": _view_reduce})
            except Exception:  # noqa: BLE001 - a class that refuses subclasses
                return None
            sub.__autoflow_options__ = options
            _view_classes[cls][options] = sub
    try:
        view = object.__new__(sub)
        object.__setattr__(view, "__dict__", state)
    except (TypeError, AttributeError):
        return None
    return view


def _view_reduce(self, protocol=2):
    """Pickle a converted view as ``convert(<the object>, <options>)``."""
    cls = type(self).__mro__[1]
    obj = object.__new__(cls)
    object.__setattr__(obj, "__dict__", self.__dict__)
    return (_convert_with_options, (obj, type(self).__autoflow_options__))


def _convert_with_options(obj, options):
    return convert(obj, **dict(options))


def _convert_class(cls, kw):
    """Convert the methods a class defines (in place; the class stays the same
    object, so a pytree registration, an Equinox or Flax module stays one)."""
    def user_code(f):
        # Methods made by `dataclasses`/Equinox (`__init__`, `__eq__`...) come from
        # exec'd text, not the user's file: they are not the user's code.
        f = getattr(f, "__func__", f)
        code = getattr(f, "__code__", None)
        return code is not None and not code.co_filename.startswith("<") \
            and not is_library_value(f)

    for name, value in list(vars(cls).items()):
        value = getattr(value, "__autoflow_dispatch__", value)  # (runtime.through)
        if not (isinstance(value, property) or user_code(value)):
            continue
        if isinstance(value, property):
            new = property(*(convert(f, **kw) if f is not None else None
                             for f in (value.fget, value.fset, value.fdel)), value.__doc__)
        elif inspect.isfunction(value) or isinstance(value, (staticmethod, classmethod)):
            new = convert(value, **kw)
        else:
            continue
        if new is not value:
            setattr(cls, name, new)
    return cls


def _through_wrapper(fn, kw):
    """The same wrapper around the converted function, for a wrapper made by a
    library: JAX's ``custom_jvp``/``custom_vjp`` (their rules converted too) and
    any closure-based wrapper with ``__wrapped__`` (``jax.checkpoint``,
    ``functools.wraps`` decorators of libraries): the wrapper's own code and
    settings (remat policy, type checks) are kept, only the function it wraps
    is swapped. ``None`` when ``fn`` is not such a wrapper.
    """
    jax = sys.modules.get("jax")
    with _lock:
        cached = _by_function.get(fn) if _cacheable(fn) else None
        hit = cached.get(("wrapper", kw_key(kw))) if cached else None
    if hit is not None:
        return hit
    new = None
    if jax is not None and _jit_of_user_code(fn):
        # `jax.jit(fn)` made before autoflow saw it: the same jit of `fn` converted
        from .runtime.jax_internals import jit_options

        options = jit_options(fn)
        if options is None:
            return None
        converted = convert(fn.__wrapped__, **kw)
        if converted is fn.__wrapped__:
            return fn
        new = jax.jit(converted, **options)
    elif jax is not None and isinstance(fn, jax.custom_jvp):
        new = jax.custom_jvp(convert(fn.fun, **kw), nondiff_argnums=fn.nondiff_argnums)
        if fn.jvp is not None:
            new.defjvp(convert(fn.jvp, **kw), symbolic_zeros=fn.symbolic_zeros)
    elif jax is not None and isinstance(fn, jax.custom_vjp):
        new = jax.custom_vjp(convert(fn.fun, **kw), nondiff_argnums=fn.nondiff_argnums)
        if fn.fwd is not None:
            extra = {"optimize_remat": fn.optimize_remat} if hasattr(fn, "optimize_remat") else {}
            new.defvjp(convert(fn.fwd, **kw), convert(fn.bwd, **kw),
                       symbolic_zeros=fn.symbolic_zeros, **extra)
    elif inspect.isfunction(fn) and hasattr(fn, "__wrapped__") and (fn.__closure__ or fn.__kwdefaults__
                                                                 or fn.__defaults__) \
            and (is_library_value(fn) or fn.__code__.co_filename.startswith("<")):
        # (a wrapper whose code a library generated: `beartype` execs its checking
        # wrapper, and holds the function in a keyword default)
        inner = inspect.unwrap(fn)
        if inner is fn or not inspect.isfunction(inner):
            return None
        converted = convert(inner, **kw)
        if converted is inner:
            return fn
        new = _swap_in_closure(fn, inner, converted, depth=4, kw=kw)
    if new is None:
        return None
    if _cacheable(fn):
        with _lock:
            _by_function.setdefault(fn, {})[("wrapper", kw_key(kw))] = new
    return new


def _swap_in_closure(fn, old, new, depth, kw=None):
    """A copy of function ``fn`` whose closure holds ``new`` where it held ``old``,
    looking through the closures of the library functions it holds (``jax.checkpoint``
    wraps its remat function in another wrapper), and a ``jax.jit`` of ``old`` made
    again of ``new`` (``jax.checkpoint(jax.jit(f))``). ``None`` if ``old`` is not there."""
    if depth == 0 or not inspect.isfunction(fn):
        return None
    cells, found = list(fn.__closure__ or ()), False
    defaults = list(fn.__defaults__ or ())
    kwdefaults = dict(fn.__kwdefaults__ or {})
    for i, value in enumerate(defaults):
        if value is old:
            defaults[i], found = new, True
    for k, value in kwdefaults.items():
        if value is old:
            kwdefaults[k], found = new, True
    for i, c in enumerate(cells):
        value = _cell_value(c)
        if value is old:
            cells[i], found = types.CellType(new), True
        elif inspect.isfunction(value) and value is not fn and is_library_value(value):
            swapped = _swap_in_closure(value, old, new, depth - 1, kw)
            if swapped is not None:
                cells[i], found = types.CellType(swapped), True
        elif kw is not None and _jit_of_user_code(value) and inspect.unwrap(value) is old:
            swapped = _through_wrapper(value, kw)
            if swapped is not None and swapped is not value:
                cells[i], found = types.CellType(swapped), True
    if not found:
        return None
    out = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__,
                             tuple(defaults) if fn.__defaults__ is not None else None,
                             tuple(cells) if fn.__closure__ is not None else None)
    out.__kwdefaults__ = kwdefaults if fn.__kwdefaults__ is not None else None
    out.__dict__.update(fn.__dict__)
    for attr in ("__qualname__", "__doc__", "__module__"):
        setattr(out, attr, getattr(fn, attr))
    if getattr(fn, "__wrapped__", None) is old:
        out.__wrapped__ = new
    return out


def kw_key(kw):
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in kw.items()))


def _cacheable(obj):
    """Can ``obj`` key the weak cache (weak-referenceable and hashable)?"""
    if not (inspect.isfunction(obj) or is_jax_wrapper(obj)):
        return False
    try:
        weakref.ref(obj)
        hash(obj)
        return True
    except TypeError:
        return False


def _cell_value(cell):
    try:
        return cell.cell_contents
    except ValueError:
        return None


def is_jax_wrapper(f) -> bool:
    """Is ``f`` one of JAX's wrapper objects that ``convert`` sees through
    (``custom_jvp``, ``custom_vjp``, and ``jax.jit`` of a user function)?"""
    jax = sys.modules.get("jax")
    return jax is not None and (isinstance(f, (jax.custom_jvp, jax.custom_vjp))
                                or _jit_of_user_code(f))


def _jit_of_user_code(f) -> bool:
    """``jax.jit(fn)`` (at module level, say) of a function of the user's, possibly
    through library wrappers (``jax.jit(jax.checkpoint(fn))``)?"""
    if "jax" not in sys.modules or not callable(getattr(f, "__wrapped__", None)):
        return False
    from .runtime.jax_internals import is_jit_wrapper

    if not is_jit_wrapper(f):
        return False
    inner = inspect.unwrap(f)
    return inspect.isfunction(inner) and not is_library_value(inner)


def _uses_no_runtime(code, alias) -> bool:
    """Does no code in ``code`` (nested functions included) reach the runtime?"""
    if alias in code.co_freevars or alias in code.co_cellvars:
        return False
    return all(_uses_no_runtime(c, alias) for c in code.co_consts
               if isinstance(c, types.CodeType))


def to_source(fn: Callable[..., Any], *, recursive: bool = True, asserts: bool = True,
              debug: bool = False) -> str:
    """The converted source of ``fn`` as a string (what ``convert`` compiles)."""
    fn = getattr(fn, "__autoflow_dispatch__", fn)
    if not hasattr(fn, "__code__") or (hasattr(fn, "__wrapped__") and (
            is_library_value(fn) or fn.__code__.co_filename.startswith("<"))):
        fn = inspect.unwrap(fn)  # a library's wrapper (jax.checkpoint, jaxtyped): the user's code
    if inspect.ismethod(fn):
        fn = fn.__func__
    with _lock:
        try:
            options = _options(None, recursive, (), asserts, debug)
            source = _source(fn, _transform_options(options))
        except SourceUnavailable as e:
            raise ConversionError(f"cannot convert `{getattr(fn, '__qualname__', fn)}`: {e}") from None
    return source


@overload
def jit(fn: Callable[..., Any], *, strict: bool | None = None, recursive: bool = True,
        include: Iterable[str] = (), asserts: bool = True,
        max_loop_iterations: int | None = None, checkpoints: int | None = None,
        lanes: str | None = None, debug_loops: bool | int | None = None,
        **jit_kwargs: Any) -> jax.stages.Wrapped: ...
@overload
def jit(fn: None = None, *, strict: bool | None = None, recursive: bool = True,
        include: Iterable[str] = (), asserts: bool = True,
        max_loop_iterations: int | None = None, checkpoints: int | None = None,
        lanes: str | None = None, debug_loops: bool | int | None = None,
        **jit_kwargs: Any) -> Callable[[Callable[..., Any]], jax.stages.Wrapped]: ...
def jit(fn: Callable[..., Any] | None = None, *, strict: bool | None = None,
        recursive: bool = True, include: Iterable[str] = (), asserts: bool = True,
        max_loop_iterations: int | None = None, checkpoints: int | None = None,
        lanes: str | None = None, debug_loops: bool | int | None = None,
        **jit_kwargs: Any) -> Any:
    """``jax.jit(autoflow.convert(fn), **jit_kwargs)``.

    Takes ``convert``'s options (``strict``, ``recursive``, ``include``,
    ``asserts``, ``max_loop_iterations``, ``checkpoints``, ``lanes``,
    ``debug_loops``) and every keyword argument
    of ``jax.jit``, and returns what ``jax.jit``
    returns (so ``.lower()``, ``.trace()``, ``.compile()`` work). Use it bare
    or with arguments:

    ```python
    @autoflow.jit
    def collatz_steps(n):
        steps = 0
        while n != 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            steps += 1
        return steps

    @autoflow.jit(static_argnames=["n"])
    def power(x, n): ...
    ```
    """
    if fn is None:
        return functools.partial(jit, strict=strict, recursive=recursive, include=include,
                                 asserts=asserts, max_loop_iterations=max_loop_iterations,
                                 checkpoints=checkpoints, lanes=lanes, debug_loops=debug_loops,
                                 **jit_kwargs)
    import jax

    if inspect.isgeneratorfunction(inspect.unwrap(fn)) or inspect.isasyncgenfunction(fn):
        return _generator_error(fn)
    debug_loops = _debug_loops(debug_loops)
    converted = convert(fn, strict=strict, recursive=recursive, include=include,
                        asserts=asserts, max_loop_iterations=max_loop_iterations,
                        checkpoints=checkpoints, lanes=lanes, debug_loops=debug_loops or False)
    # A thin wrapper re-raises the user's exception from a staged `raise`/`assert`
    # or loop bound (and, on a JAX without checkpointed loops, turns JAX's
    # backward-pass error for a `while` under `jax.grad` into autoflow's); it
    # costs about a microsecond a call, so only code that can need it (see
    # `_may_raise`) gets it. Only there are checks tied to the results
    # (`later.fast_checks`): JAX's C++ dispatch reports a failed one as a
    # `ValueError` only the wrapper tells from the user's own; elsewhere (a check
    # `_may_raise` did not foresee) a check stays an ordered effect, whose failure
    # JAX reports as its `JaxRuntimeError`.
    wrap = max_loop_iterations is not None or _may_raise(fn) or debug_loops is not None
    jitted = jax.jit(_teaching(converted, wrap), **jit_kwargs)
    return _Jitted(jitted, converted) if wrap else jitted


def _generator_error(fn):
    """What ``autoflow.jit`` of a generator function gives: calling it raises
    autoflow's error at the ``def`` (a generator is no value ``jax.jit`` can return)."""
    from .core.origin import Site, message

    code = inspect.unwrap(fn).__code__
    name = getattr(fn, "__qualname__", code.co_name)

    @functools.wraps(fn)
    def refuse(*args, **kwargs):
        raise ConversionError(message(
            Site(code.co_filename, code.co_firstlineno, None),
            f"`{name}` is a generator function (it has `yield`): calling it makes a "
            "generator, which a jitted function cannot return",
            f"Jit the code that consumes it instead (`autoflow.jit` of a function that runs "
            f"`for v in {code.co_name}(...)` or `list({code.co_name}(...))`), or make "
            f"`{name}` return an array (`jnp.stack([...])`)."))

    return refuse


# id(converted function) -> its `teach.teaching` wrapper, held weakly: the wrapper
# holds the function, so the id cannot be reused while the entry exists.
_teachers: weakref.WeakValueDictionary[tuple, Any] = weakref.WeakValueDictionary()


def _teaching(fn, fast=False):
    """``fn`` re-issuing JAX's tracing errors in the user's terms (``runtime.teach``),
    with ``fast``, its run-time checks tied to its results (``later.fast_checks``); one
    wrapper per function, so ``jax.jit``'s cache (keyed by the function) is shared."""
    from .runtime.later import fast_checks
    from .runtime.teach import teaching

    hit = _teachers.get((id(fn), fast))
    if hit is None or inspect.unwrap(hit) is not fn:
        hit = teaching(fast_checks(fn) if fast else fn)
        _teachers[(id(fn), fast)] = hit
    return hit


def _may_raise(fn) -> bool:
    """Can a staged check fire in ``fn`` or the helpers it calls in its file (a
    ``raise``, ``assert`` or ``warn(...)`` in ``fn``, a read after a loop of a
    variable only the loop binds, or in a function or class of the same file
    that ``fn`` names, directly or through others it names; a ``range`` with a
    step anywhere in the file), or, on a JAX without
    checkpointed loops, does the file have a ``while`` or ``for ... range(`` loop
    (which ``jax.grad`` may then fail to differentiate)? When in doubt, yes."""
    import linecache

    fn = inspect.unwrap(getattr(fn, "__func__", fn))
    code = getattr(fn, "__code__", None) or getattr(getattr(type(fn), "__call__", None),
                                                    "__code__", None)
    if code is None:
        return True
    lines = linecache.getlines(code.co_filename)
    if not lines:
        return True
    if not _checkpointed_loops():
        if any(line.lstrip().startswith("while ") or line.lstrip().startswith("for ")
               and "range(" in line for line in lines):
            return True
    if any("range(" in line and line.count(",", line.index("range(")) >= 2 for line in lines):
        return True  # a `range` with a step: a traced step of 0 raises ValueError at run time
    if not any(line.lstrip().startswith(("raise", "assert", "while ", "for ", "if ")) or "warn(" in line
               or any(word in line for word in _CHECKED_CALLS) for line in lines):
        return False
    try:
        return _reaches_a_raise(code, lines)
    except Exception:  # noqa: BLE001 - unreadable: keep the wrapper
        return True


# filename -> (its ast, {name: [(top-level def or class, raises?)]})
_RAISES: dict[str, Any] = Bounded(256)


def _reaches_a_raise(code, lines) -> bool:
    import ast

    from .core.parsing import _find, module_ast

    tree = module_ast(code.co_filename, lines)
    if tree is None:
        return True
    hit = _RAISES.get(code.co_filename)
    if hit is None or hit[0] is not tree:
        tops: dict[str, list[Any]] = {}
        for stmt in tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stringy = _makes_strings(stmt)
                raises = any(_raises(n, stringy) for n in ast.walk(stmt))
                tops.setdefault(stmt.name, []).append((stmt, raises))
                if isinstance(stmt, ast.ClassDef):  # its methods, by their names too
                    for m in stmt.body:
                        if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                            tops.setdefault(m.name, []).append((stmt, raises))
        hit = _RAISES[code.co_filename] = (tree, tops)
    tops = hit[1]
    node = _find(tree.body, code.co_firstlineno, code.co_name)
    if node is None or isinstance(node, list):  # a lambda, or not found: every name it could
        return True                             # reach is unknown
    todo, seen = [node], set()
    while todo:
        n = todo.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if _zero_trip_read(n) or _table_read(n) or _loop_dict_key(n):
            return True
        stringy = _makes_strings(n)
        for sub in ast.walk(n):
            if _raises(sub, stringy):
                return True
            name = sub.id if isinstance(sub, ast.Name) else \
                sub.attr if isinstance(sub, ast.Attribute) else None
            for other, raises in tops.get(name or "", ()):
                if raises:
                    return True
                todo.append(other)
    return False


def _zero_trip_read(fn) -> bool:
    """Does a loop in ``fn`` bind a variable that code after the loop reads (or the
    body reads above where it binds it: the value of an earlier iteration), or an
    ``if`` on one of its paths only, and that nothing binds before it? (Such a read
    raises Python's ``UnboundLocalError`` when the compiled code runs and nothing
    bound it.)"""
    def names(node, ctx):
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}

    loops = [n for n in ast.walk(fn) if isinstance(n, (ast.While, ast.For, ast.If))]
    if not loops:
        return False
    args = {a.arg for a in ast.walk(fn) if isinstance(a, ast.arg)}
    for loop in loops:
        inside = set().union(set(), *(names(s, ast.Store) for s in loop.body))
        if isinstance(loop, ast.For):
            inside |= names(loop.target, ast.Store)
        elif isinstance(loop, ast.If):  # bound on one path only (an `if` can leave it unbound)
            inside ^= set().union(set(), *(names(s, ast.Store) for s in loop.orelse))
        before = args | {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)
                         and isinstance(n.ctx, ast.Store) and n.lineno < loop.lineno}
        end = loop.end_lineno or loop.lineno
        loads = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
        for name in inside - before:
            first = min((n.lineno for s in loop.body for n in ast.walk(s)
                         if isinstance(n, ast.Name) and n.id == name
                         and isinstance(n.ctx, ast.Store)), default=end)
            # read after the loop, or in the body above its first binding (an
            # earlier iteration's value)
            if any(n.id == name and (n.lineno > end or loop.lineno < n.lineno < first)
                   for n in loads):
                return True
    return False


def _table_read(fn) -> bool:
    """Does ``fn`` read or write a Python table at an index that may be traced (``T[i]``,
    ``T`` a global, a closure variable or a local only ever bound to a list or tuple
    display, a comprehension or a ``list``/``tuple``/``np.`` call; ``i`` not a constant):
    Python's ``IndexError`` when the compiled code runs with ``i`` out of range."""
    args = {a.arg for a in ast.walk(fn) if isinstance(a, ast.arg)}
    other = set(args)  # names bound to something else than a table
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign):
            table = isinstance(n.value, (ast.List, ast.Tuple, ast.ListComp, ast.BinOp)) or (
                isinstance(n.value, ast.Call) and (
                    getattr(n.value.func, "id", None) in ("list", "tuple")
                    or isinstance(n.value.func, ast.Attribute)))
            if not table:
                other.update(t.id for t in n.targets if isinstance(t, ast.Name))
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.For, ast.NamedExpr)):
            other.update(t.id for t in ast.walk(n.target) if isinstance(t, ast.Name))
    for n in ast.walk(fn):
        if isinstance(n, ast.Subscript) and isinstance(n.value, (ast.Name, ast.Subscript)) \
                and not any(isinstance(k, ast.Slice) for k in ast.walk(n.slice)) \
                and any(isinstance(k, ast.Name) for k in ast.walk(n.slice)):
            root: ast.expr = n.value
            while isinstance(root, ast.Subscript):
                root = root.value
            if isinstance(root, ast.Name) and root.id not in other:
                return True
    return False


def _loop_dict_key(fn) -> bool:
    """Does a loop in ``fn`` set a string key of a dict (``d["k"] = v``)? A read of it
    after a loop that ran no iteration is Python's ``KeyError`` at run time."""
    for loop in ast.walk(fn):
        if isinstance(loop, (ast.For, ast.While)):
            for n in ast.walk(loop):
                if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) \
                        and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
                    return True
    return False


# Calls whose traced forms check their arguments when the compiled code runs (Python's
# ValueError from `math.comb(-1, 2)`, `xs.index(v)`, `int("12-")`, `math.sqrt(-1.0)`...).
_MATH_CHECKED = ("sqrt", "log", "log2", "log10", "log1p", "exp", "expm1", "exp2", "sin", "cos",
                 "tan", "sinh", "cosh", "asin", "acos", "acosh", "atanh", "fmod", "pow",
                 "gamma", "lgamma", "floor", "ceil", "trunc")
_CHECKED_CALLS = ("isqrt(", "comb(", "perm(", "factorial(", "lcm(", ".index(", "int(", "math.",
                  "[") + tuple(f"{n}(" for n in _MATH_CHECKED)
_CHECKED_NAMES = frozenset({"isqrt", "comb", "perm", "factorial", "lcm", "index",
                            *_MATH_CHECKED})


_STRING_MAKERS = frozenset({"str", "repr", "format", "bin", "hex", "oct", "chr", "join"})


def _makes_strings(node) -> bool:
    """Does ``node`` make strings from values (an f-string, ``str(...)``, ``bin(...)``...),
    which an ``int(...)`` in it may parse?"""
    for n in ast.walk(node):
        if isinstance(n, ast.JoinedStr) or isinstance(n, ast.Call) and (
                getattr(n.func, "id", None) or getattr(n.func, "attr", None)) in _STRING_MAKERS:
            return True
    return False


def _raises(node, stringy=True) -> bool:
    """A ``raise``, an ``assert``, a ``warn(...)`` (an error where the filters say so), or a
    call whose traced form checks its arguments at run time (``_CHECKED_CALLS``; ``int``
    of a string, where the code around makes strings: ``stringy``)."""
    if isinstance(node, (ast.Raise, ast.Assert)):
        return True
    if isinstance(node, ast.Call):
        f = node.func
        name = getattr(f, "attr", None) or getattr(f, "id", None)
        if name == "int" and isinstance(f, ast.Name):
            return stringy and bool(node.args) and not isinstance(node.args[0], ast.Constant)
        if name in _MATH_CHECKED and isinstance(f, ast.Attribute):  # `math.sqrt`, not `jnp.sqrt`
            return isinstance(f.value, ast.Name) and f.value.id == "math"
        return name == "warn" or name in _CHECKED_NAMES
    return False


def _checkpointed_loops() -> bool:
    """Can ``jax.grad`` differentiate a staged data-dependent loop (``runtime.while_prim``)?
    (As far as is known now: the self-check runs when a loop is first staged.)"""
    from .runtime import jax_internals

    return jax_internals.primitives(check=False)


class _Jitted:
    """What ``autoflow.jit`` returns: ``jax.jit``'s function, whose attributes
    (``lower``, ``trace``, ``eval_shape``...) it passes through, and which
    re-raises a user's exception from a traced ``raise`` as itself.

    JAX reports an exception raised by a run-time check as ``JaxRuntimeError``
    with the user's exception at the end of its message; the user's own
    ``except ValueError`` expects the ``ValueError``.
    """

    __slots__ = ("_jitted", "_converted", "_inline", "__dict__", "__weakref__")

    def __init__(self, jitted, converted=None):
        self._jitted, self._converted = jitted, converted
        # (decided once: a call only pays for what this JAX can need)
        self._inline = converted is not None and not _checkpointed_loops()
        functools.update_wrapper(self, jitted)

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True  # noqa: F841 - pytest hides this frame
        if self._inline and _linearizing():
            # jax.grad around it, on a JAX without checkpointed loops: trace the
            # function inline, so that its loops are staged knowing they are
            # differentiated (a scan where one can be, autoflow's error otherwise).
            return self._converted(*args, **kwargs)
        try:
            return self._jitted(*args, **kwargs)
        except Exception as e:  # (JaxRuntimeError; a KeyboardInterrupt in a callback too)
            from .runtime.jax_internals import interrupted_in_callback, raised_in_callback
            from .runtime.raising import at_user_line, last_user_exception

            user = last_user_exception()
            if user is None and interrupted_in_callback(e):
                # Ctrl-C, delivered inside a callback (`debug_loops` reports)
                raise KeyboardInterrupt("interrupted while the compiled code ran") from None
            try:
                if user is None or not raised_in_callback(e, user):
                    raise
                raise at_user_line(user) from None
            finally:  # (the exception in flight has this frame's entry by now)
                err = sys.exc_info()[1]
                if err is not None:
                    err.__traceback__ = without_own_frames(err.__traceback__)

    def __getattr__(self, name):
        if name == "_jitted":  # not set yet (unpickling)
            raise AttributeError(name)
        return getattr(self._jitted, name)

    def __reduce__(self):
        return (_Jitted, (self._jitted, self._converted))

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def __repr__(self):
        return f"autoflow.jit({self._jitted!r})"


def without_own_frames(tb):
    """Traceback ``tb`` without the entries of autoflow's own files (as JAX leaves
    its own out): what the user sees of a run-time failure is their own code."""
    entries = []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(PACKAGE_DIR):
            entries.append(tb)
        tb = tb.tb_next
    out = None
    for entry in reversed(entries):
        out = types.TracebackType(out, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return out


def _linearizing() -> bool:
    """Is ``jax.grad``/``jax.vjp`` linearizing the caller?"""
    from .runtime.jax_internals import is_linearizing

    return is_linearizing()


_pickling.install()

# What the runtime calls back (see _registry: no import circle between the two).
_registry.convert, _registry.converted_as, _registry.is_jax_wrapper = (
    convert, _by_function, is_jax_wrapper)
