"""What each control-flow statement lowered to, for ``autoflow explain``.

::

    with events.recording() as log:
        jax.make_jaxpr(converted)(x)
    for e in log:
        print(e.site, e.statement, e.lowered)   # file:line, 'while', 'lax.while_loop'
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading

from ...core.origin import user_site

_state = threading.local()
_recording = 0  # how many threads are recording: `note` is free when none is

@dataclasses.dataclass
class Event:
    site: object        # core.origin.Site of the statement (or None)
    statement: str      # 'if', 'while', 'for', 'ternary', 'and', 'or', 'not'
    lowered: str        # 'python', 'lax.cond', 'lax.while_loop', 'lax.fori_loop', ...


def note(statement, lowered, site=None):
    """Record what ``statement`` lowered to, at ``site()`` (default: the caller's
    caller's user line)."""
    if not _recording:
        return
    log = getattr(_state, "log", None)
    if log is not None:
        log.append(Event(site() if site is not None else user_site(2), statement, lowered))


@contextlib.contextmanager
def recording():
    global _recording
    previous = getattr(_state, "log", None)
    _state.log = log = []
    _recording += 1
    try:
        yield log
    finally:
        _recording -= 1
        _state.log = previous


# -- explain mode: what each primitive compiles to ---------------------------------

_plain = threading.local()


@contextlib.contextmanager
def plain_loops(on=True):
    """Stage a loop as the ``lax.while_loop`` it compiles to, and a traced ``if`` as
    its ``lax.cond`` or select, for ``autoflow explain``, which shows people the jaxpr
    (``on=False``: stage autoflow's primitives, as ``selfcheck`` needs inside explain)."""
    before = getattr(_plain, "on", False)
    _plain.on = on
    try:
        yield
    finally:
        _plain.on = before


def plain_now() -> bool:
    """Inside ``plain_loops()``?"""
    return getattr(_plain, "on", False)
