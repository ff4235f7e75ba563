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


class LoopLimitError(AutoflowError, RuntimeError):
    """A loop staged with ``max_loop_iterations=N`` was still running after N
    iterations (raised when the compiled code runs)."""
