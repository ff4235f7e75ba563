import jax
import jax.numpy as jnp

import autoflow


@autoflow.jit
def positives(x):
    return x[x > 0].sum()  # expect: AF102


@jax.jit
def masked(x, limit):
    keep = x < limit
    return x[keep]  # expect: AF102


@autoflow.jit
def padded(x, n):
    return jnp.concatenate([x, jnp.zeros(n)])  # expect: AF103 n


@autoflow.jit(static_argnames=("n",))
def padded_static(x, n):
    return jnp.concatenate([x, jnp.zeros(n)])  # static: fine


@jax.jit
def counter(x, n):
    m = n * 2
    return x + jnp.arange(m).sum()  # expect: AF103 m n


@autoflow.jit
def same_shape(x):
    return x + jnp.ones(x.shape[0])  # static shape: fine
