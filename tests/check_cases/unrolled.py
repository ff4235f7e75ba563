import jax
import jax.numpy as jnp

import autoflow


@jax.jit
def plain_loop(x):
    for i in range(1000):  # expect: AF106
        x = x * 0.5 + i
    return x


@autoflow.jit
def marked(x):
    for i in autoflow.unroll(range(500)):  # expect: AF106
        x = x + i
    return x


@autoflow.jit
def staged(x):
    for i in range(1000):  # autoflow stages it as one fori_loop: fine
        x = x * 0.5 + i
    return x


@jax.jit
def short(x):
    for i in range(4):  # small: fine
        x = x + i
    return x
