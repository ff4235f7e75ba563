"""The iterables a ``for`` loop can stage: ranges, arrays, ``enumerate``, ``zip``, ``reversed``.

``_as_seq`` gives an iterable's length and an indexable item (a traced index for a
staged loop) or None (it is iterated as Python); ``autoflow.unroll``/``roll`` mark
an iterable with per-loop options (``LoopOptions``).
"""

from __future__ import annotations

import builtins

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ...core.origin import message
from ...errors import ConversionError
from .. import jax as jx
from .ranges import TracedRange, range  # noqa: A004, F401 - (runtime.range)
from ..python.string_values import String
from ..python.strings import items as string_items, reversed_text
from ..common.values import Tracer


class LoopOptions:
    """An iterable with per-loop options: see ``autoflow.unroll``/``autoflow.roll``."""

    def __init__(self, iterable, mode, unroll=1):
        self.iterable, self.mode, self.unroll = iterable, mode, unroll

    def __iter__(self):
        return iter(self.iterable)



class Enumerate:
    def __init__(self, iterable, start=0):
        self.iterable, self.start = iterable, start

    def __iter__(self):
        return builtins.enumerate(self.iterable, self.start)


class Zip:
    def __init__(self, iterables, strict=False):
        self.iterables, self.strict = iterables, strict

    def __iter__(self):
        return builtins.zip(*self.iterables, strict=self.strict)


def enumerate(iterable, start=0):  # noqa: A001
    """``enumerate`` that a staged ``for`` loop can scan."""
    return Enumerate(iterable, start)


def zip(*iterables, strict=False):  # noqa: A001
    """``zip`` that a staged ``for`` loop can scan."""
    return Zip(iterables, strict)


def reversed(seq):  # noqa: A001 - mirrors the builtin
    """``reversed`` that keeps ranges (traced bounds too), arrays and strings made from
    traced values stageable."""
    if isinstance(seq, builtins.range):
        return seq[::-1]
    if isinstance(seq, TracedRange):
        start, step, length = seq.parts()
        return TracedRange(start + (length - 1) * step, start - step, -step)
    if isinstance(seq, (jax.Array, np.ndarray)) and np.ndim(seq) >= 1:
        return seq[::-1]
    if isinstance(seq, String):  # its characters, reversed (`"".join(reversed(s))`)
        return reversed_text(seq)
    return builtins.reversed(seq)


def _python_int(i):
    """The traced integer ``i`` typed as JAX types a Python int (weakly)."""
    if not isinstance(i, Tracer) or not jnp.issubdtype(i.dtype, jnp.integer):
        return i
    return jx.convert_weak(i, jax.dtypes.canonicalize_dtype(jnp.int64))


class _Seq:
    """An iterable with a length and an indexable item, so it can be staged."""

    def __init__(self, length, item, python, traced_items):
        self.length = length          # int, or a traced scalar
        self.item = item              # k (traced int) -> the k-th item
        self.python = python          # a Python iterable over the same items
        self.traced_items = traced_items


def _as_seq(it):
    # A range's items are Python ints: weakly typed (`h + i` with an int8 `h` is int8)
    if isinstance(it, builtins.range):
        r = it
        return _Seq(len(r), lambda k: _python_int(r.start + k * r.step), r, False)
    if isinstance(it, TracedRange):
        start, step, length = it.parts()
        return _Seq(length, lambda k: _python_int(start + k.astype(start.dtype) * step),
                    None, True)
    if isinstance(it, String):  # made from traced values: its characters
        length, char = string_items(it)
        return _Seq(length, char, None, True)
    if isinstance(it, (jax.Array, np.ndarray)) and np.ndim(it) >= 1:
        arr = it
        return _Seq(np.shape(arr)[0], lambda k: lax.dynamic_index_in_dim(
            jnp.asarray(arr), k, keepdims=False), arr, isinstance(arr, Tracer))
    if isinstance(it, Enumerate):
        inner = _as_seq(it.iterable)
        if inner is None:
            return None
        s = it.start
        # (the count is a Python int: weakly typed, as a range's items)
        return _Seq(inner.length, lambda k: (_python_int(s + k), inner.item(k)),
                    None if inner.python is None else
                    _Again(lambda: builtins.enumerate(inner.python, s)), inner.traced_items)
    if isinstance(it, Zip):
        inners = [_as_seq(x) for x in it.iterables]
        if not inners or any(x is None for x in inners):
            return None
        lengths = [x.length for x in inners]
        if builtins.all(isinstance(n, int) for n in lengths):
            if it.strict and len(set(lengths)) > 1:
                return None  # let Python raise its ValueError
            length = builtins.min(lengths)
        else:
            length = jnp.min(jnp.stack([jnp.asarray(n) for n in lengths]))
        pythons = [x.python for x in inners]
        return _Seq(length, lambda k: tuple(x.item(k) for x in inners),
                    None if builtins.any(p is None for p in pythons) else
                    _Again(lambda: builtins.zip(*pythons)),
                    builtins.any(x.traced_items for x in inners))
    return None


class _Again:
    """The items of ``make()``, iterable more than once (a ``for`` loop looks at the first
    item before it decides how to run: an ``enumerate`` or ``zip`` object, iterated
    again, would go on from the second and lose it)."""

    __slots__ = ("make",)

    def __init__(self, make):
        self.make = make

    def __iter__(self):
        return iter(self.make())


class ScalarIterationError(ConversionError, TypeError):
    """``for i in n`` with ``n`` a scalar: Python's ``TypeError``, in autoflow's words."""


def _scalar_iterable(value, site):
    """``for i in n:`` over a scalar (Python: ``TypeError``): say so, naming ``n``
    and suggesting ``range(n)``, which is what such a loop usually means."""
    import ast

    name = "n"
    try:
        stmt = ast.parse(site.source_line().strip() + "\n    pass").body[0]
        name = ast.unparse(stmt.iter)
    except (AttributeError, SyntaxError, IndexError, ValueError):
        pass
    raise ScalarIterationError(message(
        site, f"this `for` loop iterates over `{name}`, a scalar ({value.dtype}[]), which "
        "is not iterable (Python raises `TypeError` here too)",
        f"To loop `{name}` times, write `for ... in range({name}):` (a traced bound is "
        "staged as a `lax.while_loop`)."))


def unroll(iterable):
    """Mark a ``for`` loop's iterable to run as Python (unrolled under ``jit``)."""
    return LoopOptions(iterable, "unroll")


def roll(iterable, unroll=1):  # noqa: A002
    """Mark a ``for`` loop's iterable to always stage as a ``lax`` loop.

    ``unroll`` is passed to ``lax.fori_loop``/``lax.scan``.
    """
    return LoopOptions(iterable, "roll", unroll)
