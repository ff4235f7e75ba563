import jax.numpy as jnp


def divides(x, k):
    if k > 1:
        y = x + 1
    else:
        y = 1 / k  # ERROR
    return y


def bad_add(x):
    if x.sum() > 0:
        y = x + jnp.ones(4)  # ERROR
    else:
        y = x
    return y
