"""The rest of Python on traced values: ``match``, builtins, indexing tables.

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
* the same reductions, and ``len``, of a comprehension with an ``if``
  (``sum(x for x in xs if x > t)``, see ``filtered``): an item whose test is
  traced is masked (``jnp.where``) instead of dropped;
* ``int``/``float``/``bool`` of a traced scalar: a cast (``int`` truncates
  toward zero, as Python does; ``bool`` is ``x != 0``); so is
  ``operator.truth`` (``truth``);
* ``getitem(table, i)``: a Python list or tuple of numbers or of same-shape
  arrays, or a NumPy array, indexed by a traced integer is indexed as one
  stacked ``jnp`` array (so a loop over ``i`` stays rolled); an index out of
  range raises Python's ``IndexError`` when the compiled code runs;
* ``match_subject``: the subject of a ``match`` that stays Python.

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

from ..core.origin import Site, message, user_site
from ..errors import ConversionError
from .jax_internals import current_trace
from .ranges import TracedRange
from .strings import String
from .values import (Tracer, as_pred, describe, is_array_like, is_extended, is_traced, structure,
                     concrete_truth as _truth)


def _traced(x):
    return isinstance(x, Tracer) and is_traced(x)


def _any_traced(xs):
    return _b.any(_traced(x) for x in jax.tree_util.tree_leaves(xs))


def _fold(values, better):
    out = values[0]
    for v in values[1:]:
        out = jnp.where(better(v, out), v, out)
    return out


def _same_layout(values):
    trees = [jax.tree_util.tree_structure(v) for v in values]
    return _b.all(t == trees[0] for t in trees) and _b.all(
        is_array_like(leaf) for v in values for leaf in jax.tree_util.tree_leaves(v))


def _keyed_extreme(items, key, better):
    """``max(items, key=key)`` where a key is traced: a left fold that keeps the first
    best item as Python does (``better(k, best_k)`` strictly)."""
    keys = [key(v) for v in items]
    if not (_any_traced(keys) or _any_traced(items)) or not _b.all(np.ndim(k) == 0 for k in keys) \
            or not _same_layout(items):
        return None
    best, best_key = items[0], keys[0]
    for v, k in zip(items[1:], keys[1:]):
        take = better(k, best_key)
        best = jax.tree_util.tree_map(lambda a, b: jnp.where(take, a, b), v, best)
        best_key = jnp.where(take, k, best_key)
    return best


def _extreme(name, args, kwargs, better, reduce):
    py = getattr(_b, name)
    if kwargs:
        if set(kwargs) <= {"key", "default"} and kwargs.get("key") is not None:
            items = args[0] if _b.len(args) == 1 else args
            if _traced(items) and np.ndim(items) >= 1:
                items = list(items)
            if isinstance(items, (list, tuple)) and items:
                out = _keyed_extreme(list(items), kwargs["key"], better)
                if out is not None:
                    return out
        return py(*args, **kwargs)
    if _b.len(args) == 1:
        (it,) = args
        if isinstance(it, types.GeneratorType):
            it = list(it)  # (`max(v for v in xs)`: Python's max reads them all too)
        if it.__class__ is TracedRange:
            return it.extreme(name == "max", user_site(3))
        if _traced(it) and np.ndim(it) == 1:
            if np.shape(it)[0] == 0:
                return py(())  # Python's ValueError for an empty sequence
            if jnp.issubdtype(it.dtype, jnp.inexact):
                # Python keeps the first item while no later one compares better: a
                # NaN first stays, a NaN later never wins
                return jnp.where(jnp.isnan(it[0]), it[0], reduce(it, axis=0))
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
        total = jnp.sum(jnp.where(_lanes(masks, items), items, jnp.zeros_like(items)), axis=0)
        return total if isinstance(start, _b.int) and start == 0 and not isinstance(start, _b.bool) \
            else start + total
    if _traced(iterable) and np.ndim(iterable) >= 1:
        total = jnp.sum(iterable, axis=0)
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
    if not (_any_traced(keys) or _any_traced(items)) \
            or not _b.all(np.ndim(k) == 0 and is_array_like(k) for k in keys) \
            or not _same_layout(items):
        return _b.sorted(items, key=key, reverse=reverse)
    stacked_keys = jnp.stack([jnp.asarray(k) for k in keys])
    n = _b.len(items)
    if reverse:
        # Python's reverse=True keeps equal items in their order: sort the reversed
        # list stably, then reverse the result.
        order = (n - 1 - jnp.argsort(stacked_keys[::-1], stable=True))[::-1]
    else:
        order = jnp.argsort(stacked_keys, stable=True)
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
        if _any_traced(xs) or key is not None and _b.len(xs) > 1 and _any_traced(
                [key(v) for v in xs]):
            from .state import mutates

            new = sorted(xs, **kwargs)
            mutates(xs)
            xs[:] = new
            return xs
    xs.sort(*args, **kwargs)
    return xs


def _equalities(xs, value):
    """``[e is value or e == value for e in xs]`` as traced booleans, or None where
    Python's own comparison is needed (an item or ``value`` that is no scalar)."""
    if not isinstance(xs, (list, tuple)) or not (_traced(value) or _any_traced(xs)):
        return None
    if not (is_array_like(value) and np.ndim(value) == 0) or not _b.all(
            is_array_like(e) and np.ndim(e) == 0 for e in xs):
        return None
    return [jnp.asarray(True) if e is value else jnp.asarray(e) == value for e in xs]


