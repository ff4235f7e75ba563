"""Compositions that were JAX internal errors (found by probing every order of ``jit``,
``vmap`` and the derivatives on fresh programs), each lane against eager Python.

* a loop with two ``break``s under ``jax.jacfwd``/``jax.hessian`` inside ``jit`` or
  ``vmap``: the ``if`` between them gave every output a batch axis, the primal one
  included, which ``jacfwd``'s own ``vmap`` over the tangents refuses;
* nested ``vmap``, the outer axis on a value the loop's carry reads and the inner on
  its trip count: the two levels' lanes were merged into one loop though the carry the
  inner lanes share differs between the outer ones.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow.runtime import jax as jx

needs_primitives = pytest.mark.skipif(not jx.primitives(), reason="this JAX has no hijax primitives")


def two_breaks(x):
    i = 0
    acc = 0.0
    while True:
        acc = acc + x * x
        i += 1
        if acc > 1.5:
            break
        if i >= 12:
            break
    return acc


def power_by_count(x, n):
    acc = 1.0
    i = 0
    while i < n:
        acc = acc * x
        i += 1
    return acc


def power_with_break(x, n):
    acc = 1.0
    for i in range(1, n):
        acc = acc * x
        if acc > 50.0:
            break
    return acc


XS = jnp.array([0.3, 0.9, 1.4], jnp.float32)


@needs_primitives
def test_forward_mode_through_two_breaks():
    conv = autoflow.convert(two_breaks)
    for name, fn, oracle in [("jit(jacfwd)", jax.jit(jax.jacfwd(conv)), jax.jacfwd(two_breaks)),
                             ("jit(hessian)", jax.jit(jax.hessian(conv)), jax.hessian(two_breaks))]:
        for x in XS:
            np.testing.assert_allclose(fn(x), oracle(x), rtol=1e-5, err_msg=f"{name} {x}")
    want = [jax.jacfwd(two_breaks)(x) for x in XS]
    np.testing.assert_allclose(jax.vmap(jax.jacfwd(conv))(XS), want, rtol=1e-5)
    want = [jax.hessian(two_breaks)(x) for x in XS]
    np.testing.assert_allclose(jax.vmap(jax.hessian(conv))(XS), want, rtol=1e-5)


@pytest.mark.parametrize("fn", [power_by_count, power_with_break])
@pytest.mark.parametrize("lanes", ["auto", "lockstep", "flat"])
def test_nested_vmap_outer_on_a_value_inner_on_the_trip_count(fn, lanes):
    conv = autoflow.convert(fn, lanes=lanes)
    xs = jnp.array([0.5, 2.0, 3.0], jnp.float32)
    ns = jnp.array([0, 3, 5, 1], jnp.int32)
    want = np.array([[fn(x, int(n)) for n in ns] for x in xs])
    for got in (jax.vmap(lambda x: jax.vmap(lambda n: conv(x, n))(ns))(xs),
                jax.jit(jax.vmap(jax.vmap(conv, (None, 0)), (0, None)))(xs, ns),
                jax.vmap(jax.vmap(conv, (0, None)), (None, 0))(xs, ns).T):
        np.testing.assert_allclose(got, want, rtol=1e-6)
