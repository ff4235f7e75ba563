"""A loop in a branch of a traced ``if``, under ``vmap`` of a derivative.

Under ``vmap`` a loop in a branch runs only for the lanes that take the branch
(``loops.lanes``): a loop a lane never reaches may never end for it (``while x < 3``
for a negative ``x``). Differentiated first (``vmap(grad)``, ``vmap(jvp)``,
``grad`` of a ``vmap``'s sum), the ``if`` became JAX's own ``cond`` (forward mode, the
values of reverse mode, the branch's VJP), which ``vmap`` batches into a select of both
branches run for every lane: these programs hung. Each lane is checked against
``jax.grad``/``jax.jvp`` of the plain function, run eagerly.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow.runtime import jax as jx

needs_primitives = pytest.mark.skipif(not jx.primitives(), reason="this JAX has no hijax primitives")


def loop_in_branch(x):
    if x > 0:
        while x < 3.0:
            x = x * 2.0 + 0.1
    return x


def _grow(x):
    while jnp.abs(x) < 3.0:
        x = x * 2.0 + 0.1
    return x


def helper_in_both(x):
    if x > 0:
        y = _grow(x)
    else:
        y = _grow(-x + 0.5) * x
    for i in range(2):
        y = y + _grow(y * 0.1)
    return y


def loop_in_else_of_a_loop(x):
    k = 0
    while k < 2:
        if x < 0:
            x = x * 0.5
        else:
            while x < 5.0:
                x = x * 1.5 + 0.2
        k += 1
    return x


PROGRAMS = [loop_in_branch, helper_in_both, loop_in_else_of_a_loop]
XS = jnp.asarray([1.0, -0.3, 2.5, -1.7], jnp.float32)


def _lanes(fn):
    return np.array([fn(x) for x in XS])


@needs_primitives
@pytest.mark.parametrize("fn", PROGRAMS, ids=[f.__name__ for f in PROGRAMS])
def test_vmap_of_derivatives(fn):
    conv = autoflow.convert(fn)
    grads = _lanes(jax.grad(fn))
    tangents = _lanes(lambda x: jax.jvp(fn, (x,), (1.0,))[1])
    for name, got in [
        ("vmap(grad)", jax.vmap(jax.grad(conv))(XS)),
        ("jit(vmap(grad))", jax.jit(jax.vmap(jax.grad(conv)))(XS)),
        ("grad(sum(vmap))", jax.grad(lambda xs: jax.vmap(conv)(xs).sum())(XS)),
        ("vmap(jvp)", jax.vmap(lambda x: jax.jvp(conv, (x,), (1.0,))[1])(XS)),
        ("vmap(grad) lockstep", jax.vmap(jax.grad(autoflow.convert(fn, lanes="lockstep")))(XS)),
    ]:
        want = tangents if "jvp" in name else grads
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, err_msg=name)


@pytest.mark.parametrize("fn", [loop_in_branch, loop_in_else_of_a_loop],
                         ids=["loop_in_branch", "loop_in_else_of_a_loop"])
def test_a_bounded_loop_a_lane_does_not_reach_does_not_raise(fn):
    # (`max_loop_iterations`: the loop is a scan run for every lane; its limit was
    # checked for the lanes that never reach it too: `LoopLimitError` for x = -0.3)
    conv = autoflow.convert(fn, max_loop_iterations=50)
    np.testing.assert_allclose(jax.vmap(conv)(XS), _lanes(fn), rtol=1e-6)
    if jx.primitives():
        np.testing.assert_allclose(jax.vmap(jax.grad(conv))(XS), _lanes(jax.grad(fn)),
                                   rtol=1e-5)
