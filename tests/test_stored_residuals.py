"""Reverse mode near the forward pass (``runtime/loops/stored.py``): a loop's first steps
store their residuals and the backward pass transposes the body over them; the steps
beyond the stored ones are checkpointed as before.

The oracle is ``jax.grad`` of the same program written with ``lax.fori_loop`` of a
known trip count (a ``scan``), or of the eager Python function. Trip counts are taken
below, at and above the number of stored steps ``R`` (found from the loop's plan),
and zero.
"""

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np
import pytest

import autoflow
from autoflow.runtime import jax as jx
from autoflow.runtime.loops import stored

pytestmark = pytest.mark.skipif(not jx.primitives(), reason="needs autoflow's loop primitive")

K = 16  # the checkpoint budget of these tests: R == K for the small carries below


def _close(a, b, tol=1e-4):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


@pytest.fixture
def plans(monkeypatch):
    """The plans the loops traced in a test made (their ``slots``: ``R``)."""
    made = []
    original = stored.plan

    def spy(*args):
        made.append(original(*args))
        return made[-1]

    monkeypatch.setattr(stored, "plan", spy)
    return made


def counted(x, w, n):
    i = 0
    while i < n:
        x = jnp.tanh(w * x) + 0.1 * x * jnp.exp(w[0])
        i += 1
    return jnp.sum(x * x)


def counted_ref(x, w, n):
    x = lax.fori_loop(0, n, lambda i, x: jnp.tanh(w * x) + 0.1 * x * jnp.exp(w[0]), x)
    return jnp.sum(x * x)


X = jnp.array([0.3, -0.8, 1.1])
W = jnp.array([0.9, 1.3, -0.7])
TRIPS = (0, 1, 5, K - 1, K, K + 1, 3 * K + 2)


def test_trip_counts_around_the_stored_steps(plans):
    g = jax.jit(jax.grad(autoflow.convert(counted, checkpoints=K), argnums=(0, 1)))
    for n in TRIPS:
        _close(g(X, W, n), jax.grad(counted_ref, argnums=(0, 1))(X, W, n))
    assert plans and all(p.slots == K for p in plans)
    kinds = {k for k, _ in plans[0].kinds}
    assert {"input", "const", "step"} <= kinds, plans[0].kinds  # w; exp(w[0]); per step


def test_the_default_budget_and_eager_grad():
    g = autoflow.jit(counted)
    for n in (0, 7, 64, 65, 200):
        _close(jax.grad(g, argnums=(0, 1))(X, W, n), jax.grad(counted, argnums=(0, 1))(X, W, n))


def test_vmap_of_grad_with_lanes_on_both_sides_of_the_budget():
    g = jax.grad(autoflow.convert(counted, checkpoints=K), argnums=(0, 1))
    ns = jnp.array([0, 3, K, K + 1, 2 * K + 5])
    xs = jnp.stack([X * (1 + 0.1 * k) for k in range(len(ns))])
    want = [jax.grad(counted_ref, argnums=(0, 1))(xs[k], W, int(n)) for k, n in enumerate(ns)]
    for got in (jax.vmap(g, (0, None, 0))(xs, W, ns), jax.jit(jax.vmap(g, (0, None, 0)))(xs, W, ns)):
        for k in range(len(ns)):
            _close((got[0][k], got[1][k]), want[k])


def test_grad_of_vmap():
    f = autoflow.convert(counted, checkpoints=K)
    ns = jnp.array([2, K, 3 * K])
    xs = jnp.stack([X, X * 0.5, X * 1.5])

    def total(xs, w):
        return jnp.sum(jax.vmap(f, (0, None, 0))(xs, w, ns))

    def total_ref(xs, w):
        return sum(counted_ref(xs[k], w, int(n)) for k, n in enumerate(ns))

    _close(jax.jit(jax.grad(total, argnums=(0, 1)))(xs, W),
           jax.grad(total_ref, argnums=(0, 1))(xs, W))


def scalar(x, n):
    i = 0
    while i < n:
        x = x + 0.3 * jnp.sin(x * 1.7)
        i += 1
    return x


def scalar_ref(x, n):
    return lax.fori_loop(0, n, lambda i, x: x + 0.3 * jnp.sin(x * 1.7), x)


def test_grad_of_grad():
    gg = jax.jit(jax.grad(jax.grad(autoflow.convert(scalar, checkpoints=K))))
    for n in (0, 4, K, K + 3, 40):
        _close(gg(0.4, n), jax.grad(jax.grad(scalar_ref))(0.4, n))


@pytest.mark.parametrize("n", [3, K + 3])
def test_checkpoint_around_the_loop(n):
    f = autoflow.convert(scalar, checkpoints=K)
    _close(jax.jit(jax.grad(jax.checkpoint(f)), static_argnums=1)(0.4, n),
           jax.grad(scalar_ref)(0.4, n))
    _close(jax.jit(jax.grad(lambda x, n: jax.checkpoint(f)(x, n) ** 2))(0.4, n),
           jax.grad(lambda x, n: scalar_ref(x, n) ** 2)(0.4, n))


