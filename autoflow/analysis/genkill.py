"""Gen/kill transfer functions: liveness through a statement, composed without sets of sets.

A function ``(G, K)`` maps the names live after a statement ``L`` to ``G | (L - K)``
(``K`` None: ``G``, everything killed); ``_then`` composes two, ``_union`` joins the
paths of a branch, ``_minus``/``_plus`` kill and add names. ``Summaries`` keeps one per
statement.
"""

from __future__ import annotations



_EMPTY = frozenset()


# ---- gen/kill functions ----------------------------------------------------
# (G, K): L -> G | (L - K); K None = kills everything (L -> G).
_ID = (_EMPTY, _EMPTY)


def _apply(f, live):
    g, k = f
    if k is None:
        return set(g)
    return g | (live - k) if k else g | live


def _then(first, second):
    """``second(first(L))``."""
    g1, k1 = first
    g2, k2 = second
    if k2 is None:
        return g2, None
    g = g2 | (g1 - k2) if k2 else g2 | g1
    return g, (None if k1 is None else k1 | k2)


def _union(*fs):
    g, k = set(), None
    first = True
    for gi, ki in fs:
        g |= gi
        if first:
            k, first = ki, False
        elif k is None:
            k = ki
        elif ki is not None:
            k = k & ki
    return frozenset(g), (None if k is None else frozenset(k))


def _minus(f, names):
    g, k = f
    return g - names, (None if k is None else k | names)


def _plus(f, names):
    g, k = f
    return g | names, k
