"""Python's builtins on traced values: reductions, ``sorted``, bits, casts.

Each function here is the plain Python operation when its arguments are
concrete (the same result, of the same type, as without autoflow), and the
``jnp`` equivalent when one of them is traced:

* ``max``/``min`` of two or more values: a left fold of ``jnp.where``, which
  picks the first largest (smallest) value exactly as Python does, NaN
  included; of one 1-D array, ``jnp.nanmax``/``jnp.nanmin``, or its first item
  where that is NaN (Python's result: a NaN first stays, a later one never wins);
* ``max``/``min`` with ``key=`` whose keys are traced scalars: the same fold on the
  keys, the items picked with them;
* ``sorted`` of items (or keys) that are traced scalars: a stable ``jnp.argsort``,
  ``reverse=True`` keeping equal items in order as Python does;
* ``sum`` of an array: ``jnp.sum`` over the leading axis (plus ``start``);
* ``any``/``all``: concrete items decide as Python does (and stop the
  iteration where Python stops it); the traced ones are reduced with
  ``jnp.any``/``jnp.all``;
* the same reductions of a comprehension with an ``if`` go to ``comprehensions``;
* ``int``/``float``/``bool`` of a traced scalar: a cast (``int`` truncates
  toward zero, as Python does; ``bool`` is ``x != 0``).

``abs``, ``round``, ``divmod``, ``pow`` and ``len`` need nothing: JAX arrays
implement them.
"""

from __future__ import annotations

import builtins as _b
import operator
import types

import numpy as np
import jax
import jax.numpy as jnp

from ...core.origin import user_site
from ..loops.ranges import TracedRange
from .string_values import String
from ..common.values import Tracer, any_traced, as_pred_vec, as_pred, is_array_like, is_traced, concrete_truth as _truth
from .comprehensions import Filtered, RangeItems, _filtered_extreme, _range_fold


def _fold(values, better):
    out = values[0]
    for v in values[1:]:
        out = jnp.where(better(v, out), v, out)
    return out


def _same_layout(values):
    trees = [jax.tree_util.tree_structure(v) for v in values]
    return _b.all(t == trees[0] for t in trees) and _b.all(
        is_array_like(leaf) or isinstance(leaf, (int, float)) and not isinstance(leaf, bool)
        for v in values for leaf in jax.tree_util.tree_leaves(v))


def _is_scalar(v):
    """``np.ndim(v) == 0``, without making an array of a tuple or list (of traced items)."""
    return isinstance(v, (_b.int, _b.float, _b.complex)) or getattr(v, "ndim", None) == 0


def _key_tuples(keys):
    """``keys`` as tuples of scalars of one length (a scalar key: a tuple of one), which
    compare as Python compares tuples (``_lexicographic``); None for other keys."""
    if _b.all(_is_scalar(k) for k in keys):
        return [(k,) for k in keys]
    if _b.all(type(k) is tuple for k in keys) and _b.len({_b.len(k) for k in keys}) == 1 \
            and keys[0] and _b.all(_is_scalar(p) for k in keys for p in k):
        return keys
    return None


def _lexicographic(better, k, best):
    """``k`` strictly better than ``best`` (tuples of one length), as Python's tuple
    comparison decides: at the first place where they differ (``==`` fails there)."""
    out = better(k[-1], best[-1])
    for x, y in zip(k[-2::-1], best[-2::-1]):
        out = jnp.logical_or(better(x, y), jnp.logical_and(x == y, out))
    return out


# Iterables whose items `max`/`min` read once, as a list (Python's reads them all too).
_ITERATORS = (range, types.GeneratorType, enumerate, zip, map, filter, reversed)


def _staged(call, items, key, better):
    """Python's ``max``/``min`` (``call()``); where its comparisons are staged although no
    item is traced (concrete JAX arrays under a trace: a global, a closed-over array), the
    fold that picks the same item."""
    try:
        return call()
    except jax.errors.TracerBoolConversionError:
        out = None
        if isinstance(items, jax.Array) and items.ndim >= 1 and items.shape[0] > 1:
            items = list(items)  # (a concrete array: its rows, as Python iterates it)
        if isinstance(items, (list, tuple)) and _b.len(items) > 1:
            out = _keyed_extreme(list(items), key, better, staged=True)
        if out is None:
            raise
        return out


