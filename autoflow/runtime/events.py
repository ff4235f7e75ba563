"""A record of what each control-flow statement lowered to (for ``explain``).

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

from ..core.origin import user_site

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
