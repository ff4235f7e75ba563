"""Index assignment, ``print``, ``warnings``, logging and ``assert`` in converted code.

Output effects (``print``, ``warnings.warn``, logging calls, a stream's
``write``) and ``assert`` are Python's own on code that runs outside any
JAX transformation. Under a trace they happen when the compiled code runs,
on the path taken, at every call (``later``).
"""

from __future__ import annotations

import array
import builtins
import functools
import io
import logging
import operator
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from ...core.origin import message, user_frames, user_site
from ...errors import ConversionError
from . import path_condition
from .later import Thunk, later
from .raising import exception, refuse_if_caught
from .checks import fail
from ..state.aliasing import derived, is_original
from ..state.writes import mutates, refuse_buffer_write
from ..common.teach import is_generated
from ..common.values import Tracer, as_pred, in_staged_block, is_traced, staging as under_trace, concrete_truth

_BINOPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
           "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "&": operator.and_,
           "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
           "@": operator.matmul}
_AT_METHODS = {"+": "add", "*": "multiply", "/": "divide", "**": "power"}


def is_traced_index(index):
    return isinstance(index, Tracer) and is_traced(index)


def setitem(x, index, value, op=None):
    """``x[index] = value`` (or ``x[index] op= value``), returning the new ``x``.

    Plain Python::

        def is_traced_index(index):
    return isinstance(index, Tracer) and is_traced(index)


def setitem(x, index, value, op=None):
            x[index] = value if op is None else x[index] <op> value
            return x

    A JAX array is immutable: the result is ``x.at[index].set(value)`` (or
    ``.add``/``.multiply``/... for ``+=``, ``*=``...), a new array. Lists,
    dicts and NumPy arrays are updated in place as Python would, inside
    staged branches and loop bodies too: the enclosing staged statement is
    told, and restores the container for each branch and carries it
    (``runtime.state``), so two branches cannot see each other's writes.
    """
    if isinstance(x, jax.Array):
        from ..python.tables import is_table_row
        if is_table_row(x):
            _row_write_error()
        ref = x.at[index]
        if op is None:
            return ref.set(value)
        method = _AT_METHODS.get(op)
        if method is not None:
            return getattr(ref, method)(value)
        return ref.set(_BINOPS[op](x[index], value))
    if isinstance(x, dict) and is_traced_index(index):
        raise ConversionError(message(
            user_site(2), "this line sets a dict item whose key is traced; a dict key must "
            "be a concrete Python value",
            "Make the key static (a loop over a static range runs as Python when it must), "
            "or keep the values in an array indexed by the traced value."))
    if isinstance(x, list) and is_traced_index(index):
        from ..python.tables import setitem_list
        mutates(x)
        return setitem_list(x, index, value, op, _BINOPS)
    if isinstance(x, np.ndarray):  # a traced value cannot go in: autoflow's error, not NumPy's
        from ..python.tables import check_numpy_write
        check_numpy_write(x, index, value, op)
    if isinstance(x, (np.ndarray, bytearray, array.array)) and in_staged_block():
        refuse_buffer_write(x)  # (made before the staged statement: it cannot carry it)
    if isinstance(x, (list, dict)):
        # Changed in place, as Python does; the innermost enclosing staged
        # statement is told (and then restores it for each branch and carries
        # it) when the container existed before it (see runtime.state).
        mutates(x)
    if op is None:
        x[index] = value
    else:
        old = x[index]
        if type(x) is dict:  # `d[k] += v` reads `d[k]`: a key a loop may have left unset
            from .unset import read_key
            old = read_key(x, index, user_site(2))
        x[index] = _BINOPS[op](old, value)
    return x


