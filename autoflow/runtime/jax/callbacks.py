"""JAX's host callbacks as autoflow's effects and checks use them.

The effect of an ordered ``jax.debug.callback`` (``ordered effect``), the loggers JAX
reports a failed callback to (``callback loggers``), and the error a failed callback
raises when the compiled code runs (``run-time errors``).
"""

from __future__ import annotations

import importlib

import jax
import numpy as np

from . import private
from .paths import _check, _lose, _why
from .texts import matches_jax_error


# -- effects: the ordered one, the loggers of failed callbacks, a block's outer trace --

ORDERED_DEBUG = None  # the effect of `jax.debug.callback(..., ordered=True)` (effects.primitive._Effect's)


@_check("ordered effect")
def _find_ordered_effect():
    global ORDERED_DEBUG
    try:
        ORDERED_DEBUG = private.debugging_ordered_debug_effect()
    except ImportError as e:  # another JAX: later stages plain callbacks
        ORDERED_DEBUG = _lose("ordered effect", str(e))



DEBUGGING_LOGGER = private.DEBUGGING_LOGGER  # the logger failed debug callbacks report to
CALLBACK_LOGGER = private.CALLBACK_LOGGER  # ... and failed pure callbacks (effects.checks._Check's)


@_check("callback loggers")
def _find_loggers():
    for name in (DEBUGGING_LOGGER, CALLBACK_LOGGER):
        try:
            logger = importlib.import_module(name).logger
            if logger.name != name:
                raise AttributeError(f"{name}.logger is named {logger.name}")
        except (ImportError, AttributeError) as e:
            return _lose("callback loggers", _why(e))
    return None




# -- errors raised while the compiled code runs -------------------------------------------

_RUNTIME_ERRORS = tuple(t for t in (getattr(jax.errors, "JaxRuntimeError", None),)
                        if isinstance(t, type))


def is_runtime_error(e) -> bool:
    """The error JAX raises when a callback failed while compiled code ran
    (``jax.errors.JaxRuntimeError``; called through its C++ dispatch, a ``ValueError``
    whose text starts ``INTERNAL:``)."""
    return isinstance(e, _RUNTIME_ERRORS) or (
        type(e) is ValueError and matches_jax_error("internal", str(e)[:80]))


_USERS = [None]  # (effects.raising's `users_exception`: set there, a layer above)


def on_users_exception(find):
    """``find(e)``: the user's exception that JAX's error ``e`` reports (a staged
    ``raise`` or check that failed in a callback), ready to raise, or None."""
    _USERS[0] = find


def users_exception(e):
    """The user's exception behind ``e`` (``on_users_exception``), or None."""
    find = _USERS[0]
    return find(e) if find is not None else None


def raised_in_callback(e, user) -> bool:
    """Is ``e`` JAX's report of the exception ``user`` raised in a callback (its text
    holds the callback's traceback)?"""
    return is_runtime_error(e) and str(user) in str(e)


def interrupted_in_callback(e) -> bool:
    """Is ``e`` JAX's report of a Ctrl-C delivered inside a callback?"""
    return is_runtime_error(e) and matches_jax_error("interrupted", str(e))


@_check("run-time errors")
def _check_runtime_errors():
    """Does a failed callback reach autoflow as ``is_runtime_error`` expects, with the
    callback's exception, and its traceback, in its text?"""
    probe = ValueError("autoflow's probe of a failed callback")

    def fail(x):
        raise probe

    import logging

    f = jax.jit(lambda x: jax.pure_callback(fail, jax.ShapeDtypeStruct((), np.float32), x))
    logger = logging.getLogger(CALLBACK_LOGGER)
    was, logger.disabled = logger.disabled, True  # (JAX logs the probe's failure)
    try:
        for _ in range(2):  # (the first call, then through JAX's C++ dispatch)
            try:
                jax.block_until_ready(f(np.float32(1.0)))
            except Exception as e:  # noqa: BLE001 - the error looked for
                if not (raised_in_callback(e, probe) and f"\n{type(probe).__name__}" in str(e)):
                    return _lose("run-time errors", f"a failed callback raised {_why(e)}")
            else:
                return _lose("run-time errors", "a failed callback raised nothing")
    finally:
        logger.disabled = was
    return None
