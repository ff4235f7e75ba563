"""Errors and warnings autoflow reports to users."""

from __future__ import annotations


class AutoflowError(Exception):
    """Base class of every exception autoflow raises."""


class ConversionError(AutoflowError):
    """Converted code cannot be staged as written.

    The message names the user's file and line, quotes the source line and
    says what to change.
    """


class ConversionWarning(UserWarning):
    """autoflow ran a function (or part of one) as plain Python instead."""


class PerformanceWarning(ConversionWarning):
    """Converted code is correct but slower than it could be: a loop with traced
    carries was unrolled into one copy of its body per iteration under ``jit``.
    Shown once per loop; ``autoflow.unroll(iterable)`` says it is intended."""
