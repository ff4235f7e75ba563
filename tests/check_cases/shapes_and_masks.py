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


@autoflow.jit
def reshaped(x, n):
    return x.reshape(n, -1)  # expect: AF103 n


@autoflow.jit
def reshaped_static(x):
    return x.reshape(x.shape[0], -1)  # static shape: fine


@autoflow.jit
def tiled(x, n):
    return jnp.tile(x, n)  # expect: AF103 n


@autoflow.jit
def positive_places(x):
    return jnp.nonzero(x > 0)[0]  # expect: AF112


@autoflow.jit
def positive_places_sized(x):
    return jnp.nonzero(x > 0, size=3, fill_value=0)[0]  # sized: fine


@autoflow.jit
def where_one(x):
    return jnp.where(x > 0)[0]  # expect: AF112


@autoflow.jit
def keyed(x):
    return {x: 1.0}  # expect: AF113 x


@autoflow.jit
def seen(x):
    s = set()
    s.add(x)  # expect: AF113 x
    return len(s)
