"""Lists of many like items carried through a staged loop as one array.

A dynamic-programming table kept in a Python list (``best = [0.0] * (n + 1)``, or
``[[0] * (m + 1) for _ in range(n + 1)]``), read and written at the loop's traced
index, would be ``n + 1`` carries of the loop, each read and written through a select
of all of them at every iteration (``python.tables`` stacks the list to index it). A
list (or a rectangular list of lists) of at least ``MIN_ITEMS`` items of one shape
and dtype is carried as that stacked array instead: the body gets a list
of its rows, which ``python.tables`` knows to be the array's (``remember_stack``), so a
read at a traced index is one dynamic index of it and a write one update; the list the
body gives back is stacked again (the array itself where its items are still the
array's rows). The lists are Python's lists everywhere the user's code sees them.
A body that gives back something else at that place (a list that grew, a value that
is no list) stages the loop again without packing (``Unpackable``).
"""

from __future__ import annotations

import jax.numpy as jnp

from ..common.carries import pack as variables, unpack as one_value
from ..common.values import aval_of, is_array_like
from ..effects.raising import Signal

MIN_ITEMS = 8


class Unpackable(Signal):
    """Internal: a packed list came back from the body as something else."""

    def __init__(self):
        super().__init__("internal: a packed loop carry changed its layout")


def _shape(value):
    """``(lengths, items)`` of a rectangular (nested) list of array-like items, or None."""
    if type(value) is not list or not value:
        return None
    if all(type(v) is list for v in value):
        rows = [_shape(v) for v in value]
        if any(r is None for r in rows) or len({r[0] for r in rows}) != 1:
            return None
        return (len(value),) + rows[0][0], [x for r in rows for x in r[1]]
    if not all(type(v) is not list and is_array_like(v) for v in value):
        return None
    return (len(value),), list(value)


def positions(values):
    """``{index: lengths}`` of the ``values`` (a loop's variables) to carry packed."""
    out = {}
    for j, v in enumerate(values):
        found = _shape(v)
        if found is None or len(found[1]) < MIN_ITEMS:
            continue
        # (one shape and dtype; a weak Python number among strong items becomes one
        # of them, as a write at a traced index makes it anyway)
        if len({aval_of(x)[:2] for x in found[1]}) == 1:
            out[j] = found[0]
    return out


def pack(value, n, where):
    """``value`` (a statement's ``n`` variables, as ``carries.pack`` takes them) with the
    lists at ``where`` stacked (``Unpackable`` where one is not a list of the lengths it
    was packed with); ``value`` itself where ``where`` is empty."""
    from ..python.tables import stacked

    if not where:
        return value
    out = list(variables(value, n))
    for j, lengths in where.items():
        found = _shape(out[j])
        if found is None or found[0] != lengths \
                or len({aval_of(x)[0] for x in found[1]}) != 1:
            raise Unpackable()
        out[j] = stacked(out[j], "this loop carries")
    return one_value(tuple(out))


def unpack(value, n, where):
    """``value`` (as ``pack`` gives it) with the arrays at ``where`` made lists of their
    rows again."""
    from ..python.tables import remember_stack

    if not where:
        return value
    out = list(variables(value, n))
    for j, lengths in where.items():
        arr = jnp.asarray(out[j])
        out[j] = _rows(arr, len(lengths))
        remember_stack(out[j], arr)
    return one_value(tuple(out))


def _rows(arr, depth):
    """``arr``'s items as nested lists ``depth`` deep."""
    from ..python.tables import unstacked

    items = unstacked(arr, depth)

    def level(shape):
        if len(shape) == 1:
            return [next(items) for _ in range(shape[0])]
        return [level(shape[1:]) for _ in range(shape[0])]
    return level(arr.shape[:depth])


def attempting(lists, staged, reset):
    """A statement's ``attempt(active)`` for ``state.shared.settle``: ``staged(active,
    lists)``, and, where a packed list came back as something else (``Unpackable``),
    ``staged(active, {})`` from then on (``reset()`` puts the carried state back)."""
    packing = {"lists": lists}

    def attempt(active):
        if packing["lists"]:
            try:
                return staged(active, packing["lists"])
            except Unpackable:
                packing["lists"] = {}
                if active:
                    reset()
        return staged(active, {})
    return attempt
