import jax.numpy as jnp


def carry_shape(x, n):
    acc = jnp.zeros(1)
    i = 0
    while i < n:  # ERROR
        acc = jnp.concatenate([acc, x[None]])
        i = i + 1
    return acc


def carry_from_none(x, n):
    best = None
    i = 0
    while i < n:  # ERROR
        best = x * i
        i = i + 1
    return best


def list_grows(x, n):
    out = []
    for i in range(n):  # ERROR
        out.append(x * i)
    return out
