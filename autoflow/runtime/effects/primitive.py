"""The effect primitive (``_Effect``): an ordered host callback, where its gate holds.

Under ``vmap`` it happens once per lane whose gate holds, in lane order, as Python
would (see its docstring); used where this JAX allows autoflow's primitives
(``_effects_as_primitive``).
"""

from __future__ import annotations

import builtins

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import jax as jx
from ..jax import selfcheck
from ..common.events import plain_now
from ..loops import lanes


def _effects_as_primitive():
    """May ``later`` stage ``_Effect`` (autoflow's primitives, with ordered effects, on
    this JAX; not inside a JAX custom-derivative rule, nor for ``autoflow explain``,
    which shows the callbacks it compiles to)?"""
    return jx.ORDERED_DEBUG is not None and not plain_now() and jx.primitives() \
        and selfcheck.effects_ok() and not jx.in_custom_rule()


def _lanes_of(x, d, size):
    """``x``, batched along axis ``d`` (None: not batched), with its lanes first."""
    x = jnp.asarray(x)
    return jnp.moveaxis(x, d, 0) if d is not None else jnp.broadcast_to(x, (size,) + x.shape)


class _Effect(jx.HiPrimitive):
    """``call(*operands)`` when the compiled code runs, where ``gate`` (no gate: always,
    else one traced boolean) holds: an ordered host callback, in a ``cond`` of its own
    so that where the gate is false the host is not called.

    Under ``vmap`` it is what Python does lane by lane: an effect (a ``print``, a
    warning, a log record) happens once per lane whose gate holds, in lane order,
    whether or not its operands are batched (JAX's own callback would happen once
    for operands that are not); a check (``check``: ``call`` raises) calls the host
    once, for the first lane whose gate holds (Python would stop there)."""

    stage_low = True
    primitive_name = "effect"
    is_effect = True  # (left out of a backward pass's recomputation: common.primitives.quiet_closed)

    def __init__(self, call, gate_avals, op_avals, check):
        self.in_avals = (gate_avals, op_avals)
        self.out_aval = ()
        self.params = dict(call=call, stops=bool(check))
        self.effects = frozenset({jx.ORDERED_DEBUG})
        super().__init__()

    def __call__(self, *args):
        return jx.bind(self, args)

    def expand(self, gate, ops):
        if not jx.tracing():
            # run now (`vmap` without `jit`): the user's exception itself, not JAX's
            # error about a failed callback
            if not gate or np.asarray(gate[0]):
                self.call(*ops)
            return ()
        if not gate:
            jax.debug.callback(self.call, *ops, ordered=True)
        else:
            # (the host checks the gate too: a `cond` batched by JAX's own rule runs the
            # callback for every lane)
            lax.cond(gate[0], lambda ok, ops: jax.debug.callback(
                         self._gated, ok, *ops, ordered=True),
                     lambda ok, ops: None, gate[0], tuple(ops))
        return ()

    def _gated(self, ok, *values):
        if np.asarray(ok):
            self.call(*values)

    def dce(self, used_outs, *live_ins):  # (JAX 0.12 passes the live inputs too)
        return True, True, self

    def jvp(self, primals, tangents):
        self(*primals)
        return (), ()

    def lin(self, nzs_in, *primals):
        return self(*primals), None  # (bound one level up: vmapped, its batching rule)

    def linearized(self, residuals, *tangents):
        return ()

    def vjp_fwd(self, nzs_in, gate, ops):
        return self(gate, ops), None

    def vjp_bwd_retval(self, res, out_ct):
        gate_av, op_av = self.in_avals
        return (tuple(jx.Zero(a.to_ct_aval()) for a in gate_av),
                tuple(jx.Zero(a.to_ct_aval()) for a in op_av))

    def batch(self, axis_data, args, dims):
        size = axis_data.size
        (gate, ops), (dgate, dops) = args, dims

        gate = _lanes_of(gate[0], dgate[0], size) if gate else jnp.ones((size,), bool)
        # In the body of a loop under `vmap` a lane that has finished still runs with
        # the others (its results are dropped), and a carry shared by the running lanes
        # (a counter) goes on changing for it: only the lanes still running may print
        # or raise (`loops.lanes`: the mask its batching rule passes down).
        needed = lanes.mask_for(axis_data)
        if needed is not None:
            gate = gate & needed
        ops = [_lanes_of(x, d, size) for x, d in builtins.zip(ops, dops)]
        lane_avals = tuple(jx.typeof(x[0]) for x in ops)
        one = _Effect(self.call, (jx.typeof(gate[0]),), lane_avals, self.stops)
        if self.stops:  # Python stops at the first lane that raises: call once, for it
            first = jnp.argmax(gate)
            one((jnp.any(gate),), tuple(x[first] for x in ops))
        else:
            for i in builtins.range(size):
                one((gate[i],), tuple(x[i] for x in ops))
        return (), ()
