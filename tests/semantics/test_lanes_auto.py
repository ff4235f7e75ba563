"""How the lanes of a ``vmap`` run a data-dependent loop (``lanes=``, default ``"auto"``:
``runtime/loops/lane_loop.py``, ``flat_lanes.py``) changes when each lane waits, never
what it computes: every lane's result is the eager Python run of that lane."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow.runtime import jax as jx
from autoflow.runtime.loops import flat_lanes, lane_loop

pytestmark = pytest.mark.skipif(not jx.primitives(),
                                reason="autoflow's loop primitive is unavailable on this JAX")


def nest(n, m):
    """Nested loops with break and continue; inner trip counts differ per lane."""
    total = 0
    i = 0
    while i < n:
        i += 1
        if i % 3 == 0:
            continue
        j = 0
        while True:
            j += 1
            if j % 5 == 4:
                continue
            total += j
            if j >= m + i:
                break
        if total > 400:
            break
    return total * 10 + i


def rejection(key, a):
    """A normal draw above ``a``: proposals redrawn until positive, until above ``a``."""
    while True:
        key, k = jax.random.split(key)
        while True:
            k, s = jax.random.split(k)
            x = jax.random.normal(s)
            if x > 0:
                break
        if x > a:
            break
    return x


def scaled(x, c, n):
    """A float nest (Newton steps until converged, each a loop) for derivatives."""
    i = 0
    while i < n:
        y = x
        k = 0
        while k < n - i:
            y = y - (y * y - c) / (2 * y)
            k += 1
        x = 0.5 * (x + y)
        i += 1
    return x


def eager(fn, *lanes):
    """Each lane's eager Python result (the oracle)."""
    return np.stack([np.asarray(fn(*args)) for args in zip(*lanes)])


@pytest.fixture
def compact_small(monkeypatch):
    """Compaction from 8 lanes on, buckets down to 2 (so small batches exercise it);
    the calls of the compacted form, by batch size."""
    sizes = []
    original = lane_loop._compacted

    def counted(prim, *a):
        sizes.append(prim.size)
        return original(prim, *a)

    monkeypatch.setattr(lane_loop, "COMPACT_MIN", 8)
    monkeypatch.setattr(lane_loop, "BUCKET_MIN", 2)
    monkeypatch.setattr(lane_loop, "SHRINK", 2)
    monkeypatch.setattr(lane_loop, "_compacted", counted)
    return sizes


NS = np.array([1, 7, 2, 9, 4, 3, 12, 5, 6, 1, 8, 2], np.int32)
MS = np.array([3, 1, 20, 2, 9, 0, 4, 30, 1, 6, 2, 11], np.int32)


@pytest.mark.parametrize("lanes", ["auto", "lockstep", "flat", "nested"])
def test_a_nest_with_break_and_continue_per_lane(lanes):
    want = eager(nest, NS.tolist(), MS.tolist())
    got = jax.jit(jax.vmap(autoflow.convert(nest, lanes=lanes)))(NS, MS)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("switch", [0.0, 1e9])
def test_auto_gives_the_same_lanes_whenever_it_goes_flat(monkeypatch, switch):
    # (going flat at once, or never: the lanes' results do not depend on when)
    monkeypatch.setattr(flat_lanes, "SWITCH_AT", switch)
    monkeypatch.setattr(flat_lanes, "SWITCH_MIN", switch)
    want = eager(nest, NS.tolist(), MS.tolist())
    got = jax.jit(jax.vmap(autoflow.convert(nest)))(NS, MS)
    np.testing.assert_array_equal(got, want)


def test_a_compacted_nest_per_lane(compact_small):
    want = eager(nest, NS.tolist(), MS.tolist())
    got = jax.jit(jax.vmap(autoflow.convert(nest)))(NS, MS)
    np.testing.assert_array_equal(got, want)
    assert 12 in compact_small


def test_in_axes_mixing_batched_and_shared(compact_small):
    want = eager(nest, [7] * 12, MS.tolist())
    got = jax.jit(jax.vmap(autoflow.convert(nest), in_axes=(None, 0)))(jnp.int32(7), MS)
    np.testing.assert_array_equal(got, want)
    want = eager(nest, NS.tolist(), [4] * 12)
    got = jax.vmap(autoflow.jit(nest), in_axes=(0, None))(NS, jnp.int32(4))
    np.testing.assert_array_equal(got, want)


