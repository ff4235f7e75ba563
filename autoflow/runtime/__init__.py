"""autoflow's runtime: the operators converted code calls.

This is the only part of autoflow that imports JAX. Converted code reaches it
through one alias (``af`` unless the user's code already uses that name).
"""

import os as _os

from ._jax_compat import hide_frames_of as _hide_frames_of

from .operators import (and_, compare, enumerate, for_stmt, if_chain, if_exp, if_stmt, ld, not_, or_,
                        python_condition, python_operand, range, reversed, roll, unroll,
                        while_stmt, zip)
from .raising import exception, passthrough as _passthrough
from .state import mutates, state

internal_errors = _passthrough()
from .values import Undefined  # noqa: E402 - after the operators it builds on

# Hide autoflow's own frames from tracebacks that pass through JAX, as JAX
# does for its internals.
_hide_frames_of(_os.path.dirname(_os.path.dirname(__file__)))

__all__ = ["Undefined", "and_", "append", "assert_", "bound", "call", "compare", "converted",
           "enumerate", "exception", "fstring", "getitem", "match_is", "match_subject", "max", "min", "sum", "any", "all",
           "int", "float", "bool", "for_stmt", "if_chain", "if_exp", "if_stmt", "internal_errors", "ld", "mutates", "not_", "or_", "print",
           "python_condition", "python_operand", "range", "reversed", "roll", "setitem", "state", "unroll", "while_stmt", "zip"]

from . import calls as _calls  # noqa: E402
from .effects import append, assert_, print, setitem  # noqa: E402,A004
from .vocabulary import (all, any, bool, float, fstring, getitem, int, match_is, match_subject, max,  # noqa: E402,A004
                         min, sum)


def call(f, *args, **kwargs):
    """``f(*args, **kwargs)``, converting ``f`` first when it is user code."""
    return bound(())._target(f)(*args, **kwargs)


def converted(f):
    """``f`` converted when it is a user function (for ``jax.vmap(f)`` and the like)."""
    return bound(())._target(f)


_bound = {}


def bound(options):
    """The runtime namespace for converted code built with ``options``."""
    rt = _bound.get(options)
    if rt is None:
        import sys

        from ..api import convert
        rt = _bound[options] = _calls.Runtime(sys.modules[__name__], convert, options)
    return rt
