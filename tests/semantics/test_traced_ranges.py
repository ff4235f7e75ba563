"""``range`` with traced bounds of any integer type, against Python's ``range``.

Python's ``range`` counts with ints of any size; a traced range computes in the bounds'
type only where it is signed and at least as wide as the default integer, and its length
without overflow: an unsigned bound with a negative step, or a span wider than a narrow
type holds (``range(int8(-100), int8(100))``), runs Python's number of iterations.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow


def digits_down(n):
    c = 0
    for i in range(n, -1, -1):
        c = c * 10 + i
    return c


def counted(a, b, s):
    c = 0
    for _ in range(a, b, s):
        c += 1
    return c


def measures(a, b, s):
    r = range(a, b, s)
    return len(r), sum(r), 3 in r


@pytest.mark.parametrize("dtype", [jnp.uint8, jnp.uint32, jnp.int8, jnp.int16, jnp.int32])
def test_a_negative_step_from_any_integer_type(dtype):
    for n in (0, 3, 5):
        assert int(autoflow.jit(digits_down)(dtype(n))) == digits_down(int(n))
    ns = jnp.array([0, 2, 4], dtype)
    assert [int(v) for v in jax.vmap(autoflow.convert(digits_down))(ns)] == [
        digits_down(int(n)) for n in ns]


CASES = [(-100, 100, 1, jnp.int8), (100, -100, -7, jnp.int8), (-30000, 30000, 10000, jnp.int16),
         (-2_000_000_000, 2_000_000_000, 1_000_000_000, jnp.int32), (0, 2_147_483_647, 5 ** 13,
                                                                    jnp.int32),
         (250, 3, -1, jnp.uint8), (3, 250, 9, jnp.uint8), (7, 7, 1, jnp.int8), (7, 3, 2, jnp.int16)]


@pytest.mark.parametrize("a, b, s, dtype", CASES)
def test_the_trip_count_and_measures_are_pythons(a, b, s, dtype):
    args = (dtype(a), dtype(b), s)
    assert int(autoflow.jit(counted)(*args)) == counted(a, b, s)
    n, total, has = autoflow.jit(measures)(*args)
    want = measures(a, b, s)
    assert (int(n), bool(has)) == (want[0], want[2])
    if abs(want[1]) < 2 ** 31:
        assert int(total) == want[1]


def test_lengths_against_python_at_random():
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(200):
        a, b = (int(v) for v in rng.integers(-120, 120, 2))
        s = int(rng.choice([-9, -3, -1, 1, 2, 5, 11]))
        rows.append((a, b, s))
    a, b, s = (jnp.array(col, jnp.int8) for col in zip(*rows))
    lengths = jax.jit(jax.vmap(autoflow.convert(lambda a, b, s: len(range(a, b, s)))))(a, b, s)
    assert [int(v) for v in lengths] == [len(range(*row)) for row in rows]
