"""Which lanes of a ``vmap`` still need a result: masks for loops under ``vmap``.

Under ``jax.vmap``, a loop with a batched condition runs while any lane runs.
Two places make lanes run for nothing:

* a loop inside the body of another batched loop: once a lane has finished the
  outer loop, its inner loops still run with it (the outer loop discards the
  results), and can keep them running to their own limits;
* a loop inside a branch of an ``if`` with a batched condition: both branches
  run for every lane (the ``if`` selects afterwards), so a loop in the branch a
  lane does not take runs for it too, as long as its loop condition says.

autoflow's batching rules (``loops.while_primitive._WhileLoop.batch``,
``cond.primitive._Cond``) evaluate such bodies and branches with ``vmap``, passing
each lane's "still needed" mask along under the ``vmap``'s own axis name: a
loop batched by that ``vmap`` runs only for the needed lanes (the others keep
their initial carries, a result nobody reads). The masks are trace-time values
of the level the ``vmap`` is called at, which is the level the batching rules
of that ``vmap`` receive their operands at, so they combine with them directly.
"""

from __future__ import annotations

import itertools
import threading

import jax

from .. import jax as jx

_local = threading.local()
_names = itertools.count()


def _stack():
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def mask_for(axis_data):
    """The mask of the lanes still needed for the ``vmap`` ``axis_data``
    belongs to (a bool array of shape ``(size,)``), or None.

    None also where the mask is not a value of the trace the batching rule runs
    in: JAX's own batching rule of a primitive holding jaxprs (a ``cond`` or a
    ``jit`` in a loop body) batches them in a trace of its own, into which a
    value of the trace around cannot be passed (it would be captured as a
    constant: JAX's "No constant handler" error when compiling). autoflow's own
    rules never put such a primitive between a mask and the loops it masks
    (``cond.primitive._Cond.expand``); a user's ``jax.jit`` or ``lax.cond`` around a
    converted loop in a batched loop body runs that loop for every lane."""
    name = getattr(axis_data, "name", None)
    if name is None:
        return None
    for n, mask in reversed(_stack()):
        if n == name:
            return mask if jx.of_current_trace(mask) else None
    return None


def vmap(fn, in_axes, out_axes, size, mask):
    """``jax.vmap(fn, in_axes, out_axes, axis_size=size)``; with a ``mask``, the
    loops it batches run only for the lanes where ``mask`` is True."""
    if mask is None:
        return jax.vmap(fn, in_axes, out_axes, axis_size=size)
    name = f"_autoflow_lanes_{next(_names)}"
    mapped = jax.vmap(fn, in_axes, out_axes, axis_size=size, axis_name=name)

    def call(*args):
        stack = _stack()
        stack.append((name, mask))
        try:
            return mapped(*args)
        finally:
            stack.pop()

    return call