def _not_in(kind, value, site):
    from .later import fail

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
    if _b.len(args) <= 2 and not _any_traced(args):
        eqs = _equalities(xs, value)
        if eqs is not None:
            start, stop, _ = slice(*args if _b.len(args) == 2 else (
                args[0] if args else None, None)).indices(_b.len(xs))
            found = jnp.stack(eqs[start:stop]) if start < stop else jnp.zeros((1,), jnp.bool_)
            site = user_site()
            from . import later

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
    if not _traced(x):
        return x.bit_length()
    mag, bits, dtype = _integer_bits(x, "bit_length")
    return (bits - jax.lax.clz(mag)).astype(jnp.result_type(0) if dtype == jnp.bool_ else dtype)


def bit_count(x, /):
    """``x.bit_count()``; of a traced integer, the number of ones in ``abs(x)`` (a traced
    integer). Plain Python: ``x.bit_count()``."""
    if not _traced(x):
        return x.bit_count()
    mag, _, dtype = _integer_bits(x, "bit_count")
    return jax.lax.population_count(mag).astype(dtype)


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


# ---------------------------------------------------------------------------
# reductions over a comprehension with an `if`
# ---------------------------------------------------------------------------

class Filtered:
    """The items of ``(ELT for T in XS if TEST)`` as ``(TEST, lambda: ELT)``
    pairs, for a reduction (see ``filtered``)."""

    __slots__ = ("pairs", "fn", "iterable", "listed", "static")

    def __init__(self, items, iterable, listed):
        if iterable is None:
            self.pairs, self.fn, self.iterable = items, None, None
        else:
            self.pairs, self.fn, self.iterable = None, items, iterable
        self.listed = listed

    def items(self):
        """``(mask, item)`` for each item kept, in order: ``mask`` is None for a
        concrete test (Python's own decision: a dropped item is never made),
        the test as a traced boolean otherwise. A list comprehension's items
        are all made first, as Python makes the list."""
        out = self._items()
        return iter(list(out)) if self.listed else out

    def _items(self):
        pairs = self.pairs if self.fn is None else map(self.fn, self.iterable)
        for test, thunk in pairs:
            c = _truth(test, user_site, what="test of a comprehension's `if`")
            if c is None:
                yield as_pred(test), thunk()
            elif c:
                yield None, thunk()

    def mapped(self):
        """``(masks, items)``, each test and item of a ``for`` over a traced
        array made at once (``jax.vmap`` over its leading axis; a concrete test
        is a mask too); None where the items are not those of a traced array."""
        xs = self.iterable
        if self.fn is None or not _traced(xs) or np.ndim(xs) == 0:
            return None
        fn = self.fn
        self.static = None

        def one(x):
            test, thunk = fn(x)
            # (a test that does not depend on the item: kept or dropped for all)
            self.static = _truth(test, user_site, what="test of a comprehension's `if`")
            value = thunk()
            _check_maskable(value)
            return as_pred(test), jnp.asarray(value)

        return jax.vmap(one)(xs)

    def values(self, dropped, pred=None):
        """The items Python's reduction sees: a masked item ``v`` becomes
        ``jnp.where(mask, v, dropped(v))`` (``pred(v)`` in place of ``v`` when
        given), a value that leaves the reduction unchanged where dropped."""
        for mask, v in self.items():
            if mask is None:
                yield v
            elif pred is not None and (not is_array_like(v) or np.size(v) != 1):
                yield v  # no single truth value: the reduction raises Python's error
            else:
                _check_maskable(v)
                w = pred(v) if pred is not None else v
                yield jnp.where(mask, w, dropped(w))

    def __iter__(self):  # pragma: no cover - the rewriter hands it to a reduction only
        return (v for _, v in self.items())


def _check_maskable(v):
    if not is_array_like(v):
        raise ConversionError(message(
            user_site(), f"this comprehension's `if` is traced, so its items are kept or "
            f"dropped when the compiled code runs, but an item is {describe(v)}, not a "
            "number or array",
            "Make the items numbers or arrays, or make the test static."))


