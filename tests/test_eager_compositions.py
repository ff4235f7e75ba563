"""``vmap`` and ``grad`` of a converted function run eagerly (no ``jit`` around them): each
lane is the eager Python run of that lane, call after call, and a repeated call compiles
nothing (each of autoflow's loops and branches is compiled whole, once per distinct
program: op by op, the loops of a reverse pass were compiled again at every call)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow.runtime import jax as jx
from autoflow.runtime.jax import hijax

# (reverse mode through a `while` loop: autoflow's loop primitive)
needs_loops = pytest.mark.skipif(not jx.primitives(), reason="needs autoflow's loop primitive")


def newton_sqrt(x):
    y = x
    i = 0
    while jnp.abs(y * y - x) > 1e-5 and i < 50:
        y = 0.5 * (y + x / y)
        i += 1
    return y


def newton_cube(x):
    y = x
    i = 0
    while jnp.abs(y * y * y - x) > 1e-5 and i < 50:
        y = y - (y * y * y - x) / (3.0 * y * y)
        i += 1
    return y


def scaled_sum(x):
    total = 0.0
    k = 0
    while k < 5:
        if total > 2.0:
            total = total + 0.5 * x
        else:
            total = total + x * x
        k += 1
    return total


def scaled_sum_other_constant(x):
    total = 0.0
    k = 0
    while k < 5:
        if total > 2.0:
            total = total + 0.25 * x
        else:
            total = total + x * x
        k += 1
    return total


def printing_loop(x):
    k = 0
    while x > 1.0:
        print("halving", k)
        x = x / 2
        k += 1
    return x


class _Compiles:
    """Counts XLA compilations (JAX's own monitoring event) while open."""

    EVENT = "/jax/core/compile/backend_compile_duration"

    def __init__(self):
        self.count = 0

    def __call__(self, event, duration, **kwargs):
        if event == self.EVENT:
            self.count += 1

    def __enter__(self):
        jax.monitoring.register_event_duration_secs_listener(self)
        return self

    def __exit__(self, *exc):
        jax.monitoring.unregister_event_duration_listener(self)


def _lanes_of_grad(fn, xs):
    """The eager oracle: ``grad`` of the plain Python function, lane by lane."""
    return np.array([jax.grad(fn)(float(x)) for x in xs])


@needs_loops
@pytest.mark.parametrize("fn", [newton_sqrt, newton_cube, scaled_sum])
def test_vmap_of_grad_run_eagerly_is_each_lanes_python_call_after_call(fn):
    xs = jnp.linspace(1.0, 4.0, 6)
    composed = jax.vmap(jax.grad(autoflow.convert(fn)))
    want = _lanes_of_grad(fn, xs)
    for _ in range(3):
        np.testing.assert_allclose(np.asarray(composed(xs)), want, rtol=1e-5, atol=1e-6)


@needs_loops
def test_a_repeated_eager_call_compiles_nothing():
    xs = jnp.linspace(1.0, 4.0, 8)
    composed = jax.vmap(jax.grad(autoflow.convert(newton_sqrt)))
    composed(xs)
    if not hasattr(jax.monitoring, "unregister_event_duration_listener"):
        pytest.skip("this JAX has no way to take a monitoring listener off")
    with _Compiles() as compiles:
        got = composed(xs)
    np.testing.assert_allclose(np.asarray(got), _lanes_of_grad(newton_sqrt, xs), rtol=1e-5)
    if not hijax.install_low_staging():
        pytest.skip("this JAX stages autoflow's equations another way")
    assert compiles.count == 0


@needs_loops
def test_programs_that_differ_in_a_constant_do_not_share_a_compiled_program():
    xs = jnp.linspace(0.5, 3.0, 5)
    one = jax.vmap(jax.grad(autoflow.convert(scaled_sum)))
    other = jax.vmap(jax.grad(autoflow.convert(scaled_sum_other_constant)))
    for _ in range(2):
        np.testing.assert_allclose(np.asarray(one(xs)), _lanes_of_grad(scaled_sum, xs),
                                   rtol=1e-5)
        np.testing.assert_allclose(np.asarray(other(xs)),
                                   _lanes_of_grad(scaled_sum_other_constant, xs), rtol=1e-5)


def test_lanes_of_other_dtypes_and_shapes_do_not_share_a_compiled_program():
    conv = jax.vmap(autoflow.convert(newton_sqrt))
    for xs in (jnp.linspace(1.0, 4.0, 4), jnp.linspace(1.0, 4.0, 7),
               jnp.linspace(1.0, 9.0, 4).astype(jnp.bfloat16)):
        got = conv(xs)
        assert got.dtype == xs.dtype and got.shape == xs.shape
        want = np.array([float(newton_sqrt(float(x))) for x in np.asarray(xs, np.float32)])
        np.testing.assert_allclose(np.asarray(got, np.float32), want, rtol=2e-2)


def test_an_eager_loop_that_prints_prints_at_every_call(capfd):
    xs = jnp.array([3.0, 0.5, 9.0])
    conv = jax.vmap(autoflow.convert(printing_loop))
    for _ in range(2):
        got = conv(xs)
        jax.effects_barrier()
    out = capfd.readouterr().out
    want_lines = []
    for x in (3.0, 0.5, 9.0):
        k = 0
        while x > 1.0:
            want_lines.append(f"halving {k}")
            x /= 2
            k += 1
    assert sorted(line for line in out.splitlines() if line.startswith("halving")) == \
        sorted(want_lines * 2)
    np.testing.assert_allclose(np.asarray(got), [0.75, 0.5, 0.5625])


def test_the_cache_holds_a_bounded_number_of_programs(monkeypatch):
    monkeypatch.setattr(hijax, "EAGER_CACHE_SIZE", 2)
    for n in (3, 4, 5, 6):
        xs = jnp.linspace(1.0, 4.0, n)
        np.testing.assert_allclose(np.asarray(jax.vmap(autoflow.convert(newton_sqrt))(xs)),
                                   np.sqrt(np.asarray(xs)), rtol=1e-4)
    assert len(hijax._EAGER_CACHE) <= 2


def branching(x):
    if x > 0:
        return x * 2
    return -x


def test_autoflow_jit_made_again_at_each_call_compiles_once():
    # `autoflow.jit(f)(x)` written inline (a new jitted function at each call) compiled
    # again at each call, 30 ms each: the wrapper JAX's cache is keyed by was made again
    for fn in (branching, newton_sqrt):
        values = (2.0, -3.0, 0.5) if fn is branching else (2.0, 3.0, 0.5)
        wants = [fn(jnp.float32(v)) for v in values]  # (eager Python: its own compiles)
        autoflow.jit(fn)(jnp.float32(1.5))
        with _Compiles() as compiles:
            got = [autoflow.jit(fn)(jnp.float32(v)) for v in values]
        assert compiles.count == 0, fn.__name__
        np.testing.assert_allclose(np.array(got), np.array(wants), rtol=1e-6)
