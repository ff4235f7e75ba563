"""``autoflow.install_import_hook`` on a package of plain JAX code, in the fast tier
(tests/test_ecosystem.py, in the slow tier, runs it on Equinox, Flax and diffrax code)."""

from __future__ import annotations

import importlib
import sys
import textwrap

import jax
import jax.numpy as jnp
import pytest

import autoflow

SOURCE = textwrap.dedent("""\
    import jax


    def clip_steps(x, limit):
        steps = 0
        while x > limit:
            x = x / 2
            steps += 1
        return x, steps


    @jax.jit
    def jitted(x):
        return clip_steps(x, 1.0)[1]
""")


@pytest.fixture
def package(tmp_path, monkeypatch):
    (tmp_path / "hookpkg").mkdir()
    (tmp_path / "hookpkg" / "__init__.py").write_text("")
    (tmp_path / "hookpkg" / "ops.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "hookpkg"
    for name in ("hookpkg", "hookpkg.ops"):
        sys.modules.pop(name, None)


def test_hooked_package_runs_under_plain_jax_jit(package):
    with autoflow.install_import_hook(package) as hook:
        ops = importlib.import_module(f"{package}.ops")
    assert isinstance(hook, autoflow.hooks.ImportHook)
    # The module's own jax.jit now traces converted code: the while loop is staged.
    assert int(ops.jitted(jnp.float32(10.0))) == 4
    x, steps = jax.jit(ops.clip_steps)(jnp.float32(10.0), 1.0)
    assert (float(x), int(steps)) == (0.625, 4)
    assert ops.clip_steps(10.0, 1.0) == (0.625, 4)  # concrete: plain Python


def test_without_the_hook_the_same_module_fails_under_jit(package):
    ops = importlib.import_module(f"{package}.ops")
    with pytest.raises(jax.errors.TracerBoolConversionError):
        ops.jitted(jnp.float32(10.0))


def test_uninstalled_hook_converts_nothing_more(package):
    hook = autoflow.install_import_hook(package)
    hook.uninstall()
    ops = importlib.import_module(f"{package}.ops")
    with pytest.raises(jax.errors.TracerBoolConversionError):
        ops.jitted(jnp.float32(10.0))