def _keyed_extreme(items, key, better, staged=False):
    """``max(items, key=key)`` where a key is traced: a left fold that keeps the first
    best item as Python does (``better(k, best_k)`` strictly). Keys (or, without ``key``,
    items) that are tuples of scalars compare as Python's tuples do."""
    keys = [v if key is None else key(v) for v in items]
    tuples = _key_tuples(keys)
    if not (staged or any_traced(keys) or any_traced(items)) or tuples is None \
            or not _same_layout(items):
        return None
    best, best_key = items[0], tuples[0]
    for v, k in zip(items[1:], tuples[1:]):
        take = _lexicographic(better, k, best_key)
        best = jax.tree_util.tree_map(lambda a, b: jnp.where(take, a, b), v, best)
        best_key = tuple(jnp.where(take, a, b) for a, b in zip(k, best_key))
    return best


def _extreme(name, args, kwargs, better, reduce):
    py = getattr(_b, name)
    if kwargs:
        if set(kwargs) <= {"key", "default"} and kwargs.get("key") is not None:
            items = args[0] if _b.len(args) == 1 else args
            if is_traced(items) and np.ndim(items) >= 1 or isinstance(items, _ITERATORS):
                # (`max(range(n), key=lambda i: xs[i])`: the index of a traced largest)
                items = list(items)
                args = (items,) if _b.len(args) == 1 else args
            if isinstance(items, (list, tuple)) and items:
                out = _keyed_extreme(list(items), kwargs["key"], better)
                if out is not None:
                    return out
            return _staged(lambda: py(*args, **kwargs), items, kwargs["key"], better)
        return py(*args, **kwargs)
    if _b.len(args) == 1:
        (it,) = args
        if isinstance(it, _ITERATORS) and not isinstance(it, range):
            it = list(it)  # (`max(v for v in xs)`, `max(zip(...))`: Python's reads them all too)
        if it.__class__ is TracedRange:
            return it.extreme(name == "max", user_site(3))
        if is_traced(it) and np.ndim(it) == 1:
            if np.shape(it)[0] == 0:
                return py(())  # Python's ValueError for an empty sequence
            if jnp.issubdtype(it.dtype, jnp.inexact):
                # Python keeps the first item while no later one compares better: a
                # NaN first stays, a NaN later never wins
                return jnp.where(jnp.isnan(it[0]), it[0], reduce(it, axis=0))
            return reduce(it, axis=0)
        if isinstance(it, (list, tuple)) and it and _b.any(is_traced(v) for v in it) \
                and _b.all(_is_scalar(v) for v in it):
            return _fold(list(it), better)
        if isinstance(it, (list, tuple)) and it and _b.all(type(v) is tuple for v in it):
            out = _keyed_extreme(list(it), None, better)  # (tuples with traced items)
            if out is not None:
                return out
        return _staged(lambda: py(it), it, None, better)
    if _b.any(is_traced(v) for v in args) and _b.all(_is_scalar(v) for v in args):
        return _fold(list(args), better)
    if _b.len(args) > 1 and _b.all(type(v) is tuple for v in args):
        out = _keyed_extreme(list(args), None, better)
        if out is not None:
            return out
    return _staged(lambda: py(*args), args, None, better)


def max(*args, **kwargs):  # noqa: A001 - mirrors the builtin
    """``max``; traced scalars: the first largest, as Python picks it."""
    if _b.len(args) == 1 and isinstance(args[0], RangeItems) and set(kwargs) <= {"default"}:
        return _range_fold("max", args[0], **kwargs)
    if _b.len(args) == 1 and isinstance(args[0], Filtered):
        return _filtered_extreme("max", args[0], kwargs, operator.gt)
    return _extreme("max", args, kwargs, lambda v, best: v > best, jnp.nanmax)


def min(*args, **kwargs):  # noqa: A001
    """``min``; traced scalars: the first smallest, as Python picks it."""
    if _b.len(args) == 1 and isinstance(args[0], RangeItems) and set(kwargs) <= {"default"}:
        return _range_fold("min", args[0], **kwargs)
    if _b.len(args) == 1 and isinstance(args[0], Filtered):
        return _filtered_extreme("min", args[0], kwargs, operator.lt)
    return _extreme("min", args, kwargs, lambda v, best: v < best, jnp.nanmin)


