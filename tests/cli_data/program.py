"""Functions for the command-line round trip: `autoflow convert` this file, import
the output, and run it under `jax.jit` against this file run eagerly."""

import jax.numpy as jnp


def halvings(x, limit):
    steps = 0
    while x > limit:
        x = x / 2
        steps += 1
    return x, steps


def abs_sum(xs):
    total = 0.0
    for v in xs:
        if v > 0:
            total += v
        else:
            total -= v
    return total


def first_negative(xs):
    for i in range(xs.shape[0]):
        if xs[i] < 0:
            return i
    return -1


def piecewise(x):
    # An early return: the rest of the function becomes the else branch.
    if x < 0:
        return -x
    y = x * x
    return y + jnp.sin(x)


def odd_total(n):
    total = 0
    for i in range(n):
        if i % 2 == 0:
            continue
        total += i
    return total


class Scaler:
    @staticmethod
    def scale(x, n):
        for _ in range(n):
            x = x * 1.5
        return x