def filtered(items, iterable=None, listed=False, /):
    """The items of a comprehension with an ``if``, for a reduction.

    The rewriter makes ``sum(x for x in xs if x > t)`` into
    ``af.sum(af.filtered(lambda x: (x > t, lambda: x), xs))`` (a generator of
    ``(test, thunk)`` pairs and no ``iterable`` for other comprehensions).
    Plain Python::

        def filtered(items, iterable=None, listed=False):
            pairs = items if iterable is None else map(items, iterable)
            kept = (thunk() for test, thunk in pairs if test)
            return list(kept) if listed else kept

    ``sum``, ``any``, ``all``, ``max``, ``min`` and ``len`` reduce it: with
    concrete tests as Python reduces the comprehension; an item whose test
    is traced is masked instead of dropped (``sum`` adds ``jnp.where(test,
    x, 0)``, ``any`` reads ``test & bool(x)``...). ``max``/``min`` of items
    that may all be dropped at run time need ``default=``. Over a traced
    array (``for x in xs``) the tests and items are made at once, mapped over
    its leading axis (``jax.vmap``), and reduced with ``jnp``; over a list,
    item by item.
    """
    if isinstance(iterable, String):  # its characters, each masked by the traced length
        return Filtered(_character_pairs(items, iterable), None, listed)
    if iterable is not None and iterable.__class__ is TracedRange:
        def one(i):
            test, thunk = items(i)
            return as_pred(test) if _traced(test) else _b.bool(test), thunk()
        return RangeItems(iterable, one)
    return Filtered(items, iterable, listed)


def _character_pairs(items, s):
    """``(test, thunk)`` for each position of a string made from traced values, up to
    its capacity: a position past its traced length is masked, and what the
    comprehension computes there runs only where it is inside (``later.on_path``: a
    check in it, ``int(c)``, fires only on real characters; the ``int()`` checks are
    gathered into one, made when the items are all made: ``strings.gathering``)."""
    from .later import on_path
    from .strings import characters, emit, gathering

    checks = []
    done = False
    try:
        for inside, char in characters(s):
            with on_path(inside), gathering(checks):
                test, thunk = items(char)
            c = _truth(test, user_site, what="test of a comprehension's `if`")
            if c is False:
                continue
            keep = inside if c is True else as_pred(test) if inside is None \
                else jnp.logical_and(inside, as_pred(test))
            yield (True if keep is None else keep), (
                lambda keep=keep, thunk=thunk: _gated(keep, thunk, checks))
        done = True
        emit(checks)
    finally:
        if not done and checks:  # (a reduction that stopped early, as Python's `any` does)
            try:
                emit(checks)
            except Exception:  # noqa: BLE001 - the reduction's own error goes on
                pass


def _gated(keep, thunk, checks):
    from .later import on_path
    from .strings import gathering

    with on_path(keep), gathering(checks):
        return thunk()


_EMPTY = object()


class RangeItems:
    """The items of a comprehension over a ``range`` with a traced bound, for a
    reduction: ``one(i)`` gives ``(mask, item)`` for the value ``i`` of the range
    (``mask``: the comprehension's ``if``, True without one). Reduced in one staged
    loop over the range (``_range_fold``); anything else refuses, as the range does."""

    __slots__ = ("range", "one")

    def __init__(self, rng, one):
        self.range, self.one = rng, one

    def __iter__(self):
        return iter(self.range)  # autoflow's error: a traced range is no Python sequence


def generated(fn, iterable, listed=False, /):
    """The items of ``(ELT for NAME in XS)`` (``[...]`` when ``listed``) handed to a
    reduction, as ``generated(lambda NAME: ELT, XS)``. Plain Python::

        def generated(fn, iterable, listed=False):
            items = (fn(v) for v in iterable)
            return list(items) if listed else items

    Over a ``range`` with a traced bound, a ``RangeItems`` that ``sum``, ``any``,
    ``all``, ``max`` and ``min`` reduce in one staged loop."""
    if isinstance(iterable, String):  # its characters, each masked by the traced length
        return Filtered(_character_pairs(lambda c: (True, lambda: fn(c)), iterable), None,
                        listed)
    if iterable.__class__ is TracedRange:
        return RangeItems(iterable, lambda i: (True, fn(i)))
    items = (fn(v) for v in iterable)
    return list(items) if listed else items


