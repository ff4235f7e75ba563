"""The rest of Python on traced values: ``match``, builtins, indexing tables.

Each function here is the plain Python operation when its arguments are
concrete (the same result, of the same type, as without autoflow), and the
``jnp`` equivalent when one of them is traced:

* ``max``/``min`` of two or more values: a left fold of ``jnp.where``, which
  picks the first largest (smallest) value exactly as Python does, NaN
  included; of one array, ``jnp.max``/``jnp.min`` over its leading axis;
* ``sum`` of an array: ``jnp.sum`` over the leading axis (plus ``start``);
* ``any``/``all``: concrete items decide as Python does (and stop the
  iteration where Python stops it); the traced ones are reduced with
  ``jnp.any``/``jnp.all``;
* ``int``/``float``/``bool`` of a traced scalar: a cast (``int`` truncates
  toward zero, as Python does; ``bool`` is ``x != 0``);
* ``getitem(table, i)``: a Python list or tuple of numbers or of same-shape
  arrays, or a NumPy array, indexed by a traced integer is indexed as one
  stacked ``jnp`` array (so a loop over ``i`` stays rolled);
* ``match_subject``: the subject of a ``match`` that stays Python.

``abs``, ``round``, ``divmod``, ``pow`` and ``len`` need nothing: JAX arrays
implement them.
"""

from __future__ import annotations

import builtins as _b

import numpy as np

import jax
import jax.numpy as jnp

from ..core.origin import Site, message, user_site
from ..errors import ConversionError
from .values import Tracer, as_pred, is_traced, structure


def _traced(x):
    return isinstance(x, Tracer) and is_traced(x)


def _any_traced(xs):
    return _b.any(_traced(x) for x in jax.tree_util.tree_leaves(xs))


def _fold(values, better):
    out = values[0]
    for v in values[1:]:
        out = jnp.where(better(v, out), v, out)
    return out


def _extreme(name, args, kwargs, better, reduce):
    py = getattr(_b, name)
    if kwargs:
        return py(*args, **kwargs)
    if len(args) == 1:
        (it,) = args
        if _traced(it) and np.ndim(it) == 1:
            if np.shape(it)[0] == 0:
                return py(())  # Python's ValueError for an empty sequence
            return reduce(it, axis=0)
        if isinstance(it, (list, tuple)) and it and _b.any(_traced(v) for v in it) \
                and _b.all(np.ndim(v) == 0 for v in it):
            return _fold(list(it), better)
        return py(it)
    if _b.any(_traced(v) for v in args) and _b.all(np.ndim(v) == 0 for v in args):
        return _fold(list(args), better)
    return py(*args)


def max(*args, **kwargs):  # noqa: A001 - mirrors the builtin
    """``max``; traced scalars: the first largest, as Python picks it."""
    return _extreme("max", args, kwargs, lambda v, best: v > best, jnp.max)


def min(*args, **kwargs):  # noqa: A001
    """``min``; traced scalars: the first smallest, as Python picks it."""
    return _extreme("min", args, kwargs, lambda v, best: v < best, jnp.min)


def sum(iterable, /, start=0):  # noqa: A001
    """``sum``; a traced array is summed over its leading axis in one op."""
    if _traced(iterable) and np.ndim(iterable) >= 1:
        total = jnp.sum(iterable, axis=0)
        return total if isinstance(start, _b.int) and start == 0 and not isinstance(start, _b.bool) \
            else start + total
    return _b.sum(iterable, start)


def _truth_reduce(iterable, stop_on, reduce):
    if _traced(iterable):
        if np.ndim(iterable) != 1:
            return getattr(_b, reduce.__name__)(iterable)  # Python's own error
        return reduce(as_pred_vec(iterable))
    traced = []
    for v in iterable:
        if _traced(v):
            if np.size(v) != 1:
                _b.bool(v)  # Python's own error for an array without one truth value
            traced.append(as_pred(v))
        elif _b.bool(v) is stop_on:
            return stop_on
    if not traced:
        return not stop_on
    return reduce(jnp.stack(traced))


def as_pred_vec(x):
    x = jnp.asarray(x)
    return x if x.dtype == jnp.bool_ else x != 0


def any(iterable, /):  # noqa: A001
    """``any``; traced items are reduced with ``jnp.any``."""
    return _truth_reduce(iterable, True, jnp.any)


def all(iterable, /):  # noqa: A001
    """``all``; traced items are reduced with ``jnp.all``."""
    return _truth_reduce(iterable, False, jnp.all)


