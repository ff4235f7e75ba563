"""Converting what converted code calls, lazily, and only user code.

``af.call(f, *args)`` calls ``f`` converted: the callee's own ``if``/loops
become operators too. Library code is called as it is: a callee is library
code when its source file lies in the standard library, in an installed
package's directory (site-packages), in JAX or in autoflow itself, unless
its module is listed in ``include``. ``autoflow.do_not_convert`` opts a
function out.
"""

from __future__ import annotations

import functools
import inspect
import operator
import types
import builtins
import sys
import threading

from ... import _registry
from ...core.caches import Bounded
from ...core.libraries import is_library_file
from ...core.origin import message, user_site
from ...errors import ConversionError
from . import library_state, maths, through
from .builtins import bool as _bool
from ..effects.statements import effect_call
from ..common.values import in_staged_block

_depth = threading.local()


def _converted(f, options):
    """``f`` converted with ``options``, if that was done already (the fast path)."""
    try:
        hit = _registry.converted_as.get(f)
    except TypeError:
        return None
    if hit:
        hit = hit.get(options)
        if hit is not None and hit[0] is f.__code__:
            return hit[1]
    return None


def _is_jax_wrapper(f):
    return _registry.is_jax_wrapper(f)


# Builtins that, reached under another name, still go to the runtime's
# versions (a traced `range` bound must stage a loop, not fail in `range`).
_ITERABLES = {id(getattr(builtins, n)): (getattr(builtins, n), n)
              for n in ("range", "enumerate", "zip", "reversed")}


def _included(fn, include):
    module = getattr(fn, "__module__", None) or ""
    return any(module == m or module.startswith(m + ".") for m in include)


def _bound_method(f) -> bool:
    """A library's bound method (``eqx.Module``'s ``self.method``): a function
    ``__func__`` bound to ``__self__``, as ``types.MethodType`` is."""
    return inspect.isfunction(getattr(f, "__func__", None)) and hasattr(f, "__self__") \
        and not isinstance(f, type)


