"""A user package with traced control flow inside library callbacks."""

import equinox as eqx
import jax
import jax.numpy as jnp


class Clipped(eqx.Module):
    """An Equinox module whose __call__ branches on a traced value."""
    weight: jax.Array
    limit: float = 1.0

    def __call__(self, x, *, key=None):
        y = self.weight * x
        if jnp.sum(y) > self.limit:
            y = y / jnp.sum(y)
        return y


def vector_field(t, y, args):
    """A diffrax vector field with a traced `if`."""
    if t < 0.5:
        return -y
    return -2.0 * y


def damped(step, g):
    """An optax-style gradient transform body with a data-dependent loop."""
    n = 0
    while jnp.linalg.norm(g) > 1.0 and n < 20:
        g = g * 0.5
        n += 1
    return g * step