def setitem_in(x, path, value, op=None):
    """``x[p0][p1]...[pk] = value`` (or ``op=``), returning ``x``: an item write into a
    container held by ``x`` (``dp[i][j] = v``, ``d["a"][i] = v``).

    Plain Python::

        def setitem_in(x, path, value, op=None):
            inner = x
            for k in path[:-1]:
                inner = inner[k]
            inner[path[-1]] = value if op is None else inner[path[-1]] <op> value
            return x

    A list chosen by a traced index (a row of a table of lists) cannot be picked as
    Python picks it: the table below it is updated as one stacked array
    (``stacked(table).at[i, j].set(v)``), its rows in place. A JAX array inside is
    immutable, as in Python (JAX's own error).
    """
    inner = x
    for depth, k in enumerate(path[:-1]):
        if isinstance(inner, list) and is_traced_index(k):
            from ..python.tables import setitem_list
            mutates(inner)
            setitem_list(inner, path[-1], value, op, _BINOPS, path[depth:-1])
            return x
        inner = inner[k]
    if isinstance(inner, jax.Array):  # immutable: JAX's own error, as eagerly
        inner[path[-1]] = value
    setitem(inner, path[-1], value, op)
    return x


def _row_write_error():
    raise ConversionError(message(
        user_site(), "this line writes into a row read from a Python list of lists at a "
        "traced index; the row is an array here, not the table's list, so Python's write "
        "into the table cannot be made through it",
        "Write into the table itself: `table[i][j] = v`."))


def append(xs, value):
    """``xs.append(value)``, returning ``xs``.

    Plain Python::

        def append(xs, value):
            xs.append(value)
            return xs

    Inside a staged branch or loop body a list is extended functionally
    (``xs + [value]``): a staged branch or loop body then cannot leak its
    values into the list, and a list that grows inside a staged loop is
    seen as a carry that changes structure (the loop runs as Python when it
    can, and otherwise says so).
    """
    if in_staged_block() and isinstance(xs, list) and not is_original(xs):
        new = xs + [value]
        derived(new, xs)
        return new
    mutates(xs)
    xs.append(value)
    return xs


# ---------------------------------------------------------------------------
# Output: print, warnings, logging, writes to a stream
# ---------------------------------------------------------------------------

def print(*args, sep=" ", end="\n", file=None, flush=False):  # noqa: A001
    """Python's ``print``, when the code runs.

    Plain Python: the builtin ``print``. Under a trace (``jit``, a staged
    branch or loop body) it is staged to print when the compiled code runs,
    at every call, only on the path taken, in program order, with traced
    values formatted as Python formats the same values (``effects.later.later``).
    ``autoflow.trace_print`` prints while tracing instead.
    """
    if not under_trace():
        builtins.print(*args, sep=sep, end=end, file=file, flush=flush)
        return
    std = _std_name(file)
    if std is not None:  # `file=sys.stderr`: the stream `sys.stderr` is when the code runs
        later(_print_std, (std,) + args, dict(sep=sep, end=end, flush=flush), site=user_site(2))
        return
    later(builtins.print, args, dict(sep=sep, end=end, file=file, flush=flush),
          site=user_site(2))


def _std_name(stream):
    """``"stdout"``/``"stderr"`` where ``stream`` is ``sys.stdout``/``sys.stderr`` now
    (Python reads ``sys.stderr`` at each call: a redirect between calls counts)."""
    if stream is None:
        return None
    return "stdout" if stream is sys.stdout else "stderr" if stream is sys.stderr else None


def _print_std(name, *args, **kwargs):
    builtins.print(*args, file=getattr(sys, name), **kwargs)


def _std_method(name, method, *args, **kwargs):
    return getattr(getattr(sys, name), method)(*args, **kwargs)


def _frames(stacklevel):
    """The ``stacklevel``-th frame of the user's code up from the caller, as
    Python would count it: the functions autoflow generated for a branch or
    loop body are part of the function that holds them (at their own line)."""
    level = 0
    inner = None  # a generated frame whose enclosing function comes next
    for frame in user_frames(1):
        if is_generated(frame.f_code):
            inner = inner or frame
            continue
        level += 1
        if level == stacklevel:
            return frame, (inner or frame).f_lineno
        inner = None
    return None, None


def _now_or_later(fn, args):
    """``fn(*args)`` now on concrete code, when the compiled code runs under a trace
    (``args`` are the values, made at run time; ``fn`` holds the rest)."""
    if under_trace():
        later(fn, args, site=user_site(3))
    else:
        fn(*args)