def _item_dtype(items):
    """The dtype of Python's sum of ``items``' rows: theirs (``0 + int8`` is int8, and
    wraps as the items' additions do), but for booleans (``0 + True`` is an int)."""
    dtype = jnp.result_type(items)
    return None if dtype == jnp.bool_ else dtype


def sum(iterable, /, start=0):  # noqa: A001
    """``sum``; a traced array is summed over its leading axis in one op."""
    if iterable.__class__ is TracedRange:
        return iterable.total(start)
    if isinstance(iterable, RangeItems):
        return _range_fold("sum", iterable, start)
    if isinstance(iterable, Filtered):
        mapped = iterable.mapped()
        if mapped is None:
            return _b.sum(iterable.values(jnp.zeros_like), start)
        masks, items = mapped
        total = jnp.sum(jnp.where(_lanes(masks, items), items, jnp.zeros_like(items)), axis=0,
                        dtype=_item_dtype(items))
        return total if isinstance(start, _b.int) and start == 0 and not isinstance(start, _b.bool) \
            else start + total
    if is_traced(iterable) and np.ndim(iterable) >= 1:
        total = jnp.sum(iterable, axis=0, dtype=_item_dtype(iterable))
        return total if isinstance(start, _b.int) and start == 0 and not isinstance(start, _b.bool) \
            else start + total
    return _b.sum(iterable, start)


def sorted(iterable, /, *, key=None, reverse=False):  # noqa: A001
    """``sorted``; items (or keys) that are traced scalars: a stable ``jnp.argsort`` of
    the keys, the items gathered in that order (a list of the same length, as Python's)."""
    items = list(iterable)
    if not isinstance(reverse, (_b.bool, _b.int)) or _b.len(items) < 2:
        return _b.sorted(items, key=key, reverse=reverse)
    keys = items if key is None else [key(v) for v in items]
    tuples = _key_tuples(keys)
    if not (any_traced(keys) or any_traced(items)) or tuples is None \
            or not _same_layout(items):
        return _b.sorted(items, key=key, reverse=reverse)
    # (keys that are tuples: sorted by their first items, ties by the next, as Python's)
    columns = [jnp.stack([jnp.asarray(k[c]) for k in tuples]) for c in _b.range(_b.len(tuples[0]))]
    n = _b.len(items)

    def stable_order(cols):
        return jax.lax.sort((*cols, jnp.arange(n)), num_keys=_b.len(cols), is_stable=True)[-1]
    if reverse:
        # Python's reverse=True keeps equal items in their order: sort the reversed
        # list stably, then reverse the result.
        order = (n - 1 - stable_order([c[::-1] for c in columns]))[::-1]
    else:
        order = stable_order(columns)
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *items)
    return [jax.tree_util.tree_map(lambda a, i=i: a[order[i]], stacked) for i in _b.range(n)]


def sort(xs, /, *args, **kwargs):
    """``xs.sort(...)``, returning ``xs`` (the rewriter makes ``xs.sort()`` into
    ``xs = af.sort(xs)``, so a staged statement carries the list).

    Plain Python::

        def sort(xs, *args, **kwargs):
            xs.sort(*args, **kwargs)
            return xs

    A list of traced scalars (or with traced keys) is sorted in place as ``sorted``
    sorts it (stable, ``reverse=True`` keeping equal items in order); anything else
    is the object's own ``sort``.
    """
    if type(xs) is list and not args and set(kwargs) <= {"key", "reverse"}:
        key = kwargs.get("key")
        if any_traced(xs) or key is not None and _b.len(xs) > 1 and any_traced(
                [key(v) for v in xs]):
            from ..state.writes import mutates

            new = sorted(xs, **kwargs)
            mutates(xs)
            xs[:] = new
            return xs
    xs.sort(*args, **kwargs)
    return xs


def _equalities(xs, value):
    """``[e is value or e == value for e in xs]`` as traced booleans, or None where
    Python's own comparison is needed (an item or ``value`` that is no scalar)."""
    if not isinstance(xs, (list, tuple)) or not (is_traced(value) or any_traced(xs)):
        return None
    if not (is_array_like(value) and np.ndim(value) == 0) or not _b.all(
            is_array_like(e) and np.ndim(e) == 0 for e in xs):
        return None
    return [jnp.asarray(True) if e is value else jnp.asarray(e) == value for e in xs]


