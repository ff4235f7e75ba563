"""``Shared``: the state one staged statement changes besides its carried variables.

``af.state(attrs=..., objects=...)`` names it at the call site (see the package's
docstring); ``Shared`` snapshots it, puts it back before each staged path, carries
its values through ``lax`` and writes the result back in place. ``settle`` stages a
statement until the state it changes settles: a call in it that changes state the
statement does not carry raises ``MoreState``, and the statement is staged again
carrying that too (the driver of ``cond.statements.traced_if`` and
``loops.statements._loop_with_state``).
"""

from __future__ import annotations

import array
import collections

from ...core.origin import message
from ...errors import ConversionError
from ..effects.raising import Signal
from ..common.values import in_staged_block
from .snapshots import _new_tracer, _restore, _snap, contents, is_container, write
from .journal import _note_write, _recorders
from .writes import _writer
from .reach import module_state
from .nnx import _get, _is_variable, _set


class Shared:
    """Attributes and container contents that a staged statement may change.

    ``attrs``: ``(object, attribute name)`` pairs the statement assigns;
    ``objects``: lists and dicts whose contents it changes in place.
    """

    def __init__(self, attrs=(), objects=(), labels=(), escapes=()):
        # Made at every run of the statement, used only when it is staged:
        # the work is done in `_setup`, on first use.
        self._args = (attrs, objects, labels, escapes)
        self._ready = False

    def _setup(self):
        attrs, objects, labels, escapes = self._args
        self._ready = True
        # ``escapes``: indices (attributes first, then objects) of state that
        # outlives the function (module-level objects, closure variables).
        self.escapes = tuple(escapes)
        self.attrs = tuple(attrs)
        labels = tuple(labels) + (None,) * (len(self.attrs) + len(objects) - len(labels))
        if any(_is_variable(o) for o in objects):
            # An NNX Variable written by index (`v[...] += 1`) holds its value as
            # an attribute: carry that (attributes come first, then objects).
            k = len(self.attrs)
            moved = [i for i, o in enumerate(objects) if _is_variable(o)]
            rest = [i for i in range(len(objects)) if i not in moved]
            order = list(range(k)) + [k + i for i in moved] + [k + i for i in rest]
            self.attrs += tuple((objects[i], "value") for i in moved)
            self.escapes = tuple(j for j, old in enumerate(order) if old in self.escapes)
            labels = tuple(labels[old] if old < k or old - k in rest
                           else f"{labels[old] or 'a Variable'}[...]" for old in order)
            objects = [objects[i] for i in rest]
        k = len(self.attrs)
        # iterators the statement advances with `next()` (refused when staged: `settle`)
        self.iterators = tuple(lb or "an iterator" for o, lb in zip(objects, labels[k:])
                               if not is_container(o) and _is_iterator(o))
        # Python's own containers a staged statement cannot carry (a set, a deque...):
        # refused when staged (`settle`), as Python would change them on one path only
        self.uncarried = tuple((lb or type(o).__name__, type(o).__name__)
                               for o, lb in zip(objects, labels[k:])
                               if not is_container(o) and isinstance(o, _UNCARRIED))
        kept = [(o, lb, k + i in self.escapes)
                for i, (o, lb) in enumerate(zip(objects, labels[k:])) if is_container(o)]
        self.escapes = tuple(i for i in self.escapes if i < k) + tuple(
            k + j for j, (_, _, e) in enumerate(kept) if e)
        self.objects = tuple(o for o, _, _ in kept)
        self.labels = labels[:len(self.attrs)] + tuple(lb for _, lb, _ in kept)
        self._snap = None

    def __bool__(self):
        if not self._ready:
            self._setup()
        return bool(self.attrs or self.objects)

    def extend(self, attrs, objects, known=None):
        """Also carry ``attrs``/``objects`` (found changed by a call in the body);
        ``known`` maps ids of the statement's variables' values to their names."""
        known = known or {}
        if not self._ready:
            self._setup()
        known_attrs = {(id(o), n) for o, n in self.attrs}
        attrs = list(attrs) + [(o, "value") for o in objects if _is_variable(o)]
        new_attrs = [(o, n) for o, n in attrs if (id(o), n) not in known_attrs]
        have = {id(o) for o in self.objects}
        new_objects = [o for o in objects if id(o) not in have and is_container(o)]
        k = len(self.attrs)
        self.escapes = tuple(i for i in self.escapes if i < k) + tuple(
            i + len(new_attrs) for i in self.escapes if i >= k)
        self.labels = (self.labels[:k] + tuple(
            f"{known.get(id(o), type(o).__name__)}.{n}" for o, n in new_attrs)
            + self.labels[k:] + tuple(known.get(id(o), "a list or dict") for o in new_objects))
        self.attrs = self.attrs + tuple(new_attrs)
        self.objects = self.objects + tuple(new_objects)

    def record_writes(self):
        """Tell the staged statement being traced around this one what it changed
        (and where this statement is, for an error if that one cannot carry it)."""
        if self.attrs or self.objects:
            if _recorders():
                self.site, self.function = _writer()
            _note_write(*(o for o, _ in self.attrs), *self.objects)
            recorders = _recorders()
            if recorders:
                recorders[-1].append(self)

    def names(self):
        """Labels for error messages (``s.x``, ``out``)."""
        out = [lb or n for lb, (_, n) in zip(self.labels, self.attrs)]
        return out + [lb or "a list or dict" for lb in self.labels[len(self.attrs):]]

    def snapshot(self):
        """Record the state as it is now (``reset`` puts it back)."""
        self._snap = self._record()
        return self

    def _record(self):
        memo = {}
        attrs = [_get(o, n) for o, n in self.attrs]
        return [_snap(v, memo) for v in attrs], [_snap(o, memo) for o in self.objects]

    def _put_back(self, snap):
        done = set()
        attrs, objects = snap
        for (o, n), v in zip(self.attrs, attrs):
            _set(o, n, _restore(v, done))
        for s in objects:
            _restore(s, done)

    def keeping(self, fn):
        """``fn``, run so that the state is as before it when it returns (or raises):
        a loop's test, which sets the state to an iteration's values to read them,
        evaluated again in the middle of the body (``effects.path_condition``: where the
        element's loop still runs), must not undo what the body has written so far."""
        def run(*args):
            snap = self._record()
            try:
                return fn(*args)
            finally:
                self._put_back(snap)
        return run

    def check_escapes(self, values, site, fns=(), frame=None):
        """State that outlives the function must not be left holding a traced value:
        what the rewriter saw outlives it (``escapes``), and module state that the
        statement's functions ``fns`` or the code running from ``frame`` outwards
        reach (an object a caller passed in)."""
        if in_staged_block() or not (self.escapes or fns):
            return
        before = self._snap[0] + self._snap[1]
        k = len(self.attrs)
        module = None
        for i in range(len(before)):
            if not (i in self.escapes or fns) or not _new_tracer(values[i], before[i]):
                continue
            label = self.names()[i]
            if i not in self.escapes:  # module state the rewriter could not see?
                if module is None:
                    module = module_state(fns, frame)
                obj = self.attrs[i][0] if i < k else self.objects[i - k]
                where = module.get(id(obj))
                if where is None:
                    continue
                label = where if i >= k else f"{where}.{self.attrs[i][1]}"
            raise ConversionError(message(
                site(), f"`{label}` outlives this function (module-level or "
                "closure state, or a default argument's value), and this traced statement "
                "would leave a traced "
                "value in it, which is not valid once the compiled function returns",
                f"Return the value instead of storing it in `{label}`, or make the "
                "condition or loop bound static."))

    def reset(self):
        """Put every attribute and container back as it was at ``snapshot``."""
        self._put_back(self._snap)

    def values(self):
        """The current values: attribute values, then container contents."""
        return tuple([contents(_get(o, n)) for o, n in self.attrs]
                     + [contents(o) for o in self.objects])

    def assign(self, values):
        """Set every attribute and container to ``values`` (as from ``values()``)."""
        k = len(self.attrs)
        for obj, v in zip(self.objects, values[k:]):
            write(obj, v)
        for (o, n), v in zip(self.attrs, values[:k]):
            current = _get(o, n, None)
            _set(o, n, write(current, v) if is_container(current) else v)


