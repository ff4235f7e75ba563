"""The per-thread stacks the state bookkeeping shares, and ``journal``.

The staged statements being traced (``_scopes``, ``_recorders``: see ``scopes``) and
the open ``journal`` contexts, which note every object converted code writes in
place while they run (``_note_write``).
"""

from __future__ import annotations

import threading


_local = threading.local()


def _scopes():
    return _local.__dict__.setdefault("scopes", [])


def _recorders():
    return _local.__dict__.setdefault("recorders", [])


class journal:
    """Context: which objects did converted code write in place while this ran?

    Plain Python writes are not recorded (``mutates`` is a no-op outside a
    staged body); a loop that ran an iteration as Python and would rather stage
    the whole loop from the state before it (``loops.statements.for_stmt``, one copy
    of the body) may only do so if that iteration wrote nothing the staged loop
    would write again: ``written`` lists the objects whose attributes or items
    were set. Nested journals all see a write.
    """

    def __enter__(self):
        self.written = []
        _local.__dict__.setdefault("journals", []).append(self)
        return self

    def __exit__(self, *exc):
        _local.journals.pop()


def _note_write(*objects):
    for j in _local.__dict__.get("journals", ()):
        j.written.extend(objects)
