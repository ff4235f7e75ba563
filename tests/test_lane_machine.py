"""Nested data-dependent loops under ``vmap`` as one flat loop (``runtime/loops/flat_lanes.py``,
the option ``lanes="flat"``): every lane's results are those of the eager program."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow.runtime import jax as jx
from autoflow.runtime.loops import flat_lanes

# (the flat form is a batching rule of autoflow's loop primitive, which a JAX without
# the private API it builds on does not have: loops are then lax.while_loop's own)
pytestmark = pytest.mark.skipif(not jx.primitives(),
                                reason="autoflow's loop primitive is unavailable on this JAX")


@pytest.fixture
def flat(monkeypatch):
    """The nests flattened (``flat_lanes.machine`` calls) while a test runs."""
    calls = []
    machine = flat_lanes.machine

    def counted(*a, **k):
        calls.append("auto" if k.get("auto") else "flat")
        return machine(*a, **k)

    monkeypatch.setattr(flat_lanes, "machine", counted)
    return calls


def draws(key, p):
    total = 0
    count = 0
    while total < 20:
        key, k = jax.random.split(key)
        n = 0
        while True:
            k, s = jax.random.split(k)
            n += 1
            if jax.random.uniform(s) < p:
                break
        total = total + n
        count += 1
    return total, count


def newton_roots(cs, x, n):
    # for each of the first n values c: sqrt(c) by Newton's method; trip counts differ
    out = 0.0
    i = 0
    while i < n:
        c = cs[i]
        y = x
        while abs(y * y - c) > 1e-4 * c:
            y = 0.5 * (y + c / y)
        out = out + y
        i = i + 1
    return out


def _lanes(fn, *batched):
    return [fn(*(a[j] for a in batched)) for j in range(batched[0].shape[0])]


def _close(got, want):
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        assert np.allclose(np.asarray(g), np.asarray(w), rtol=1e-5)


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_flat_lanes_give_each_lane_its_eager_result(flat, p):
    keys = jax.random.split(jax.random.key(0), 6)
    ps = jnp.full(6, p)
    want = _lanes(draws, keys, ps)
    got = jax.jit(jax.vmap(autoflow.convert(draws, lanes="flat")))(keys, ps)
    _close(got, (np.array([w[0] for w in want]), np.array([w[1] for w in want])))
    assert flat


def test_flat_lanes_compose_with_jit_inside_vmap(flat):
    keys = jax.random.split(jax.random.key(1), 5)
    ps = jnp.linspace(0.05, 0.9, 5)
    got = jax.vmap(autoflow.jit(draws, lanes="flat"))(keys, ps)
    want = _lanes(draws, keys, ps)
    _close(got, (np.array([w[0] for w in want]), np.array([w[1] for w in want])))
    assert flat


def test_flat_lanes_are_the_nested_programs_values(flat):
    cs = jnp.asarray(np.random.default_rng(0).uniform(0.5, 50.0, size=(8, 3)), jnp.float32)
    xs = jnp.linspace(1.0, 9.0, 8)
    ns = jnp.array([1, 2, 3, 3, 2, 1, 3, 2])
    want = [newton_roots(np.asarray(c), float(x), int(n)) for c, x, n in zip(cs, xs, ns)]
    got = jax.jit(jax.vmap(autoflow.convert(newton_roots, lanes="flat")))(cs, xs, ns)
    assert np.allclose(got, want, rtol=1e-5)
    assert flat


def test_flat_lanes_under_grad(flat):
    cs = jnp.asarray(np.random.default_rng(1).uniform(0.5, 50.0, size=(4, 3)), jnp.float32)
    xs = jnp.linspace(1.0, 4.0, 4)
    ns = jnp.array([3, 1, 2, 3])
    got = jax.jit(jax.vmap(jax.grad(autoflow.convert(newton_roots, lanes="flat")), (0, 0, 0)))(cs, xs, ns)
    # d/dc of a converged Newton square root: 1 / (2 sqrt(c)), for the first n of a row
    want = 1.0 / (2.0 * np.sqrt(np.asarray(cs))) * (np.arange(3) < np.asarray(ns)[:, None])
    assert np.allclose(got, want, rtol=2e-2, atol=1e-6)
    assert flat


def test_a_body_with_effects_stays_nested(flat, capsys):
    def loud(c, x):
        i = 0
        while i < c:
            y = x
            while y > 1.0:
                y = y / 2
            print("row", i)
            i = i + 1 + (y < 0.7)
        return i

    got = jax.vmap(autoflow.convert(loud, lanes="flat"))(jnp.array([2, 3]), jnp.array([5.0, 9.0]))
    jax.effects_barrier()
    assert list(np.asarray(got)) == [loud(2, 5.0), loud(3, 9.0)]
    assert not flat


def test_auto_lanes_are_the_default_and_lockstep_never_flattens(flat):
    # (without the option, a nest starts in lockstep and may go on flat when compiled;
    # lanes="lockstep", or its old name "nested", keeps every lane waiting for the slowest)
    cs = jnp.asarray(np.random.default_rng(0).uniform(0.5, 50.0, size=(4, 3)), jnp.float32)
    xs = jnp.linspace(1.0, 9.0, 4)
    ns = jnp.array([1, 2, 3, 3])
    want = [newton_roots(np.asarray(c), float(x), int(n)) for c, x, n in zip(cs, xs, ns)]
    got = jax.vmap(autoflow.convert(newton_roots))(cs, xs, ns)
    assert np.allclose(got, want, rtol=1e-5)
    assert flat == ["auto"]
    flat.clear()
    for name in ("lockstep", "nested"):
        got = jax.vmap(autoflow.convert(newton_roots, lanes=name))(cs, xs, ns)
        assert np.allclose(got, want, rtol=1e-5)
    assert not flat
    with pytest.raises(ValueError, match="lanes="):
        autoflow.convert(newton_roots, lanes="diagonal")