def _is_iterator(obj) -> bool:
    """Is ``obj`` a Python iterator (a generator, ``iter(list)``...), whose ``next()``
    changes it in place?"""
    try:
        return hasattr(type(obj), "__next__") and iter(obj) is obj
    except Exception:  # (an object whose `__iter__` raises is no iterator)
        return False


_UNCARRIED = (set, collections.deque, bytearray, array.array)


def _refuse_iterators(shared, what, site):
    """An iterator advanced by ``next()`` in a staged statement: its body is traced
    once (a loop's), or both of its paths are (an ``if``'s), so ``next`` would not run
    as often as Python runs it, and nothing would say so. The same for a set (or a
    deque, a bytearray) the statement changes in place: a staged statement carries
    lists and dicts only."""
    if not shared._ready:
        shared._setup()
    if shared.uncarried and not shared.iterators:
        label, kind = shared.uncarried[0]
        why = ("the loop's body is traced once, so it would change once, not once per "
               "iteration" if what == "loop" else "both paths of a traced `if` are traced, "
               "so the path not taken would change it too")
        raise ConversionError(message(
            site(), f"`{label}` (a {kind}) is changed in place inside this traced {what}: {why}",
            ("Keep flags in an array instead (`seen = jnp.zeros(n, bool)` before it, "
             "`seen = seen.at[i].set(True)` here, `seen.sum()` for how many)"
             if kind == "set" else "Hold the items in a `jnp` array instead, changed with "
             "`q = q.at[i].set(v)` (or `q = jnp.roll(q, 1)` for a rotation)")
            + f", or make the condition static so that the {what} runs as Python."))
    if not shared.iterators:
        return
    label = shared.iterators[0]
    why = ("the loop's body is traced once, so `next` would run once, not once per "
           "iteration" if what == "loop" else "both paths of a traced `if` are traced, "
           "so `next` would also run on the path not taken")
    raise ConversionError(message(
        site(), f"`{label}` is a Python iterator that this traced {what} advances with "
        f"`next()`: {why}",
        "Use an array and a traced index instead of the iterator (`xs = jnp.asarray("
        "items)`, then `xs[i]` and `i = i + 1`), or make the condition static so that "
        f"the {what} runs as Python."))