def warn(message, category=None, stacklevel=1, source=None, **kwargs):
    """``warnings.warn``, when the code runs (see ``print``).

    It is issued through ``warnings.warn_explicit`` with the file, line,
    module and registry that ``warnings.warn`` would have found at the user's
    line (the functions autoflow made for branches and loop bodies are not
    counted as frames), so the filters decide as they would in Python
    ("default": once per line, "always", "error"...), at every call.
    """
    if isinstance(message, Warning):
        category = message.__class__
    elif category is None:
        category = UserWarning
    frame, lineno = _frames(max(stacklevel, 1))
    if frame is None:
        filename, module, globs, lineno = "sys", "sys", sys.__dict__, 1
    else:
        filename, globs = frame.f_code.co_filename, frame.f_globals
        module = globs.get("__name__", "<string>")
    registry = globs.setdefault("__warningregistry__", {})
    # (The registry and the module's globals are the objects themselves: the
    # filters note there what was shown.)
    _now_or_later(functools.partial(warnings.warn_explicit, category=category,
                                    filename=filename, lineno=lineno, module=module,
                                    registry=registry, module_globals=globs, source=source),
                  (message,))


_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "warn": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL,
           "fatal": logging.CRITICAL, "exception": logging.ERROR}


def _log_now(msg, args, *, logger, level, where, exc_info, extra, stack_info):
    filename, lineno, func = where
    if not logger.isEnabledFor(level):
        return
    if exc_info and not isinstance(exc_info, (tuple, BaseException)):
        exc_info = sys.exc_info()
    record = logger.makeRecord(logger.name, level, filename, lineno, msg, args,
                               exc_info or None, func, extra,
                               "Stack (most recent call last):" if stack_info else None)
    logger.handle(record)


def log(logger, method, *args, **kwargs):
    """``logger.<method>(...)`` (``logger.info``, ``logging.warning``...), when the
    code runs (see ``print``): the level is checked then, and the record
    names the file, line and function of the user's call."""
    if method == "log":
        level, args = args[0], args[1:]
    else:
        level = _LEVELS[method]
    msg, args = args[0], args[1:]
    if logger is None:  # `logging.info(...)`: the root logger, set up as `logging` would
        logger = logging.getLogger()
        if not logger.handlers:
            logging.basicConfig()
    if method == "exception":
        kwargs.setdefault("exc_info", True)
    frame, lineno = _frames(max(kwargs.get("stacklevel", 1), 1))
    where = ("(unknown file)", 0, "(unknown function)") if frame is None else (
        frame.f_code.co_filename, lineno, frame.f_code.co_name)
    _now_or_later(functools.partial(_log_now, logger=logger, level=level, where=where,
                                    exc_info=kwargs.get("exc_info"), extra=kwargs.get("extra"),
                                    stack_info=kwargs.get("stack_info", False)), (msg, args))


_LOGGING_FUNCTIONS = {id(getattr(logging, m)): m for m in (*_LEVELS, "log") if hasattr(logging, m)}


def effect_call(f, args, kwargs):
    """``f(*args, **kwargs)`` when ``f`` is an output effect (``warnings.warn``, a
    logging call, a stream's ``write``): at the user's line, and under a trace
    when the compiled code runs; ``NotImplemented`` for any other ``f`` (the
    caller then calls it)."""
    if f is warnings.warn:
        return warn(*args, **kwargs)
    self = getattr(f, "__self__", None)
    if self is None:
        method = _LOGGING_FUNCTIONS.get(id(f))
        if method is None or getattr(logging, method) is not f:
            return NotImplemented
        return log(None, method, *args, **kwargs)
    name = getattr(f, "__name__", None)
    if isinstance(self, logging.Logger) and (name in _LEVELS or name == "log"):
        return log(self, name, *args, **kwargs)
    if name in _STREAM_METHODS and (isinstance(self, (io.IOBase, logging.LoggerAdapter))
                                    or self is sys.stdout or self is sys.stderr):
        # (`sys.stdout` may be any object with a `write`: a user's tee, a capture)
        if not under_trace():
            return NotImplemented
        std = _std_name(self)
        if std is not None:  # `sys.stdout.write(s)`: the stream `sys.stdout` is then
            later(_std_method, (std, name) + tuple(args), kwargs, site=user_site(2))
        elif _local_stream(self, name):
            return NotImplemented  # (outside a staged block: written now, as before)
        else:
            later(f, args, kwargs, site=user_site(2))
        return _written(args) if name == "write" else None
    return NotImplemented


