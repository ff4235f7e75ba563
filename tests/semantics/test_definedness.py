"""A variable bound on some paths only: read where it is bound, Python's value; read
where it is not, Python's `UnboundLocalError` when the compiled code runs (no zeros, no
refusal); a read that only an untaken path makes, no error. Each against eager Python,
under `jit`, `vmap` and `grad`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import autoflow

from .oracle import F, I, check


def one_path(x, c):
    if c > 0:
        u = x * 2.0
    return x + u


def other_path_rebinds(x, c, r):
    if c > 0:
        u = x * 2.0
    if r > 0:
        u = 3.0
    return x + u


def nested(x, c, r):
    if c > 0:
        if r > 0:
            u = x * 2.0
        y = 1.0
    else:
        y = 2.0
    return y + u


def read_under_the_same_test(x, c):
    q = c > 0
    if q:
        u = jnp.sin(x)
    y = x * 0.5
    if q:
        y = y + u
    return y


def untaken_read(x, c):
    if c > 0:
        v4 = x + 1.0
        return v4
    else:
        return x * 2.0


def find_for(xs, limit):
    for i in range(3):
        if xs[i] > limit:
            found = xs[i]
    return found


def find_while(xs, limit):
    i = 0
    while i < 3:
        if xs[i] > limit:
            found = xs[i] * 2.0
        i += 1
    return found


def numba_ssa(v, x, n):
    # (Numba's SSA regression test: `p` is bound in the first iteration unless i == x)
    for i in range(n):
        if i == 0:
            if i == x:
                pass
            else:
                p = v
        else:
            p = p + v
    return p


def found_after_break(xs, limit):
    for v in xs:
        if v > limit:
            hit = v
            break
    return hit * 2.0


def match_arms_bind_different_names(x, k):
    # A `match` with a sequence pattern stays a Python `match` (its subject is
    # static); its arms bind different names, so after it `y` is bound only where
    # the first arm ran: a path through it does not bind what one arm binds.
    if x > 0:
        if x > 5.0:
            return x
        match k:
            case [a]:
                y = a * x
            case _:
                z = x  # noqa: F841
    else:
        y = 3.0
    return y


CASES = [
    (one_path, [(F(2.0), I(1)), (F(2.0), I(-1))]),
    (other_path_rebinds, [(F(2.0), I(1), I(1)), (F(2.0), I(1), I(-1)), (F(2.0), I(-1), I(1)),
                          (F(2.0), I(-1), I(-1))]),
    (nested, [(F(2.0), I(1), I(1)), (F(2.0), I(1), I(-1)), (F(2.0), I(-1), I(1))]),
    (read_under_the_same_test, [(F(2.0), I(1)), (F(2.0), I(-1))]),
    (untaken_read, [(F(2.0), I(1)), (F(2.0), I(-1))]),
]


def _raises(fn, args):
    try:
        fn(*args)
    except UnboundLocalError:
        return True
    return False


@pytest.mark.parametrize("fn, inputs", CASES, ids=[c[0].__name__ for c in CASES])
def test_a_variable_bound_on_some_paths_of_an_if(fn, inputs):
    bound = [a for a in inputs if not _raises(fn, a)]
    for args in inputs:
        if args in bound:
            check(fn, *args, vmap=[a for a in bound if a is not args], grad=True)
        else:
            check(fn, *args, expect_raise=UnboundLocalError)


XS = jnp.asarray([1.0, 5.0, 2.0])


@pytest.mark.parametrize("fn", [find_for, find_while], ids=lambda f: f.__name__)
def test_a_variable_a_loop_binds_on_some_iterations(fn):
    check(fn, XS, F(3.0), vmap=[(XS, F(1.5)), (XS + 1.0, F(0.5))], grad=True)
    check(fn, XS, F(9.0), expect_raise=UnboundLocalError)


def test_numbas_ssa_case_raises_where_python_does():
    check(numba_ssa, F(1.0), I(1), I(3), vmap=[(F(2.0), I(2), I(3))], grad=True)
    check(numba_ssa, F(1.0), I(0), I(3), expect_raise=UnboundLocalError)
    check(numba_ssa, F(1.0), I(0), I(1), expect_raise=UnboundLocalError)
    check(numba_ssa, F(1.0), I(0), I(0), expect_raise=UnboundLocalError)


def test_what_a_python_match_binds_on_every_path():
    fn = match_arms_bind_different_names
    check(fn, F(1.0), [2.0], static_argnums=(1,), vmap=[(F(2.0), [2.0])], grad=True)
    check(fn, F(7.0), [], static_argnums=(1,), vmap=[(F(-1.0), [])], grad=True)
    check(fn, F(1.0), [], static_argnums=(1,), expect_raise=UnboundLocalError)


def test_a_variable_bound_before_a_break():
    check(found_after_break, XS, F(3.0), vmap=[(XS, F(1.5))], grad=True)
    check(found_after_break, XS, F(9.0), expect_raise=UnboundLocalError)


# A variable an inner loop (or `if`) may leave unbound, read in the body of a staged outer
# loop: the outer loop carries where it is bound (it read zeros, silently, before).

def inner_for_in_while(x, n):
    total = 0.0
    i = 0
    while i < n:
        for j in range(x):
            v = j * 2.0
        total = total + v
        i += 1
    return total


def inner_while_in_for(x, n):
    total = 0.0
    for i in range(n):
        k = 0
        while k < x:
            v = k * 2.0
            k += 1
        total = total + v
    return total


def read_above_the_inner_loop(x, n):
    total = 0.0
    for i in range(n):
        if i > 0:
            total = total + v  # noqa: F821 - bound by an earlier iteration
        for j in range(x):
            v = j * 2.0  # noqa: F841 - read by the next iteration
    return total


def inner_if_then_loop(x, n, c):
    total = 0.0
    for i in range(n):
        if c > i:
            v = 1.0
        for j in range(x):
            if j > 1:
                break
            v = j * 2.0
        total = total + v
    return total


@pytest.mark.parametrize("fn", [inner_for_in_while, inner_while_in_for,
                                read_above_the_inner_loop],
                         ids=lambda f: f.__name__)
def test_a_variable_an_inner_loop_may_leave_unbound(fn):
    check(fn, I(2), I(2), vmap=[(I(3), I(1)), (I(1), I(3))], grad=False)
    check(fn, I(0), I(2), expect_raise=UnboundLocalError)
    check(fn, I(0), I(0), vmap=[(I(2), I(0))])


def test_an_inner_if_then_an_inner_loop_may_leave_unbound():
    fn = inner_if_then_loop
    check(fn, I(0), I(2), I(3), vmap=[(I(3), I(2), I(0)), (I(1), I(3), I(-1))])
    check(fn, I(0), I(2), I(0), expect_raise=UnboundLocalError)
    check(fn, I(0), I(2), I(1), vmap=[(I(0), I(3), I(2)), (I(2), I(1), I(0))])


# A `del` on some paths of a staged loop or `if`: the name is bound where no `del` ran
# (the loop carries a flag "bound yet", True at its start), and every later read checks
# it, arithmetic included (zeros, read silently, before).

def deleted_on_a_path_of_a_loop(x, n):
    v = 1.0
    i = 0
    while i < n:
        if x == i:
            del v
        i += 1
    return v


def read_above_a_later_iterations_del(x, n):
    v = 1.0
    t = 0.0
    for i in range(n):
        t = t + v
        if x > i:
            del v
            v = 3.0
        if i == x:
            del v
    return t


def rebound_or_deleted(x, n):
    v = 1.0
    for i in range(n):
        if x > i:
            del v
            v = 2.0
        if x > 5:
            del v
    return v * 2.0


def deleted_then_arithmetic(x):
    v = 1.0
    if x > 2:
        del v
    return v + 1.0


def test_a_del_on_some_paths_of_a_staged_loop():
    check(deleted_on_a_path_of_a_loop, I(5), I(3), vmap=[(I(-1), I(2)), (I(7), I(0))])
    check(deleted_on_a_path_of_a_loop, I(1), I(3), expect_raise=UnboundLocalError)
    check(read_above_a_later_iterations_del, I(5), I(3), vmap=[(I(4), I(2)), (I(3), I(0))])
    check(read_above_a_later_iterations_del, I(1), I(3), expect_raise=UnboundLocalError)
    check(read_above_a_later_iterations_del, I(0), I(3), expect_raise=UnboundLocalError)
    check(rebound_or_deleted, I(1), I(2), vmap=[(I(0), I(3)), (I(4), I(1))])
    check(rebound_or_deleted, I(7), I(2), expect_raise=UnboundLocalError)


@pytest.mark.parametrize("x", [1, 3])
def test_arithmetic_on_a_name_deleted_on_one_path(x):
    if x < 2:
        check(deleted_then_arithmetic, I(x), vmap=[(I(0),), (I(-4),)])
    else:
        check(deleted_then_arithmetic, I(x), expect_raise=UnboundLocalError)


# A nested function or lambda reading a variable a staged statement may have left unbound
# (read zeros, silently): the read checks, as the enclosing function's reads do.

def read_by_a_lambda(x):
    if x > 0:
        c = x
    g = lambda: c * 2  # noqa: E731
    return g()


def read_by_a_nested_def(x, n):
    i = 0
    while i < n:
        if i > 1:
            c = x * i
        i += 1

    def g():
        return c + 1.0
    return g()


def bound_before_the_call(x):
    g = lambda: c * 3  # noqa: E731
    if x > 0:
        c = x
    else:
        c = -x
    return g()


def test_a_closure_reads_a_variable_a_staged_statement_may_leave_unbound():
    check(read_by_a_lambda, F(2.0), vmap=[(F(3.0),)], grad=True)
    check(read_by_a_lambda, F(-1.0), expect_raise=NameError)
    check(read_by_a_nested_def, F(2.0), I(4), vmap=[(F(1.0), I(3))], grad=True)
    check(read_by_a_nested_def, F(2.0), I(1), expect_raise=NameError)
    check(bound_before_the_call, F(2.0), vmap=[(F(-3.0),)], grad=True)


def bound_in_an_if_nested_in_the_else(x, y):
    if x > 0:
        z = 1.0
    else:
        if y > 0:
            z = 3.0
    return z * x


def test_an_if_in_the_else_that_may_leave_it_unbound():
    # (the `autoflow.jit` wrapper that re-raises Python's error was left out: JAX's
    # `JaxRuntimeError` reached the caller)
    check(bound_in_an_if_nested_in_the_else, F(2.0), F(-1.0), vmap=[(F(-1.0), F(1.0))],
          grad=True)
    check(bound_in_an_if_nested_in_the_else, F(-1.0), F(-1.0), expect_raise=UnboundLocalError)


# A `while True:` runs its body at least once: what every path of the body binds is bound
# after it, with no run-time check (each check was a host callback: the textbook Gamma
# sampler's call took 262 us under `jax.jit(autoflow.convert(...))`, 13 us without them).

def nested_true_loops(x, limit):
    n = 0
    while True:
        n = n + 1
        while True:
            x = x - 1.0
            w = x * 2.0
            if w < limit:
                break
        z = w + x * n
        if z < 0.0 or n >= 3:
            break
    return z + w


def bound_after_a_break(x, limit):
    while True:
        if x > limit:
            break
        y = x * 2.0
        x = x + 1.0
    return y


def bound_before_a_break_in_a_for(x):
    for i in range(5):
        y = x * i
        if y > 3.0:
            break
    return y


def bound_in_a_static_inner_for(x):
    while True:
        for i in range(3):
            z = x + i
        x = x - z * 0.1
        if x < 0.0:
            break
    return z


def bound_iterating_an_array(xs, t):
    for v in xs:
        m = v * 2.0
        if m > t:
            break
    return m


def loop_variable_after_a_break(x):
    for k in range(200):
        x = x * 0.5
        if x < 1.0:
            break
    return x, k


def _staged_checks(fn, *args):
    """How many effects (host callbacks: prints, run-time checks) ``fn``'s program holds."""
    return len(jax.make_jaxpr(autoflow.convert(fn))(*args).effects)


