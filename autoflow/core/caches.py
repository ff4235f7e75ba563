"""Bounded caches: nothing autoflow remembers between calls grows without limit.

A cache keyed by something the program makes at run time (code objects, files,
classes, functions) is either held weakly (``weakref``: an entry goes with its
key) or is a ``Bounded`` dict, which drops its oldest entry when full; every
entry of such a cache can be computed again.
"""

from __future__ import annotations


class Bounded(dict):
    """A dict of at most ``limit`` entries: storing a new key when it is full first
    drops the entry stored first (the oldest). For caches, whose entries can be made
    again; ``seen``-sets are ``Bounded`` dicts of ``True``."""

    __slots__ = ("limit",)

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    def __setitem__(self, key, value):
        if len(self) >= self.limit and key not in self:
            del self[next(iter(self))]
        super().__setitem__(key, value)