_STREAM_METHODS = frozenset({"write", "writelines", "flush", "debug", "info", "warning",
                             "error", "critical", "exception", "log"})


def _local_stream(stream, name) -> bool:
    """Is ``stream`` a file or in-memory stream that a variable of the user's function
    writing it holds (`with open(path, "w") as fh:`, `buf = io.StringIO()`)? Written
    where the function's code runs: outside a staged block, now, as the function's
    other Python code (True); inside one, autoflow's error: a write deferred to when the
    compiled code runs would happen after the function returned (its `with` closed the
    file; what it read back of the buffer was read without it)."""
    if not isinstance(stream, io.IOBase):
        return False
    frame = next(user_frames(1), None)
    held = [k for k, v in (frame.f_locals.items() if frame is not None else ()) if v is stream]
    if not held:
        return False
    if not in_staged_block():
        return True
    raise ConversionError(message(
        user_site(frame=frame), f"this line calls `{held[0]}.{name}` inside a traced `if` or "
        f"loop, and `{held[0]}` is a file or stream of this function: the write can happen "
        "only when the compiled code runs, on the path taken, and by then the function has "
        "returned "
        "(a `with` around it has closed the file; what it read back did not have the write)",
        "Return the values and write them after the jitted call, or make the condition "
        "static so that the statement runs as Python."))


def _written(args):
    """What ``stream.write(s)`` returns (its length), where it is known."""
    s = args[0] if args else ""
    return len(s) if isinstance(s, (builtins.str, bytes)) else None


# ---------------------------------------------------------------------------
# assert
# ---------------------------------------------------------------------------

def _assertion(msg):
    return AssertionError(msg) if msg is not None else AssertionError()


def _assertion_failed(msg, site):
    msg = msg() if isinstance(msg, Thunk) else msg
    raise fail(_assertion(msg), site, f"(the traced `assert` at {site} failed when the compiled "
               "code ran)")


def assert_(test, msg=None):
    """``assert test, msg``; a traced ``test`` is checked when the compiled code runs.

    A failing traced check raises when the computation runs (through a host
    callback), with the message made from the run-time values and the user's
    file and line.
    """
    c = concrete_truth(test, lambda: user_site(2), what="assertion")
    if c is not None:
        if not c:
            if callable(msg):
                msg = msg()
            # (on a traced path: raised where the compiled code takes it, as a `raise`)
            raise exception(lambda: _assertion(msg),
                            what="this `assert` fails on a path chosen by a traced condition",
                            kind="the `assert`")
        return
    site = user_site(2)
    refuse_if_caught(AssertionError(), sys._getframe(1), site,
                     "this `assert`'s test is traced",
                     "Test the condition with an `if` instead of catching the `AssertionError`, "
                     "or make it static.")
    if callable(msg):
        try:
            # (made where the test fails only, as Python makes it: what it prints or raises
            # happens there; its formatting of traced values is made later, `Deferred`)
            with path_condition.on_path(jnp.logical_not(as_pred(test))):
                msg = msg()
        except Exception:  # it needs run-time values: made from them, when it fails
            msg = Thunk(msg)
    try:
        # (the host is called only where it fails; what follows runs only where it held)
        later(_assertion_failed, (msg, site), site=site, when=jnp.logical_not(as_pred(test)))
    except Exception as e:  # pragma: no cover - callbacks unsupported in this context
        if getattr(e, "__autoflow_site__", None) is not None:
            raise  # the assertion failed as it was staged (run at once: vmap without jit)
        raise ConversionError(message(site, f"cannot stage this traced `assert` ({e})",
                                      "Check the condition outside the jitted function.")) from None
