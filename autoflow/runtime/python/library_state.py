"""Python state that a library call changes inside a staged branch or loop body.

A staged ``if`` traces both paths and a staged loop traces its body once, so what a
call changes in Python (not in JAX values) would change once per trace, not once per
path taken or per iteration, as Python changes it. The rewriter sees a user's own
writes (``lst.append(v)``, ``self.n += 1``); a library call's are found here:

* a list or dict passed to it and changed (``heapq.heappop(h)``, ``random.shuffle(xs)``):
  the statement is told (``state.writes.mutates``), so that it carries it, or runs as
  Python where it cannot (a list that shrinks in a loop);
* a draw from Python's or NumPy's own random generator (``random.random()``,
  ``np.random.rand()``, a ``np.random.Generator``'s methods), or a generator advanced by
  ``send``/``throw``: autoflow's error, saying what to use instead.
"""

from __future__ import annotations

import random
import types

from ...core.origin import message, user_site
from ...errors import ConversionError
from ..state.snapshots import is_container

_GENERATOR_METHODS = frozenset({"send", "throw", "__next__", "close"})


def _random_owner(f):
    """The random generator ``f`` draws from (a bound method of it), or None."""
    owner = getattr(f, "__self__", None)
    if owner is None or isinstance(owner, types.ModuleType):
        return None
    if isinstance(owner, random.Random):
        return "Python's `random`"
    kind = type(owner)
    if kind.__module__.startswith("numpy.random") and kind.__name__ in (
            "RandomState", "Generator"):
        return "NumPy's random generator"
    return None


def before_call(f, args, kwargs):
    """Called before library code ``f(*args, **kwargs)`` runs in a staged block: refuses
    what cannot keep Python's meaning; returns what ``after_call`` compares, or None."""
    rng = _random_owner(f)
    if rng is not None:
        name = getattr(f, "__name__", "a draw")
        raise ConversionError(message(
            user_site(3), f"`{name}` draws from {rng} inside a traced `if` or loop: its "
            "paths and the loop's body are traced once each, so it would draw as often as "
            "it is traced, not as Python draws, and the compiled code would reuse those "
            "numbers at every call",
            "Use `jax.random` with a key (`key, sub = jax.random.split(key)`, then "
            "`jax.random.uniform(sub)`), or draw the numbers before the jitted function and "
            "pass them in."))
    owner = getattr(f, "__self__", None)
    if isinstance(owner, types.GeneratorType) and getattr(f, "__name__", "") in _GENERATOR_METHODS:
        raise ConversionError(message(
            user_site(3), f"a Python generator is advanced with `.{f.__name__}()` inside a "
            "traced `if` or loop: its paths and the loop's body are traced once each, so it "
            "would run as often as it is traced, not as Python runs it",
            "Compute its values with arrays and a traced index instead, or make the "
            "condition static so that the statement runs as Python."))
    held = [a for a in (*args, *kwargs.values()) if is_container(a)]
    if not held:
        return None
    return [(a, list(a) if isinstance(a, list) else dict(a)) for a in held]


def after_call(held):
    """Tell the staged statement of each list or dict the call changed (put back as it
    was for ``mutates``'s record, then as the call left it)."""
    from ..state.writes import mutates

    for obj, before in held:
        now = list(obj) if isinstance(obj, list) else dict(obj)
        if _same(now, before):
            continue
        _fill(obj, before)
        mutates(obj)
        _fill(obj, now)


def _same(a, b) -> bool:
    if isinstance(a, list):
        return len(a) == len(b) and all(x is y for x, y in zip(a, b))
    return a.keys() == b.keys() and all(a[k] is b[k] for k in a) and list(a) == list(b)


def _fill(obj, items):
    if isinstance(obj, list):
        obj[:] = items
    else:
        obj.clear()
        obj.update(items)
