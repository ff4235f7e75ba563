"""Unbound names, annotations, generators, array conditions and ``and``/``or`` chains.

Where Python raises ``UnboundLocalError``/``NameError`` on a concrete path, the
converted function raises the same (it never returns an internal placeholder). Size-1
arrays are valid conditions, as in Python. ``and``/``or`` evaluate an operand only
where Python would.
"""

from __future__ import annotations

import builtins

import jax.numpy as jnp

from .oracle import F, I, check, check_cases

RANGE = range


# ---- UnboundLocalError / NameError on a concrete path ---------------------------------------

def unbound_after_concrete_if(x, flag):
    if flag:
        y = x * 2.0
    return y


def test_unbound_after_concrete_if():
    check(unbound_after_concrete_if, F(1.0), True, static_argnums=(1,))
    check(unbound_after_concrete_if, F(1.0), False, static_argnums=(1,),
          expect_raise=UnboundLocalError)


def unbound_after_concrete_if_with_traced_work(x, flag):
    if flag:
        y = x * 2.0
    if x > 0:
        x = x + 1.0
    else:
        x = x - 1.0
    return x + y


def test_unbound_after_concrete_if_with_traced_work():
    check(unbound_after_concrete_if_with_traced_work, F(1.0), True, static_argnums=(1,))
    check(unbound_after_concrete_if_with_traced_work, F(1.0), False, static_argnums=(1,),
          expect_raise=UnboundLocalError)


def unbound_after_concrete_while(x, n):
    while n > 0:
        y = x * n
        n = n - 1
    return y


def test_unbound_after_concrete_while():
    check(unbound_after_concrete_while, F(1.5), 2, static_argnums=(1,))
    check(unbound_after_concrete_while, F(1.5), 0, static_argnums=(1,),
          expect_raise=UnboundLocalError)


def loop_var_unbound_after_empty_concrete_for(x, n):
    for i in range(n):
        x = x + i
    return x * i


def test_loop_var_unbound_after_empty_concrete_for():
    check(loop_var_unbound_after_empty_concrete_for, F(1.5), 3, static_argnums=(1,))
    check(loop_var_unbound_after_empty_concrete_for, F(1.5), 0, static_argnums=(1,),
          expect_raise=UnboundLocalError)


def deleted_then_read(x, flag):
    y = x + 1.0
    if flag:
        del y
    return y


def test_deleted_then_read():
    check(deleted_then_read, F(1.0), False, static_argnums=(1,))
    check(deleted_then_read, F(1.0), True, static_argnums=(1,), expect_raise=UnboundLocalError)


def deleted_under_traced_if(x):
    y = x + 1.0
    if x > 0:
        del y
    return y


def test_deleted_under_traced_if():
    # unbound on one path: Python's value, or its UnboundLocalError at run time
    check(deleted_under_traced_if, F(-1.0), vmap=[(F(-2.0),)], grad=True)
    check(deleted_under_traced_if, F(1.0), expect_raise=UnboundLocalError)


def name_error_on_concrete_path(x, flag):
    if flag:
        return x + NOT_DEFINED_ANYWHERE  # noqa: F821
    return x * 2.0


def test_name_error_on_concrete_path():
    check(name_error_on_concrete_path, F(1.0), False, static_argnums=(1,))
    check(name_error_on_concrete_path, F(1.0), True, static_argnums=(1,), expect_raise=NameError)


def unbound_in_concrete_elif_chain(x, k):
    if k == 0:
        y = x
    elif k == 1:
        y = 2.0 * x
    if x > 0:
        z = y + 1.0
    else:
        z = y - 1.0
    return z


def test_unbound_in_concrete_elif_chain():
    check(unbound_in_concrete_elif_chain, F(1.0), 1, static_argnums=(1,))
    check(unbound_in_concrete_elif_chain, F(1.0), 2, static_argnums=(1,),
          expect_raise=UnboundLocalError)


# ---- bare annotations ------------------------------------------------------------------------------

def annotated_before_traced_if(x):
    y: float
    if x > 0:
        y = x
    else:
        y = -x
    return y


def test_annotated_before_traced_if():
    check_cases(annotated_before_traced_if, [(F(2.0),), (F(-3.0),)], vmap=[(F(1.0),)], grad=True)


def annotated_then_assigned_on_one_branch(x):
    y: float
    if x > 0:
        y = x
    return y


