"""Library code between converted code and the user's code: containers that call
the user's modules (``eqx.nn.Sequential``, ``nnx.Sequential``), ``convert`` of a
module handed to ``nnx.jit``/``nnx.grad``/``eqx.filter_jit``, ``jax.checkpoint``,
``beartype``/``jaxtyped`` wrappers, and pickling a converted function in a fresh
process. Each result against the same code run eagerly on concrete values."""

from __future__ import annotations

import functools
import os
import pickle
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow

eqx = pytest.importorskip("equinox")
nnx = pytest.importorskip("flax.nnx")


def close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


# ---- library containers calling the user's modules ---------------------------------------------

class Normalise(eqx.Module):
    """A user layer with a traced `if` and a traced `while`."""
    limit: float = 1.0

    def __call__(self, x, *, key=None):
        if jnp.sum(x) > self.limit:
            x = x / jnp.sum(x)
        while jnp.max(x) < 0.25:
            x = x * 2.0
        return x


class NnxNormalise(nnx.Module):
    def __init__(self):
        self.hits = nnx.BatchStat(jnp.zeros((), jnp.int32))

    def __call__(self, x):
        if jnp.sum(x) > 1.0:
            x = x / jnp.sum(x)
            self.hits[...] += 1
        return x


def normalise_fn(x):
    if jnp.sum(x) > 1.0:
        x = x / jnp.sum(x)
    return x


EQX_SEQ = eqx.nn.Sequential([Normalise(), eqx.nn.Lambda(jnp.tanh)])


def through_module_global(x):
    return EQX_SEQ(x)


def through_parameter(x, model):
    return model(x) * 2.0


def builds_nnx_sequential(x):
    return nnx.Sequential(NnxNormalise(), jnp.tanh)(x)


def vmaps_a_library_container(xs):
    return jax.vmap(EQX_SEQ)(xs)


XS = [jnp.array([1.0, 2.0], jnp.float32), jnp.array([0.1, 0.05], jnp.float32),
      jnp.array([0.01, 0.02], jnp.float32)]


@pytest.mark.parametrize("i", range(3))
def test_equinox_sequential_of_a_user_layer(i):
    x = XS[i]
    expected = EQX_SEQ(x)  # eager
    close(autoflow.jit(through_module_global)(x), expected)
    close(eqx.filter_jit(autoflow.convert(through_parameter))(x, EQX_SEQ), 2.0 * expected)
    close(autoflow.jit(lambda v: EQX_SEQ(v))(x), expected)
    close(autoflow.jit(EQX_SEQ)(x), expected)


def test_vmap_of_a_library_container():
    xs = jnp.stack(XS)
    expected = jnp.stack([EQX_SEQ(x) for x in XS])
    close(autoflow.jit(vmaps_a_library_container)(xs), expected)


@pytest.mark.parametrize("i", range(3))
def test_nnx_sequential_of_a_user_module(i):
    x = XS[i]
    expected = builds_nnx_sequential(x)
    close(autoflow.jit(builds_nnx_sequential)(x), expected)


def test_the_class_is_unchanged_outside_converted_code():
    autoflow.jit(through_module_global)(XS[0])  # Normalise reached through library code
    layer = Normalise()
    close(layer(XS[0]), normalise_fn(XS[0]))    # eager: as written
    # Outside converted code the method runs as written: jax.jit of it fails as it would.
    with pytest.raises(jax.errors.TracerBoolConversionError):
        jax.jit(layer)(XS[0])
    assert "jnp.sum(x) > self.limit" in autoflow.to_source(Normalise.__call__)


def test_tree_map_and_partial_of_user_functions():
    def f(x):
        out = jax.tree.map(normalise_fn, {"a": x, "b": 3.0 * x})
        g = functools.partial(normalise_fn)
        return out["a"] + out["b"] + g(x)

    for x in XS:
        close(autoflow.jit(f)(x), f(x))


# ---- convert of a module: still a module -------------------------------------------------------

class Gated(nnx.Module):
    def __init__(self):
        self.w = nnx.Param(jnp.arange(1.0, 3.0))
        self.hits = nnx.BatchStat(jnp.zeros((), jnp.int32))

    def __call__(self, x):
        y = x * self.w[...]
        if y.sum() > 1.0:
            y = y / y.sum()
        return y


class Counting(Gated):
    def __call__(self, x):
        y = super().__call__(x)
        if y.sum() > 0.5:
            self.hits[...] += 1
        return y