def _range_fold(kind, items, start=0, default=_EMPTY):
    """``sum``/``any``/``all``/``max``/``min`` of a ``RangeItems``: a ``lax.fori_loop``
    over the range's traced length, each item masked by its test."""
    from jax import lax

    from . import later
    from .ranges import _empty

    first, step, n = items.range.parts()

    def at(k):
        mask, v = items.one(first + k.astype(first.dtype) * step)
        return as_pred_vec(jnp.asarray(mask)), v

    spec = jax.eval_shape(lambda k: at(k)[1], jnp.zeros((), n.dtype))
    zeros = jnp.zeros(spec.shape, spec.dtype)
    if kind == "sum":
        dtype = jnp.result_type(start, spec.dtype)
        shape = jnp.broadcast_shapes(np.shape(start), spec.shape)
        init = jnp.broadcast_to(jnp.asarray(start).astype(dtype), shape)

        def body(k, acc):
            mask, v = at(k)
            return acc + jnp.where(mask, v, zeros).astype(dtype)

        return lax.fori_loop(0, n, body, init)
    if kind in ("any", "all"):
        if spec.shape != () and int(np.prod(spec.shape)) != 1:
            raise ConversionError(message(
                user_site(), f"`{kind}()` of items of shape {spec.shape}, which have no "
                "single truth value", f"Reduce elementwise with `jnp.{kind}`."))

        def body(k, acc):
            mask, v = at(k)
            truth = as_pred_vec(jnp.reshape(v, ()))
            return acc | (mask & truth) if kind == "any" else acc & (~mask | truth)

        return lax.fori_loop(0, n, body, jnp.asarray(kind == "all"))
    if spec.shape != ():
        raise ConversionError(message(
            user_site(), f"`{kind}()` compares items of shape {spec.shape}, which have no "
            "single truth value", f"Reduce elementwise with `jnp.{kind}imum` or `jnp.{kind}`."))
    better = operator.gt if kind == "max" else operator.lt

    def body(k, carry):
        best, have = carry
        mask, v = at(k)
        take = mask & (~have | better(v, best))
        return jnp.where(take, v, best), have | mask

    best, have = lax.fori_loop(0, n, body, (zeros, jnp.asarray(False)))
    if default is not _EMPTY:
        return _or_default(kind, best, have, {"default": default})
    site = user_site()
    later.later(_empty, (kind, site), site=site, when=~have)
    return best


def len(obj, /):  # noqa: A001
    """``len``; of a list comprehension with a traced ``if``, the number of
    items kept (a traced integer); of a dict, without the keys a staged loop that ran
    no iteration left unset (``later.maybe_unset``: a traced integer)."""
    if obj.__class__ is TracedRange:
        return obj.length()
    if isinstance(obj, String):  # made from traced values: a traced length
        from .strings import length
        return length(obj)
    if type(obj) is dict:  # keys a staged loop that ran no iteration did not set
        from .later import maybe_unset

        unset = maybe_unset(obj)
        if unset:
            return _b.len(obj) - _b.sum(jnp.logical_not(f).astype(jnp.int32)
                                        for f in unset.values())
    if not isinstance(obj, Filtered):
        return _b.len(obj)
    mapped = obj.mapped()
    if mapped is not None:
        return jnp.sum(mapped[0].astype(jnp.int32))
    count, masked = 0, []
    for mask, _ in obj.items():
        if mask is None:
            count += 1
        else:
            masked.append(mask)
    if not masked:
        return count
    return count + jnp.sum(jnp.stack(masked).astype(jnp.int32))



def _filtered_extreme(name, f, kwargs, better):
    """``max``/``min`` of a ``Filtered``: Python's algorithm (the first item is
    the best so far; a later one replaces it only if ``better``), as Python
    runs it while everything is concrete; from the first traced test or item
    on, the rest is reduced at once (``_masked_extreme``)."""
    extra = set(kwargs) - {"key", "default"}
    if extra:
        return getattr(_b, name)(f, **kwargs)  # Python's TypeError
    key = kwargs.get("key")
    mapped = f.mapped()
    if mapped is not None:
        masks, items = mapped
        if items.shape[0] == 0 or f.static is False:  # no item is kept, on every path
            return getattr(_b, name)((), **kwargs)  # Python's ValueError, or the default
        keys = items if key is None else jax.vmap(key)(items)
        best, have = _masked_extreme(name, masks, keys, items)
        return _or_default(name, best, True if f.static else have, kwargs)
    best = best_key = _EMPTY
    items = f.items()
    staged = None
    for mask, v in items:
        k = v if key is None else key(v)
        if mask is not None or _traced(k) or best is not _EMPTY and _traced(best_key):
            staged = [] if best is _EMPTY else [(None, best, best_key)]
            staged.append((mask, v, k))
            break
        if best is _EMPTY or better(k, best_key):  # Python's own comparison
            best, best_key = v, k
    if staged is None:
        if best is _EMPTY:
            return getattr(_b, name)((), **kwargs)  # Python's ValueError, or the default
        return best
    for mask, v in items:  # (Python's max reads every item too)
        staged.append((mask, v, v if key is None else key(v)))
    for _, v, k in staged:
        _check_maskable(v)
        _check_maskable(k)
    masks = [m for m, _, _ in staged if m is not None]
    have = True if _b.len(masks) < _b.len(staged) else jnp.any(jnp.stack(masks))
    kept = jnp.stack([jnp.asarray(True) if m is None else m for m, _, _ in staged])
    keys = jnp.stack(jnp.broadcast_arrays(*[jnp.asarray(k) for _, _, k in staged]))
    values = jnp.stack(jnp.broadcast_arrays(*[jnp.asarray(v) for _, v, _ in staged]))
    best, have_any = _masked_extreme(name, kept, keys, values)
    return _or_default(name, best, have if have is True else have_any, kwargs)


