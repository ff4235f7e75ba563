"""``autoflow.jit`` wraps a function (to re-raise a user's exception from a staged
``raise``/``assert`` as itself) only when a check can fire in it: a ``raise`` in
the function, or in a function or class of its file that it names. Other
functions are ``jax.jit``'s own (no Python frame per call)."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

import autoflow

from .equivalence import load_module

SOURCE = '''
import jax.numpy as jnp


def check_positive(x):
    if x < 0:
        raise ValueError("negative input")
    return x


class Checker:
    def check(self, x):
        assert x < 100.0, "too large"
        return x


def uses_helper(x):
    y = x * 2.0
    return check_positive(y) + 1.0


def uses_helper_through_another(x):
    return uses_helper(x) - 1.0


def uses_method(x):
    return Checker().check(x)


def pure(x):
    if x > 0:
        return x * 2.0
    return -x


def harness(a, b):
    if a.shape != b.shape:
        raise AssertionError("shapes")
'''


@pytest.fixture()
def module(tmp_path):
    path = tmp_path / "wrapper_choice_mod.py"
    path.write_text(SOURCE)
    return load_module(path)


@pytest.mark.parametrize("where, name", [
    ("module", "uses_helper"), ("module", "uses_helper_through_another"),
    # (a file with no `raise` or `if` of its own, calling the helpers of another file)
    ("caller", "from_import"), ("caller", "through_module"), ("caller", "in_a_lambda")])
def test_a_raise_in_a_helper_is_re_raised_as_itself(request, where, name):
    fn = getattr(request.getfixturevalue(where), name)
    f = autoflow.jit(fn)
    assert float(f(jnp.float32(2.0))) == fn(2.0)
    with pytest.raises(ValueError, match="negative input"):
        f(jnp.float32(-2.0)).block_until_ready()


def test_an_assert_in_a_method_it_names_is_re_raised_as_itself(module):
    f = autoflow.jit(module.uses_method)
    assert float(f(jnp.float32(2.0))) == 2.0
    with pytest.raises(AssertionError, match="too large"):
        f(jnp.float32(200.0)).block_until_ready()


def test_a_function_that_reaches_no_raise_is_jax_jit_itself(module):
    f = autoflow.jit(module.pure)
    assert type(f).__name__ != "_Jitted"
    assert float(f(jnp.float32(3.0))) == module.pure(3.0)
    assert float(f(jnp.float32(-3.0))) == module.pure(-3.0)
    assert type(autoflow.jit(module.uses_helper)).__name__ == "_Jitted"


CALLER = '''
import jax.numpy as jnp
import wrapper_choice_mod as helpers
from wrapper_choice_mod import check_positive, pure


def from_import(x):
    return check_positive(x) + 1.0


def through_module(x):
    return helpers.check_positive(x) * 2.0


def in_a_lambda(x):
    g = lambda v: check_positive(v)
    return g(x)


def only_pure(x):
    return pure(x) + 1.0
'''


@pytest.fixture()
def caller(module, tmp_path, monkeypatch):
    """A file with no `raise` or `if` of its own, calling the helpers of another file."""
    import sys

    monkeypatch.setitem(sys.modules, "wrapper_choice_mod", module)
    path = tmp_path / "wrapper_choice_caller.py"
    path.write_text(CALLER)
    return load_module(path)


def test_a_helper_of_another_file_that_reaches_no_raise_keeps_jax_jit(caller):
    f = autoflow.jit(caller.only_pure)
    assert type(f).__name__ != "_Jitted"
    assert float(f(jnp.float32(-3.0))) == caller.only_pure(-3.0)
