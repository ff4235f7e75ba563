import jax
import jax.numpy as jnp

import autoflow


@autoflow.jit
def noisy(x):
    y = x * 2
    print("y is", y)  # expect: AF105 y
    print("tracing noisy")  # a constant: fine
    return y


@jax.jit
def plain(x):
    print(x)  # expect: AF105 x
    return x + 1
