"""Reach: lambdas, library wrappers (custom_jvp/custom_vjp/checkpoint/wraps),
callable objects' signatures and pickling, each against eager Python."""

from __future__ import annotations

import functools
import inspect
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow

from .semantics.oracle import F, check

# ---- lambdas ---------------------------------------------------------------------------------

abs_lambda = lambda x: x if x > 0 else -x  # noqa: E731
pair = (lambda x: x + 1.0 if x > 0 else x, lambda x: x * 2.0 if x > 0 else x - 1.0)  # noqa: E731
adder = lambda a: (lambda b: a + b if b > 0 else a - b)  # noqa: E731


@pytest.mark.parametrize("x", [2.0, -3.0])
def test_lambda_converted(x):
    check(abs_lambda, F(x))
    check(pair[0], F(x))
    check(pair[1], F(x))


def calls_lambdas(x):
    return abs_lambda(x) + adder(x)(x - 1.0)


@pytest.mark.parametrize("x", [2.0, -3.0, 0.5])
def test_lambdas_reached_from_converted_code(x):
    check(calls_lambdas, F(x))


def test_lambda_given_to_jit_directly():
    f = autoflow.jit(lambda x: abs_lambda(x) * 2.0 if x < 5 else abs_lambda(x))
    assert float(f(-3.0)) == 6.0 and float(f(7.0)) == 7.0


# ---- library wrappers ------------------------------------------------------------------------

@jax.custom_jvp
def soft_relu(x):
    if x > 0:
        return x + 0.5
    return 0.5 * jnp.exp(x)


@soft_relu.defjvp
def soft_relu_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    if x > 0:
        return soft_relu(x), t
    return soft_relu(x), 0.5 * jnp.exp(x) * t * 10.0   # a custom rule, told apart from autodiff


@pytest.mark.parametrize("x", [1.0, -1.0])
def test_custom_jvp_rule_kept(x):
    assert np.allclose(autoflow.jit(soft_relu)(x), soft_relu.fun(x))
    expected = 1.0 if x > 0 else 5.0 * np.exp(x)
    assert np.allclose(jax.grad(autoflow.convert(soft_relu))(F(x)), expected)
    assert np.allclose(jax.jit(jax.grad(autoflow.convert(soft_relu)))(F(x)), expected)
    assert np.allclose(jax.grad(jax.jit(autoflow.convert(soft_relu)))(F(x)), expected)
    assert np.allclose(jax.grad(autoflow.jit(soft_relu))(F(x)), expected)
    xs = jnp.array([x, -x])
    both = np.array([expected, 1.0 if -x > 0 else 5.0 * np.exp(-x)])
    assert np.allclose(jax.vmap(jax.grad(autoflow.convert(soft_relu)))(xs), both)
    assert np.allclose(jax.grad(lambda v: jax.vmap(autoflow.convert(soft_relu))(v).sum())(xs),
                       both)


@jax.custom_vjp
def clip_grad(x):
    if x > 1.0:
        return x * 1.0
    return x * 2.0


def clip_fwd(x):
    return clip_grad(x), x


def clip_bwd(x, g):
    if x > 0:
        return (jnp.clip(g, -0.1, 0.1),)
    return (g,)


clip_grad.defvjp(clip_fwd, clip_bwd)


def test_custom_vjp_rules_kept():
    f = autoflow.convert(clip_grad)
    assert float(autoflow.jit(clip_grad)(2.0)) == 2.0
    assert float(jax.jit(jax.grad(f))(F(2.0))) == pytest.approx(0.1)
    assert float(jax.jit(jax.grad(f))(F(-2.0))) == pytest.approx(1.0)


@functools.partial(jax.checkpoint, policy=jax.checkpoint_policies.nothing_saveable)
def doubling(x):
    while x < 10.0:
        x = x * 2.0
    return x


def test_checkpoint_sees_through_and_keeps_remat():
    assert float(autoflow.jit(doubling)(F(3.0))) == 12.0
    jaxpr = str(jax.make_jaxpr(autoflow.convert(doubling))(F(3.0)))
    assert "remat" in jaxpr or "checkpoint" in jaxpr


# ---- callable objects, pickling ---------------------------------------------------------------

class Scaler:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        if x > 0:
            return x * self.k
        return -x


def test_callable_object_signature_is_the_call():
    f = autoflow.convert(Scaler(3.0))
    assert list(inspect.signature(f).parameters) == ["x"]
    assert float(f(F(2.0))) == 6.0
    assert float(jax.jit(f)(F(-2.0))) == 2.0


def looped(x, n):
    i = 0
    while i < n:
        x = x * 2.0 if x < 100.0 else x
        i += 1
    return x


def test_converted_functions_pickle_with_cloudpickle():
    cloudpickle = pytest.importorskip("cloudpickle")
    for obj in (autoflow.convert(looped, max_loop_iterations=8), autoflow.jit(looped)):
        g = pickle.loads(cloudpickle.dumps(obj))
        assert float(g(F(1.0), jnp.int32(3))) == 8.0


from . import reach_helpers  # noqa: E402


def module_functions_to_jax(xs):
    c, _ = jax.lax.scan(reach_helpers.step, 0.0, xs)
    return c, jax.vmap(reach_helpers.magnitude)(xs)


def test_module_attribute_functions_handed_to_jax_are_converted():
    xs = jnp.array([1.0, -2.0, 3.0], jnp.float32)
    c, m = autoflow.jit(module_functions_to_jax)(xs)
    assert float(c) == 4.0
    np.testing.assert_allclose(m, [2.0, 2.0, 6.0])


# ---- callables held by objects and containers -----------------------------------------------

def _halve_until_small(x):
    while x > 1.0:
        x = x * 0.5
    return x


class _Layer:
    def __init__(self, scale):
        self.scale = scale

    def __call__(self, x):
        if x > 0:
            return x * self.scale
        return -x

    def settle(self, x):
        while x < 10.0:
            x = x * 2.0 + 1.0
        return x


class _Net:
    def __init__(self):
        self.layers = [_Layer(2.0), _Layer(3.0)]
        self.head = _Layer(0.5)
        self.ops = {"halve": _halve_until_small}

    def __call__(self, x):
        x = self.layers[0](x)
        x = self.layers[1](x)
        return self.head.settle(x) + self.layers[-1].settle(x) + self.ops["halve"](x)


_NET = _Net()
_TABLE = {"halve": _halve_until_small, "layer": _Layer(4.0)}
_LIST = [_halve_until_small]


def calls_through_containers(x):
    a = _TABLE["halve"](x * 3.0) + _LIST[0](x + 5.0) + _TABLE["layer"](x)
    # array and container methods stay as written
    b = jnp.zeros(3).at[1].set(x).sum() + jnp.linalg.norm(jnp.stack([x, a]))
    return _NET(x) + a + b


@pytest.mark.parametrize("x", [2.0, -3.0, 0.25])
def test_callables_held_in_containers_and_attributes_are_converted(x):
    check(calls_through_containers, F(x))
    text = autoflow.to_source(calls_through_containers)
    assert "af.call(_TABLE['halve']" in text and "af.call(_LIST[0]" in text
    assert "jnp.zeros(3).at[1].set(x).sum()" in text and "jnp.linalg.norm(" in text
    assert "af.call(self.layers[-1].settle" in autoflow.to_source(_Net.__call__)
