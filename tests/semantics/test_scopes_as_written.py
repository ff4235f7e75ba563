"""Scopes the rewriter must keep as written, against eager Python:

* a nested function marked ``@autoflow.do_not_convert`` runs as written (its traced
  ``if`` is JAX's error, as in a top-level one), while the code around it converts;
* a bare annotation (``y: int``) in a converted branch makes ``y`` local to the user's
  function: reading it unbound is ``UnboundLocalError``, never a global's value.
"""

from __future__ import annotations

import jax.numpy as jnp
import pytest

import autoflow

from .oracle import check

y = 100.0


def nested_as_written(x):
    @autoflow.do_not_convert
    def inner(v):
        if v > 0:
            return v
        return -v

    if x > 0:
        z = x * 2
    else:
        z = -x
    return inner(z)


def nested_reads_a_carry(x):
    k = 3.0

    @autoflow.do_not_convert
    def scaled(v):
        return v * k

    if x > 0:
        k = 5.0
    return scaled(x)


def annotated_in_a_branch(x):
    if x > 0:
        y: float
    return y  # noqa: F821 - unbound: Python raises UnboundLocalError


def test_nested_do_not_convert_runs_as_written():
    assert autoflow.convert(nested_as_written)(2.0) == nested_as_written(2.0)
    with pytest.raises(jax_bool_errors()):
        autoflow.jit(nested_as_written)(jnp.float32(1.5))
    text = autoflow.to_source(nested_as_written)
    assert "        if v > 0:\n            return v\n" in text


def jax_bool_errors():
    import jax

    return (jax.errors.TracerBoolConversionError, jax.errors.ConcretizationTypeError)


@pytest.mark.parametrize("x", [2.0, -2.0])
def test_nested_do_not_convert_reads_the_variables_around_it(x):
    check(nested_reads_a_carry, x, vmap=[(3.0,), (-1.0,)], grad=True)


@pytest.mark.parametrize("x", [1.0, -1.0])
def test_a_bare_annotation_makes_the_name_local(x):
    check(annotated_in_a_branch, x, expect_raise=UnboundLocalError)


def deleted_in_a_loop(n):
    v = 5
    for i in range(n):
        if i == 1:
            del v
    return v


def test_a_name_deleted_in_a_loop_is_read_as_python_reads_it():
    # (on concrete values the caller got autoflow's internal placeholder for `v`)
    for n in (0, 1):
        assert autoflow.convert(deleted_in_a_loop)(n) == deleted_in_a_loop(n)
    with pytest.raises(UnboundLocalError):
        autoflow.convert(deleted_in_a_loop)(3)