def _or_default(name, best, have, kwargs):
    """``best``, or where no item is kept, the default (``have``: True or traced)."""
    if have is True:
        return best
    if "default" not in kwargs:
        raise ConversionError(message(
            user_site(), f"`{name}()` of a comprehension whose `if` is traced: whether any "
            f"item is kept is known only when the compiled code runs, and Python's `{name}()` "
            "of an empty sequence raises ValueError",
            f"Give a default for the empty case, `{name}(..., default=...)` (a number), or "
            f"use `jnp.{name}(jnp.where(mask, xs, {'-' if name == 'max' else ''}jnp.inf))`."))
    default = kwargs["default"]
    if not is_array_like(default):
        raise ConversionError(message(
            user_site(), f"`{name}()` of a comprehension whose `if` is traced returns its "
            f"default, {describe(default)}, when no item is kept, which is known only when "
            "the compiled code runs; a traced choice can only be between arrays",
            "Give a number as the default (and test for it after the call)."))
    return jnp.where(have, best, default)


def _masked_extreme(name, kept, keys, values):
    """``(best, have)`` over stacked items, as Python's fold picks it: the first
    kept item if its key is NaN (nothing compares greater than NaN), else the
    first kept item with the largest (smallest) key, NaN keys never chosen.
    ``have``: whether any item is kept (a traced boolean)."""
    if keys.ndim != 1:
        raise ConversionError(message(
            user_site(), f"`{name}()` compares items of shape {keys.shape[1:]}, which "
            "have no single truth value",
            f"Reduce elementwise with `jnp.{name}imum` or `jnp.{name}`."))
    first = jnp.argmax(kept)  # the first kept item
    inexact = jnp.issubdtype(keys.dtype, jnp.inexact)
    usable = kept & ~jnp.isnan(keys) if inexact else kept
    if keys.dtype == jnp.bool_:
        keys = keys.astype(jnp.int32)
    if inexact:
        fill = -jnp.inf if name == "max" else jnp.inf
    else:
        info = jnp.iinfo(keys.dtype)
        fill = info.min if name == "max" else info.max
    reduce = jnp.max if name == "max" else jnp.min
    extreme = reduce(jnp.where(usable, keys, fill))
    index = jnp.argmax(usable & (keys == extreme))  # the first one with that key
    if inexact:
        index = jnp.where(jnp.isnan(keys[first]), first, index)
    return values[index], jnp.any(kept)


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
    """``int``; of a traced scalar, a cast (truncating toward zero); of a string made
    from traced values, Python's parse of its characters (``runtime.strings``)."""
    if isinstance(x, String):
        from .strings import to_int
        return to_int(x, *args, **kwargs)
    if not args and not kwargs:
        out = _cast("int", x, _b.int)
        if out is not None:
            return out
    return _b.int(x, *args, **kwargs)


def float(x=0.0, /):  # noqa: A001
    """``float``; of a traced scalar, a cast to JAX's default float."""
    if isinstance(x, String):
        from .strings import _cannot
        _cannot(x, "`float()` of", "Compute with the number itself rather than its text.")
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


_PY_SCALARS = (_b.bool, _b.int, _b.float, _b.complex)


def _python_numbers(items):
    """Is every item a Python number (``bool``/``int``/``float``/``complex``, no subclass)?"""
    kinds = _PY_SCALARS
    return _b.all(v.__class__ in kinds for v in items)


def _constant(items):
    """A table of Python numbers as one array constant, typed as ``jnp.stack`` of the
    numbers would type it (JAX's weak type for ``int``/``float``/``complex``, which a
    Python number keeps in arithmetic): one constant of the table's length instead of
    one per item (which takes time quadratic in the length to trace)."""
    from jax import lax

    kinds = {v.__class__ for v in items}
    dtype = jnp.result_type(*(k(0) for k in kinds))
    arr = jnp.asarray(np.asarray(items, dtype=dtype))
    if kinds == {_b.bool}:
        return arr
    # (`lax.full` of a Python number is weakly typed, and `.at[...].set` keeps the
    # weak type of the array it writes into)
    zero = 0j if _b.complex in kinds else 0.0 if _b.float in kinds else 0
    return lax.full(arr.shape, zero).at[...].set(arr)


_ITEM = (_b.int, _b.float, _b.bool, _b.complex, np.generic, np.ndarray, jax.Array)

# id(list) -> (the list's items when it was stacked, the stacked array, the trace it
# was made in): a table of traced items read again in the same trace is not stacked
# again.
_STACKS = {}


