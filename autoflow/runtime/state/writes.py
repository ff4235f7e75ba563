"""Writes through calls, marked by the rewriter: ``af.mutates`` and its kin, and refusals.

``mutates``/``mutates_global``/``rebinds_global``/``rebinds_nonlocal`` run before a
write that may outlive the call. In plain Python they do nothing (a ``journal``
notes the write); while a staged branch or loop body is traced they tell the staged
statement around it, which carries the state, or raise ``ModuleStateError`` for
module state and closure cells no staged statement can change as Python would
(see the package's docstring).
"""

from __future__ import annotations

import sys

import numpy as np

from ...core.origin import _is_internal, message, user_site
from ...errors import ConversionError
from ..common.values import in_staged_block
from .snapshots import _snap, is_container
from .journal import _note_write, _recorders, _scopes
from .nnx import _get, _is_variable, _set, unlock


class _Write:
    """One plain write made while a staged body was traced (see ``mutates``)."""

    def __init__(self, obj, name):
        self.objects, self.attrs = (), ()
        if name is None:
            self.objects = (obj,)
            self._snap = _snap(obj, {})
        else:
            self.attrs = ((obj, name),)
            self._old = _get(obj, name)

    def reset(self):
        if self.attrs:
            (obj, name), = self.attrs
            _set(obj, name, self._old)
        else:
            self._snap.restore(set())


def mutates(obj, name=None, *, _label=None, _module=False):
    """Marker before a write to ``obj.name`` (or, without ``name``, to container
    ``obj`` in place) that may outlive the call.

    Plain Python: nothing (but a ``journal`` notes it). While a staged branch
    or loop body is traced, the enclosing staged statement is told, so that it
    carries that state too; module state it cannot carry is an error (see the
    module docstring).
    """
    _note_write(obj)
    if not in_staged_block():
        return
    recorders = _recorders()
    if name is None and _is_variable(obj):  # `v[...] = x` on an NNX Variable
        name = "value"
    if name is not None or is_container(obj):
        _judge(obj, name, _label, _module)
        if recorders:
            recorders[-1].append(_Write(obj, name))
            unlock(obj)


def mutates_global(label, obj, name=None):
    """``mutates(obj, name)`` for ``obj`` a module global (``label``: how the
    source names it, ``cfg.items``): in a staged branch or loop body that does
    not carry it, an error (see the module docstring)."""
    mutates(obj, name, _label=label, _module=True)


def rebinds_global(name):
    """Marker before a statement that rebinds module global ``name`` (declared
    ``global``). Plain Python: nothing. In a staged branch or loop body: an
    error (a staged statement cannot rebind a global at each call, path and
    iteration as Python does)."""
    _note_write(sys._getframe(1).f_globals)
    if in_staged_block():
        _refuse(name, None, "module global", rebinding=True)


def rebinds_nonlocal(name, reader):
    """Marker before a statement that rebinds ``name``, declared ``nonlocal``;
    ``reader`` is ``lambda: name`` (its closure holds the cell). Plain Python:
    nothing. In a staged branch or loop body: fine where the statements being
    traced carry that variable (a function nested in the converted one, called
    in the body) or the cell was made inside them; otherwise an error."""
    if not in_staged_block():
        return
    cells = getattr(reader, "__closure__", None) or ()
    if len(cells) != 1:
        return
    cell = cells[0]
    _note_write(cell)
    for scope in reversed(_scopes()):
        if name in scope.names and id(cell) in scope.cells():
            continue  # the statement carries it (the rewriter saw the call)
        if id(cell) in scope.cells() or id(cell) in scope.module():
            _refuse(name, None, "closure variable", rebinding=True, scope=scope)
        return  # a cell made inside the statement


