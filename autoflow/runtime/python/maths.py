"""``math.f(x)`` with a traced argument: which ``jnp`` function computes it.

The functions of floats are in ``floats``, those of integers in ``integers``;
``math_call`` dispatches to them, or says ``NotImplemented`` for any other call.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..common.values import any_tracer


def _math_table():
    import math

    from .floats import table
    from .integers import FUNCTIONS

    functions = {**table(), **FUNCTIONS}
    return {id(getattr(math, n)): (getattr(math, n), f) for n, f in functions.items()
            if hasattr(math, n)}


MATH = _math_table()


def math_call(f, args, kwargs):
    """``math.exp(x)``... with a traced argument: the ``jnp`` function that gives the
    same value (``math.floor``/``ceil``/``trunc`` an integer, as Python's), raising
    Python's errors when the compiled code runs (``math.sqrt(-1.0)``: ``runtime.python.floats``;
    ``math.gcd``, ``comb``... of integers: ``runtime.python.integers``); ``NotImplemented``
    for any other call (the caller calls ``f``)."""
    hit = MATH.get(id(f))
    if hit is None or hit[0] is not f or not any_tracer((args, kwargs)):
        return NotImplemented
    out = hit[1](*args, **kwargs)
    # (weakly typed, as the Python number `math` gives is: it adapts to the array it meets)
    if isinstance(out, jax.Array) and out.ndim == 0 and out.dtype != jnp.bool_:
        from .. import jax as jx

        return jx.convert_weak(out, out.dtype)
    return out