def printing(x, n):
    i = 0
    while i < n:
        x = x * 1.1
        print("step", i)
        i += 1
    return x


@pytest.mark.parametrize("n", [3, K + 2])
def test_prints_once_per_step_of_the_forward_pass(n, capfd):
    g = jax.jit(jax.grad(autoflow.convert(printing, checkpoints=K)))
    _close(g(1.0, n), 1.1 ** n)
    jax.effects_barrier()
    assert capfd.readouterr().out.count("step") == n


def integers(x, n):
    i = 0
    k = 1
    while i < n:
        x = x * jnp.cos(x) + i * 0.01
        k = k * 3 % 7
        i += 1
    return x * k


def test_integer_carries_and_residuals():
    f = autoflow.convert(integers, checkpoints=K)
    for n in (0, 2, K, K + 5):
        _close(jax.jit(jax.grad(f))(0.7, n), jax.grad(integers)(0.7, n))


def nested(x, w, n):
    i = 0
    while i < n:
        j = 0
        while j < i % 4 + 1:
            x = jnp.sin(x * w) + 0.5 * x
            j += 1
        i += 1
    return jnp.sum(x)


def test_nested_loops():
    f = autoflow.convert(nested, checkpoints=K)
    for n in (0, 3, K + 2):
        _close(jax.jit(jax.grad(f, argnums=(0, 1)))(X, W, n),
               jax.grad(nested, argnums=(0, 1))(X, W, n))


def uneven(n, x):
    a = x
    i = 0
    while i < n:
        a = a + 1.0
        j = 0
        while j < n % 2 + 1:
            a = a * 0.5
            j += 1
        i += 1
    return a


@pytest.mark.parametrize("body", [nested, uneven], ids=["nested", "uneven"])
def test_vmap_of_grad_of_nested_loops_with_lanes_that_stop_early(body):
    """Under vmap a lane whose steps are all reversed still runs the backward step on
    rows it never stored (a lane with no step stored none at all): the loops in that
    step's pullback must end (they did not: the call never returned)."""
    ns = jnp.array([2, 0, 3, 1, K + 2])
    if body is nested:
        xs = jnp.stack([X * (k + 1) * 0.3 for k in range(5)])

        def f(n, x):
            return nested(x, W, n)
    else:
        xs, f = jnp.array([2.0, -2.0, -1.25, 1.5, 0.75]), uneven
    g = jax.grad(autoflow.convert(f, checkpoints=K), argnums=1)
    got = jax.vmap(g)(ns, xs)
    for k in range(5):
        _close(got[k], jax.grad(f, argnums=1)(int(ns[k]), xs[k]))
    _close(jax.jit(jax.vmap(g))(ns, xs), got)


def test_no_stored_steps_where_a_step_keeps_too_much(plans):
    """An outer loop whose steps keep an inner loop's checkpoints of a large carry stores
    none (R = 0): the checkpointed passes alone, as before."""
    def outer(x, n):
        i = 0
        while i < n:
            y = x * jnp.linspace(0.5, 1.0, 64)
            while y[0] < 100.0 + i:
                y = y * 1.01 + 0.1
            x = jnp.mean(y)
            i += 1
        return x

    f = autoflow.convert(outer, checkpoints=K)
    _close(jax.jit(jax.grad(f))(0.7, 3), jax.grad(outer)(0.7, 3), tol=1e-3)
    assert [p.slots for p in plans] == [K, 0]


def matrix(A, b, n):
    i = 0
    x = b
    while i < n:
        x = jnp.tanh(A @ x) + 0.5 * b
        i += 1
    return jnp.sum(x * x)


def matrix_ref(A, b, n):
    return jnp.sum(lax.fori_loop(0, n, lambda i, x: jnp.tanh(A @ x) + 0.5 * b, b) ** 2)


def branching(A, b, n):
    i = 0
    x = b
    while i < n:
        y = jnp.tanh(A @ x)
        if jnp.sum(y) > 0:
            x = y + 0.5 * b
        else:
            x = 0.9 * y - 0.1 * b
        i += 1
    return jnp.sum(x * x)


A = jnp.array(np.random.default_rng(0).normal(size=(6, 6)) / 2.5, jnp.float32)
B = jnp.linspace(-1.0, 1.0, 6)


