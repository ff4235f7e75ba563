"""Index assignment, ``print`` and ``assert`` in converted code."""

from __future__ import annotations

import builtins
import functools
import operator

import jax
import numpy as np

from ..core.origin import message, user_site
from ..errors import ConversionError
from .state import derived, is_original, mutates
from .values import Tracer, in_staged_block, is_traced, truth

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
        from .vocabulary import setitem_list
        mutates(x)
        return setitem_list(x, index, value, op, _BINOPS)
    if isinstance(x, np.ndarray):  # a traced value cannot go in: autoflow's error, not NumPy's
        from .vocabulary import check_numpy_write
        check_numpy_write(x, index, value, op)
    if isinstance(x, (list, dict)):
        # Changed in place, as Python does; the innermost enclosing staged
        # statement is told (and then restores it for each branch and carries
        # it) when the container existed before it (see runtime.state).
        mutates(x)
    if op is None:
        x[index] = value
    else:
        x[index] = _BINOPS[op](x[index], value)
    return x


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


def print(*args, sep=" ", end="\n", file=None, flush=False):  # noqa: A001
    """``print`` that shows traced values every time the compiled code runs.

    With only concrete arguments it is the builtin ``print``. With a traced
    argument it is ``jax.debug.print``: printed when the compiled function
    runs (each call), not once at trace time.
    """
    from .vocabulary import Deferred, print_deferred
    if builtins.any(isinstance(a, Deferred) for a in args):  # `print(f"{loss:.4f}")`
        print_deferred(args, sep, end, file, flush)
        return
    leaves = jax.tree_util.tree_leaves(args)
    if not builtins.any(isinstance(x, Tracer) and is_traced(x) for x in leaves):
        builtins.print(*args, sep=sep, end=end, file=file, flush=flush)
        return
    sep = " " if sep is None else sep
    end = "\n" if end is None else end
    fmt = sep.join("{}" for _ in args) + (end[:-1] if end.endswith("\n") else end)
    fmt = fmt.replace("{}", "\x00").replace("{", "{{").replace("}", "}}").replace("\x00", "{}")
    jax.debug.print(fmt, *args, ordered=True)


def _fail_check(msg, site, ok):
    if not bool(np.asarray(ok)):
        from .raising import fail

        exc = AssertionError(msg) if msg is not None else AssertionError()
        raise fail(exc, site, f"(the traced `assert` at {site} failed when the compiled "
                   "code ran)")


def assert_(test, msg=None):
    """``assert test, msg``; a traced ``test`` is checked when the compiled code runs.

    A failing traced check raises when the computation runs (through a host
    callback), with the message and the user's file and line.
    """
    c = truth(test, lambda: user_site(2), what="assertion")
    if callable(msg):
        msg = msg() if c is not True else None
    if c is not None:
        if not c:
            raise AssertionError(msg) if msg is not None else AssertionError()
        return
    site = user_site(2)
    try:
        jax.debug.callback(functools.partial(_fail_check, msg, site), test, ordered=True)
    except Exception as e:  # pragma: no cover - callbacks unsupported in this context
        raise ConversionError(message(site, f"cannot stage this traced `assert` ({e})",
                                      "Check the condition outside the jitted function.")) from None
