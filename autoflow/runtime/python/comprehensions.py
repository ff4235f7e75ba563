"""Reductions over a comprehension with an ``if``, and ``len``.

``sum(x for x in xs if x > t)``, ``max``, ``min``, ``any``, ``all`` and ``len`` of
such a comprehension (``filtered``, ``generated``): an item whose test is traced is
masked (``jnp.where``) instead of dropped; a ``range`` with traced bounds is
reduced without a loop (``RangeItems``).
"""

from __future__ import annotations

import builtins as _b
import operator

import numpy as np
import jax
import jax.numpy as jnp

from ...core.origin import message, user_site
from ...errors import ConversionError
from ..loops.ranges import TracedRange
from .string_values import String
from ..common.values import as_pred_vec, as_pred, describe, is_array_like, is_traced, concrete_truth as _truth


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
        if self.fn is None or not is_traced(xs) or np.ndim(xs) == 0:
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
            return as_pred(test) if is_traced(test) else _b.bool(test), thunk()
        return RangeItems(iterable, one)
    return Filtered(items, iterable, listed)


def _character_pairs(items, s):
    """``(test, thunk)`` for each position of a string made from traced values, up to
    its capacity: a position past its traced length is masked, and what the
    comprehension computes there runs only where it is inside (``effects.path_condition.on_path``: a
    check in it, ``int(c)``, fires only on real characters; the ``int()`` checks are
    gathered into one, made when the items are all made: ``python.text.gathering``)."""
    from ..effects.path_condition import on_path
    from .strings import characters
    from .text import emit, gathering

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
    from ..effects.path_condition import on_path
    from .text import gathering

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

    from ..effects import later
    from ..loops.ranges import _empty

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
        if spec.shape != () and _b.int(np.prod(spec.shape)) != 1:
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
    no iteration left unset (``effects.unset.maybe_unset``: a traced integer)."""
    if obj.__class__ is TracedRange:
        return obj.length()
    if isinstance(obj, String):  # made from traced values: a traced length
        from .strings import length
        return length(obj)
    if type(obj) is dict:  # keys a staged loop that ran no iteration did not set
        from ..effects.unset import maybe_unset

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
        if mask is not None or is_traced(k) or best is not _EMPTY and is_traced(best_key):
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