@pytest.mark.parametrize("scale", [0.1, 2.0])
def test_nnx_jit_and_grad_of_a_converted_module(scale):
    x = jnp.ones(2, jnp.float32) * scale
    model = Gated()
    expected = model(x)
    converted = autoflow.convert(model)
    assert isinstance(converted, Gated) and isinstance(converted, nnx.Module)
    close(nnx.jit(converted)(x), expected)
    close(nnx.jit(lambda m, v: m(v))(converted, x), expected)
    grads = nnx.grad(lambda m, v: m(v).sum())(converted, x)
    expected_grads = nnx.grad(lambda m, v: m(v).sum())(model, x)
    close(grads["w"][...], expected_grads["w"][...])


def test_a_converted_nnx_module_writes_its_state_into_the_module():
    x = jnp.ones(2, jnp.float32) * 2.0
    eager = Counting()
    expected = eager(x)
    model = Counting()
    close(nnx.jit(lambda m, v: m(v))(autoflow.convert(model), x), expected)
    assert int(model.hits[...]) == int(eager.hits[...]) == 1


@pytest.mark.parametrize("scale", [0.1, 2.0])
def test_eqx_filter_jit_and_grad_of_a_converted_module(scale):
    x = jnp.ones(2, jnp.float32) * scale
    layer = Normalise(limit=0.5)
    converted = autoflow.convert(layer)
    assert isinstance(converted, Normalise)
    close(eqx.filter_jit(converted)(x), layer(x))
    again = pickle.loads(pickle.dumps(converted))  # pickled as `convert(layer)`
    assert type(again) is type(converted)
    close(jax.jit(again)(x), layer(x))
    g = eqx.filter_grad(lambda v, m: m(v).sum())(x, converted)
    close(g, eqx.filter_grad(lambda v, m: m(v).sum())(x, layer))


# ---- jax.checkpoint / remat around a user function ---------------------------------------------

@jax.checkpoint
def ckpt(x):
    if jnp.sum(x) > 1.0:
        x = x / jnp.sum(x)
    return x * x


@jax.remat
def remat(x):
    if jnp.sum(x) > 1.0:
        x = x / jnp.sum(x)
    return x * x


@functools.partial(jax.checkpoint, prevent_cse=False)
def ckpt_partial(x):
    if jnp.sum(x) > 1.0:
        x = x / jnp.sum(x)
    return x * x


def calls_checkpointed(x):
    return ckpt(x) + remat(x) + ckpt_partial(x)


@pytest.mark.parametrize("i", range(2))
def test_checkpointed_functions_called_from_converted_code(i):
    x = XS[i]
    expected = 3.0 * normalise_fn(x) ** 2
    close(autoflow.jit(calls_checkpointed)(x), expected)
    close(autoflow.jit(ckpt)(x), normalise_fn(x) ** 2)
    grad = jax.grad(lambda v: autoflow.jit(calls_checkpointed)(v).sum())(x)
    expected_grad = jax.grad(lambda v: (3.0 * normalise_fn(v) ** 2).sum())(x)
    close(grad, expected_grad)
    jaxpr = str(jax.make_jaxpr(autoflow.convert(calls_checkpointed))(x))
    assert "checkpoint" in jaxpr or "remat" in jaxpr


# Module-level jax.jit and jax.checkpoint around each other (a traced `if` inside):
# called from converted code, the user function inside is converted, and the wrappers
# keep their settings (static arguments, the remat).

@jax.checkpoint
@jax.jit
def ckpt_of_jit(x):
    if jnp.sum(x) > 1.0:
        x = x / jnp.sum(x)
    return x * x


@jax.jit
@jax.checkpoint
def jit_of_ckpt(x):
    if jnp.sum(x) > 1.0:
        x = x / jnp.sum(x)
    return x * x


@functools.partial(jax.jit, static_argnums=1)
def jit_static(x, n):
    if jnp.sum(x) > 1.0:
        x = x / jnp.sum(x)
    return jnp.concatenate([x, jnp.zeros(n)])  # (n a shape: it must stay static)


def calls_module_level_wrappers(x):
    return ckpt_of_jit(x) + jit_of_ckpt(x) + jit_static(x, 2)[:x.shape[0]]