def test_annotated_then_assigned_on_one_branch():
    check(annotated_then_assigned_on_one_branch, F(2.0), vmap=[(F(3.0),)], grad=True)
    check(annotated_then_assigned_on_one_branch, F(-2.0), expect_raise=UnboundLocalError)


def annotated_before_traced_while(x):
    n: int
    n = 0
    while x < 10.0:
        x = x * 2.0
        n = n + 1
    return x, n


def test_annotated_before_traced_while():
    check_cases(annotated_before_traced_while, [(F(1.0),), (F(11.0),)])


# ---- generators defined inside a converted function ----------------------------------------------

def generator_defined_inside(x):
    def gen(n):
        for i in range(n):
            yield x * i

    return sum(gen(4))


def test_generator_defined_inside():
    check(generator_defined_inside, F(1.5), vmap=[(F(-1.0),)])


def generator_with_while_and_if_inside(x):
    def gen():
        v = 1.0
        while v < 10.0:
            if v > 3.0:
                yield v * 10.0
            else:
                yield v
            v = v * 2.0

    vals = list(gen())
    return x * sum(vals), len(vals)


def test_generator_with_while_and_if_inside():
    check(generator_with_while_and_if_inside, F(0.5))


def generator_in_traced_loop(x):
    def pairs():
        yield 1.0
        yield 2.0

    while x < 20.0:
        for p in pairs():
            x = x + p
        x = x * 2.0
    return x


def test_generator_in_traced_loop():
    check_cases(generator_in_traced_loop, [(F(1.0),), (F(30.0),)])


def generator_with_return_value(x):
    def gen():
        total = 0.0
        for i in range(3):
            total = total + i
            yield i
        return total

    g = gen()
    seen = []
    while True:
        try:
            seen.append(next(g))
        except StopIteration as stop:
            return x + stop.value, len(seen)


def test_generator_with_return_value():
    check(generator_with_return_value, F(1.0))


# ---- size-1 arrays are valid conditions --------------------------------------------------------

def if_on_shape_1_condition(x):
    if x > 0:
        return x * 2.0
    return -x


def test_if_on_shape_1_condition():
    check_cases(if_on_shape_1_condition, [(jnp.array([2.0], jnp.float32),),
                                         (jnp.array([-2.0], jnp.float32),)])


def test_if_on_shape_1x1_condition():
    check_cases(if_on_shape_1_condition, [(jnp.array([[2.0]], jnp.float32),),
                                         (jnp.array([[-2.0]], jnp.float32),)])


def if_on_literal_size_1_array(x):
    c = jnp.array([True])
    if c:
        x = x + 1.0
    if jnp.array([[False]]):
        x = x * 100.0
    return x


def test_if_on_literal_size_1_array():
    check(if_on_literal_size_1_array, F(1.0))


def if_on_size_1_mask(x):
    c = jnp.array([True]) & (x > 0)
    if c:
        return x * 3.0
    return x - 1.0


def test_if_on_size_1_mask():
    check_cases(if_on_size_1_mask, [(F(2.0),), (F(-2.0),)])


def while_on_shape_1_condition(v):
    n = 0
    while v < 10.0:
        v = v * 2.0
        n = n + 1
    return v, n


def test_while_on_shape_1_condition():
    check_cases(while_on_shape_1_condition, [(jnp.array([1.0], jnp.float32),),
                                            (jnp.array([[3.0]], jnp.float32),)])


def ternary_and_not_on_shape_1(x):
    y = x * 2.0 if x.sum(keepdims=True) > 0 else -x
    if not (x > 1.0):
        y = y + 100.0
    return y


def test_ternary_and_not_on_shape_1():
    check_cases(ternary_and_not_on_shape_1, [(jnp.array([2.0], jnp.float32),),
                                            (jnp.array([0.5], jnp.float32),),
                                            (jnp.array([-1.0], jnp.float32),)])


def and_or_on_shape_1(x):
    if x > 0 and x < 5.0 or x < -10.0:
        return x + 1.0
    return x - 1.0


def test_and_or_on_shape_1():
    check_cases(and_or_on_shape_1, [(jnp.array([2.0], jnp.float32),),
                                   (jnp.array([7.0], jnp.float32),),
                                   (jnp.array([-20.0], jnp.float32),)])


# ---- and / or evaluate an operand only where Python would ----------------------------------------

