"""Public entry points: convert, jit, to_source, do_not_convert.

The work behind them: ``_conversion`` (options, caches, transforming a function's
code), ``_wrappers`` (classes and library wrappers converted) and ``_jitted`` (what
``jit`` returns, and when it wraps ``jax.jit``'s function).
"""

from __future__ import annotations

import functools
import inspect
import types
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from . import _conversion, _pickling, _registry
from .core.libraries import is_library_value
from .core.loading import make_function
from .core.parsing import SourceUnavailable
from .errors import ConversionError
from ._conversion import (_CONVERTED, _DO_NOT_CONVERT, _convert_code, _debug_loops, _fallback, _lock, _options,
                          _source, _transform_options)
from ._wrappers import _convert_class, _through_wrapper, is_jax_wrapper
from ._arguments import changed_parameters
from ._jitted import _Jitted, _generator_error, _may_raise, _teaching


if TYPE_CHECKING:
    import jax.stages

# Whatever ``convert``/``do_not_convert`` are given (a function, a method, a
# ``functools.partial``, a callable object, a class) comes back as the same kind.
F = TypeVar("F", bound=Callable[..., Any])


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
    * ``lanes="auto"`` (the default), ``"lockstep"`` or ``"flat"``: how the lanes of a
      ``jax.vmap`` run a loop with a data-dependent trip count. ``"lockstep"`` (also
      spelled ``"nested"``): every lane steps until the slowest is done, the others
      masked. ``"flat"``: a loop whose body holds one such loop runs as one flat loop
      in which each lane advances through its own inner loop. ``"auto"``: a nest
      starts in lockstep and moves on in the flat form, in the compiled program,
      once its lanes are seen to wait for each other; a batch of at least
      ``runtime.loops.lane_loop.COMPACT_MIN`` lanes (nested ``vmap``s count
      together) runs each step on the lanes still running only, moved to the front
      (see ``runtime/loops/flat_lanes.py`` and ``lane_loop.py``). A loop that prints
      or checks stays in lockstep.
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
    if inspect.isfunction(fn):  # a user method made to dispatch (runtime.python.through): the method
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
        cached = _conversion._by_function.get(fn)
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
            _conversion._by_function.setdefault(fn, {})[options] = (fn.__code__, fn)
            return fn
        from . import runtime
        new = make_function(code, fn, runtime.bound(options), alias)
        functools.update_wrapper(new, fn)
        setattr(new, _CONVERTED, True)
        # `pickle` by reference, even kept under another name than `fn` (_pickling)
        new.__module__ = _pickling.module_name(fn, options) or new.__module__
        _conversion._by_function.setdefault(fn, {})[options] = (fn.__code__, new)
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
    # (`effects.checks.fast_checks`): JAX's C++ dispatch reports a failed one as a
    # `ValueError` only the wrapper tells from the user's own; elsewhere (a check
    # `_may_raise` did not foresee) a check stays an ordered effect, whose failure
    # JAX reports as its `JaxRuntimeError`.
    # Lists and dicts its code changes in place, written back after each call (see
    # `_arguments`); where none is, a change made through a helper is autoflow's error.
    writes = bool(changed_parameters(fn))
    wrap = writes or max_loop_iterations is not None or _may_raise(fn) \
        or debug_loops is not None
    jitted = jax.jit(_teaching(converted, wrap, writes), **jit_kwargs)
    return _Jitted(jitted, converted, writes) if wrap else jitted


_pickling.install()

# What the runtime calls back (see _registry: no import circle between the two).
_registry.convert, _registry.converted_as, _registry.is_jax_wrapper = (
    convert, _conversion._by_function, is_jax_wrapper)