def _stack(table):
    """``table`` (numbers, same-shape arrays, or lists/tuples of them, nested to one
    depth everywhere) as one array, or None where it cannot be."""
    if isinstance(table, np.ndarray):
        return jnp.asarray(table) if table.dtype.kind in "biufc" else None
    items = list(table)
    if not items:
        return None
    if _python_numbers(items):
        return _constant(items)
    if _b.all(isinstance(v, (list, tuple)) for v in items):
        rows = [_stack(v) for v in items]
        if _b.any(r is None for r in rows) or _b.len({r.shape for r in rows}) != 1:
            return None
        return jnp.stack(rows)
    if not _b.all(isinstance(v, _ITEM) for v in items):
        return None
    if _b.len({np.shape(v) for v in items}) != 1:
        return None
    trace = current_trace()
    cached = _STACKS.get(id(table)) if isinstance(table, list) else None
    if cached is not None and cached[2] is trace and _b.len(cached[0]) == _b.len(items) \
            and _b.all(a is b for a, b in zip(cached[0], items)):
        return cached[1]
    out = jnp.stack([jnp.asarray(v) for v in items])
    if isinstance(table, list) and _any_traced(items):
        if _b.len(_STACKS) > 256:
            _STACKS.clear()
        _STACKS[id(table)] = (items, out, trace)
    return out


def stacked(table, what, site=None):
    """``table`` (a list/tuple of numbers or same-shape arrays, a list of such lists,
    or a NumPy array) as one ``jnp`` array; a clear error when its items cannot stack."""
    out = _stack(table)
    if out is not None:
        return out
    site = site or user_site(3)
    kind = type(table).__name__
    raise ConversionError(message(
        site, f"{what} a Python {kind} with a traced index, but its items "
        f"({structure(table) if not isinstance(table, np.ndarray) else table.dtype}) "
        "cannot be stacked into one array",
        f"Only a {kind} of numbers or of arrays of one shape (or of lists of them, all of one "
        "length) can be indexed by a traced value. Make the index concrete (a Python loop: "
        "`autoflow.unroll(...)`), or keep the items in one JAX array."))


# id(a row read from a table at a traced index) -> (a weak reference to it, the kinds of
# the table's levels below the one read: "list", "tuple" or "ndarray" each). A row of a
# table of lists is no list of the table's, so a write into it is autoflow's error
# (``is_table_row``); an index into any row is checked as Python checks it.
_ROWS = {}


def _levels(table):
    """The kinds of ``table``'s levels, outermost first (``("list", "tuple")`` for a list
    of tuples of numbers; ``"ndarray"`` for a NumPy array, whose rows are arrays too)."""
    kinds = []
    v = table
    while isinstance(v, (list, tuple, np.ndarray)):
        if isinstance(v, np.ndarray):
            kinds.append("ndarray")
            break
        kinds.append("list" if isinstance(v, list) else "tuple")
        if not v:
            break
        v = v[0]
    return tuple(kinds)


def _row_levels(x):
    ref = _ROWS.get(id(x))
    return ref[1] if ref is not None and ref[0]() is x else None


def _remember_row(out, levels):
    if not levels or np.ndim(out) == 0:
        return
    if _b.len(_ROWS) > 512:
        for k in [k for k, v in _ROWS.items() if v[0]() is None]:
            del _ROWS[k]
    import weakref
    _ROWS[id(out)] = (weakref.ref(out), levels)


def _int_index(i):
    """Is ``i`` one integer index (a Python or NumPy integer, or a traced integer scalar)?"""
    if isinstance(i, (_b.bool, np.bool_)):
        return False
    if isinstance(i, (_b.int, np.integer)):
        return True
    return _traced(i) and np.ndim(i) == 0 and jnp.issubdtype(jnp.result_type(i), jnp.integer)


_CLAMP_NOTE = ("A {kind} indexed by a traced index is checked when the compiled code "
               "runs, as Python checks it; for JAX's clamped indexing instead, index "
               "`jnp.asarray(table)[i]`, or use `jnp.take(table, i, mode=\"clip\")`.")


def _numpy_index_error(shape, index, site):
    """NumPy's ``IndexError`` for ``index`` (run-time values) into an array of ``shape``."""
    from .later import fail

    try:
        np.broadcast_to(np.False_, shape)[tuple(_b.int(i) for i in index)]
    except IndexError as e:
        raise fail(e, site, _CLAMP_NOTE.format(kind="NumPy array")) from None


