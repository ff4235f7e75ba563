"""What a staged loop learns from tracing its body, remembered for its next traces.

A loop nested in another is traced again each time the outer body is: ``_DEFINED``
(the variables first bound in its body) and ``_DEFERRED`` (the checks its body stages)
let each later trace start from what the first learned (``staging.stage_loop``).
"""

from __future__ import annotations

import types

import jax.numpy as jnp
import numpy as np

from ..common.carries import join_parts, parts_of
from ..common.values import Tracer, Undefined, aval_of, is_array_like, is_extended


# Variables first bound inside a loop, remembered per loop and entry types:
# (how it is staged, the entry's types, the body's code and closure's types)
# -> {index: spec}.
# A loop nested in another is traced again each time the outer body is (its
# restarts, its probe iteration): without this, each of those traces would
# start the inner loop without the variable and restart it once more, so the
# traces of a loop body doubled with each level of nesting (a line search
# inside an optimiser's loop, with `return`s in both). A remembered spec is
# only used when the entry state and everything the body closes over have the
# same types as when it was learned (so the body traces the same), and it is
# checked: the body must give exactly that type (`_loop_body`). Only loops that
# cannot add such a variable as their body is traced (a scan, a bounded loop, a
# JAX without `new_input`) look one up: see `loop`.
_DEFINED = {}


_DEFINED_LIMIT = 4096

# The checks a loop's body stages (`flags._deferring_checks`), remembered the same way
# (keyed as `_DEFINED` is, with the carries a staged statement before the loop may have
# left unbound): each trace of an outer body starts its inner loops carrying them, where
# finding them again would restart each inner loop once more, which doubles the traces
# of a body with each level of nesting. Checked as they are carried ("undefer").
_DEFERRED = {}


def _types(x, depth):
    """What tracing code that reads ``x`` can depend on, hashable (``None``: unknown)."""
    if isinstance(x, Undefined):
        return ("undefined", x.guarded)
    if is_array_like(x):
        if isinstance(x, Tracer):
            return aval_of(x) + (True,)
        if np.size(x) > 64 or is_extended(jnp.result_type(x)):
            return None  # (a concrete table, whose values could steer the trace; a PRNG key)
        return aval_of(x) + (np.asarray(x).tobytes(),)
    if x is None or isinstance(x, (bool, int, float, complex, str)):
        return (type(x), x)
    if isinstance(x, (tuple, list)):
        parts = tuple(_types(v, depth) for v in x)
        return None if None in parts else (type(x), parts)
    if isinstance(x, types.FunctionType):
        return _function_types(x, depth)
    if isinstance(x, (types.ModuleType, types.BuiltinFunctionType, type)):
        return ("object", id(x))
    return None


def _function_types(fn, depth):
    """A function and what its closure holds (functions it closes over, recursively)."""
    if depth <= 0:
        return None
    cells = []
    for cell in fn.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell: a name not bound yet
            cells.append(("empty",))
            continue
        t = _types(value, depth - 1)
        if t is None:
            return None
        cells.append(t)
    defaults = _types(fn.__defaults__ or (), depth - 1)
    if defaults is None:
        return None
    return ("function", fn.__code__, tuple(cells), defaults)


def _entry_types(state, body):
    """What a loop's restarts depend on: its entry state and its body's closure
    (module globals are not looked at: rebinding one to a value of another type
    between two traces of the same function is left to the check in the body)."""
    if not isinstance(body, types.FunctionType):
        return None
    out = (_types(state, 4), _function_types(body, 4))
    if None in out:
        return None
    try:
        hash(out)
    except TypeError:
        return None
    return out


def _defer_key(body, how, state, names, maybe):
    """The key of ``_DEFERRED``: ``_entry_types`` of the loop, the parts ``maybe`` holds
    (index -> spec: variables that may be unbound where it starts) by their spec alone."""
    parts = [f"maybe {maybe[j]!r}" if j in maybe else p
             for j, p in enumerate(parts_of(state, names))]
    entry = _entry_types(join_parts(parts, names), body)
    return None if entry is None else how + (entry,)
