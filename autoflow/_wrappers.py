"""What ``convert`` makes of what is not a plain function: classes and library wrappers.

A class's methods are converted in place (``_convert_class``); JAX's ``custom_jvp`` and
``custom_vjp``, a ``jax.jit(f)`` made before autoflow saw ``f``, and the closure-based
wrappers of libraries (``jax.checkpoint``, ``functools.wraps`` decorators) are made again
around the converted function (``_through_wrapper``, ``_swap_in_closure``). They call
``api.convert`` back through ``_registry`` (no import circle).
"""

from __future__ import annotations

import inspect
import sys
import types
import weakref

from . import _conversion, _registry
from ._conversion import _lock
from .core.libraries import is_library_value


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
        value = getattr(value, "__autoflow_dispatch__", value)  # (runtime.python.through)
        if not (isinstance(value, property) or user_code(value)):
            continue
        if isinstance(value, property):
            new = property(*(_registry.convert(f, **kw) if f is not None else None
                             for f in (value.fget, value.fset, value.fdel)), value.__doc__)
        elif inspect.isfunction(value) or isinstance(value, (staticmethod, classmethod)):
            new = _registry.convert(value, **kw)
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
        cached = _conversion._by_function.get(fn) if _cacheable(fn) else None
        hit = cached.get(("wrapper", kw_key(kw))) if cached else None
    if hit is not None:
        return hit
    new = None
    if jax is not None and _jit_of_user_code(fn):
        # `jax.jit(fn)` made before autoflow saw it: the same jit of `fn` converted
        from .runtime.jax import jit_options

        options = jit_options(fn)
        if options is None:
            return None
        converted = _registry.convert(fn.__wrapped__, **kw)
        if converted is fn.__wrapped__:
            return fn
        new = jax.jit(converted, **options)
    elif jax is not None and isinstance(fn, jax.custom_jvp):
        new = jax.custom_jvp(_registry.convert(fn.fun, **kw), nondiff_argnums=fn.nondiff_argnums)
        if fn.jvp is not None:
            new.defjvp(_registry.convert(fn.jvp, **kw), symbolic_zeros=fn.symbolic_zeros)
    elif jax is not None and isinstance(fn, jax.custom_vjp):
        new = jax.custom_vjp(_registry.convert(fn.fun, **kw), nondiff_argnums=fn.nondiff_argnums)
        if fn.fwd is not None:
            extra = {"optimize_remat": fn.optimize_remat} if hasattr(fn, "optimize_remat") else {}
            new.defvjp(_registry.convert(fn.fwd, **kw), _registry.convert(fn.bwd, **kw),
                       symbolic_zeros=fn.symbolic_zeros, **extra)
    elif inspect.isfunction(fn) and hasattr(fn, "__wrapped__") and (fn.__closure__ or fn.__kwdefaults__
                                                                 or fn.__defaults__) \
            and (is_library_value(fn) or fn.__code__.co_filename.startswith("<")):
        # (a wrapper whose code a library generated: `beartype` execs its checking
        # wrapper, and holds the function in a keyword default)
        inner = inspect.unwrap(fn)
        if inner is fn or not inspect.isfunction(inner):
            return None
        converted = _registry.convert(inner, **kw)
        if converted is inner:
            return fn
        new = _swap_in_closure(fn, inner, converted, depth=4, kw=kw)
    if new is None:
        return None
    if _cacheable(fn):
        with _lock:
            _conversion._by_function.setdefault(fn, {})[("wrapper", kw_key(kw))] = new
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
    from .runtime.jax import is_jit_wrapper

    if not is_jit_wrapper(f):
        return False
    inner = inspect.unwrap(f)
    return inspect.isfunction(inner) and not is_library_value(inner)
