"""Snapshots of lists and dicts, nested ones included, and writes back in place.

``undoer`` puts containers back as they were; ``contents`` copies them (the leaves
shared); ``write`` makes a container hold new contents in place, so that aliases
see them.
"""

from __future__ import annotations

import jax

from ..common.values import DICTS, Tracer, dict_like, is_traced

_CONTAINERS = (list,) + DICTS
_UNFLATTENED: dict = {}  # a subclass of list or dict -> is it a leaf to JAX (not its pytree)?


def is_container(x) -> bool:
    """A list or dict whose contents a staged statement carries: Python's, the dicts JAX
    flattens, and a subclass JAX does not flatten (a user's ``class Config(dict)``),
    carried as a plain one (``contents``) and written back in place (``write``)."""
    t = type(x)
    if t in _CONTAINERS:
        return True
    if not isinstance(x, (list, dict)):
        return False
    leaf = _UNFLATTENED.get(t)
    if leaf is None:
        leaf = _UNFLATTENED[t] = jax.tree_util.tree_structure(x) == jax.tree_util.tree_structure(0)
    return leaf


class _Snap:
    """A container's contents at one moment, nested containers included."""

    __slots__ = ("obj", "items")

    def __init__(self, obj, memo):
        self.obj = obj
        memo[id(obj)] = self
        if isinstance(obj, list):
            self.items = [_snap(v, memo) for v in obj]
        else:
            self.items = {k: _snap(v, memo) for k, v in obj.items()}

    def restore(self, done):
        """Put the container (and those inside it) back as it was; return it."""
        if id(self.obj) in done:
            return self.obj
        done.add(id(self.obj))
        if isinstance(self.obj, list):
            self.obj[:] = [_restore(v, done) for v in self.items]
        else:
            self.obj.clear()
            self.obj.update({k: _restore(v, done) for k, v in self.items.items()})
        return self.obj


def holds_as(obj, value) -> bool:
    """Can container ``obj`` be written ``value`` in place: of its type, or (a subclass JAX
    does not flatten) a plain list or dict as ``contents`` gives it?"""
    return type(value) is type(obj) or is_container(obj) and (
        type(value) is list if isinstance(obj, list) else type(value) in DICTS)


def _snap(value, memo):
    if is_container(value):
        hit = memo.get(id(value))
        return hit if hit is not None else _Snap(value, memo)
    return value


def _restore(value, done):
    return value.restore(done) if isinstance(value, _Snap) else value


def _new_tracer(value, snap):
    """Does ``value`` hold a traced value that the snapshot ``snap`` did not?"""
    old = None
    for leaf in jax.tree_util.tree_leaves(value):
        if isinstance(leaf, Tracer) and is_traced(leaf):
            if old is None:
                old = {id(x) for x in jax.tree_util.tree_leaves(_restore_copy(snap))}
            if id(leaf) not in old:
                return True
    return False


def _restore_copy(value):
    """The recorded contents of a snapshot as plain lists and dicts."""
    if isinstance(value, _Snap):
        items = value.items
        if isinstance(items, list):
            return [_restore_copy(v) for v in items]
        return {k: _restore_copy(v) for k, v in items.items()}
    return value


def undoer(values):
    """A function that puts the lists and dicts ``values`` hold (nested ones too) back
    as they are now: for a traced path that is abandoned after it changed them in
    place (a branch every path of which raises)."""
    memo = {}
    snaps = [_snap(v, memo) for v in values]

    def undo():
        done = set()
        for snap in snaps:
            _restore(snap, done)
    return undo


def contents(value):
    """``value`` with every list and dict copied (the leaves are shared)."""
    if type(value) is list:
        return [contents(v) for v in value]
    if type(value) in DICTS:
        return dict_like(value, {k: contents(v) for k, v in value.items()})
    if is_container(value):  # (a subclass JAX does not flatten: as a plain one)
        return [contents(v) for v in value] if isinstance(value, list) else {
            k: contents(v) for k, v in value.items()}
    return value


def write(obj, value):
    """Make container ``obj`` hold ``value`` (same layout), in place; return ``obj``.

    Nested containers of ``obj`` are updated in place too where the layout
    matches, so references to them stay valid.
    """
    if value is obj:  # (already it: clearing it first would empty both)
        return obj
    if isinstance(obj, list) and type(value) is list and is_container(obj):
        old = list(obj)
        obj[:] = [write(old[i], v) if i < len(old) else v for i, v in enumerate(value)]
        return obj
    if isinstance(obj, dict) and type(value) in DICTS and is_container(obj):
        old = dict(obj)
        obj.clear()
        obj.update({k: write(old[k], v) if k in old else v for k, v in value.items()})
        return obj
    return value
