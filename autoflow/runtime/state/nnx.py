"""Attributes read and written as Python does, Flax NNX ``Variable``s included.

``_get``/``_set`` read and write an attribute (a ``Variable``'s value through
``get_value``/``set_value``); NNX Variables refuse writes made in a trace other than
their own, so while a staged path writes one it gets a trace state of that trace
(``_writable``, ``unlock``).
"""

from __future__ import annotations

from ..common.values import Undefined
from .journal import _local


_NO_DEFAULT = object()


def _get(obj, name, default=_NO_DEFAULT):
    if name == "value" and _is_variable(obj):
        return obj.get_value()
    return getattr(obj, name, Undefined(name) if default is _NO_DEFAULT else default)


def _set(obj, name, value):
    """autoflow's own write of a carried attribute (putting it back, or as a path left
    it): a frozen dataclass's refusal is for the user's writes, which run as Python's
    on their path (``effects.raising.on_its_path``), not for these."""
    import dataclasses

    with _writable(obj):
        if isinstance(value, Undefined):
            if hasattr(obj, name):
                try:
                    delattr(obj, name)
                except dataclasses.FrozenInstanceError:
                    object.__delattr__(obj, name)
            return
        if name == "value" and _is_variable(obj):
            obj.set_value(value)
            return
        try:
            setattr(obj, name, value)
        except dataclasses.FrozenInstanceError:
            object.__setattr__(obj, name, value)


# Flax NNX Variables refuse writes made in a trace other than the one they were
# made in (``TraceContextError``), and a staged branch or loop body is such a
# trace. autoflow carries their values itself (as it does any attribute), so
# while a path is traced it gives each Variable the path writes a trace state of
# that trace, and puts the old one back when the path's trace ends.

def _is_variable(obj):
    return (hasattr(type(obj), "_check_can_update") and hasattr(obj, "get_value")
            and type(obj).__module__.startswith("flax."))


def _fresh_trace_state(obj):
    """Give NNX Variable ``obj`` a trace state of the current trace; return the
    old one (None when ``obj`` is not such a Variable or may already be written)."""
    if not _is_variable(obj):
        return None
    try:
        old = object.__getattribute__(obj, "_trace_state")
        if old.is_valid():
            return None
        object.__setattr__(obj, "_trace_state", type(old)())
    except Exception:  # another Flax layout: leave the Variable alone
        return None
    return old


class _writable:
    def __init__(self, obj):
        self.obj = obj

    def __enter__(self):
        self.old = _fresh_trace_state(self.obj)

    def __exit__(self, *exc):
        if self.old is not None:
            object.__setattr__(self.obj, "_trace_state", self.old)


def unlock(obj):
    """Before a write to NNX Variable ``obj`` on a staged path: let it be written
    until the innermost recording path ends."""
    old = _fresh_trace_state(obj)
    if old is not None:
        stack = _local.__dict__.setdefault("unlocked", [])
        if stack:
            stack[-1].append((obj, old))
        else:
            object.__setattr__(obj, "_trace_state", old)
