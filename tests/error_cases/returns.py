import jax.numpy as jnp


def falls_off(x):
    if x > 0:  # ERROR
        return x * 2


def return_structures(x):
    if x > 0:  # ERROR
        return x, x
    return x


def return_shapes(x):
    if x.sum() > 0:  # ERROR
        return jnp.zeros(3)
    return jnp.zeros(4)


def falls_off_else(x):
    if x > 0:  # ERROR
        pass
    else:
        return x
