"""``return`` inside loops: autoflow carries the return value in its own variable."""

import jax.numpy as jnp


def return_in_loop(x, n):
    i = 0
    while i < n:  # ERROR
        if x > i:
            return x
        i = i + 1


def return_in_while_shapes(x, n):
    i = 0
    while i < n:  # ERROR
        if i > 2:
            return jnp.zeros(3)
        i = i + 1
    return jnp.zeros(4)


def return_in_for_structures(x, n):
    for i in range(n):  # ERROR
        if x > i:
            return (x, x)
    return x


def nested_return(x):
    if x > 0:
        if x > 1:  # ERROR
            return x
    else:
        return x - 1


def two_returns_in_loop(x, n):
    i = 0
    while i < n:
        if i > 2:
            return jnp.zeros(3)
        if i > 5:
            return jnp.zeros(4)
        i = i + 1
    return jnp.zeros(3)


def return_none_in_loop(x, n):
    i = 0
    while i < n:
        if i > 2:
            return None
        i = i + 1
    return x


def return_tuple_in_loop(x, n):
    for i in range(n):
        if x > i:
            return x, x
        if x < -i:
            return x, (x, x)
    return x, x


def return_in_static_loop(x):
    for i in range(3):  # ERROR
        if x > i:
            return jnp.zeros(3)
    return jnp.zeros(4)


def two_returns_in_static_loop(x):
    for i in range(3):
        if x > i:
            return jnp.zeros(3)
        if x < -i:
            return jnp.zeros(2)
    return jnp.zeros(3)
