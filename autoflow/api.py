"""Public entry points: convert, jit, to_source, do_not_convert."""

from __future__ import annotations

import builtins
import functools
import inspect
import os
import threading
import warnings
import weakref

from .core.loading import compile_function, make_function
from .core.naming import Namer, referenced_names
from .core.parsing import SourceUnavailable, parse_function
from .errors import ConversionError, ConversionWarning
from .transforms import pipeline
from .transforms.context import Context
from .transforms.util import mark_user

_DO_NOT_CONVERT = "__autoflow_do_not_convert__"
_CONVERTED = "__autoflow_converted__"

_lock = threading.RLock()
_by_function = weakref.WeakKeyDictionary()  # original function -> converted function
_by_code = {}  # (code object, options) -> (converted code, alias, source)
_warned = set()


def _strict(strict):
    if strict is not None:
        return bool(strict)
    return os.environ.get("AUTOFLOW_STRICT", "") not in ("", "0")


def do_not_convert(fn):
    """Mark ``fn`` so that autoflow never converts it (it runs as written).

    Example::

        @autoflow.do_not_convert
        def python_only(x):
            ...
    """
    try:
        setattr(fn, _DO_NOT_CONVERT, True)
    except AttributeError:
        pass
    return fn


def _convert_code(fn, options):
    """Parse, transform and compile ``fn``'s code; cached per code object."""
    key = (fn.__code__, options)
    hit = _by_code.get(key)
    if hit is not None:
        return hit
    node, filename, _ = parse_function(fn)
    mark_user(node)
    reserved = referenced_names(node) | set(fn.__code__.co_freevars) | set(fn.__code__.co_names)
    namer = Namer(reserved)
    alias = namer.reusable("af")
    shadowed = frozenset(n for n in reserved if hasattr(builtins, n)
                         and (n in fn.__globals__ or n in fn.__code__.co_freevars
                              or n in fn.__code__.co_varnames))
    ctx = Context(namer=namer, af=alias, shadowed=shadowed, filename=filename,
                  options=dict(options))
    pipeline.run(node, ctx)
    source = pipeline.to_source(node)
    code = compile_function(node, filename, fn.__code__.co_freevars, alias)
    _by_code[key] = hit = (code, alias, source)
    return hit


def _fallback(fn, reason, strict):
    where = f"{fn.__code__.co_filename}:{fn.__code__.co_firstlineno}" if hasattr(fn, "__code__") else ""
    text = (f"{where}: autoflow cannot convert `{getattr(fn, '__qualname__', fn)}`: {reason}. "
            "It runs unconverted, so Python control flow on traced values will fail under jit.")
    if strict:
        raise ConversionError(text + " (strict mode)")
    if fn not in _warned:
        _warned.add(fn)
        warnings.warn(text + " Silence this with `autoflow.do_not_convert` on the function.",
                      ConversionWarning, stacklevel=3)
    return fn


def convert(fn=None, *, strict=None, debug=False):
    """Return ``fn`` with its Python control flow converted (not jitted).

    The result runs ``if``/``while``/``for`` as Python on concrete values and
    as ``lax.cond``/``lax.while_loop``/``lax.scan``... on traced ones, so it
    composes with ``jax.jit``, ``jax.grad`` and ``jax.vmap``::

        f = autoflow.convert(f)
        jax.vmap(f)(xs)
        jax.grad(f)(x)

    Conversion is cached per function (code object and closure). ``strict``
    (or ``AUTOFLOW_STRICT=1``) turns fallback to unconverted code into a
    ``ConversionError``; ``debug`` prints the source after each pass.
    """
    if fn is None:
        return functools.partial(convert, strict=strict, debug=debug)
    strict = _strict(strict)
    if getattr(fn, _DO_NOT_CONVERT, False) or getattr(fn, _CONVERTED, False):
        return fn
    if isinstance(fn, functools.partial):
        return functools.partial(convert(fn.func, strict=strict, debug=debug),
                                 *fn.args, **fn.keywords)
    if inspect.ismethod(fn):
        return type(fn)(convert(fn.__func__, strict=strict, debug=debug), fn.__self__)
    if not inspect.isfunction(fn):
        if callable(fn) and inspect.ismethod(getattr(fn, "__call__", None)):
            return convert(fn.__call__, strict=strict, debug=debug)
        return _fallback(fn, "it is not a Python function", strict)
    if inspect.isgeneratorfunction(fn) or inspect.iscoroutinefunction(fn) \
            or inspect.isasyncgenfunction(fn):
        return fn  # generators and coroutines run as they are
    with _lock:
        cached = _by_function.get(fn)
        if cached is not None and cached[0] is fn.__code__ and cached[1] == (strict, debug):
            return cached[2]
        try:
            code, alias, _ = _convert_code(fn, (("debug", bool(debug)),))
        except SourceUnavailable as e:
            return _fallback(fn, str(e), strict)
        from . import runtime
        new = make_function(code, fn, runtime, alias)
        functools.update_wrapper(new, fn)
        setattr(new, _CONVERTED, True)
        _by_function[fn] = (fn.__code__, (strict, debug), new)
        return new


def to_source(fn, *, debug=False) -> str:
    """The converted source of ``fn`` as a string (what ``convert`` compiles)."""
    fn = inspect.unwrap(fn) if not hasattr(fn, "__code__") else fn
    if inspect.ismethod(fn):
        fn = fn.__func__
    with _lock:
        try:
            _, _, source = _convert_code(fn, (("debug", bool(debug)),))
        except SourceUnavailable as e:
            raise ConversionError(f"cannot convert `{getattr(fn, '__qualname__', fn)}`: {e}") from None
    return source


def jit(fn=None, *, strict=None, **jit_kwargs):
    """``jax.jit(autoflow.convert(fn), **jit_kwargs)``.

    Accepts every keyword argument of ``jax.jit`` and returns what ``jax.jit``
    returns (so ``.lower()``, ``.trace()``, ``.compile()`` work). Use it bare
    or with arguments::

        @autoflow.jit
        def collatz_steps(n):
            steps = 0
            while n != 1:
                n = n // 2 if n % 2 == 0 else 3 * n + 1
                steps += 1
            return steps

        @autoflow.jit(static_argnames=["n"])
        def power(x, n): ...
    """
    if fn is None:
        return functools.partial(jit, strict=strict, **jit_kwargs)
    import jax

    return jax.jit(convert(fn, strict=strict), **jit_kwargs)
