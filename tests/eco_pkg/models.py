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


try:  # Flax NNX: state lives in Variables, updated in place by the module.
    from flax import nnx
except ImportError:  # pragma: no cover - flax is a test dependency
    nnx = None

if nnx is not None:
    class Gated(nnx.Module):
        """An NNX module that normalises on a traced condition and counts how often."""

        def __init__(self, n):
            self.w = nnx.Param(jnp.arange(1.0, n + 1.0))
            self.hits = nnx.BatchStat(jnp.zeros((), jnp.int32))

        def __call__(self, x):
            y = x * self.w.value
            if y.sum() > 1.0:
                y = y / y.sum()
                self.hits.value += 1
            return y

    class GatedIndexed(nnx.Module):
        """``Gated`` written with NNX's ``variable[...]`` access."""

        def __init__(self, n):
            self.w = nnx.Param(jnp.arange(1.0, n + 1.0))
            self.hits = nnx.BatchStat(jnp.zeros((), jnp.int32))

        def __call__(self, x):
            y = x * self.w[...]
            for _ in range(3):
                if y.sum() > 1.0:
                    y = y / (2.0 * y.sum())
                    self.hits[...] += 1
            return y


try:  # jaxtyping with beartype: a runtime-checked signature around a traced `if`.
    from beartype import beartype
    from jaxtyping import Array, Float, jaxtyped
except ImportError:  # pragma: no cover - test dependencies
    jaxtyped = None

if jaxtyped is not None:
    @jaxtyped(typechecker=beartype)
    def normalise(x: Float[Array, " n"]) -> Float[Array, " n"]:
        """Scale ``x`` to sum to one when its sum is over one."""
        if jnp.sum(x) > 1.0:
            x = x / jnp.sum(x)
        return x