@pytest.mark.parametrize("i", range(2))
def test_module_level_jit_and_checkpoint_called_from_converted_code(i):
    x = XS[i]
    expected = 3.0 * normalise_fn(x) ** 2 - normalise_fn(x) ** 2 + normalise_fn(x)
    close(autoflow.jit(calls_module_level_wrappers)(x), expected)
    grad = jax.grad(lambda v: autoflow.jit(calls_module_level_wrappers)(v).sum())(x)
    want = jax.grad(lambda v: (2.0 * normalise_fn(v) ** 2 + normalise_fn(v)).sum())(x)
    close(grad, want)
    jaxpr = str(jax.make_jaxpr(autoflow.convert(calls_module_level_wrappers))(x))
    assert "checkpoint" in jaxpr or "remat" in jaxpr
    # convert of the jitted function itself: jitted again, its static argument kept
    assert autoflow.convert(jit_static)(x, 3).shape == (x.shape[0] + 3,)


# ---- beartype / jaxtyped ------------------------------------------------------------------------

beartype = pytest.importorskip("beartype").beartype
jaxtyping = pytest.importorskip("jaxtyping")
Float, Array = jaxtyping.Float, jaxtyping.Array


@beartype
def bear(x: jax.Array) -> jax.Array:
    if jnp.sum(x) > 1.0:
        x = x / jnp.sum(x)
    return x


@jaxtyping.jaxtyped(typechecker=beartype)
def typed(x: Float[Array, " n"]) -> Float[Array, " n"]:  # noqa: F722 - jaxtyping's shape
    if jnp.sum(x) > 1.0:
        x = x / jnp.sum(x)
    return x


def calls_bear(x):
    return bear(x) + typed(x)


@pytest.mark.parametrize("i", range(2))
def test_beartype_and_jaxtyped_functions(i):
    x = XS[i]
    for fn in (bear, typed):
        close(autoflow.jit(fn)(x), fn(x))
        close(jax.jit(autoflow.convert(fn))(x), fn(x))
    close(autoflow.jit(calls_bear)(x), calls_bear(x))


def test_beartype_checks_still_run():
    beartype_roar = pytest.importorskip("beartype.roar")
    with pytest.raises(beartype_roar.BeartypeCallHintParamViolation):
        autoflow.convert(bear)([1.0, 2.0])
    with pytest.raises(jaxtyping.TypeCheckError):
        autoflow.jit(typed)(jnp.ones((2, 2)))
    assert "jnp.sum(x) > 1.0" in autoflow.to_source(bear)


# ---- pickling a converted function kept under another name ---------------------------------------

_LOAD = """
import pickle, sys
import jax, jax.numpy as jnp
fns = pickle.loads(sys.stdin.buffer.read())
for x in ([1.0, 2.0], [0.1, 0.2], [4.0, 0.5]):
    x = jnp.array(x)
    print(*(float(jax.jit(f)(x).sum()) for f in fns))
"""


def test_converted_functions_under_other_names_pickle_into_a_fresh_process():
    cloudpickle = pytest.importorskip("cloudpickle")
    from . import pickled_fns

    fns = [pickled_fns.converted_normalise, pickled_fns.make_nested()]
    payload = cloudpickle.dumps(fns)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(_LOAD)], input=payload,
                         capture_output=True, cwd=root, timeout=120,
                         env=dict(os.environ, PYTHONPATH=root, JAX_PLATFORMS="cpu"))
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    rows = [[float(v) for v in line.split()] for line in out.stdout.decode().split("\n") if line]
    for x, row in zip(([1.0, 2.0], [0.1, 0.2], [4.0, 0.5]), rows):
        x = jnp.array(x)
        eager = [float(pickled_fns.normalise(x).sum()), float(pickled_fns.make_nested().__wrapped__(x).sum())]
        np.testing.assert_allclose(row, eager, rtol=1e-6)
    # (under jit in the fresh process: the loaded functions are the converted ones)


def test_a_converted_function_under_another_name_pickles_with_plain_pickle():
    """Plain `pickle` (what `multiprocessing`'s spawn uses) saves a function by name;
    `converted_normalise = autoflow.convert(normalise)` is found again in a fresh process
    (converted there), not confused with `normalise`."""
    from . import pickled_fns

    f = pickled_fns.converted_normalise
    assert pickle.loads(pickle.dumps(f)) is f
    assert repr(f).startswith("<function normalise at ")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(_LOAD)], input=pickle.dumps([f]),
                         capture_output=True, cwd=root, timeout=120,
                         env=dict(os.environ, PYTHONPATH=root, JAX_PLATFORMS="cpu"))
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    rows = [float(line) for line in out.stdout.decode().split("\n") if line]
    for x, got in zip(([1.0, 2.0], [0.1, 0.2], [4.0, 0.5]), rows):
        np.testing.assert_allclose(got, float(pickled_fns.normalise(jnp.array(x)).sum()), rtol=1e-6)
