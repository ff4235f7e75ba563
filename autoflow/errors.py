"""Errors and warnings autoflow reports to users."""

from __future__ import annotations


# JAX's traceback filtering adds this note to an exception leaving ``jax.jit``; the
# traceback of autoflow's errors is the user's code already, and the message (file,
# line, caret, fix) is complete: the note would end it with "the traceback of the
# following exception" and nothing following.
_JAX_FRAMES_NOTE = "JAX has removed its internal frames from the traceback"


class AutoflowError(Exception):
    """Base class of every exception autoflow raises."""

    def add_note(self, note, /):
        if isinstance(note, str) and _JAX_FRAMES_NOTE in note:
            return
        super().add_note(note)


class ConversionError(AutoflowError):
    """Converted code cannot be staged as written.

    The message names the user's file and line, quotes the source line and
    says what to change.
    """


class ConversionWarning(UserWarning):
    """autoflow ran a function (or part of one) as plain Python instead."""


class LoopLimitError(AutoflowError, RuntimeError):
    """A loop staged with ``max_loop_iterations=N`` was still running after N
    iterations (raised when the compiled code runs)."""


class TracingError(AutoflowError):
    """A JAX tracing error (``ConcretizationTypeError``, ``NonConcreteBooleanIndexError``,
    a traced shape...) raised by the user's code in converted code, re-issued with
    the user's file, line, variable and a fix (``runtime.common.teach``). Each instance is
    also an instance of the JAX error it replaces, kept as ``jax_error``;
    ``variable`` and ``argument`` name the user's traced variable and the
    parameter it comes from, when they can be found."""

    jax_error = None
    variable = None
    argument = None

    def __str__(self):
        return self.args[0] if self.args else ""


class InternalError(AutoflowError, RuntimeError):
    """autoflow failed on a program it should handle: a bug in autoflow (the message
    names the user's statement and asks for a report)."""


class PerformanceWarning(ConversionWarning):
    """Converted code is correct but slower than it could be: a loop with traced
    carries was unrolled into one copy of its body per iteration under ``jit``.
    Shown once per loop; ``autoflow.unroll(iterable)`` says it is intended."""


# Errors defined with the runtime (which imports JAX), named here as tracebacks show them.
_RUNTIME = {"CarryShapeError": "loops.body", "UnboundVariableError": "common.values"}


def __getattr__(name):
    if name in _RUNTIME:
        import importlib

        return getattr(importlib.import_module(f"autoflow.runtime.{_RUNTIME[name]}"), name)
    raise AttributeError(f"module 'autoflow.errors' has no attribute {name!r}")