def check_index(kind, shape, index, site, write=False):
    """Python's ``IndexError`` where ``index`` (a traced or concrete integer, or a tuple
    of them into a NumPy array) is out of range of a table of ``kind`` (``"list"``,
    ``"tuple"``, ``"ndarray"``) whose stacked shape is ``shape``: at once where it is
    known, else when the compiled code runs. A negative index in range counts from
    the end, as in Python. ``write``: ``x[i] = v`` (Python's message says so)."""
    from . import later

    where = index if isinstance(index, tuple) else (index,)
    if _b.len(where) > _b.len(shape) or not _b.all(_int_index(i) for i in where):
        return  # (not Python's integer index: JAX's own indexing decides)
    bad = False
    for i, n in zip(where, shape):
        out = (i >= n) | (i < -n)
        bad = out if bad is False else bad | out
    if kind == "ndarray":
        if not _traced(bad):
            if bad:
                _numpy_index_error(shape, where, site)
            return
        later.later(_numpy_index_error, (tuple(shape), where, site), site=site, when=bad)
        return
    text = f"{kind} assignment index out of range" if write else f"{kind} index out of range"
    later.check(bad, IndexError, text, site, _CLAMP_NOTE.format(kind=f"Python {kind}"))


def getitem(table, index):
    """``table[index]``; a Python table indexed by a traced integer is stacked.

    Plain Python::

        def getitem(table, index):
            return table[index]

    Of a dict: Python's ``KeyError`` where a staged loop that sets the key ran no
    iteration (``later.read_key``). An index out of range raises Python's
    ``IndexError`` (``list index out of range``;
    of a NumPy array, NumPy's message) when the compiled code runs (``check_index``),
    where JAX's indexing would clamp; a tuple index into a list is Python's ``TypeError``.
    A table of lists read at a traced index gives its row as an array (``t[i][j]``
    then reads on, checked as the row's list would be); that row is no list of the
    table's, so a write into it is autoflow's error (``setitem``), as Python would
    change the table.
    """
    if type(table) is dict:  # `d["k"]` where a staged loop may have left "k" unset
        from .later import read_key

        return read_key(table, index, user_site())
    levels = _row_levels(table) if _ROWS and isinstance(table, jax.Array) else None
    if levels is not None:  # `t[i][j]`: `j` into the row `t[i]` read at a traced `i`
        if levels[0] != "ndarray" and isinstance(index, tuple):
            raise TypeError(f"{levels[0]} indices must be integers or slices, not tuple")
        check_index(levels[0], np.shape(table), index, user_site())
        out = table[index]
        _remember_row(out, levels if levels[0] == "ndarray" else levels[1:])
        return out
    if isinstance(table, (list, tuple, np.ndarray)) and _index_traced(index):
        levels = _levels(table)
        if levels[0] != "ndarray" and isinstance(index, tuple):
            kind = "list" if isinstance(table, list) else "tuple"
            raise TypeError(f"{kind} indices must be integers or slices, not tuple")
        site = user_site()
        table_array = stacked(table, "this line indexes", site)
        check_index(levels[0], table_array.shape, index, site)
        out = table_array[index]
        _remember_row(out, levels if levels[0] == "ndarray" else levels[1:])
        return out
    return table[index]


def get(d, *args):
    """``d.get(key, default=None)``.

    Plain Python::

        def get(d, *args):
            return d.get(*args)

    Where a staged loop that sets ``d[key]`` in its body may have run no iteration
    (``later.key_flag``), the value where it ran and ``default`` where it did not
    (``jnp.where``), as Python; a ``default`` that cannot stand in for the value
    (``None``, another shape) is autoflow's error at the line.
    """
    if type(d) is dict and args and _b.len(args) <= 2:
        from .later import key_flag

        try:
            value = d.get(args[0], _MISSING)
        except TypeError:  # (an unhashable key: Python's error below)
            value = _MISSING
        flag = None if value is _MISSING else key_flag(value)
        if flag is not None:
            default = args[1] if _b.len(args) == 2 else None
            if not (is_array_like(value) and is_array_like(default)
                    and np.shape(default) in ((), np.shape(value))
                    and not is_extended(jnp.result_type(value))):
                raise ConversionError(message(
                    user_site(), f"this line reads the key {args[0]!r} with `get`, which a "
                    "traced loop sets in its body: where the loop runs no iteration Python "
                    f"gives the default, {describe(default)}, which cannot stand in for "
                    f"{describe(value)} in compiled code",
                    f"Give a default of the value's shape and dtype (`.get({args[0]!r}, "
                    f"0.0)`), or set the key before the loop."))
            return jnp.where(flag, value, default)
    return d.get(*args)


_MISSING = object()


def is_table_row(x):
    """Was ``x`` read from a table of lists at a traced index (``getitem``)?"""
    levels = _row_levels(x) if _ROWS else None
    return levels is not None and levels[0] == "list"


def _write_back(x, arr):
    """Put the items of ``arr`` into the (nested) list ``x``, in place."""
    for k in _b.range(_b.len(x)):
        if isinstance(x[k], list):
            _write_back(x[k], arr[k])
        else:
            x[k] = arr[k]


