"""Containers a staged path keeps or replaces: ``kept``, ``derived``, ``is_original``.

A staged branch or loop body gets copies of its carried lists and dicts; where every
traced path keeps a variable's container (changes it in place), the result is
written back into the original object, so an alias sees what Python would.
"""

from __future__ import annotations

from ..common.values import DICTS
from .snapshots import holds_as, is_container, write
from .journal import _local
from .writes import mutates
from .reach import entry_values, reachable


class kept:
    """Context: which containers the carried variables hold, and whether a traced
    path keeps them (changes them in place, as ``lst.append(v)`` or
    ``lst[0] = v`` do) or rebinds the variable to another object.

    A staged branch or loop body gets copies of its carried lists and dicts
    (``lax`` passes values), and ``af.append`` extends a list functionally
    there (``derived`` records the new list as the same list, grown). When
    every traced path keeps a variable's container, the statement writes the
    result back into the original object (``write_back``): an alias of the
    list, or ``alias is lst``, then sees what Python would.
    """

    def __init__(self, values):
        self.entry = tuple(values)
        self.same = {i: True for i, v in enumerate(self.entry) if is_container(v)}
        self.substitute = {}  # index -> the original container the path works on
        self.also = set()  # ids of other containers the paths change in place (shared state)

    def aliased(self, fns):
        """The containers that ``fns`` can also reach another way (an alias in a
        closure): the paths must then work on the original objects (carried as
        shared state), so that the alias sees each change as it happens."""
        if not self.same:
            return []
        seen = reachable(entry_values(fns, ()))
        found = [i for i in self.same if id(self.entry[i]) in seen]
        self.substitute = {i: self.entry[i] for i in found}
        return [self.entry[i] for i in found]

    def wrap(self, fn, unpack_in, unpack_out, with_inputs=None):
        """``fn`` (a branch or loop body), noting for each traced call whether its
        outputs are its inputs' containers. ``with_inputs(args, {index: obj})``
        puts the original containers of ``aliased`` in place of the copies."""
        def run(*args):
            if self.substitute:
                args = with_inputs(args, {i: o for i, o in self.substitute.items()})
            inputs = unpack_in(args) if self.same else ()
            stack = _local.__dict__.setdefault("lineage", [])
            stack.append({})
            shared_now = _local.__dict__.setdefault("originals", [])
            shared_now.append({id(o) for o in self.substitute.values()} | self.also)
            try:
                out = fn(*args)
            finally:
                origins = stack.pop()
                shared_now.pop()
            outs = unpack_out(out) if self.same else ()
            for i in self.same:
                if i < len(outs) and i < len(inputs):
                    self.same[i] = self.same[i] and _derives(outs[i], inputs[i], origins)
            return out
        return run

    def write_back(self, values):
        """``values`` (the statement's results), with each kept container written
        into the original object in place and the variable bound to it."""
        if not self.same:
            return values
        values = list(values)
        for i, same in self.same.items():
            old = self.entry[i]
            if same and i < len(values) and holds_as(old, values[i]):
                mutates(old)  # an enclosing staged statement must carry it (and undo it)
                values[i] = write(old, values[i])
        return values


def is_original(obj):
    """``obj`` is a container that the innermost traced path works on in place
    (``kept.aliased``, or state the staged ``if`` carries): appending to it must
    change it, as Python does."""
    stack = _local.__dict__.get("originals")
    return bool(stack) and id(obj) in stack[-1]


def derived(new, old):
    """Note that list ``new`` is ``old`` changed (``af.append`` in a staged block)."""
    stack = _local.__dict__.get("lineage")
    if stack:
        stack[-1][id(new)] = (new, old)


def _derives(out, inp, origins):
    for _ in range(100_000):
        if out is inp:
            return True
        hit = origins.get(id(out))
        if hit is None or hit[0] is not out:
            return False
        out = hit[1]
    return False


def shared_places(value):
    """Pairs ``(i, j)`` of leaf indices of ``value`` (flattened as ``common.values.flatten``
    does) that are one place of a list or dict that ``value`` holds twice (``grid = [row,
    row]``: ``grid[0][0]`` and ``grid[1][0]``), each with the path of its second place;
    ``[]`` when no list or dict is held twice (checked first, without paths)."""
    import jax

    from ..common.values import is_leaf

    ids, todo, twice = set(), [value], False
    while todo and not twice:
        v = todo.pop()
        if is_container(v):
            twice = id(v) in ids
            ids.add(id(v))
        if type(v) in (list, tuple):
            todo.extend(v)
        elif type(v) in DICTS:
            todo.extend(v.values())
    if not twice:
        return []
    first, pairs = {}, []
    for i, (path, _) in enumerate(jax.tree_util.tree_flatten_with_path(value, is_leaf=is_leaf)[0]):
        obj = value
        for depth, key in enumerate(path):
            if is_container(obj):
                place = (id(obj), jax.tree_util.keystr(tuple(path[depth:])))
                if place in first and first[place] != i:
                    pairs.append((first[place], i, path))
                first.setdefault(place, i)
            if hasattr(key, "idx") and type(obj) in (list, tuple):
                obj = obj[key.idx]
            elif hasattr(key, "key") and type(obj) in DICTS:
                obj = obj[key.key]
            else:
                break
    return pairs