def refuse_buffer_write(obj):
    """A write in place into ``obj``, a Python buffer a staged statement cannot carry (a
    NumPy array, a ``bytearray``, an ``array.array``), inside a staged branch or loop
    body: an error where the buffer existed before the innermost staged statement. Its
    code runs once, at trace time, for every path and iteration, so the path not taken
    would write it too (a buffer made inside is new at every run: fine)."""
    scopes = _scopes()
    if not scopes:
        return
    scope = scopes[-1]
    if id(obj) not in scope.reach() and id(obj) not in scope.module():
        return
    site, _ = _writer()
    kind = "a NumPy array" if isinstance(obj, np.ndarray) else f"a `{type(obj).__name__}`"
    raise ConversionError(message(
        site, f"this line writes into {kind} made before this traced `if` or loop, inside "
        "it: its code runs once, at trace time, for every path and iteration, so the path "
        "not taken would write it too, and the compiled code would not write it at all",
        "Make it a JAX array (`jnp.zeros(...)` instead of `np.zeros(...)`) and write with "
        "`buf = buf.at[i].set(v)` (autoflow carries JAX arrays through loops and branches), "
        "or make the condition static so that the statement runs as Python."))


def _judge(obj, name, label, module):
    """A write about to happen in a staged block to ``obj`` (``.name``): an
    error when it is module state that an enclosing staged statement does not
    carry (and cannot: see the module docstring)."""
    scopes = _scopes()
    if not scopes:
        if module:  # (a staged block that records nothing: `a if c else f()`)
            _refuse(label, name, "module global")
        return
    for scope in reversed(scopes):
        if scope.carries(obj, name) or id(obj) in scope.reach():
            continue  # carried, or carried once the statement traces again
        where = scope.module().get(id(obj))
        if module or where is not None:
            _refuse(label or where, name, "module global" if module else "module state",
                    scope=scope)
        return  # made inside the statement


def _function_name(code):
    """The user's function that ``code`` is (or is a branch or loop body of: those
    carry its name, see ``core.loading``)."""
    return getattr(code, "co_qualname", code.co_name).split(".<locals>.")[-1]


def _writer():
    """``(site, function name)`` of the innermost user code running."""
    frame = sys._getframe(1)
    while frame is not None and _is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None, None
    return user_site(frame=frame), _function_name(frame.f_code)


class ModuleStateError(ConversionError):
    """A write through a call, in a staged branch or loop body, to state that
    outlives the function (see the module docstring). Not a reason to run a
    loop as Python: unrolled, the write would still happen only while tracing."""


def _refuse(label, name, kind, rebinding=False, scope=None, site=None, fn=None):
    """Raise the error for a write that the staged statements cannot carry."""
    if site is None:
        site, fn = _writer()
    what = f"{label}.{name}" if name is not None and label else (label or "this object")
    if scope is None and _scopes():
        scope = _scopes()[-1]
    stmt = scope.site() if scope is not None else None
    where = f" (the traced statement at {stmt})" if stmt is not None else ""
    who = f"`{fn}`" if fn and not fn.startswith("<") else "this code"
    if kind == "closure variable":
        owner = ("a variable of an enclosing function (a closure cell) that the traced "
                 "statement does not carry")
        todo = (f"Return the new value of `{what}` from the function and assign it at the "
                "call instead of assigning it `nonlocal`, or make the condition or loop "
                "bound static.")
    else:
        owner = ("a module global" if kind == "module global"
                 else "module state (a module global holds it)")
        todo = (f"Pass `{what}` in and return the new value instead (a traced statement "
                "carries its variables), or make the condition or loop bound static. A "
                "write that is the same on every path and iteration (a cache, a lazy "
                "initialisation) can be made before the traced statement; bookkeeping meant "
                f"for tracing (counting traces) can stay in {who} marked "
                "`@autoflow.do_not_convert`.")
    verb = "rebinds" if rebinding else "changes"
    raise ModuleStateError(message(
        site, f"`{what}` is {owner}, and {who} {verb} it here inside a staged branch or loop "
        f"body{where}. That code runs once, at trace time, for every path and iteration: "
        f"Python would {'rebind' if rebinding else 'change'} `{what}` on the path taken, at "
        "each iteration and at every call, and the compiled code cannot.", todo))
