"""Helpers the ``if`` and loop primitives share (``cond_prim``, ``while_prim``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from . import jax_internals as jx


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
    return [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]