class Runtime(types.ModuleType):
    """The runtime as converted code sees it, with the options of one ``convert``.

    Attribute lookups fall through to ``autoflow.runtime``; ``call`` converts
    callees with the same options.
    """

    def __init__(self, base, convert, options):
        super().__init__("autoflow.runtime")
        self._base = base
        self._convert = convert
        self._options = options
        self._include = tuple(dict(options).get("include", ()))

    def __reduce__(self):
        # Pickled by reference to the options (cloudpickle ships converted
        # functions to other processes: Ray, Dask, joblib).
        return bound, (self._options,)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(self._base, name)
        setattr(self, name, value)  # cache for the next lookup
        return value

    def _target(self, f):
        f = through.original(f)  # a user method that dispatches (`through`): the method
        if getattr(f, "__autoflow_do_not_convert__", False) or getattr(f, "__autoflow_converted__", False):
            return f
        if isinstance(f, functools.partial):
            inner = self._target(f.func)
            return f if inner is f.func else functools.partial(inner, *f.args, **f.keywords)
        if inspect.ismethod(f) or _bound_method(f):  # (Equinox binds methods its own way)
            inner = self._target(f.__func__)
            return f if inner is f.__func__ else types.MethodType(inner, f.__self__)
        if inspect.isfunction(f):
            done = _converted(f, self._options)
            if done is not None:
                return done
            code = f.__code__
            if is_library_file(code.co_filename) and not _included(f, self._include):
                if hasattr(f, "__wrapped__"):  # a library's wrapper around user code
                    return self._convert(f, **dict(self._options))
                return f
            return self._convert(f, **dict(self._options))
        if isinstance(f, type) or not callable(f):
            return f
        if _is_jax_wrapper(f):  # custom_jvp/custom_vjp around user code
            return self._convert(f, **dict(self._options))
        call = through.original(getattr(type(f), "__call__", None))
        if inspect.isfunction(call) and not is_library_file(call.__code__.co_filename):
            converted = self._convert(call, **dict(self._options))
            if converted is not call:
                return types.MethodType(converted, f)
        return f

    def while_stmt(self, *args, **kwargs):
        return self._base.while_stmt(*args, **self._loop_options(kwargs))

    def for_stmt(self, *args, **kwargs):
        return self._base.for_stmt(*args, **self._loop_options(kwargs))

    def _loop_options(self, kwargs):
        """``kwargs`` of a loop, with the options that reach its staging: its bound
        (``max_loop_iterations``), ``checkpoints``, ``lanes`` and ``debug_loops``."""
        options = dict(self._options)
        kwargs.setdefault("max_iterations", options.get("max_loop_iterations"))
        for name in ("checkpoints", "lanes", "debug_loops"):
            if options.get(name) is not None:
                kwargs.setdefault(name, options[name])
        return kwargs

    def function_arg(self, f):
        """``f`` converted where it is a plain function of the user's (or a partial of one),
        handed to library code by a parameter (``optx.minimise(objective, ...)``); any
        other value (an array, a module of the user's, which a library may take as a
        pytree) as it is."""
        if inspect.isfunction(f) or isinstance(f, functools.partial):
            return self._target(f)
        return f

    def converted(self, f):
        """``f`` converted when it is a user function (for ``jax.vmap(f)`` and the like).

        Library code holding the user's objects (``jax.vmap(eqx.nn.Sequential([...]))``)
        comes back wrapped, so that the user's methods it calls run converted (``through``).
        """
        target = self._target(f)
        if target is f and callable(f) and not getattr(f, "__autoflow_converted__", False) \
                and through.reaches_user_objects(f, (), {}):
            def through_library(*args, **kwargs):
                with through.active(self):
                    return f(*args, **kwargs)

            through_library.__wrapped__ = f
            return through_library
        return target

    def call(self, f, *args, **kwargs):
        """``f(*args, **kwargs)`` with ``f`` converted (unless it is library code).

        A recursion that never ends while tracing (its depth depends on a
        traced value: both branches of a staged ``if`` are traced, the
        recursive one included) is reported at the outermost call, naming
        the function, instead of as Python's ``RecursionError``.
        """
        target = _ITERABLES.get(id(f))
        if target is not None and target[0] is f:  # `r = range; for i in r(n)`
            return getattr(self._base, target[1])(*args, **kwargs)
        done = effect_call(f, args, kwargs)  # `warnings.warn`, `logger.info`...
        if done is NotImplemented:
            done = maths.math_call(f, args, kwargs)  # `math.exp(x)` of a traced `x`
        if done is not NotImplemented:
            return done
        staged = in_staged_block()
        if staged and type(f) is types.BuiltinMethodType \
                and getattr(f, "__name__", None) in _CHANGES_IN_PLACE:
            _mutates(f.__self__)
        target = self._target(f)
        held = None  # (a list or dict a library call in a staged block may change)
        if staged and target is f and not getattr(f, "__autoflow_converted__", False) \
                and not isinstance(f, type):
            held = library_state.before_call(f, args, kwargs)
        if isinstance(f, type):  # a user class built here may be handed to library code
            through.patch(f)
            out = self._call(f, target, args, kwargs)
        elif target is f and not getattr(f, "__autoflow_converted__", False) \
                and through.reaches_user_objects(f, args, kwargs):
            # library code about to call the user's methods (`eqx.nn.Sequential`)
            with through.active(self):
                out = self._call(f, target, args, kwargs)
        else:
            out = self._call(f, target, args, kwargs)
        if held is not None:
            library_state.after_call(held)
        return out

    def _call(self, f, target, args, kwargs):
        if not in_staged_block():
            return target(*args, **kwargs)
        key = getattr(target, "__code__", None) or id(target)
        depth = _depth.__dict__.setdefault("calls", {})
        depth[key] = depth.get(key, 0) + 1
        try:
            return target(*args, **kwargs)
        except RecursionError:
            if depth[key] != 1:
                raise
            name = getattr(f, "__qualname__", None) or getattr(f, "__name__", repr(f))
            raise ConversionError(message(
                user_site(2), f"`{name}` calls itself without end while autoflow traces it: "
                "its recursion depth depends on a traced value (both branches of a traced "
                "`if` are traced, the recursive call included)",
                f"Rewrite `{name}` as a `while` loop over its arguments, or make the value "
                "that ends the recursion static.")) from None
        finally:
            depth[key] -= 1


# list and dict methods that change their object in place
_CHANGES_IN_PLACE = frozenset("append extend insert pop remove clear sort reverse update popitem "
                              "setdefault __setitem__ __delitem__ __iadd__ __imul__ __ior__".split())


def _mutates(obj):
    """``lst.append(v)`` called where the rewriter could not tell ``lst`` is a list (made
    by a call): the staged statement around it must carry ``lst`` (``state.mutates``)."""
    from ..state.snapshots import is_container
    from ..state.writes import mutates

    if is_container(obj):
        mutates(obj)


_bound = Bounded(256)  # options -> the runtime converted code with them sees


def bound(options):
    """The runtime namespace for converted code built with ``options``."""
    rt = _bound.get(options)
    if rt is None:
        rt = _bound[options] = Runtime(sys.modules["autoflow.runtime"], _registry.convert, options)
    return rt


def call(f, *args, **kwargs):
    """``f(*args, **kwargs)``, converting ``f`` first when it is user code."""
    return bound(())._target(f)(*args, **kwargs)


def converted(f):
    """``f`` converted when it is a user function (for ``jax.vmap(f)`` and the like)."""
    return bound(())._target(f)


def function_arg(f):
    """``f`` converted where it is a plain function of the user's (``Runtime.function_arg``)."""
    return bound(()).function_arg(f)

def truth(fn, x, /):
    """``fn(x)``, where ``fn`` may be ``operator.truth`` (then ``bool(x)``).

    Plain Python::

        def truth(fn, x):
            return fn(x)

    The rewriter makes ``operator.truth(x)`` and ``truth(x)`` into ``af.truth(
    operator.truth, x)``; ``operator.truth`` of a traced scalar is then a
    traced boolean, so ``while operator.truth(p):`` stages like ``while p:``.
    Any other ``fn`` (a method called ``truth``) is called as written.
    """
    if fn is operator.truth:
        return _bool(x)
    return call(fn, x)  # (as `calls` would have called it: converted if it is the user's)
