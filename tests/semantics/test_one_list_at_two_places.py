"""A list a loop's state holds at two places (``grid = [row, row]``), against eager
Python: one object, so a write through one place is seen through the other. A staged
loop carries each place apart; where its body writes through one place only, that is
autoflow's error at the loop (before, a loop whose test read the other place never
ended). A loop that runs as Python (a static bound) works on the objects themselves.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow import ConversionError


def doubled_through_one_place(x):
    row = [x]
    grid = [row, row]
    while grid[0][0] < 10.0:
        grid[1][0] = grid[1][0] * 2
    return grid[0][0]


def classic_table(x):
    table = [[0.0] * 3] * 2  # one row, twice
    for i in range(3):
        table[0][i] = x * i
    return table[1][0] + table[1][1] + table[1][2]


def read_only(x):
    row = [x, 2.0 * x]
    grid = [row, row]
    total = 0.0
    while total < 10.0:
        total = total + grid[0][0] + grid[1][1]
    return total


def test_a_write_through_one_place_in_a_staged_loop_is_an_error():
    with pytest.raises(ConversionError, match=r"`grid\[1\]\[0\]` is a place of a list"):
        autoflow.jit(doubled_through_one_place)(3.0)
    with pytest.raises(ConversionError, match="holds twice"):
        jax.vmap(autoflow.convert(doubled_through_one_place))(jnp.array([3.0, 20.0]))
    assert autoflow.convert(doubled_through_one_place)(3.0) == 12.0  # concrete: Python


def test_a_static_loop_runs_as_python_on_the_objects():
    for x in (1.0, 2.5):
        assert float(autoflow.jit(classic_table)(x)) == classic_table(x)
    assert np.allclose(jax.grad(autoflow.convert(classic_table))(2.0), 3.0)


def test_places_the_body_only_reads_are_fine():
    xs = jnp.array([1.0, 4.0])
    assert np.allclose(jax.vmap(autoflow.convert(read_only))(xs), [read_only(x) for x in xs])


def counted_into_default(x, acc=[]):  # noqa: B006 - the mutable default is the point
    if x > 0:
        acc.append(x)
    else:
        acc.append(-x)
    return len(acc)


def test_a_default_arguments_list_is_state_that_outlives_the_call():
    before = list(counted_into_default.__defaults__[0])
    with pytest.raises(ConversionError, match="`acc` outlives this function"):
        autoflow.jit(counted_into_default)(3.0)
    # no traced value is left in the default list
    assert counted_into_default.__defaults__[0] == before