def _rows_distinct(x, seen=None):
    seen = set() if seen is None else seen
    for v in x:
        if isinstance(v, list):
            if id(v) in seen:
                return False
            seen.add(id(v))
            if not _rows_distinct(v, seen):
                return False
    return True


def setitem_list(x, index, value, op, binops, path=()):
    """``x[index] = value`` on a list with a traced index: the list's items
    become the rows of ``stacked(x).at[index].set(value)``. ``path``: the indices
    before ``index`` (``x[i][j] = v``: ``path=(i,)``, ``index=j``); a list of lists is
    updated in place, each row keeping its identity. An index out of range is Python's
    ``IndexError`` when the compiled code runs (where JAX's update would be dropped)."""
    site = user_site()
    where = tuple(path) + (index,)
    if _b.len(where) > 1:
        bad = [v for v in x if not isinstance(v, list)]
        if bad:
            raise ConversionError(message(
                site, "this line writes into a row of a Python list chosen by a traced "
                f"index, but a row is {describe(bad[0])}, which Python cannot write into "
                "(or not the same way at every index)",
                "Make every row a list, or keep the table in one JAX array."))
    if not _rows_distinct(x):
        raise ConversionError(message(
            site, "this line writes into a Python list of lists at a traced index, but "
            "some of its rows are the same list (`[[0] * k] * m` makes one row `m` times), "
            "so Python's write changes all of them",
            "Make each row a list of its own: `[[0] * k for _ in range(m)]`."))
    arr = stacked(x, "this line writes into", site)
    for k, i in enumerate(where):  # Python reads `x[i]`, then writes `x[i][j] = value`
        check_index("list", arr.shape[k:k + 1], i, site, write=k == _b.len(where) - 1)
    at = where if _b.len(where) > 1 else index
    if op is None:
        arr = arr.at[at].set(value)
    else:
        arr = arr.at[at].set(binops[op](arr[at], value))
    _write_back(x, arr)
    return x


def check_numpy_write(buf, index, value, op=None):
    """``buf[index] = value`` on a NumPy array: a traced ``value`` (or ``index``)
    cannot go into it (NumPy would say "setting an array element with a
    sequence"); autoflow's error names the buffer and the ``jnp`` way."""
    if buf.dtype == object or not _any_traced((index, value)):
        return
    site = user_site(2)
    name, index_src, value_src = _write_parts(site)
    what = "value" if _any_traced(value) else "index"
    target = f"`{name}`" if name else "this NumPy array"
    at = {None: "set", "+": "add", "*": "multiply", "/": "divide", "**": "power"}.get(op)
    new = (f"`{name} = {name}.at[{index_src}].{at}({value_src})`" if name and index_src
           and value_src and at else "`buf = buf.at[i].set(v)`")
    raise ConversionError(message(
        site, f"this line writes a traced {what} into {target}, a NumPy array "
        f"({buf.dtype}{list(buf.shape)}); a NumPy array holds only concrete numbers, and "
        "this value is known only when the compiled code runs",
        f"Make {target} a JAX array (`jnp.zeros(...)` instead of `np.zeros(...)`) and write "
        f"with {new}: a JAX array is updated functionally, and autoflow carries it through "
        "loops and branches."))


def _write_parts(site):
    """``(buffer name, index source, value source)`` of the item assignment on
    ``site``'s line (Nones where the line says otherwise)."""
    import ast

    try:
        stmt = ast.parse(site.source_line().strip()).body[0]
    except (AttributeError, SyntaxError, IndexError, ValueError):
        return None, None, None
    target = stmt.targets[0] if isinstance(stmt, ast.Assign) and _b.len(stmt.targets) == 1 \
        else stmt.target if isinstance(stmt, ast.AugAssign) else None
    if not isinstance(target, ast.Subscript) or not isinstance(target.value, ast.Name):
        return None, None, None
    return target.value.id, ast.unparse(target.slice), ast.unparse(stmt.value)


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


# ---------------------------------------------------------------------------
# math on traced scalars
# ---------------------------------------------------------------------------

def _math_table():
    import math

    from .floats import table
    from .integers import FUNCTIONS

    functions = {**table(), **FUNCTIONS}
    return {id(getattr(math, n)): (getattr(math, n), f) for n, f in functions.items()
            if hasattr(math, n)}


MATH = _math_table()


def math_call(f, args, kwargs):
    """``math.exp(x)``... with a traced argument: the ``jnp`` function that gives the
    same value (``math.floor``/``ceil``/``trunc`` an integer, as Python's), raising
    Python's errors when the compiled code runs (``math.sqrt(-1.0)``: ``runtime.floats``;
    ``math.gcd``, ``comb``... of integers: ``runtime.integers``); ``NotImplemented``
    for any other call (the caller calls ``f``)."""
    hit = MATH.get(id(f))
    if hit is None or hit[0] is not f or not _any_traced((args, kwargs)):
        return NotImplemented
    return hit[1](*args, **kwargs)
