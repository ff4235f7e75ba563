"""User code that library code calls: converted when the call comes from converted code.

Converted code calls library code as it is (``calls``): ``eqx.nn.Sequential``,
``nnx.Sequential``, a library function handed a user object. Library code
that holds the user's objects then calls their methods itself
(``layer(x)`` inside ``Sequential.__call__``), out of autoflow's reach: a
traced ``if`` in the user's ``__call__`` would fail there.

So before converted code calls library code, it looks at what it hands over
(the callable and its arguments, and the containers and library objects they
hold, a few levels deep) for instances of the user's classes. Each such
class gets, once, a small dispatcher in place of each method it defines
(``__call__`` and its other public methods): while a library call made from
converted code is under way (``active``), the dispatcher runs the method
converted with that code's options; at any other time it runs the method as
written, so the class behaves as before everywhere else.

A plain user *function* held by a library object (``eqx.nn.Lambda(f)``) has
no class to reach it through; it is called as it is (convert it where it is
handed over: ``eqx.nn.Lambda(autoflow.convert(f))``).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import types
import weakref

from ...core.libraries import is_library_file, is_library_value

_local = threading.local()
# (held weakly: a class made at run time goes when nothing else holds it)
_patched: weakref.WeakSet[type] = weakref.WeakSet()  # classes whose methods dispatch already
_plain: weakref.WeakSet[type] = weakref.WeakSet()    # classes looked at with nothing to dispatch

# What the walk never looks into (and never patches).
_ATOMS = (type(None), bool, int, float, complex, str, bytes, type, types.ModuleType,
          types.BuiltinFunctionType, types.FunctionType)
_MAX_NODES = 400
_MAX_DEPTH = 6


@contextlib.contextmanager
def active(rt):
    """Library code called by converted code whose runtime is ``rt`` is under way."""
    before = getattr(_local, "runtime", None)
    _local.runtime = rt
    try:
        yield
    finally:
        _local.runtime = before


def original(f):
    """The user's method behind a dispatcher (``f`` itself when it is none)."""
    return f.__autoflow_dispatch__ if type(f) is types.FunctionType \
        and hasattr(f, "__autoflow_dispatch__") else f


def _is_array(x):
    return hasattr(x, "shape") and hasattr(x, "dtype")


def _user_method(value):
    if not inspect.isfunction(value) or getattr(value, "__autoflow_do_not_convert__", False) \
            or getattr(value, "__autoflow_converted__", False) or hasattr(value, "__autoflow_dispatch__"):
        return False
    code = value.__code__
    if code.co_filename.startswith("<") or is_library_file(code.co_filename):
        return False
    return not (inspect.isgeneratorfunction(value) or inspect.iscoroutinefunction(value)
                or inspect.isasyncgenfunction(value))


def _dispatcher(fn):
    @functools.wraps(fn)
    def dispatch(*args, **kwargs):
        rt = getattr(_local, "runtime", None)
        if rt is None:  # not reached through converted code: the method as written
            return fn(*args, **kwargs)
        return rt._target(fn)(*args, **kwargs)

    dispatch.__autoflow_dispatch__ = fn
    return dispatch


def _patch(cls) -> bool:
    """Give ``cls`` (a user class) dispatching methods; is there any?"""
    if cls in _patched:
        return True
    if cls in _plain:
        return False
    found = False
    for klass in cls.__mro__:
        if klass is object or is_library_value(klass):
            continue
        for name, value in list(vars(klass).items()):
            if name != "__call__" and name.startswith("__"):
                continue
            if hasattr(value, "__autoflow_dispatch__"):
                found = True
            elif _user_method(value):
                try:
                    setattr(klass, name, _dispatcher(value))
                except (AttributeError, TypeError):  # a class that refuses new attributes
                    continue
                found = True
    (_patched if found else _plain).add(cls)
    return found


def patch(cls) -> None:
    """Make user class ``cls`` (constructed by converted code) dispatch."""
    if cls not in _patched and cls not in _plain and not is_library_value(cls):
        _patch(cls)


def reaches_user_objects(f, args, kwargs) -> bool:
    """Does library callable ``f``, called with ``args``/``kwargs``, hold (or get) an
    instance of a user class with methods? Those classes are made to dispatch."""
    todo = [(f, 0)] + [(a, 1) for a in args] + [(v, 1) for v in kwargs.values()]
    seen, found, nodes = set(), False, 0
    while todo and nodes < _MAX_NODES:
        obj, depth = todo.pop()
        if isinstance(obj, _ATOMS) or id(obj) in seen or _is_array(obj):
            continue
        seen.add(id(obj))
        nodes += 1
        if depth > _MAX_DEPTH:
            continue
        if isinstance(obj, (tuple, list, set, frozenset)):
            todo.extend((x, depth + 1) for x in obj)
            continue
        if isinstance(obj, dict):
            todo.extend((x, depth + 1) for x in obj.values())
            continue
        if isinstance(obj, functools.partial):
            todo.extend((x, depth + 1) for x in (obj.func, *obj.args, *obj.keywords.values()))
            continue
        if isinstance(obj, types.MethodType):
            todo.append((obj.__self__, depth + 1))
            continue
        cls = type(obj)
        if not is_library_value(cls):
            found = _patch(cls) or found
            continue
        state = getattr(obj, "__dict__", None)
        if isinstance(state, dict):
            todo.extend((x, depth + 1) for x in state.values())
        if isinstance(obj, (tuple, list)):  # a library's list or tuple subclass
            todo.extend((x, depth + 1) for x in obj)
    return found
