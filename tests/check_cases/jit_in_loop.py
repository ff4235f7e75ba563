import jax
import jax.numpy as jnp

import autoflow


def train(xs):
    total = 0.0
    for x in xs:
        step = jax.jit(lambda v: v * 2.0)  # expect: AF104
        total += step(x)
    return total


def sweep(xs, rates):
    out = []
    for r in rates:
        def loss(v):
            return (v * r).sum()
        out.append(autoflow.jit(loss)(xs))  # expect: AF104
    return out


def hoisted(xs):
    step = jax.jit(lambda v: v * 2.0)  # outside the loop: fine
    return [step(x) for x in xs]


def silenced(xs):
    for x in xs:
        f = jax.jit(lambda v: v + 1.0)  # autoflow: ignore[AF104]
        f(x)
