"""Closures see the current value of the variables they read, as in Python.

A nested ``def`` or ``lambda`` reads its free variables when it is called, not when it
is defined; a converted ``while``/``for``/``if`` that rebinds such a variable must leave
the closure seeing the rebound value, inside the loop and after it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import autoflow

from .oracle import F, I, check, check_cases


# ---- a closure defined before a converted statement that rebinds what it reads ----------

def lambda_reads_var_rebound_by_while(x):
    y = x
    g = lambda: y * 2.0  # noqa: E731
    out = 0.0
    while y < 5.0:
        y = y + 1.0
        out = out + g()
    return out, g()


def test_lambda_reads_var_rebound_by_while():
    check_cases(lambda_reads_var_rebound_by_while, [(F(1.0),), (F(4.5),), (F(7.0),)],
                vmap=[(F(2.5),)])


def def_reads_var_rebound_by_static_for(x):
    acc = x

    def g():
        return acc * 1.0

    total = 0.0
    for i in range(4):
        acc = acc + 1.0
        total = total + g()
    return total, g()


def test_def_reads_var_rebound_by_static_for():
    check(def_reads_var_rebound_by_static_for, F(0.5), vmap=[(F(-2.0),)])


def def_reads_var_rebound_by_traced_range(x, n):
    acc = x

    def g():
        return acc + 0.0

    total = 0.0
    for i in range(n):
        acc = acc * 2.0
        total = total + g()
    return total, g()


def test_def_reads_var_rebound_by_traced_range():
    check_cases(def_reads_var_rebound_by_traced_range, [(F(1.5), I(3)), (F(1.5), I(0))])


def def_reads_var_rebound_by_traced_if(x):
    y = 1.0

    def h():
        return y * 2.0

    if x > 1.0:
        y = x + 1.0
    else:
        y = x - 1.0
    return h()


def test_def_reads_var_rebound_by_traced_if():
    check_cases(def_reads_var_rebound_by_traced_if, [(F(3.0),), (F(-2.0),)], vmap=[(F(0.0),)],
                grad=True)


def def_reads_var_rebound_by_concrete_if(x, flag):
    y = x

    def h():
        return y * 3.0

    if flag:
        y = x + 10.0
    else:
        y = x - 10.0
    return h()


def test_def_reads_var_rebound_by_concrete_if():
    check(def_reads_var_rebound_by_concrete_if, F(2.0), True, static_argnums=(1,))
    check(def_reads_var_rebound_by_concrete_if, F(2.0), False, static_argnums=(1,))


def closure_in_break_condition(x):
    y = x
    over = lambda: y > 5.0  # noqa: E731
    for i in range(10):
        y = y + 1.0
        if over():
            break
    return y


def test_closure_in_break_condition():
    check_cases(closure_in_break_condition, [(F(1.0),), (F(8.0),), (F(-20.0),)])


# ---- late binding: closures created in a loop all see the last value -------------------

def late_binding_lambdas_concrete_loop(x):
    fs = []
    for i in range(3):
        fs.append(lambda: x * i)
    return [f() for f in fs]


def test_late_binding_lambdas_concrete_loop():
    check(late_binding_lambdas_concrete_loop, F(2.0))


def late_binding_lambdas_traced_carry(x):
    fs = []
    s = x
    for i in range(3):
        s = s + 1.0
        fs.append(lambda: s)
    return [f() for f in fs]


def test_late_binding_lambdas_traced_carry():
    check(late_binding_lambdas_traced_carry, F(2.0), vmap=[(F(-1.0),)])


def late_binding_defs_traced_if_in_loop(x):
    fs = []
    for i in range(3):
        if x > i:
            v = x * 2.0
        else:
            v = x - 1.0

        def f():
            return v + i

        fs.append(f)
    return fs[0](), fs[2]()


def test_late_binding_defs_traced_if_in_loop():
    check_cases(late_binding_defs_traced_if_in_loop, [(F(1.5),), (F(5.0),)])


def late_binding_lambdas_traced_range(x, n):
    fs = []
    s = x
    for i in range(n):
        s = s * 2.0
        fs.append(lambda: s + i)
    return fs[0]()


def test_late_binding_lambdas_traced_range():
    # A traced trip count: Python's list of closures cannot be staged; a refusal must name `fs`.
    check(late_binding_lambdas_traced_range, F(1.0), I(3), may_refuse=["fs"])


def default_argument_captures_each_value(x):
    fs = []
    for i in range(3):
        fs.append(lambda i=i: x * i)
    return [f() for f in fs]


def test_default_argument_captures_each_value():
    check(default_argument_captures_each_value, F(2.0))


# ---- closures defined inside a loop body ---------------------------------------------

def def_in_static_for_body_reads_loop_vars(x):
    total = 0.0
    for i in range(4):
        def term():
            return x * i + total

        total = term()
    return total


def test_def_in_static_for_body_reads_loop_vars():
    check(def_in_static_for_body_reads_loop_vars, F(1.5), vmap=[(F(-1.0),)], grad=True)


def lambda_in_traced_while_body(x):
    i = 0.0
    while i < x:
        inc = lambda: i + 1.0  # noqa: E731
        i = inc()
    return i


def test_lambda_in_traced_while_body():
    check_cases(lambda_in_traced_while_body, [(F(3.5),), (F(-1.0),)])


def closure_in_for_over_array(xs):
    acc = 0.0
    for v in xs:
        scaled = lambda: v * 2.0 + acc  # noqa: E731
        acc = scaled()
    return acc


def test_closure_in_for_over_array():
    check(closure_in_for_over_array, jnp.arange(4.0, dtype=jnp.float32))


# ---- a variable bound only inside a loop, read by a closure after it ------------------

def closure_over_var_bound_only_in_static_for(x):
    def g():
        return last * 2.0

    for i in range(3):
        last = x + i
    return g()


def test_closure_over_var_bound_only_in_static_for():
    check(closure_over_var_bound_only_in_static_for, F(1.0), vmap=[(F(2.0),)])


def closure_over_var_bound_only_in_traced_range(x, n):
    get = lambda: last + i  # noqa: E731
    for i in range(n):
        last = x * i
    return get()


def test_closure_over_var_bound_only_in_traced_range():
    check(closure_over_var_bound_only_in_traced_range, F(2.0), I(3))


# ---- branch-local closures, nested functions ------------------------------------------

def closure_chosen_by_branch(x):
    if x > 0:
        y = x
        f = lambda: y * 2.0  # noqa: E731
    else:
        y = -x
        f = lambda: y * 3.0  # noqa: E731
    return f()


def test_closure_chosen_by_branch():
    # Python picks a function by the branch; staged, it may be refused (naming `f`).
    check_cases(closure_chosen_by_branch, [(F(2.0),), (F(-2.0),)], may_refuse=["f"])


def nested_function_calls_nested_function(x):
    k = 1.0

    def a(v):
        return v + k

    def b(v):
        return a(v) * 2.0

    out = 0.0
    for i in range(3):
        k = k + x
        out = out + b(1.0)
    return out


def test_nested_function_calls_nested_function():
    check(nested_function_calls_nested_function, F(0.5), vmap=[(F(2.0),)], grad=True)


def nested_function_calls_nested_in_while(x):
    k = 0.0

    def inner():
        return k * 0.5

    def outer():
        return inner() + 1.0

    steps = 0.0
    while k < x:
        k = k + outer()
        steps = steps + 1.0
    return k, steps


def test_nested_function_calls_nested_in_while():
    check_cases(nested_function_calls_nested_in_while, [(F(5.0),), (F(0.5),)])


# ---- nonlocal counters ----------------------------------------------------------------

def nonlocal_counter_static_loop(x):
    count = 0

    def bump():
        nonlocal count
        count += 1

    for i in range(4):
        bump()
        x = x * 1.5
    return x, count


def test_nonlocal_counter_static_loop():
    check(nonlocal_counter_static_loop, F(2.0), may_refuse=["count"])


def nonlocal_counter_traced_while(x):
    count = 0

    def bump():
        nonlocal count
        count += 1

    while x < 10.0:
        bump()
        x = x * 2.0
    return x, count


def test_nonlocal_counter_traced_while():
    check_cases(nonlocal_counter_traced_while, [(F(1.0),), (F(20.0),)], may_refuse=["count"])


def nonlocal_accumulator_traced_if(x):
    total = 0.0

    def add(v):
        nonlocal total
        total = total + v

    if x > 0:
        add(x)
    else:
        add(-2.0 * x)
    return total


def test_nonlocal_accumulator_traced_if():
    check_cases(nonlocal_accumulator_traced_if, [(F(3.0),), (F(-1.0),)], may_refuse=["total"])


# ---- closures passed to jax.lax inside loops -------------------------------------------

def closure_to_fori_loop_in_loop(x):
    s = x
    for i in range(3):
        s = jax.lax.fori_loop(0, 2, lambda j, c: c + s * 0.5, s)
    return s


def test_closure_to_fori_loop_in_loop():
    check(closure_to_fori_loop_in_loop, F(1.25), vmap=[(F(-1.0),)])


def lax_cond_closure_defined_before_loop(x):
    # The lambdas handed to lax.cond are new objects each iteration (JAX caches traces
    # per function object); `g`, defined before the loop, reads `scale` when called.
    scale = 1.0
    g = lambda v: v * scale  # noqa: E731
    acc = x
    for i in range(3):
        scale = scale + 1.0
        acc = jax.lax.cond(acc > 0, lambda v: g(v), lambda v: -v, acc)
    return acc


def test_lax_cond_closure_defined_before_loop():
    check_cases(lax_cond_closure_defined_before_loop, [(F(1.5),), (F(-0.5),)])


def lax_map_closure_reads_traced_while_var(x):
    w = x
    ys = jnp.arange(3.0, dtype=jnp.float32)
    while w < 4.0:
        ys = jax.lax.map(lambda v: v + w, ys)
        w = w * 2.0
    return ys, w


def test_lax_map_closure_reads_traced_while_var():
    check_cases(lax_map_closure_reads_traced_while_var, [(F(1.0),), (F(5.0),)])


def vmap_closure_reads_var_rebound_later(x):
    b = 1.0
    f = jax.vmap(lambda v: v * b)
    ys = jnp.arange(3.0, dtype=jnp.float32)
    if x > 0:
        b = x
    else:
        b = -x
    return f(ys)


def test_vmap_closure_reads_var_rebound_later():
    check_cases(vmap_closure_reads_var_rebound_later, [(F(2.0),), (F(-3.0),)])


# ---- a helper rebinds a cell in the branches of an `if` whose value is returned ---------
# The function returns right after the `if`, and the helper is only ever called: nothing
# can read the cell afterwards, so its rebinding in a staged branch is Python's own.

def returning_if_calls_a_rebinding_helper(a):
    k = 2

    def bump(v):
        nonlocal k
        k = k + v
        return k

    for _ in range(4):
        if a > 1:
            return 7.0 * a
        break
    bump(3)
    return k * a


def returning_chain_reads_the_rebound_cell(a):
    total = 1.0

    def add(v):
        nonlocal total
        total = total + v
        return total

    def peek():
        return total * 2.0

    if a > 2:
        add(a)
        return peek()
    elif a > 0:
        return add(-a) + peek()
    add(1.0)
    return total + (peek() if a < -1 else 0.0)


def test_a_returning_if_whose_branch_calls_a_rebinding_helper():
    check(returning_if_calls_a_rebinding_helper, F(0.5), vmap=[(F(3.0),), (F(-1.0),)],
          grad=True)
    check(returning_if_calls_a_rebinding_helper, F(3.0), grad=True)


@pytest.mark.parametrize("a", [3.0, 1.0, -0.5, -2.0])
def test_a_returning_chain_whose_branches_rebind_and_read_a_cell(a):
    check(returning_chain_reads_the_rebound_cell, F(a), vmap=[(F(3.0),), (F(1.0),), (F(-2.0),)],
          grad=True)


def escapes_by_return(a):
    k = 0

    def bump():
        nonlocal k
        k += 1
        return k

    if a > 0:
        bump()
        return bump, a
    return bump, -a


def escapes_by_argument(a, keep):
    k = 0

    def bump():
        nonlocal k
        k += 1
        return k

    if a > 0:
        keep.append(bump)
        return bump() * a
    return a


def test_a_helper_that_outlives_the_call_is_still_refused():
    # `bump` escapes (returned, or handed to a list): a later call would read the cell the
    # staged branch left, so the rebinding stays autoflow's error, naming the variable.
    for fn, args in ((escapes_by_return, (F(1.0),)), (escapes_by_argument, (F(1.0), []))):
        with pytest.raises(autoflow.AutoflowError, match="`k`"):
            autoflow.jit(fn)(*args)