def test_a_matrix_constant_summed_after_the_loop(plans):
    """A matrix the body reads: its cotangent, a sum of outer products over the steps,
    is one product of matrices after the loop (``stored._summed``)."""
    g = jax.jit(jax.grad(autoflow.convert(matrix, checkpoints=K), argnums=(0, 1)))
    for n in TRIPS:
        _close(g(A, B, n), jax.grad(matrix_ref, argnums=(0, 1))(A, B, n))
    assert plans[0].transposable is True
    ns = jnp.array([0, 5, K + 4])
    bs = jnp.stack([B, -B, 0.5 * B])
    got = jax.jit(jax.vmap(jax.grad(autoflow.convert(matrix, checkpoints=K), argnums=(0, 1)),
                           (None, 0, 0)))(A, bs, ns)
    for k, n in enumerate(ns):
        _close((got[0][k], got[1][k]), jax.grad(matrix_ref, argnums=(0, 1))(A, bs[k], int(n)))


def test_a_branch_in_the_body_summed_after_the_loop(plans):
    """A branch in the body: batching the ``cond`` of its pullbacks leaves
    ``stop_gradient``s in them (``select_n(p, stop_gradient(x), x)``), which are read as
    their values (``jx.linear_values``), so the sum is still one product after the loop."""
    g = jax.jit(jax.grad(autoflow.convert(branching, checkpoints=K), argnums=(0, 1)))
    for n in (0, 4, K + 3):
        _close(g(A, B, n), jax.grad(branching, argnums=(0, 1))(A, B, n))
    assert [p.transposable for p in plans if p.slots] == [True]


def test_a_body_whose_pullback_cannot_be_transposed(plans, monkeypatch):
    """Where JAX cannot transpose the steps' pullbacks (here: the branch's
    ``stop_gradient``s left as they are, as on a JAX whose jaxprs cannot be rewritten),
    the constants' cotangents are summed step by step instead."""
    monkeypatch.setattr(jx, "linear_values", lambda jaxpr: None)
    g = jax.jit(jax.grad(autoflow.convert(branching, checkpoints=K), argnums=(0, 1)))
    for n in (0, 4, K + 3):
        _close(g(A, B, n), jax.grad(branching, argnums=(0, 1))(A, B, n))
    assert [p.transposable for p in plans if p.slots] == [False]


def test_grad_of_grad_with_a_matrix_constant():
    f = autoflow.convert(matrix, checkpoints=K)
    for n in (3, K + 2):
        _close(jax.jit(jax.grad(lambda b: jnp.sum(jax.grad(f)(A, b, n) ** 2)))(B),
               jax.grad(lambda b: jnp.sum(jax.grad(matrix_ref)(A, b, n) ** 2))(B), tol=1e-3)


def test_checkpoint_around_a_loop_with_a_matrix_constant():
    f = jax.checkpoint(autoflow.convert(matrix, checkpoints=K))
    for n in (3, K + 2):
        _close(jax.jit(jax.grad(f, argnums=(0, 1)))(A, B, n),
               jax.grad(matrix_ref, argnums=(0, 1))(A, B, n))


def test_vmap_of_grad_where_lanes_run_long_past_the_stored_steps():
    """Under vmap the lanes past the stored steps reverse them in rounds (recomputing
    into rows, cutting long gaps), each lane its own; a lane that is done writes its
    rows into a scratch row, which nothing reads (the rows are not masked: see
    ``_WhileLoop.free``). Each lane equals its own gradient, with a matrix constant
    (summed after each round) and with vectors only (summed step by step)."""
    ns = jnp.array([3, 2 * K + 1, 5 * K + 3, 0, K])
    bs = jnp.stack([B * (0.5 + 0.2 * k) for k in range(len(ns))])
    got = jax.jit(jax.vmap(jax.grad(autoflow.convert(matrix, checkpoints=K), argnums=(0, 1)),
                           (None, 0, 0)))(A, bs, ns)
    for k, n in enumerate(ns):
        _close((got[0][k], got[1][k]), jax.grad(matrix_ref, argnums=(0, 1))(A, bs[k], int(n)))
    xs = jnp.stack([X * (1 + 0.1 * k) for k in range(len(ns))])
    got = jax.jit(jax.vmap(jax.grad(autoflow.convert(counted, checkpoints=K), argnums=(0, 1)),
                           (0, None, 0)))(xs, W, ns)
    for k, n in enumerate(ns):
        _close((got[0][k], got[1][k]), jax.grad(counted_ref, argnums=(0, 1))(xs[k], W, int(n)))


def _noisy_growth(x, key):
    while x < 5.0:
        key, s = jax.random.split(key)
        x = x * (1.0 + 0.1 * jax.random.uniform(s)) + 0.5
    return x


def test_a_typed_key_carried_through_a_differentiated_loop():
    # (its extended dtype is no NumPy dtype: sizing the stored steps failed on it)
    x, key = jnp.float32(1.0), jax.random.key(0)
    want = jax.grad(_noisy_growth)(x, key)
    for g in (jax.jit(jax.grad(autoflow.convert(_noisy_growth))),
              jax.grad(autoflow.jit(_noisy_growth))):
        np.testing.assert_allclose(g(x, key), want, rtol=1e-5)