def _not_in(kind, value, site):
    from ..effects.checks import fail

    text = f"{value!r} is not in list" if kind == "list" else "tuple.index(x): x not in tuple"
    raise fail(ValueError(text), site)


def index(xs, value, /, *args):
    """``xs.index(value[, start[, stop]])``; in a list or tuple of traced scalars (or of
    a traced ``value``), the first position where an item equals ``value`` (a traced
    integer), Python's ``ValueError`` when the compiled code runs if none does.

    Plain Python::

        def index(xs, value, *args):
            return xs.index(value, *args)
    """
    if _b.len(args) <= 2 and not any_traced(args):
        eqs = _equalities(xs, value)
        if eqs is not None:
            start, stop, _ = slice(*args if _b.len(args) == 2 else (
                args[0] if args else None, None)).indices(_b.len(xs))
            found = jnp.stack(eqs[start:stop]) if start < stop else jnp.zeros((1,), jnp.bool_)
            site = user_site()
            from ..effects import later

            later.later(_not_in, (type(xs).__name__, value, site), site=site,
                        when=~jnp.any(found))
            return start + jnp.argmax(found)
    return xs.index(value, *args)


def count(xs, value, /, *args):
    """``xs.count(value)``; in a list or tuple of traced scalars (or of a traced
    ``value``), the number of items equal to it (a traced integer).

    Plain Python::

        def count(xs, value, *args):
            return xs.count(value, *args)
    """
    if not args:
        eqs = _equalities(xs, value)
        if eqs is not None:
            return jnp.sum(jnp.stack(eqs).astype(jnp.result_type(0)))
    return xs.count(value, *args)


def _integer_bits(x, name):
    """``abs(x)`` of a traced integer as an unsigned integer of its width (so the
    smallest value's magnitude fits), and that width; Python's ``AttributeError`` for a
    traced value that is no integer."""
    dtype = jnp.result_type(x)
    if dtype == jnp.bool_:
        x, dtype = jnp.asarray(x).astype(jnp.int32), jnp.dtype(jnp.int32)
    if not jnp.issubdtype(dtype, jnp.integer) or np.ndim(x) != 0:
        kind = {"f": "float", "c": "complex"}.get(np.dtype(dtype).kind, "array")
        raise AttributeError(f"'{kind}' object has no attribute '{name}'")
    bits = np.dtype(dtype).itemsize * 8
    unsigned = jnp.dtype(f"uint{bits}")
    x = jnp.asarray(x)
    mag = jnp.where(x < 0, -(x.astype(unsigned)), x.astype(unsigned)) \
        if jnp.issubdtype(dtype, jnp.signedinteger) else x.astype(unsigned)
    return mag, bits, dtype


def bit_length(x, /):
    """``x.bit_length()``; of a traced integer, the number of bits of ``abs(x)`` (a traced
    integer). Plain Python: ``x.bit_length()``."""
    if not is_traced(x):
        return x.bit_length()
    mag, bits, dtype = _integer_bits(x, "bit_length")
    return (bits - jax.lax.clz(mag)).astype(jnp.result_type(0) if dtype == jnp.bool_ else dtype)


def bit_count(x, /):
    """``x.bit_count()``; of a traced integer, the number of ones in ``abs(x)`` (a traced
    integer). Plain Python: ``x.bit_count()``."""
    if not is_traced(x):
        return x.bit_count()
    mag, _, dtype = _integer_bits(x, "bit_count")
    return jax.lax.population_count(mag).astype(dtype)


def _truth_reduce(iterable, stop_on, reduce):
    if is_traced(iterable):
        if np.ndim(iterable) != 1:
            return getattr(_b, reduce.__name__)(iterable)  # Python's own error
        return reduce(as_pred_vec(iterable))
    traced, it = [], iter(iterable)
    so_far = None  # (the traced items so far, reduced as they come)
    while True:
        if traced:  # Python makes the next item only where none before decided: nor
            # may its effects and raises happen elsewhere (`pos(x - i) > 1 for i in ...`)
            from ..effects.path_condition import on_path

            with on_path(jnp.logical_not(so_far) if stop_on else so_far):
                v = next(it, _END)
        else:
            v = next(it, _END)
        if v is _END:
            break
        if is_traced(v):
            if np.size(v) != 1:
                _b.bool(v)  # Python's own error for an array without one truth value
            traced.append(as_pred(v))
            so_far = traced[-1] if so_far is None else (
                jnp.logical_or if stop_on else jnp.logical_and)(so_far, traced[-1])
        elif _b.bool(v) is stop_on:
            return stop_on if not traced else jnp.bool_(stop_on)
    if not traced:
        return not stop_on
    return reduce(jnp.stack(traced))


