"""Real library code (Equinox, Flax, optax, diffrax) calling user code with
traced control flow, converted by autoflow.jit and by the import hook; each
result against the eager one."""

from __future__ import annotations

import importlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow

eqx = pytest.importorskip("equinox")


@pytest.fixture(scope="module")
def hooked_models():
    sys.modules.pop("tests.eco_pkg.models", None)
    with autoflow.install_import_hook("tests.eco_pkg"):
        models = importlib.import_module("tests.eco_pkg.models")
    yield models
    sys.modules.pop("tests.eco_pkg.models", None)


@pytest.fixture(scope="module")
def plain_models():
    sys.modules.pop("tests.eco_pkg.models", None)
    models = importlib.import_module("tests.eco_pkg.models")
    sys.modules.pop("tests.eco_pkg.models", None)
    return models


@pytest.mark.parametrize("scale", [0.1, 2.0])
def test_equinox_module_under_filter_jit_and_vmap(hooked_models, plain_models, scale):
    x = jnp.ones(3, jnp.float32) * scale
    eager = plain_models.Clipped(jnp.arange(3.0))(x)
    model = hooked_models.Clipped(jnp.arange(3.0))
    np.testing.assert_allclose(eqx.filter_jit(model)(x), eager, rtol=1e-6)
    batched = eqx.filter_vmap(model)(jnp.stack([x, 2 * x]))
    np.testing.assert_allclose(batched[0], eager, rtol=1e-6)
    # Without the hook the same module fails under jit: the hook is what made it work.
    with pytest.raises(jax.errors.TracerBoolConversionError):
        eqx.filter_jit(plain_models.Clipped(jnp.arange(3.0)))(x)


def test_equinox_module_through_autoflow_convert(plain_models):
    model = plain_models.Clipped(jnp.arange(3.0))
    x = jnp.ones(3, jnp.float32) * 2.0
    np.testing.assert_allclose(eqx.filter_jit(autoflow.convert(model))(x), model(x), rtol=1e-6)
    np.testing.assert_allclose(autoflow.jit(model)(x), model(x), rtol=1e-6)


def test_equinox_sequential_of_user_modules(hooked_models, plain_models):
    x = jnp.ones(3, jnp.float32)
    seq = eqx.nn.Sequential([hooked_models.Clipped(jnp.arange(3.0)),
                             hooked_models.Clipped(jnp.ones(3), limit=0.5)])
    eager = eqx.nn.Sequential([plain_models.Clipped(jnp.arange(3.0)),
                               plain_models.Clipped(jnp.ones(3), limit=0.5)])(x)
    np.testing.assert_allclose(eqx.filter_jit(seq)(x), eager, rtol=1e-6)


def test_diffrax_vector_field(hooked_models, plain_models):
    diffrax = pytest.importorskip("diffrax")

    def solve(field, y0):
        sol = diffrax.diffeqsolve(diffrax.ODETerm(field), diffrax.Euler(), t0=0.0, t1=1.0,
                                  dt0=0.1, y0=y0)
        return sol.ys[-1]

    y0 = jnp.float32(1.0)
    expected = 1.0
    for k in range(10):   # Euler by hand: the eager answer
        t = 0.1 * k
        expected = expected + 0.1 * (-expected if t < 0.5 else -2.0 * expected)
    np.testing.assert_allclose(jax.jit(solve, static_argnums=0)(hooked_models.vector_field, y0),
                               expected, rtol=1e-5)
    np.testing.assert_allclose(
        jax.jit(solve, static_argnums=0)(autoflow.convert(plain_models.vector_field), y0),
        expected, rtol=1e-5)


def test_optax_transform_with_user_loop(hooked_models):
    optax = pytest.importorskip("optax")
    g = jnp.array([3.0, 4.0], jnp.float32)
    tx = optax.chain(optax.scale(1.0), optax.stateless(
        lambda updates, params: jax.tree_util.tree_map(
            lambda u: hooked_models.damped(0.1, u), updates)))
    state = tx.init(g)
    updates, _ = jax.jit(tx.update)(g, state)
    expected = g
    while float(jnp.linalg.norm(expected)) > 1.0:
        expected = expected * 0.5
    np.testing.assert_allclose(updates, expected * 0.1, rtol=1e-6)


def test_flax_linen_module_call(plain_models):
    nn = pytest.importorskip("flax.linen")

    class Gate(nn.Module):
        @nn.compact
        def __call__(self, x):
            w = self.param("w", lambda k: jnp.ones(3))
            y = x * w
            if y.sum() > 1.0:
                y = y / y.sum()
            return y

    model = Gate()
    x = jnp.ones(3, jnp.float32) * 2.0
    params = model.init(jax.random.PRNGKey(0), jnp.zeros(3))
    apply = autoflow.jit(lambda p, v: model.apply(p, v))
    np.testing.assert_allclose(apply(params, x), jnp.ones(3) / 3.0, rtol=1e-6)


def test_convert_applied_to_an_equinox_class():
    @autoflow.convert
    class Halver(eqx.Module):
        limit: float = 1.0

        def __call__(self, x):
            while jnp.max(x) > self.limit:
                x = x / 2.0
            return x

        @property
        def doubled(self):
            return self.limit * 2 if self.limit > 0 else 0.0

    x = jnp.array([5.0, 1.0], jnp.float32)
    model = Halver()
    np.testing.assert_allclose(eqx.filter_jit(model)(x), [0.625, 0.125])
    assert jax.tree_util.tree_leaves(model) == [1.0] and model.doubled == 2.0


