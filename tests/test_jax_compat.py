"""autoflow on a JAX newer than it was tested on, whose private modules moved."""

import sys
import types
import warnings

import jax
import pytest

from autoflow.runtime import _jax_compat


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(_jax_compat, "_warned_degraded", set())
    # a JAX without hijax's HiPrim (JAX 0.11's name) or VJPHiPrimitive (up to 0.10)
    monkeypatch.setitem(sys.modules, "jax.experimental.hijax", types.ModuleType("hijax"))
    return monkeypatch


def test_a_newer_jax_without_the_internals_is_named_once(fresh):
    fresh.setattr(jax, "__version__", "99.0.0")
    with pytest.warns(UserWarning, match=r"tested on JAX up to .*\(99\.0\.0\) lacks "
                                         r"jax\.experimental\.hijax\.HiPrim.*lax\.cond.*reverse mode") as seen:
        assert _jax_compat.checkpoint_internals() is None
    assert seen[0].filename == __file__  # the caller outside autoflow, not autoflow's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _jax_compat.checkpoint_internals() is None  # said once


def test_a_supported_jax_without_them_falls_back_silently(fresh):
    """The oldest supported JAX has no hijax either: that fallback is documented."""
    fresh.setattr(jax, "__version__", "0.4.38")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _jax_compat.checkpoint_internals() is None


def test_the_jax_under_test_is_within_what_autoflow_says_it_was_tested_on():
    """When the test environment gets a newer JAX, this fails until NEWEST_TESTED
    is raised (after the suite passes on it): the warning above stays true."""
    assert _jax_compat.version() <= _jax_compat.NEWEST_TESTED
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _jax_compat.checkpoint_internals()
        _jax_compat.lowering_internals()
