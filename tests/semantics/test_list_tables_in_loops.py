"""Dynamic-programming tables kept in Python lists, against eager Python.

A list of many like items that a staged loop (or a traced ``if``) reads and writes at
a traced index is carried as one array (``runtime.loops.packed``): results equal
Python's, the list is a list wherever the code looks at it, its identity is kept for
aliases, and a body that changes its layout stages the loop as before.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow


def house_robber(xs):
    n = xs.shape[0]
    best = [0.0] * (n + 1)
    for i in range(1, n + 1):
        take = best[i - 2] + xs[i - 1] if i >= 2 else xs[i - 1]
        best[i] = take if take > best[i - 1] else best[i - 1]
    return best[n]


def edit_distance(a, b):
    n, m = a.shape[0], b.shape[0]
    dp = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        dp[i][0] = i
    for j in range(m + 1):
        dp[0][j] = j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            if a[i - 1] == b[j - 1]:
                dp[i][j] = dp[i - 1][j - 1]
            else:
                dp[i][j] = 1 + min(dp[i - 1][j], dp[i][j - 1], dp[i - 1][j - 1])
    return dp[n][m]


def prefix_table(xs):
    table = [0.0] * 12
    alias = table
    k = 0
    while k < xs.shape[0]:
        table[k + 1] = table[k] + xs[k]
        k += 1
    return table[-1], len(table), alias is table, sum(alias)


def grows_in_loop(xs):
    seen = [0.0] * 10
    for i in range(xs.shape[0]):
        if xs[i] > 0:
            seen[i] = seen[i] + xs[i]
    seen.append(1.0)  # (after the loop: a list again)
    return seen


def test_a_one_dimensional_table():
    xs = jnp.sin(jnp.arange(40) * 1.3)
    assert np.allclose(autoflow.jit(house_robber)(xs), house_robber(xs))
    batch = jnp.stack([xs, -xs, jnp.cos(jnp.arange(40.0))])
    assert np.allclose(jax.vmap(autoflow.convert(house_robber))(batch),
                       [house_robber(row) for row in batch])
    assert np.allclose(jax.grad(autoflow.convert(house_robber))(xs), jax.grad(house_robber)(xs))


@pytest.mark.parametrize("n, m", [(6, 5), (9, 11)])
def test_a_two_dimensional_table(n, m):
    a, b = jnp.arange(n) % 3, jnp.arange(m) % 4
    assert int(autoflow.jit(edit_distance)(a, b)) == edit_distance(a, b)
    pairs = jnp.stack([jnp.arange(n) % 2, jnp.arange(n) % 3]), jnp.stack([b, b[::-1]])
    got = jax.vmap(autoflow.convert(edit_distance))(*pairs)
    assert [int(v) for v in got] == [edit_distance(x, y) for x, y in zip(*pairs)]


def test_the_table_stays_a_list_with_its_aliases():
    xs = jnp.arange(11.0)
    got = autoflow.jit(prefix_table)(xs)
    want = prefix_table(xs)
    assert np.allclose(got[0], want[0]) and int(got[1]) == want[1] and bool(got[2]) is True
    assert np.allclose(got[3], want[3])


def test_a_list_used_as_a_list_after_the_loop():
    xs = jnp.array([1.0, -2.0, 3.0, 0.5, -1.0, 2.0, 2.5, -3.0, 1.5, 4.0])
    got = autoflow.jit(grows_in_loop)(xs)
    assert isinstance(got, list) and len(got) == 11
    assert np.allclose(jnp.stack(got), jnp.asarray(grows_in_loop(xs)))
