import jax
import jax.numpy as jnp

import autoflow


@autoflow.jit
def prefix_sums(x):
    t = 0.0
    for i in range(1, 5):  # expect: AF107 i
        t = t + jnp.sum(x[:i])
    return t


@autoflow.jit
def growing(x):
    for k in range(3):  # expect: AF107 k
        x = x + jnp.zeros(k + 1).sum()
    return x


@autoflow.jit
def nested_range(x):
    for n in range(4):  # an inner `range(n)` stages as a loop of its own: fine
        for j in range(n):
            x = x + j
    return x


@autoflow.jit
def fixed_shapes(x):
    t = 0.0
    for i in range(1, 5):  # the mask keeps shapes fixed: one fori_loop, fine
        t = t + jnp.sum(jnp.where(jnp.arange(x.shape[0]) < i, x, 0.0))
    return t


@jax.jit
def plain(x):
    for i in range(3):  # plain jax.jit unrolls every loop anyway (AF106 when long)
        x = x + jnp.sum(x[:i])
    return x


@autoflow.jit
def traced_bound(x, n):
    for i in range(n):  # a traced bound: not a static loop
        x = x + i
    return x


@autoflow.jit
def silenced(x):
    for i in range(3):  # autoflow: ignore[AF107]
        x = x + jnp.sum(x[:i])
    return x


@autoflow.jit
def marked_unrolled(x):
    for i in autoflow.unroll(range(3)):  # unrolling said to be intended: fine
        x = x + jnp.sum(x[:i])
    return x
