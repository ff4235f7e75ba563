"""A `raise` reached only when no earlier traced `return` was taken raises exactly on
that path (in plain code, after loops that return early, in helpers), and a traced
`raise` stops what follows it; each against eager Python."""

from __future__ import annotations

import pytest

from .oracle import F, I, check


def positive_or_raise(x):
    if x > 0:
        return x
    raise ValueError("x must be positive")


def positive_elif(x):
    if x > 1.0:
        return x * 2.0
    elif x > 0.0:
        return x
    raise ValueError("x must be positive")


def sqrt_newton(x, tol):
    y = x
    for _ in range(30):
        y2 = y - (y * y - x) / (2.0 * y)
        if abs(y2 - y) < tol:
            return y2
        y = y2
    raise RuntimeError("did not converge")


def first_above(xs, limit):
    i = 0
    while i < 4:
        if xs[i] > limit:
            return i
        i += 1
    raise LookupError(f"nothing above {limit}")


def helper_raises(x):
    return positive_or_raise(x) * 3.0


def raise_in_loop_else(x, n):
    for i in range(n):
        if x * i > 2.0:
            return i
    else:
        raise ValueError("never above 2")


@pytest.mark.parametrize("x", [2.5, -1.0, 0.5])
def test_a_raise_after_a_traced_return(x):
    if x > 0:
        check(positive_or_raise, F(x), vmap=[(F(3.0),), (F(0.25),)], grad=True)
        check(helper_raises, F(x), grad=True)
    else:
        check(positive_or_raise, F(x), expect_raise=ValueError)
        check(helper_raises, F(x), expect_raise=ValueError)


@pytest.mark.parametrize("x", [2.5, 0.5, -1.0])
def test_a_raise_after_an_elif_chain_of_returns(x):
    if x > 0:
        check(positive_elif, F(x), vmap=[(F(1.5),), (F(0.75),)], grad=True)
    else:
        check(positive_elif, F(x), expect_raise=ValueError)


def test_a_raise_after_a_loop_that_returns_early():
    check(sqrt_newton, F(2.0), F(1e-5), vmap=[(F(9.0), F(1e-5)), (F(0.5), F(1e-5))])
    check(sqrt_newton, F(2.0), F(-1.0), expect_raise=RuntimeError)
    xs = [1.0, 3.0, 5.0, 7.0]
    import jax.numpy as jnp

    check(first_above, jnp.asarray(xs), F(4.0))
    check(first_above, jnp.asarray(xs), F(9.0), expect_raise=LookupError)


@pytest.mark.parametrize("n", [0, 3, 5])
def test_a_raise_in_a_loop_else_after_a_return_in_the_loop(n):
    if n > 2:
        check(raise_in_loop_else, F(1.5), I(n))
    else:
        check(raise_in_loop_else, F(1.5), I(n), expect_raise=ValueError)


def raise_beside_a_closure(a, n, xs):
    lst = [1.0, -1.0]
    for v in xs:
        if 0.0 <= lst[1]:
            if a > 1:
                raise ValueError(f"a is {a}")
            lst.append(lst.pop(0) * 0.5)
        else:
            def g(z):
                return z + v  # `v` is a cell: the converted loop test assigns it
            if n > a:
                break
    return v, lst


def test_a_check_in_a_loop_body_keeps_the_loop_variable_a_closure_reads():
    # The check's path condition evaluates the loop's test in the body; the test (which
    # sets the cell `v` to the carry) must not undo the body's `v = item`.
    import jax.numpy as jnp

    xs = jnp.asarray([-1.5, 1.25, 0.75])
    check(raise_beside_a_closure, I(7), I(1), xs, vmap=[(I(1), I(0), xs), (I(2), I(3), xs)])
    check(raise_beside_a_closure, I(0), I(3), xs)


def loop_that_always_raises(xs, k):
    total = 0.0
    for v in xs:
        m = -5
        if m < 0:  # concrete: every iteration raises, in a loop staged for its traced carries
            raise ValueError(f"m must be non-negative, got {m}")
        total = total + v
    while k > 0:
        k = k - 1
    return total


def loop_that_raises_if_it_runs(n, x):
    i = 0
    while i < n:
        raise ValueError(f"ran with n={n}")
    return x


def test_a_loop_body_that_always_raises():
    import jax.numpy as jnp

    check(loop_that_always_raises, jnp.asarray([1.0, 2.0]), I(3), expect_raise=ValueError)
    check(loop_that_raises_if_it_runs, I(2), F(1.0), expect_raise=ValueError)
    check(loop_that_raises_if_it_runs, I(0), F(1.0), vmap=[(I(0), F(2.0))])


def writes_then_always_raises_in_a_branch(x, xs):
    d = {"p": 1.0}
    k = 2
    if x > 0:
        for v in xs:
            d["p"] = xs[0]  # in place, in an iteration run as Python; then it raises
            if k > 0:
                raise ValueError("always")
    return d["p"]


def test_a_branch_that_writes_then_always_raises_leaves_no_tracer_behind():
    # (composing fuzzer, seed 3047, reduced: the dict held a value of the abandoned
    # branch's trace, JAX's UnexpectedTracerError, and then was emptied)
    import jax.numpy as jnp

    xs = jnp.asarray([1.0, 2.0])
    check(writes_then_always_raises_in_a_branch, F(1.0), xs, expect_raise=ValueError)
    check(writes_then_always_raises_in_a_branch, F(-1.0), xs, vmap=[(F(-2.0), xs + 1)])