class MoreState(Signal):
    """Internal: retrace a staged statement carrying more state."""

    def __init__(self, attrs, objects, inner=()):
        super().__init__("internal: more state to carry")
        self.attrs, self.objects, self.inner = attrs, objects, list(inner)

    def undo(self):
        """Put back what the inner statements wrote (they wrote values of the
        trace that is being abandoned)."""
        for inner in reversed(self.inner):
            inner.reset()


def settle(shared, attempt, known, what, site, retry=None):
    """Stage a statement that changes ``shared`` state until that state settles;
    what ``attempt`` returns (the driver of ``cond.statements.traced_if`` and
    ``loops.statements._loop_with_state``).

    ``attempt(active)`` stages the statement once (``active``: ``shared`` names
    state to carry, as it was when this attempt began). A call in it that
    changes state the statement does not carry raises ``MoreState``: what the
    calls wrote is undone, the state put back, ``shared`` extended (``known()``:
    ``{id: name}`` of the statement's variables, for labels) and the statement
    staged again, at most 8 times; then the ``ConversionError`` "the state this
    ``what`` changes never settles", at ``site()``. Any other exception puts the
    state back and propagates, unless ``retry(exc)`` is given and returns true
    (it may change what the next attempt stages): then the statement is staged
    again.
    """
    _refuse_iterators(shared, what, site)
    for _ in range(8):
        active = bool(shared)
        try:
            return attempt(active)
        except MoreState as m:
            m.undo()
            if active:
                shared.reset()
            shared.extend(m.attrs, m.objects, known())
        except BaseException as e:
            if active:
                shared.reset()
            if retry is None or not retry(e):
                raise
    raise ConversionError(message(site(), f"the state this {what} changes never settles"))


def state(attrs=(), objects=(), labels=(), escapes=()):
    """The shared state of one converted statement (see ``Shared``)."""
    return Shared(attrs, objects, labels, escapes)
