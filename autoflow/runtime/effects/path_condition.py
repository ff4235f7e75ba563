"""The path condition: where on the traced paths an effect staged now happens.

The conjunction of the traced conditions of the staged branches around the
statement (``on_path``), the "nothing raised yet" of the checks before it
(``after_raise``, ``raise_gate``), and the blocks whose checks are carried
(``scope``).
"""

from __future__ import annotations

import threading

import jax.numpy as jnp

from ..jax import current_trace
from ..common.values import as_pred


_local = threading.local()


# ---------------------------------------------------------------------------
# The path condition
# ---------------------------------------------------------------------------

def _path():
    return getattr(_local, "path", [])


class _NoRaise:
    """An entry of the path: no staged ``raise`` (or failed check) before here.

    After a traced ``raise`` on a path, Python runs nothing more; the compiled
    code goes on (the check raises when it has run), so what follows must run
    only where nothing raised: effects check it, loops test it (``raise_gate``),
    so a loop after a raise guard cannot spin on the values Python never reached.
    Unlike a branch's condition it stays on the path until the block it was
    added in ends (the branch, the loop body, or the traced function)."""

    __slots__ = ("pred",)

    def __init__(self, pred):
        self.pred = pred

    def __call__(self):
        return self.pred() if callable(self.pred) else self.pred


class _Base:
    """The entries added outside every staged block, for the trace they were made in
    (a later trace of another program does not see them)."""

    trace = None
    entries = ()


def _base():
    base = getattr(_local, "base", None)
    if base is None:
        base = _local.base = _Base()
    return base


def _base_entries():
    base = getattr(_local, "base", None)
    if base is None or not base.entries:
        return ()
    # the trace the outermost open block was entered from (or the current one)
    outer = getattr(_local, "outer", None) if getattr(_local, "depth", 0) else current_trace()
    return base.entries if base.trace is outer else ()


class on_path:
    """Context: the code traced inside runs only where ``pred`` holds (no condition
    for ``pred=None``: a loop body's block). What it adds to the path after a
    ``raise`` (``after_raise``) ends with it; ``raised()`` tells it.

    ``carries_ok``: whoever opened the block reads ``ok()`` when it ends and hands
    it on to the code around (a branch's result, a loop's carry): then a check
    staged inside may be a ``_Check`` (see ``fast_checks``), whose result reaches
    the function's outputs through it. ``fresh``: the block is a branch or loop body
    that JAX traces for autoflow (its trace, if not the one around, is started from
    that one); any other block is traced where it opens, and a trace between it and
    the block around is the user's own (``jax.grad``, ``jax.vmap``, ``lax.scan``)."""

    def __init__(self, pred=None, carries_ok=False, fresh=False):
        self.pred, self.carries_ok, self.fresh = pred, carries_ok, fresh

    def __enter__(self):
        depth = getattr(_local, "depth", 0)
        if not depth:
            _local.outer = current_trace()
            _local.blocks = []
        _local.depth = depth + 1
        self.trace = current_trace()
        _local.blocks.append(self)
        self.saved = _path()
        _local.path = self.saved + ([self.pred] if self.pred is not None else [])
        self.start = len(_local.path)
        return self

    def ok(self):
        """Where nothing in this block raised (a traced boolean), or None if no
        ``raise`` was staged in it."""
        added = [e for e in _local.path[self.start:] if isinstance(e, _NoRaise)]
        return _conjunction(added) if added else None

    def __exit__(self, *exc):
        _local.path = self.saved
        _local.depth -= 1
        _local.blocks.pop()


def scope(carries_ok=False, fresh=False):
    """A block whose ``after_raise`` entries end with it (a loop body)."""
    return on_path(None, carries_ok, fresh)


def after_raise(pred):
    """From here to the end of the enclosing block, code runs only where ``pred``
    (a traced boolean, or a thunk of one) holds: nothing raised (see ``_NoRaise``)."""
    entry = _NoRaise(pred)
    if getattr(_local, "depth", 0):
        _local.path.append(entry)
        return
    base, trace = _base(), current_trace()
    if base.trace is not trace:
        base.trace, base.entries = trace, []
    base.entries.append(entry)


def raise_mark():
    """Where this block's ``after_raise`` entries end now (for ``drop_raises_since``)."""
    if getattr(_local, "depth", 0):
        return _local.path, len(_local.path)
    base, trace = _base(), current_trace()
    if base.trace is not trace:
        base.trace, base.entries = trace, []
    return base.entries, len(base.entries)


def drop_raises_since(mark):
    """Forget the ``after_raise`` entries added since ``mark`` (``raise_mark``): what
    follows runs whether those checks failed (a ``finally`` clause, before they raise)."""
    entries, n = mark
    entries[n:] = [e for e in entries[n:] if not isinstance(e, _NoRaise)]


def _conjunction(preds):
    out = True
    for p in preds:
        p = _value_only(p) if callable(p) else p
        out = as_pred(p) if out is True else jnp.logical_and(out, as_pred(p))
    return out


def _value_only(thunk):
    """``thunk()`` (a loop's test, computed again in its body: whether this element's loop
    still runs) for its value only: the effects and checks it stages were staged where
    the loop tests it, and staging them again here would ask for the path condition
    being computed (``later`` stages nothing while this runs)."""
    if getattr(_local, "quiet", False):
        return thunk()
    _local.quiet = True
    try:
        return thunk()
    finally:
        _local.quiet = False


def path_condition():
    """The conjunction of the traced conditions leading here (``True`` if none)."""
    return _conjunction([*_base_entries(), *_path()])


def raises_staged() -> int:
    """How many staged ``raise`` gates stand before here on this path (one more after a
    statement that staged a ``raise``: ``loops.statements.while_stmt`` then stages the
    rest of a loop it ran as Python, whose end the ``raise`` decides)."""
    return sum(isinstance(e, _NoRaise) for e in (*_base_entries(), *_path()))


def raise_gate():
    """Where no staged ``raise`` before here (on this path) raised, or None if none
    was staged: a loop staged here runs only there."""
    entries = [e for e in (*_base_entries(), *_path()) if isinstance(e, _NoRaise)]
    return _conjunction(entries) if entries else None