def test_what_a_while_true_body_binds_is_bound_after_it():
    check(nested_true_loops, F(5.0), F(3.0), vmap=[(F(9.0), F(-2.0)), (F(0.5), F(4.0))],
          grad=True)
    check(nested_true_loops, F(-4.0), F(1.0), vmap=[(F(2.0), F(2.5))])
    assert _staged_checks(nested_true_loops, F(5.0), F(3.0)) == 0


def test_a_while_true_body_that_binds_after_a_break_still_checks():
    check(bound_after_a_break, F(1.0), F(3.0), vmap=[(F(2.5), F(3.0))], grad=True)
    check(bound_after_a_break, F(5.0), F(3.0), expect_raise=UnboundLocalError)
    assert _staged_checks(bound_after_a_break, F(1.0), F(3.0)) > 0


def test_what_the_first_iteration_of_a_static_for_binds_is_bound_after_it():
    check(bound_before_a_break_in_a_for, F(1.0), vmap=[(F(0.25),), (F(-2.0),)], grad=True)
    check(bound_in_a_static_inner_for, F(2.0), vmap=[(F(0.5),), (F(7.0),)], grad=True)
    xs = jnp.arange(4.0)
    check(bound_iterating_an_array, xs, F(1.0), vmap=[(xs * 2.0, F(3.0)), (-xs, F(0.0))],
          grad=True)
    assert _staged_checks(bound_before_a_break_in_a_for, F(1.0)) == 0
    assert _staged_checks(bound_in_a_static_inner_for, F(2.0)) == 0
    assert _staged_checks(bound_iterating_an_array, xs, F(1.0)) == 0
    # (the loop variable, with a traced carry from the start: no iteration run as Python)
    check(loop_variable_after_a_break, F(1000.0), vmap=[(F(0.5),), (F(3.0),)])
    assert _staged_checks(loop_variable_after_a_break, F(1000.0)) == 0
