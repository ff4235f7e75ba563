import jax.numpy as jnp


def step(x):
    # Double positive inputs.
    if x > 0:
        x = x * 2.0
    return x


def checked(x):
    if x < -10.0:
        raise ValueError("x is too small")
    return jnp.sqrt(x * x + 1e-4)


def scale(x):
    return x * 1e-4  # nothing to convert here