def _cast(name, x, dtype):
    if _traced(x) and np.size(x) == 1:
        x = jnp.asarray(x).reshape(())
        if name == "bool":
            return as_pred(x)
        if name == "int" and jnp.issubdtype(x.dtype, jnp.complexfloating):
            return getattr(_b, name)(x)  # Python's TypeError
        return x.astype(dtype)
    return None


def int(x=0, /, *args, **kwargs):  # noqa: A001
    """``int``; of a traced scalar, a cast (truncating toward zero)."""
    if not args and not kwargs:
        out = _cast("int", x, _b.int)
        if out is not None:
            return out
    return _b.int(x, *args, **kwargs)


def float(x=0.0, /):  # noqa: A001
    """``float``; of a traced scalar, a cast to JAX's default float."""
    out = _cast("float", x, _b.float)
    return _b.float(x) if out is None else out


def bool(x=False, /):  # noqa: A001
    """``bool``; of a traced scalar, ``x != 0`` (a traced boolean)."""
    out = _cast("bool", x, _b.bool)
    return _b.bool(x) if out is None else out


# ---------------------------------------------------------------------------
# Python tables indexed by traced integers
# ---------------------------------------------------------------------------

def _index_traced(index):
    if isinstance(index, tuple):
        return _b.any(_traced(i) for i in index)
    return _traced(index)


def stacked(table, what):
    """``table`` (a list/tuple of numbers or same-shape arrays, or a NumPy
    array) as one ``jnp`` array; a clear error when its items cannot stack."""
    if isinstance(table, np.ndarray):
        if table.dtype.kind in "biufc":
            return jnp.asarray(table)
    else:
        items = list(table)
        ok = _b.bool(items) and _b.all(
            isinstance(v, (_b.int, _b.float, _b.bool, _b.complex, np.generic, np.ndarray, jax.Array))
            for v in items)
        if ok:
            shapes = {np.shape(v) for v in items}
            if len(shapes) == 1:
                return jnp.stack([jnp.asarray(v) for v in items])
    site = user_site(3)
    kind = type(table).__name__
    raise ConversionError(message(
        site, f"{what} a Python {kind} with a traced index, but its items "
        f"({structure(table) if not isinstance(table, np.ndarray) else table.dtype}) "
        "cannot be stacked into one array",
        f"Only a {kind} of numbers or of arrays of one shape can be indexed by a traced "
        "value. Make the index concrete (a Python loop: `autoflow.unroll(...)`), or "
        "keep the items in one JAX array."))


def getitem(table, index):
    """``table[index]``; a Python table indexed by a traced integer is stacked.

    Plain Python::

        def getitem(table, index):
            return table[index]
    """
    if isinstance(table, (list, tuple, np.ndarray)) and _index_traced(index):
        return stacked(table, "this line indexes")[index]
    return table[index]


def setitem_list(x, index, value, op, binops):
    """``x[index] = value`` on a list with a traced index: the list's items
    become the rows of ``stacked(x).at[index].set(value)``."""
    arr = stacked(x, "this line writes into")
    if op is None:
        arr = arr.at[index].set(value)
    else:
        arr = arr.at[index].set(binops[op](arr[index], value))
    x[:] = [arr[k] for k in _b.range(len(x))]
    return x


# ---------------------------------------------------------------------------
# match
# ---------------------------------------------------------------------------

def match_is(subject, value):
    """``subject is value`` for ``case True:``/``case False:``; a traced boolean
    subject (what a Python bool becomes under ``jit``) compares its value."""
    if _traced(subject):
        if jnp.asarray(subject).dtype == jnp.bool_ and np.size(subject) == 1:
            pred = jnp.asarray(subject).reshape(())
            return pred if value else ~pred
        return False
    return subject is value


def match_subject(subject, line, col):
    """The subject of a ``match`` that autoflow left as Python (its patterns
    are not all values and alternatives): it must be concrete."""
    if _traced(subject):
        here = user_site(2)
        site = Site(here.filename, line, col) if here is not None else None
        raise ConversionError(message(
            site, "this `match` has a traced subject, but this case's pattern (a class, "
            "mapping or sequence pattern, or a capture inside `|` or with both `as` and a "
            "guard) cannot be staged",
            "On a traced value use only value patterns (`case 0 | 1:`, `case Mode.FAST:`), "
            "guards, and a final `case _:` or `case name:`; or make the subject static."))
    return subject
