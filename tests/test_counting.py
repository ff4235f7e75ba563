"""``runtime.common.counting``: lane counts and slot searches made of products, equal to
``jnp``'s reductions, alone and under ``jit``/``vmap``; and the flat loop of
``lanes="auto"`` (behind its ``cond``) adds no reduction to a program."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow.runtime.common import counting
from autoflow.runtime.loops import flat_lanes


@pytest.mark.parametrize("n", [1, 2, 3, 17, 33, 64, counting.SMALL + 1])
def test_each_helper_is_the_reduction_it_replaces(n):
    rng = np.random.default_rng(n)
    for p in (0.0, 0.1, 0.5, 1.0):
        m = rng.random(n) < p
        ints = rng.integers(-3, 4, n).astype(np.int32)
        floats = rng.choice([-np.inf, -1.5, 0.5, np.inf], n).astype(np.float32)
        assert int(counting.first(jnp.asarray(m))) == int(np.argmax(m))
        assert int(counting.argmax(jnp.asarray(ints))) == int(np.argmax(ints))
        assert int(counting.argmin(jnp.asarray(ints))) == int(np.argmin(ints))
        assert int(counting.argmax(jnp.asarray(floats))) == int(np.argmax(floats))
        assert int(counting.argmin(jnp.asarray(floats))) == int(np.argmin(floats))
        assert bool(counting.any_(jnp.asarray(m))) == bool(m.any())
        assert float(counting.counts(jnp.asarray(m))[0]) == float(m.sum())


def test_under_jit_and_vmap():
    rng = np.random.default_rng(7)
    masks = rng.random((6, 33)) < 0.2
    values = rng.integers(0, 5, (6, 33)).astype(np.int32)
    got = jax.jit(jax.vmap(lambda m, v: (counting.first(m), counting.argmax(v),
                                         counting.argmin(v), counting.any_(m),
                                         *counting.counts(m, ~m))))(masks, values)
    want = (np.argmax(masks, 1), np.argmax(values, 1), np.argmin(values, 1),
            masks.any(1), masks.sum(1), (~masks).sum(1))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), w)


def test_counts_of_many_lanes_are_exact():
    m = jnp.arange(3 * 2**16) % 3 == 0
    assert float(counting.counts(m)[0]) == 2**16
    assert int(counting.count(m)) == 2**16
    # (past 2**24 a float32 sum of ones stops growing: count sums in int32 there)
    many = jnp.arange(counting.MANY + 5) % 2 == 0  # (counted by reductions from MANY on)
    assert int(counting.count(many)) == float(counting.counts(many)[0]) == (counting.MANY + 6) // 2
    assert bool(counting.any_(many)) and not bool(counting.any_(~jnp.ones_like(many)))
    big = jnp.ones(counting.EXACT + 3, bool)
    assert int(jax.jit(counting.count)(big)) == counting.EXACT + 3
    assert bool(counting.any_(big))


def _sampler(u):
    # a loop holding a loop whose trip count each lane has of its own: the flat machine
    # takes it under vmap (lanes="auto": behind a cond, after a lockstep start)
    x = u
    k = 0
    while x > 0.2:
        y = x
        while y < 1.0:
            y = y * 1.7 + 0.01
        x = x * 0.9 - 0.01 * y
        k += 1
    return x + k


def _compiled(fn, xs):
    return jax.jit(jax.vmap(fn)).lower(xs).compile().as_text()


def _reductions(text):
    return text.count(" reduce(") + text.count(" reduce-window(")


def test_the_flat_loop_behind_its_cond_adds_no_reduction(monkeypatch):
    xs = jnp.linspace(0.0, 1.0, 64)
    auto = autoflow.convert(_sampler)
    lockstep = autoflow.convert(_sampler, lanes="lockstep")
    want = np.array([_sampler(float(x)) for x in xs])
    np.testing.assert_allclose(np.asarray(jax.vmap(auto)(xs)), want, rtol=1e-6)
    built = []
    machine = flat_lanes.machine
    monkeypatch.setattr(flat_lanes, "machine", lambda *a, **k: built.append(1) or machine(*a, **k))
    auto_text, lockstep_text = _compiled(auto, xs), _compiled(lockstep, xs)
    if not built:  # (a JAX without what the flat machine needs: lockstep only)
        pytest.skip("the flat machine is not built on this JAX")
    assert auto_text.count(" conditional(") > lockstep_text.count(" conditional(")
    assert _reductions(auto_text) <= _reductions(lockstep_text)
