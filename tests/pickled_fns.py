"""Converted functions kept under another name than their own (tests/test_library_wrappers.py
pickles them and loads them in a fresh process)."""

import jax.numpy as jnp

import autoflow


def normalise(x):
    if jnp.sum(x) > 1.0:
        x = x / jnp.sum(x)
    return x


converted_normalise = autoflow.convert(normalise)  # stored under another name than `normalise`


def make_nested():
    def clip(x):
        while jnp.max(x) > 1.0:
            x = x / 2.0
        return x
    return autoflow.convert(clip)
