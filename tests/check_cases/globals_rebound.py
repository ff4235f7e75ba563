import jax
import jax.numpy as jnp

import autoflow

scale = 1.0
offset = 0.5  # bound once: fine


@autoflow.jit
def apply(x):
    return x * scale + offset  # expect: AF101 scale


def set_scale(value):
    global scale
    scale = value


scale = 2.0
