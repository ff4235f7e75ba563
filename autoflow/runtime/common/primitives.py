"""Helpers the ``if`` and loop primitives share (``cond.primitive``, ``loops.while_primitive``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import jax as jx


class RunsForItsEffects:
    """The dead-code rule of autoflow's ``if`` and loop primitives (a base before
    ``jx.HiPrimitive``): one whose branches or body print or check runs even when no
    result is used."""

    def dce(self, used_outs, *live_ins):  # (JAX 0.12 passes the live inputs too)
        if self.effects:
            return True, True, self
        return super().dce(used_outs, *live_ins)


def inexact(aval) -> bool:
    """Is a value of ``aval`` differentiable (a float or complex)?"""
    return jnp.issubdtype(aval.dtype, jnp.inexact)


def tangent_zeros(aval):
    """Zeros for the tangent of a value of ``aval`` (``float0`` for integers)."""
    if inexact(aval):
        return jnp.zeros(aval.shape, aval.dtype)
    return np.zeros(aval.shape, jax.dtypes.float0)


def instantiate(tangents, avals):
    """``tangents`` with JAX's symbolic zeros made real."""
    return tuple(tangent_zeros(a) if isinstance(t, jx.Zero) else t
                 for t, a in zip(tangents, avals))


def specs(avals):
    return [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=getattr(a, "weak_type", False))
            for a in avals]


def _quiet_params(params):
    """An equation's params with the loops and branches in them quiet too."""
    for k, v in params.items():
        if isinstance(v, jx.ClosedJaxpr) and v.effects:
            params[k] = quiet_closed(v)
        elif isinstance(v, tuple) and v and all(isinstance(j, jx.ClosedJaxpr) for j in v) \
                and any(j.effects for j in v):
            params[k] = tuple(quiet_closed(j) for j in v)
        elif isinstance(v, jx.HiPrimitive) and v.effects:  # a loop or `if` of autoflow's
            params[k] = v.quiet()
    return params


def _quiet_eval(jaxpr, consts, args):
    return jx.eval_without(jaxpr, consts, args, ("debug_callback", "debug_print"), _quiet_params)


def quiet_closed(closed):
    """``closed`` (a ClosedJaxpr) without its debug callbacks."""
    jaxpr = closed.jaxpr if isinstance(closed, jx.ClosedJaxpr) else closed
    consts = closed.consts if isinstance(closed, jx.ClosedJaxpr) else ()
    specs = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype,
                                  weak_type=getattr(v.aval, "weak_type", False))
             for v in jaxpr.invars]
    return jax.make_jaxpr(lambda *a: _quiet_eval(jaxpr, consts, a))(*specs)