@pytest.mark.parametrize("cls", ["Gated", "GatedIndexed"])
def test_flax_nnx_module_with_state_under_hook(hooked_models, plain_models, cls):
    nnx = pytest.importorskip("flax.nnx")
    for scale in (0.01, 2.0, 50.0):
        x = jnp.ones(3, jnp.float32) * scale
        eager = getattr(plain_models, cls)(3)
        expected = eager(x)
        model = getattr(hooked_models, cls)(3)
        got = nnx.jit(lambda m, v: m(v))(model, x)
        np.testing.assert_allclose(got, expected, rtol=1e-6)
        # The counter the traced branch bumps is updated as in eager Python.
        assert int(model.hits.value) == int(eager.hits.value)
        got = autoflow.jit(lambda v: model(v))(x)
        np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_flax_nnx_module_through_autoflow_convert(plain_models):
    nnx = pytest.importorskip("flax.nnx")
    x = jnp.ones(3, jnp.float32) * 2.0
    eager = plain_models.Gated(3)
    expected = eager(x)
    model = plain_models.Gated(3)
    got = nnx.jit(lambda m, v: autoflow.convert(m)(v))(model, x)
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert int(model.hits.value) == int(eager.hits.value) == 1


@pytest.mark.parametrize("scale", [0.1, 2.0])
def test_jaxtyped_beartype_function(hooked_models, plain_models, scale):
    pytest.importorskip("beartype")
    jaxtyping = pytest.importorskip("jaxtyping")
    x = jnp.ones(3, jnp.float32) * scale
    expected = plain_models.normalise(x)
    for fn in (autoflow.jit(plain_models.normalise), jax.jit(hooked_models.normalise)):
        np.testing.assert_allclose(fn(x), expected, rtol=1e-6)
    # The converted function keeps the runtime type check the decorator added.
    with pytest.raises(jaxtyping.TypeCheckError):
        autoflow.jit(plain_models.normalise)(jnp.ones((2, 2)))
    with pytest.raises(jaxtyping.TypeCheckError):
        hooked_models.normalise(jnp.ones((2, 2)))
    assert "jnp.sum(x) > 1.0" in autoflow.to_source(plain_models.normalise)


class _Halver(eqx.Module):
    scale: jax.Array

    def shrink(self, x):
        while x.sum() > 1.0:
            x = x * self.scale
        return x

    def __call__(self, x):
        return self.shrink(x)  # Equinox binds `self.shrink` its own way (no MethodType)


def test_equinox_method_called_through_self_converts_on_the_first_call():
    x = jnp.array([4.0, 4.0])
    for make in (lambda: autoflow.jit(lambda m, v: m(v)),
                 lambda: eqx.filter_jit(autoflow.convert(lambda m, v: m(v)))):
        m = _Halver(jnp.float32(0.5))  # (the first call of the first form failed)
        np.testing.assert_allclose(make()(m, x), m(x), rtol=1e-6)


def test_flax_nnx_variable_written_by_a_helper_in_a_staged_loop():
    # (a callable object's attributes are state the loop reaches: the Variable a helper
    # writes is carried, where it leaked as JAX's UnexpectedTracerError)
    nnx = pytest.importorskip("flax.nnx")

    class Counted(nnx.Module):
        def __init__(self):
            self.count = nnx.Variable(jnp.int32(0))

        def step(self, x):
            self.count[...] += 1
            return x - 2.0

        def __call__(self, x):
            for _ in range(3):
                x = self.step(x)
            while x.sum() > -10.0:
                x = self.step(x)
            return x

    x = jnp.array([3.0, 2.0])
    eager, model = Counted(), Counted()
    want = eager(x)
    got = nnx.jit(lambda m, v: autoflow.convert(Counted.__call__)(m, v))(model, x)
    np.testing.assert_allclose(got, want)
    assert int(model.count[...]) == int(eager.count[...])


def _kinked(y, a):
    if y > a:
        return (y - a) ** 2
    return 2 * (y - a) ** 2


def _field(t, y, args):
    if y > 0.5:
        return -y
    return -2 * y


def _minimised_by(a, objective):
    import optimistix as optx

    return optx.minimise(objective, optx.BFGS(rtol=1e-6, atol=1e-6), jnp.float32(0.0),
                         args=a, throw=False).value


def _solved_with(y0, field):
    import diffrax

    sol = diffrax.diffeqsolve(diffrax.ODETerm(field), diffrax.Euler(), t0=0.0, t1=1.0,
                              dt0=0.1, y0=y0)
    return sol.ys[-1]


def _summed_over(xs, fn):
    return sum(jax.tree_util.tree_leaves(jax.tree_util.tree_map(fn, xs)))


def _kinked_at(a):
    return _minimised_by(a, _kinked)


def _field_at(y0):
    return _solved_with(y0, _field)


def _doubled_pair(x):
    return _summed_over([x, x + 1], lambda v: v * 2 if v > 1 else v)


def _kinked_where(y, a):  # (the libraries trace what they are given: the oracle in `jnp`)
    return jnp.where(y > a, (y - a) ** 2, 2 * (y - a) ** 2)


def _field_where(t, y, args):
    return jnp.where(y > 0.5, -y, -2 * y)


@pytest.mark.parametrize("fn, oracle, arg", [
    (_kinked_at, lambda a: _minimised_by(a, _kinked_where), 1.5),
    (_field_at, lambda y0: _solved_with(y0, _field_where), 1.0),
    (_doubled_pair, _doubled_pair, 0.5)])
def test_a_function_handed_to_a_library_by_a_parameter_is_converted(fn, oracle, arg):
    # (passed by its global name it was converted; through a helper's parameter it reached
    # optimistix, diffrax, `tree_map` as written: JAX's TracerBoolConversionError)
    pytest.importorskip("optimistix")
    pytest.importorskip("diffrax")
    want = oracle(jnp.float32(arg))
    got = autoflow.jit(fn)(jnp.float32(arg))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-5)
