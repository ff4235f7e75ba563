"""``enumerate``/``zip`` loops under ``jax.grad``, ``jax.jvp`` and ``jax.hessian`` without
``jit`` (each step of the differentiation is eager, so the loop runs as Python over the
array's items): every item, once. A ``for`` loop looks at the first item before it
decides how to run; the ``enumerate``/``zip`` object was then iterated again from its
second item (``value_and_grad`` of a sum of squares over ``[1, 2, 3]`` gave 10 and
``[2, 0, 6]``; one item raised ``StopIteration``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow


def squares_enumerated(xs):
    acc = 0.0
    for i, x in enumerate(xs):
        acc = acc + x * x * (i + 1)
    return acc


def welford_from_one(xs):
    mean, m2 = 0.0, 0.0
    for k, x in enumerate(xs, start=1):
        d = x - mean
        mean = mean + d / k
        m2 = m2 + d * (x - mean)
    return mean + m2


def zipped(xs):
    ys = xs * 2.0 + 1.0
    acc = 0.0
    for x, y in zip(xs, ys):
        if x > 1.5:
            acc = acc + x * y
        else:
            acc = acc - y
    return acc


def zipped_three_with_break(xs):
    acc = 0.0
    for i, (x, y) in enumerate(zip(xs, xs[::-1])):
        acc = acc + x ** 3 - y
        if i >= 3:
            break
    return acc


PROGRAMS = [squares_enumerated, welford_from_one, zipped, zipped_three_with_break]
INPUTS = [np.array([2.0], np.float32), np.array([1.0, 2.0, 3.0], np.float32),
          np.array([0.5, 2.5, 1.0, 3.0, 2.0], np.float32)]


@pytest.mark.parametrize("fn", PROGRAMS, ids=[f.__name__ for f in PROGRAMS])
def test_every_item_once_under_reverse_and_forward_mode(fn):
    conv = autoflow.convert(fn)
    for xs in INPUTS:
        xs = jnp.asarray(xs)
        for got, want in [(jax.value_and_grad(conv)(xs), jax.value_and_grad(fn)(xs)),
                          (jax.jvp(conv, (xs,), (jnp.ones_like(xs),)),
                           jax.jvp(fn, (xs,), (jnp.ones_like(xs),))),
                          (jax.hessian(conv)(xs), jax.hessian(fn)(xs))]:
            for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
                np.testing.assert_allclose(g, w, rtol=1e-5, err_msg=f"{fn.__name__}{xs}")