_END = object()


def any(iterable, /):  # noqa: A001
    """``any``; traced items are reduced with ``jnp.any``."""
    if isinstance(iterable, RangeItems):
        return _range_fold("any", iterable)
    if isinstance(iterable, Filtered):  # a masked item counts as False
        mapped = iterable.mapped()
        if mapped is not None:
            return jnp.any(mapped[0] & _item_preds(mapped[1]))
        iterable = iterable.values(lambda v: False, as_pred)
    return _truth_reduce(iterable, True, jnp.any)


def all(iterable, /):  # noqa: A001
    """``all``; traced items are reduced with ``jnp.all``."""
    if isinstance(iterable, RangeItems):
        return _range_fold("all", iterable)
    if isinstance(iterable, Filtered):  # a masked item counts as True
        mapped = iterable.mapped()
        if mapped is not None:
            return jnp.all(~mapped[0] | _item_preds(mapped[1]))
        iterable = iterable.values(lambda v: True, as_pred)
    return _truth_reduce(iterable, False, jnp.all)


def _lanes(masks, items):
    """``masks`` (one per item) shaped to broadcast against the stacked ``items``."""
    return masks.reshape(masks.shape + (1,) * (items.ndim - masks.ndim))


def _item_preds(items):
    """The truth value of each stacked item (each must have one, as in Python)."""
    if items[0].size != 1:
        _truth(items[0], user_site, what="item of `any`/`all`")  # its error
    return as_pred_vec(items.reshape(items.shape[0]))


def _cast(name, x, dtype):
    # (`float()` of a concrete tracer too: JAX refuses it under `jax.grad` without `jit`)
    if (is_traced(x) or name == "float" and isinstance(x, Tracer)) and np.size(x) == 1:
        x = jnp.asarray(x).reshape(())
        if name == "bool":
            return as_pred(x)
        if name == "int" and jnp.issubdtype(x.dtype, jnp.complexfloating):
            return getattr(_b, name)(x)  # Python's TypeError
        return _weak(x.astype(dtype))
    return None


def _weak(x):
    """``x`` weakly typed, as a Python number is (``int(x) * jnp.int8(100)`` is int8 in
    Python: the ``int`` adapts to the array, as a weak type does)."""
    from .. import jax as jx

    return jx.convert_weak(x, x.dtype)


def int(x=0, /, *args, **kwargs):  # noqa: A001
    """``int``; of a traced scalar, a cast (truncating toward zero); of a string made
    from traced values, Python's parse of its characters (``runtime.python.strings``)."""
    if isinstance(x, String):
        from .strings import to_int
        return to_int(x, *args, **kwargs)
    if not args and not kwargs:
        if is_traced(x) and np.size(x) == 1 and jnp.issubdtype(jnp.result_type(x), jnp.floating):
            # Python's `int` of a float is `math.trunc`'s: ValueError for NaN,
            # OverflowError for an infinity or a value the integer dtype cannot hold
            from .floats import truncated
            return _weak(truncated(jnp.asarray(x).reshape(())))
        out = _cast("int", x, _b.int)
        if out is not None:
            return out
    return _b.int(x, *args, **kwargs)


def float(x=0.0, /):  # noqa: A001
    """``float``; of a traced scalar, a cast to JAX's default float."""
    if isinstance(x, String):
        from .string_values import _cannot
        _cannot(x, "`float()` of", "Compute with the number itself rather than its text.")
    out = _cast("float", x, _b.float)
    return _b.float(x) if out is None else out


def bool(x=False, /):  # noqa: A001
    """``bool``; of a traced scalar, ``x != 0`` (a traced boolean)."""
    out = _cast("bool", x, _b.bool)
    return _b.bool(x) if out is None else out