def or_chain_traced_then_none(x, opt):
    if x > 1 or opt is None or opt > 1:
        return x * 2.0
    return x


def test_or_chain_traced_then_none():
    # opt is None: Python never evaluates `opt > 1` (it would raise TypeError).
    check_cases(or_chain_traced_then_none, [(F(3.0), None), (F(0.5), None)], vmap=[(F(-1.0), None)])


def test_or_chain_traced_then_number():
    check_cases(or_chain_traced_then_none, [(F(3.0), 0.5), (F(0.5), 0.5), (F(0.5), 3.0)],
                static_argnums=(1,))


def and_chain_traced_then_none(x, opt):
    if x > 0 and opt is not None and x > opt:
        return x + 1.0
    return x - 1.0


def test_and_chain_traced_then_none():
    check_cases(and_chain_traced_then_none, [(F(2.0), None), (F(-2.0), None)])
    check_cases(and_chain_traced_then_none, [(F(2.0), 1.0), (F(2.0), 3.0)], static_argnums=(1,))


def and_guard_on_empty_list(x, items):
    if items and items[0] > x:
        return x + items[0]
    return x * 2.0


def test_and_guard_on_empty_list():
    check(and_guard_on_empty_list, F(1.0), [])
    check(and_guard_on_empty_list, F(1.0), [5.0], static_argnums=(1,))


def or_value_with_none(x, opt):
    scale = opt or 2.0
    y = x if opt is None else x * opt
    return x * scale + y


def test_or_value_with_none():
    check(or_value_with_none, F(1.5), None)
    check(or_value_with_none, F(1.5), 3.0, static_argnums=(1,))


def not_none_and_traced(x, opt):
    while not opt and x < 10.0:
        x = x * 3.0
    return x


def test_not_none_and_traced():
    check_cases(not_none_and_traced, [(F(1.0), None), (F(20.0), None)])


def traced_or_attribute_of_none(x, opt):
    if x > 0 or opt.threshold > 0:
        return x
    return -x


def test_traced_or_attribute_of_none():
    # Python evaluates `opt.threshold` only when x <= 0: it raises AttributeError there.
    check(traced_or_attribute_of_none, F(2.0), None, traced=False)
    check(traced_or_attribute_of_none, F(-2.0), None, traced=False, expect_raise=AttributeError)


def concrete_and_guards_shape_access(x, opt):
    if opt is not None and opt.shape[0] > 2 and x > 0:
        return x + opt.sum()
    return x


def test_concrete_and_guards_shape_access():
    check_cases(concrete_and_guards_shape_access, [(F(1.0), None), (F(-1.0), None)])


# ---- range under another name ------------------------------------------------------------------

def range_alias_local(x, n):
    r = range
    for i in r(n):
        x = x + i
    return x


def test_range_alias_local():
    check(range_alias_local, F(0.5), 4, static_argnums=(1,))
    check_cases(range_alias_local, [(F(0.5), I(4)), (F(0.5), I(0))])


def range_alias_module(x, n):
    total = x
    for i in RANGE(1, n, 2):
        total = total * 2.0 + i
    return total


def test_range_alias_module():
    check_cases(range_alias_module, [(F(1.0), I(6)), (F(1.0), I(1))])


def range_via_builtins(x, n):
    for i in builtins.range(n):
        x = x * 1.5
    return x


def test_range_via_builtins():
    check_cases(range_via_builtins, [(F(1.0), I(3))])


def range_shadowed_by_user_function(x):
    def range(n):  # noqa: A001 - not the builtin
        return [0.5] * n

    for v in range(3):
        x = x + v
    return x


def test_range_shadowed_by_user_function():
    check(range_shadowed_by_user_function, F(1.0))


# ---- truthiness of Python values and scalars ------------------------------------------------------

def truthiness_of_traced_scalar(x):
    if x:
        return 1.0
    return 2.0


def test_truthiness_of_traced_scalar():
    check_cases(truthiness_of_traced_scalar, [(F(0.0),), (F(-0.5),)])


def truthiness_of_python_containers(x, items, table):
    if items:
        x = x + 1.0
    if not table:
        x = x * 2.0
    if None:
        x = x * 100.0
    return x


def test_truthiness_of_python_containers():
    check(truthiness_of_python_containers, F(1.0), [], {})
    check(truthiness_of_python_containers, F(1.0), ["a"], {"k": "v"})
