"""Counting lanes and finding slots with products of matrices, not reductions.

On XLA:CPU a call of a compiled program costs one to two microseconds for each
reduction the program holds (a sum, an ``any``, an ``argmax``: twice that), whether
it runs or not: one in a branch that is not taken, or in a loop that runs no
iteration, costs as much as one that runs (``benchmarks/untaken_branch.py``). A
product of a matrix and a vector costs nothing where it does not run. autoflow's
own bookkeeping (how many lanes still run, the first free checkpoint slot, the
nearest saved step) sits in such places: the flat loop of ``lanes="auto"`` behind
its ``cond``, the checkpointed remainder of a stored reverse pass behind its own,
the test of every loop under ``vmap``. Here it is computed with products:

* ``counts(*masks)``: how many ``True`` each mask holds (one product for all; float32,
  exact below 2**24 items), ``count(mask)`` (int32, exact at every size); from ``MANY``
  lanes on, these are reductions again (a step's work outweighs their fixed cost);
* ``any_(mask)``, which stays a reduction (see there);
* ``first(mask)``, ``argmax(values)``, ``argmin(values)``: as ``jnp.argmax`` /
  ``jnp.argmin`` (the first such index; 0 for a mask with no ``True``), for the short
  vectors of checkpoint slots (a square of comparisons, ``SMALL`` items at most;
  longer ones use ``jnp``'s reductions).

The results are exact: sums of ones, and of one index, in float32 at the highest
precision of the product, on fewer than ``MANY`` items (a float32 sum of ones is exact
below ``EXACT``); ``count`` stays exact at every size (an int32 ``jnp.sum`` from
``MANY`` on). XLA makes a product by a matrix of one row a reduction, so a single row
is given a second.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

SMALL = 256  # the most items first/argmax/argmin compare pairwise
EXACT = 2**24  # from this many items on, a float32 sum of ones may round
MANY = 2**16  # from this many lanes on, counts are reductions (see counts)


def _sums(rows):
    """``rows.sum(axis=1)`` of a float32 matrix, as a product (a second row added to one)."""
    k = rows.shape[0]
    if k == 1:
        rows = jnp.concatenate([rows, jnp.zeros_like(rows)])
    out = jnp.matmul(rows, jnp.ones(rows.shape[1:], jnp.float32),
                     precision=lax.Precision.HIGHEST)
    return out[:k]


def counts(*masks):
    """How many lanes each of ``masks`` (booleans of one shape) holds: float32 scalars.
    From ``MANY`` lanes on, reductions: there a step's work outweighs a reduction's fixed
    cost, and a product measured slower a step (a million lanes: 16 against 14 ms)."""
    rows = jnp.stack(masks).reshape(len(masks), -1).astype(jnp.float32)
    if rows.shape[1] >= MANY:
        out = jnp.sum(rows, axis=1)
    else:
        out = _sums(rows)
    return tuple(out[k] for k in range(len(masks)))


def count(mask):
    """How many lanes ``mask`` holds, as an exact int32 (a product below ``MANY`` items,
    where a float32 sum of ones is exact; ``jnp.sum`` in int32 from there on)."""
    if mask.size >= MANY:
        return jnp.sum(mask.astype(jnp.int32))
    return counts(mask)[0].astype(jnp.int32)


def any_(mask):
    """``jnp.any(mask)``: a reduction, not a product. The product's flops count in XLA's
    cost analysis, and from 1,000 flops on XLA's CPU client runs a program on a worker
    thread, a hand-off of 15-30 us a call: the batched bisection of
    ``benchmarks/real_algorithms.py`` (16 lanes, 978 flops with the reduction, 1,044
    with the product) took 44 us a call against 12.5; the Gamma sampler, cg and the
    unbalanced nests of ``benchmarks/nested_lanes.py`` took the same time either way
    (0.98-1.00x, in one process)."""
    return jnp.any(mask)


def first(mask):
    """``jnp.argmax(mask)`` of a boolean vector: the index of its first ``True`` (0 if
    none), as int32."""
    n = mask.shape[0]
    if n > SMALL:
        return jnp.argmax(mask).astype(jnp.int32)
    iota = jnp.arange(n, dtype=jnp.int32)
    on = mask.astype(jnp.float32)
    # how many True come before each item: a lower triangle of ones times the mask
    before = _sums((iota[:, None] > iota[None, :]).astype(jnp.float32) * on[None, :])
    hit = (mask & (before == 0)).astype(jnp.float32)  # one item at most: the first True
    return _sums((hit * iota.astype(jnp.float32))[None, :])[0].astype(jnp.int32)


def _first_extreme(values, beats):
    """The first index of a vector's largest (``beats``: ``>=``) or smallest (``<=``)
    item, without NaN: an item is extreme where it beats every item."""
    n = values.shape[0]
    wins = _sums(beats(values[:, None], values[None, :]).astype(jnp.float32))
    return first(wins == n)


def argmax(values):
    """``jnp.argmax`` of a vector without NaN: the first index of its largest item."""
    if values.shape[0] > SMALL:
        return jnp.argmax(values).astype(jnp.int32)
    return _first_extreme(values, jnp.greater_equal)


def argmin(values):
    """``jnp.argmin`` of a vector without NaN: the first index of its smallest item."""
    if values.shape[0] > SMALL:
        return jnp.argmin(values).astype(jnp.int32)
    return _first_extreme(values, jnp.less_equal)