def test_a_rejection_sampler_with_keys(compact_small):
    keys = jax.random.split(jax.random.key(11), 12)
    a = jnp.linspace(0.0, 1.5, 12)
    want = eager(rejection, list(keys), list(a))
    for lanes in ("auto", "lockstep", "flat"):
        got = jax.jit(jax.vmap(autoflow.convert(rejection, lanes=lanes)))(keys, a)
        np.testing.assert_allclose(got, want, rtol=1e-6)


def _lane_loops(jaxpr):
    """The ``_LaneLoop`` equations at the top level of ``jaxpr``."""
    return [p for p in (jx.hijax_prim_of(e) for e in jaxpr.eqns)
            if isinstance(p, lane_loop._LaneLoop)]


def test_vmap_of_vmap_is_one_loop_over_all_lanes(compact_small):
    # The outer vmap batches the loop the inner vmap made: one loop of 4 * 6 lanes,
    # compacted over all of them (not a switch with a batched index, running every
    # branch).
    def samples(key, a):
        return jax.vmap(rejection, (0, None))(jax.random.split(key, 6), a)

    keys = jax.random.split(jax.random.key(5), 4)
    a = jnp.array([0.0, 0.5, 1.0, 1.5])
    want = np.stack([eager(rejection, list(jax.random.split(k, 6)), [x] * 6)
                     for k, x in zip(keys, a)])
    f = jax.vmap(autoflow.convert(samples))
    loops = _lane_loops(jax.make_jaxpr(f)(keys, a).jaxpr)
    assert loops and all(p.size == 24 for p in loops)
    got = jax.jit(f)(keys, a)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert 24 in compact_small
    got = jax.vmap(jax.jit(autoflow.convert(samples)))(keys, a)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_vmap_of_vmap_of_a_nest_mixing_axes(compact_small):
    inner = jax.vmap(autoflow.convert(nest), in_axes=(0, None))
    got = jax.jit(jax.vmap(inner, in_axes=(None, 0)))(NS[:5], MS[:3])
    want = np.stack([eager(nest, NS[:5].tolist(), [m] * 5) for m in MS[:3].tolist()])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("how", ["auto", "compacted"])
def test_grad_of_a_float_nest_per_lane(how, request):
    if how == "compacted":
        request.getfixturevalue("compact_small")
    xs = jnp.linspace(1.0, 3.0, 8)
    cs = jnp.linspace(2.0, 9.0, 8)
    ns = jnp.array([1, 3, 2, 4, 1, 2, 3, 2])
    f = autoflow.convert(scaled)
    want = np.array([jax.grad(scaled)(float(x), float(c), int(n))
                     for x, c, n in zip(xs, cs, ns)])
    got = jax.jit(jax.vmap(jax.grad(f), (0, 0, 0)))(xs, cs, ns)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    # grad of a vmapped nest: the lanes' loop differentiated
    got = jax.jit(jax.grad(lambda xs: jnp.sum(jax.vmap(f)(xs, cs, ns))))(xs)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    vals = jax.jit(jax.vmap(f))(xs, cs, ns)
    np.testing.assert_allclose(vals, [scaled(float(x), float(c), int(n))
                                      for x, c, n in zip(xs, cs, ns)], rtol=1e-5)


def test_a_loop_that_prints_stays_in_lockstep(compact_small, capsys):
    def loud(n, x):
        i = 0
        while i < n:
            j = 0
            while j < i:
                x = x + 1.0
                j += 1
            print("lane", i, x)
            i += 1
        return x

    ns, xs = jnp.array([2, 3, 1] * 3), jnp.arange(9.0)
    for n, x in zip(ns.tolist(), xs.tolist()):
        loud(n, x)
    want = capsys.readouterr().out
    got = jax.vmap(autoflow.convert(loud))(ns, xs)
    printed = capsys.readouterr().out
    np.testing.assert_allclose(got, [loud(n, x) for n, x in zip(ns.tolist(), xs.tolist())])
    capsys.readouterr()
    assert not compact_small
    # every lane prints its own lines (each print reports the lanes that run it)
    assert sorted(printed.split("\n")) == sorted(want.split("\n"))


def test_lanes_option_is_checked_and_defaults_to_auto():
    with pytest.raises(ValueError, match="lanes="):
        autoflow.convert(nest, lanes="diagonal")
    from autoflow import _conversion
    assert _conversion._lanes(None) in ("auto", "lockstep", "flat")
    assert _conversion._lanes("nested") == "lockstep"
