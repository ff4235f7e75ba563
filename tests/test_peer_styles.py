"""Programs in the styles of other converters' test suites (issue 35, "the long tail").

Fresh programs written in the manner of TF AutoGraph's control-flow tests, Catalyst's
AutoGraph tests, Paddle's dy2static tests, Numba's control-flow / closure / builtins
tests, and the programs JAX users post when ``jit`` refuses their control flow. Each is
checked against Python's own eager run (``tests/semantics/oracle.py``): through
``autoflow.convert`` on concrete values, ``autoflow.jit`` / ``jax.jit(autoflow.convert(f))``
on traced values, and ``jax.vmap`` where the arguments batch. A program that cannot be
staged must raise autoflow's own error naming the user's line.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import re
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from tests.semantics.oracle import assert_same, check, check_error

PROGRAMS = []


def probe(*cases, vmap=True, static=(), raises=(), refuse=None, xfail=None, concrete=True,
          oracle=None, grad=False):
    """Register ``fn`` with argument tuples ``cases``.

    ``raises``: ``[(args, ExceptionType)]`` on which Python raises. ``refuse``: names the
    ConversionError must mention when traced (the program cannot be staged). ``grad``:
    ``jax.grad`` of the converted program (first argument) against Python's. ``oracle``:
    where plain JAX refuses the program even eagerly (``if`` inside a ``lax.scan`` body),
    the same algorithm written in plain Python gives the expected values.
    """

    def deco(fn):
        marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
        opts = dict(vmap=vmap, static=tuple(static), raises=list(raises), refuse=refuse,
                    concrete=concrete, oracle=oracle, grad=grad)
        PROGRAMS.append(pytest.param(fn, cases, opts, id=fn.__name__, marks=marks))
        return fn

    return deco


def F(v):
    return np.float32(v)


def A(*v):
    return jnp.asarray(v, dtype=jnp.float32)


# =========================================================================================
# AutoGraph style
# =========================================================================================

@probe((2.0,), (0.5,), (-3.0,), (0.0,))
def ag_if_elif_else(x):
    if x > 1:
        y = x * 2
    elif x > 0:
        y = x + 1
    else:
        y = -x
    return y


@probe((2.0, True), (-2.0, False), static=(1,), vmap=False)
def ag_if_python_and_tensor(x, flag):
    if flag:
        if x > 0:
            x = x * 10
    else:
        x = x - 1
    return x


@probe((3.0,), (-3.0,))
def ag_if_only_true_modifies(x):
    y = x
    if x > 0:
        y = y * 3
    return y + 1


@probe((1.0, 2.0), (2.0, 1.0), (1.0, 1.0))
def ag_if_several_outputs(a, b):
    if a > b:
        lo, hi = b, a
    else:
        lo, hi = a, b
    return lo, hi, hi - lo


@probe((1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0))
def ag_nested_ifs(x, y):
    if x > 0:
        if y > 0:
            q = 1
        else:
            q = 4
    else:
        if y > 0:
            q = 2
        else:
            q = 3
    return q * x


@probe((A(1, 2, -3, 4),), (A(-1, 2, 3, 4),), (A(1, 2, 3, 4),))
def ag_while_break_on_element(x):
    i = 0
    total = 0.0
    while i < x.shape[0]:
        if x[i] < 0:
            break
        total = total + x[i]
        i += 1
    return total, i


@probe((A(1, -2, 3, -4),), (A(-1, -2, -3, -4),))
def ag_while_continue(x):
    i = 0
    s = 0.0
    while i < 4:
        i += 1
        if x[i - 1] < 0:
            continue
        s += x[i - 1]
    return s


@probe((5,), (0,), (1,))
def ag_for_range_traced(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


@probe((np.arange(6, dtype=np.float32).reshape(3, 2),), (np.ones((3, 2), np.float32),))
def ag_for_over_rows(x):
    s = jnp.zeros(2)
    for row in x:
        s = s + row * row
    return s


@probe((1.0,), (-2.0,))
def ag_for_over_python_list(x):
    for scale in [1.0, 2.0, 0.5]:
        if x > 0:
            x = x * scale
        else:
            x = x - scale
    return x


@probe((1.0, 2.0), (3.0, -1.0))
def ag_for_over_dict_items(a, b):
    d = {"a": a, "b": b}
    total = 0.0
    for k, v in d.items():
        if v > 0:
            total = total + v
        else:
            total = total - 1
    return total


@probe((np.float32([1, 2, 3]), np.float32([3, 2, 1])), (np.float32([0, 0, 1]), np.float32([1, 0, 0])))
def ag_for_zip_numpy_arrays(a, b):
    acc = 0.0
    for u, v in zip(a, b):
        if u > v:
            acc = acc + u
        else:
            acc = acc - v
    return acc


@probe((A(1, 2, 3), A(3, 2, 1)), (A(0, 0, 1), A(1, 0, 0)))
def ag_for_zip_arrays(a, b):
    acc = 0.0
    for u, v in zip(a, b):
        if u > v:
            acc = acc + u
        else:
            acc = acc - v
    return acc


@probe((A(3, -1, 2),), (A(-1, -1, -1),))
def ag_for_enumerate_array(x):
    best = -1
    for i, v in enumerate(x):
        if v > 0:
            best = i
    return best


@probe((2.0, 3), (1.0, 0))
def ag_closure_in_loop_body(x, n):
    for i in range(n):
        def scale(v):
            return v * 2 + i
        x = scale(x)
    return x


@probe((2.0,), (-1.0,))
def ag_list_append_static_loop(x):
    out = []
    for i in range(3):
        if x > 0:
            out.append(x * i)
        else:
            out.append(x - i)
    return jnp.stack(out)


@probe((1.0, 4), (1.0, 0))
def ag_dict_in_loop(x, n):
    d = {"acc": x, "count": 0}
    for i in range(n):
        d["acc"] = d["acc"] * 1.5
        d["count"] += 1
    return d["acc"], d["count"]


@probe((1.0, 3), (2.0, 0))
def ag_attribute_in_loop(x, n):
    state = types.SimpleNamespace(v=x, steps=0)
    for _ in range(n):
        state.v = state.v + 1
        state.steps = state.steps + 1
    return state.v, state.steps


@probe((2.5, 5), (10.0, 5), (0.5, 0))
def ag_early_return_in_loop(x, n):
    for i in range(n):
        if x < i:
            return i
    return -1


@probe((2.0,), (-2.0,))
def ag_ternary(x):
    y = x if x > 0 else -x * 2
    return y + (1 if x > 1 else 0)


@probe((2.0,), (7.0,), (-1.0,))
def ag_and_or_conditions(x):
    if x > 0 and x < 5:
        r = 1
    elif x < 0 or x > 6:
        r = 2
    else:
        r = 3
    return r


@probe((2.0,), (-2.0,))
def ag_not_condition(x):
    if not x > 0:
        x = -x
    return x


@probe((2.0,), raises=[((-1.0,), AssertionError)])
def ag_assert_traced(x):
    assert x > 0, "x must be positive"
    return jnp.sqrt(x)


@probe((2.0,), (-2.0,))
def ag_print_in_branch(x):
    if x > 0:
        print("positive", x)
        x = x + 1
    return x


@probe((2.0, 3), (2.0, 0))
def ag_del_temp_in_loop(x, n):
    for i in range(n):
        t = x * i
        x = x + t
        del t
    return x


_SCALE = 3.0


@probe((2.0,), (-2.0,))
def ag_read_global(x):
    if x > 0:
        return x * _SCALE
    return x / _SCALE


@probe((2.0, 3), (2.0, 0))
def ag_nonlocal_counter(x, n):
    calls = 0

    def step(v):
        nonlocal calls
        calls += 1
        return v * 0.5

    for _ in range(3):
        x = step(x)
    for _ in range(n):
        x = x + 1
    return x, calls


@probe((1.0, 3), (1.0, 0))
def ag_lambda_in_loop(x, n):
    f = lambda v: v * 2 + 1  # noqa: E731
    for _ in range(n):
        x = f(x)
    return x


@probe((2.0,), (-2.0,))
def ag_comprehension_in_branch(x):
    if x > 0:
        y = sum([x * i for i in range(4)])
    else:
        y = sum(x - i for i in range(3))
    return y


@probe((2.0,), (-2.0,))
def ag_try_except_in_branch(x):
    table = {"a": 1.0}
    if x > 0:
        try:
            y = table["b"]
        except KeyError:
            y = x
    else:
        y = -x
    return y


@probe((2.0,), (-2.0,))
def ag_with_in_branch(x):
    if x > 0:
        with contextlib.nullcontext():
            x = x * 4
    return x


@probe((2.0,), (-2.0,))
def ag_return_inside_with(x):
    with jax.named_scope("block"):
        if x > 0:
            return x * 2
        x = x - 1
    return x


@probe((2.0,), (-2.0,))
def ag_return_in_try_finally(x):
    log = []

    def inner(v):
        try:
            if v > 0:
                return v * 2
            v = v - 1
        finally:
            log.append(1)
        return v

    r = inner(x)
    return r, len(log)


@probe((2.0,), (-2.0,))
def ag_return_in_try_finally_direct(x):
    y = x
    try:
        if x > 0:
            return x * 3
        y = y - 1
    finally:
        y = y * 100
    return y


@probe((3.0, 5), (-3.0, 5), (3.0, 0))
def ag_return_in_loop_in_try(x, n):
    total = 0.0
    try:
        for i in range(n):
            total = total + x
            if total > 7:
                return total
    finally:
        total = -1.0
    return total


@probe((2.0,), (-2.0,))
def ag_return_in_with_in_loop(x):
    for i in range(4):
        with contextlib.nullcontext():
            if x * i > 3:
                return i
    return -1


@probe((2.0, 1.0), (-2.0, 1.0))
def ag_if_in_while_in_if(x, y):
    if y > 0:
        while x < 10:
            if x > 0:
                x = x * 2
            else:
                x = x + 3
    return x


@probe((1.0,), (3.0,))
def ag_while_true_break(x):
    while True:
        x = x * 2
        if x > 20:
            break
    return x


@probe((1.0, 4), (1.0, 0))
def ag_augassign_subscript_in_loop(x, n):
    v = jnp.zeros(3)
    for i in range(n):
        v = v.at[i % 3].add(x)
    return v


@probe((2.0,), refuse=("g",), vmap=False)
def ag_if_defines_function(x):
    if x > 0:
        def g(v):
            return v + 1
    else:
        def g(v):
            return v - 1
    return g(x)


@probe((2.0,), refuse=(), vmap=False)
def ag_lambda_conditional_select(x):
    f = (lambda v: v * v) if x > 0 else (lambda v: -v)
    return f(x)


@probe((3.0,), (-3.0,))
def ag_multiple_returns_nested(x):
    if x > 0:
        if x > 2:
            return x - 2
        return x
    return -x


@probe((2.0, 3), (2.0, 0))
def ag_loop_variable_after_loop(x, n):
    i = -1
    for i in range(n):
        x = x + i
    return x, i


@probe((1.0, 3), (1.0, 0), raises=[((1.0, -1), ValueError)])
def ag_raise_in_branch(x, n):
    if n < 0:
        raise ValueError("negative")
    for _ in range(n):
        x = x * 2
    return x


@probe((2.0,), (-2.0,))
def ag_tuple_swap_in_while(x):
    a, b = x, 1.0
    k = 0
    while k < 3:
        a, b = b, a + b
        k += 1
    return a, b


@probe((4.0,), (-4.0,))
def ag_chained_comparison(x):
    if -1 < x < 5:
        return x
    return x * 0


@probe((A(1, 2, 3),), (A(-1, -2, 3),))
def ag_any_all_arrays(x):
    if jnp.all(x > 0):
        return x.sum()
    elif jnp.any(x > 0):
        return x.max()
    return x.min()


@probe((2.0, 3), (2.0, 1))
def ag_for_else(x, n):
    for i in range(n):
        if i == 2:
            break
        x = x + 1
    else:
        x = x * 100
    return x


@probe((1.0,), (50.0,))
def ag_while_else(x):
    k = 0
    while k < 5:
        if x > 40:
            break
        x = x * 2
        k += 1
    else:
        x = -x
    return x


@probe((3.0,), refuse=("out",), vmap=False)
def ag_if_return_none_side(x):
    out = None
    if x > 0:
        out = x
    if out is None:
        return 0.0
    return out


# =========================================================================================
# Paddle dy2static style
# =========================================================================================

@probe((A(1, 2, 3, 4),), (A(-1, 0, 1, 2),))
def pd_loop_over_shape(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + x[i] * i
    return s


@probe((A(1, 2, 3),), (A(4, 5, 6),))
def pd_loop_over_len(x):
    out = x
    for i in range(len(x)):
        out = out.at[i].set(out[i] + i)
    return out


@probe((A(1, -2, 3),), (A(-1, -2, -3),))
def pd_append_then_stack(x):
    outs = []
    for i in range(x.shape[0]):
        if x[i] > 0:
            outs.append(x[i] * 2)
        else:
            outs.append(x[i] * 0)
    return jnp.stack(outs)


@probe((2.0, 3), refuse=("out",), vmap=False)
def pd_append_traced_trip(x, n):
    out = []
    for i in range(n):
        out.append(x * i)
    return len(out)


@probe((np.arange(12, dtype=np.float32).reshape(3, 4),), (-np.ones((3, 4), np.float32),))
def pd_nested_break_continue(x):
    total = 0.0
    for i in range(3):
        for j in range(4):
            if x[i, j] < 0:
                break
            if j == 1:
                continue
            total = total + x[i, j]
        if total > 30:
            break
    return total


@probe((2.0,), (-2.0,), vmap=False)
def pd_return_int_or_float(x):
    if x > 0:
        return x * 2
    return 1


@probe((2.0,), refuse=(), vmap=False)
def pd_return_different_shapes(x):
    if x > 0:
        return jnp.ones(3) * x
    return jnp.ones(2) * x


@probe((A(1, 2, 3),), (A(3, 2, 1),))
def pd_dict_state(x):
    state = {"best": x[0], "idx": 0}
    for i in range(1, 3):
        if x[i] > state["best"]:
            state["best"] = x[i]
            state["idx"] = i
    return state["best"], state["idx"]


@probe((1.0, 10), (1.0, 2), (50.0, 10))
def pd_while_two_conditions(x, n):
    i = 0
    while i < n and x < 20:
        x = x * 2
        i += 1
    return x, i


@probe((A(1, 2, 3),))
def pd_enumerate_tensor(x):
    acc = jnp.zeros(())
    for i, v in enumerate(x):
        acc = acc + v * (i + 1)
    return acc


def _pd_helper(v, k):
    if v > k:
        return v - k
    while v < k:
        v = v + 1.5
    return v


@probe((2.0, 1.0), (0.0, 3.0))
def pd_call_helper_with_control_flow(x, k):
    y = _pd_helper(x, k)
    return _pd_helper(y * 2, k + 1)


@probe((A(1, 2, 3),), (A(1, 2),), vmap=False)
def pd_static_shape_condition(x):
    if x.shape[0] > 2:
        return x[:2] * 2
    return x


@probe((2.0, None), (2.0, 3.0), vmap=False)
def pd_none_argument(x, y):
    if y is None:
        y = x * 2
    if x > y:
        return x
    return y


@probe((3.0, 4), (3.0, 0), vmap=False)
def pd_loop_var_after_traced_loop(x, n):
    for i in range(n):
        x = x + 1
    return x


@probe((F(2.0),), (F(-2.0),))
def pd_isinstance_check(x):
    if isinstance(x, (int, float)):
        y = x + 1
    else:
        y = x * 2
    if y > 0:
        y = y + 10
    return y


@probe((1.0, 4), (3.0, 0))
def pd_for_arange_static(x, n):
    for i in jnp.arange(4):
        x = x + i * n
    return x


@probe((A(1, 2, 3, 4),), (A(4, 3, 2, 1),))
def pd_slice_in_loop(x):
    s = 0.0
    for i in range(1, x.shape[0]):
        d = x[i] - x[i - 1]
        if d > 0:
            s = s + d
    return s


@probe((A(1, 2, 3),), (A(-1, 2, -3),))
def pd_tensor_bool_mask_where(x):
    y = jnp.where(x > 0, x, 0.0)
    if y.sum() > 3:
        y = y / y.sum()
    return y


@probe((2.0, 3), (2.0, 0))
def pd_list_of_arrays_index_update(x, n):
    buf = [x, x * 2, x * 3]
    for i in range(n):
        buf[0] = buf[0] + buf[1]
    return buf[0], buf[2]


@probe((1.0, 5), (1.0, 1))
def pd_while_counter_tensor(x, n):
    i = jnp.array(0)
    while i < n:
        x = x + jnp.sin(x)
        i = i + 1
    return x


@probe((A(1, 2),), (A(-1, -2),))
def pd_return_tuple_branches(x):
    if x.sum() > 0:
        return x, x.sum()
    return -x, x.mean()


@probe((A(1, 2, 3), 2), (A(4, 5, 6), 0))
def pd_loop_with_concat_fixed(x, n):
    y = jnp.concatenate([x, x])
    for _ in range(n):
        y = y * 0.5 + 1
    return y


@probe((2.0,), (-2.0,))
def pd_nested_function_def_and_call(x):
    def inner(a):
        if a > 0:
            return a + 100
        return a - 100
    return inner(x) + inner(-x)


@probe((3.0, 2), (3.0, 5))
def pd_break_in_while_else_value(x, n):
    i = 0
    found = False
    while i < 4:
        if i == n:
            found = True
            break
        i += 1
    if found:
        x = x * 2
    return x


@probe((A(1, 2, 3), A(1, 1, 1)), (A(0, 0, 0), A(1, 2, 3)))
def pd_two_tensor_loop_update(a, b):
    for i in range(3):
        if a[i] > b[i]:
            a = a.at[i].set(b[i])
        else:
            b = b.at[i].set(a[i])
    return a, b


@probe((1.0,), (-1.0,))
def pd_if_in_list_comprehension_result(x):
    vals = [x * k for k in range(3)]
    if vals[1] > 0:
        vals[2] = vals[2] + 10
    return vals[0] + vals[1] + vals[2]


@probe((2.0, 3), (2.0, 0), (2.0, 1))
def pd_loop_int_to_float_carry(x, n):
    acc = 0
    for i in range(n):
        acc = acc + x / 2
    return acc


# =========================================================================================
# Catalyst style
# =========================================================================================

@probe((1, 7, 2.0), (3, 3, 2.0), (5, 1, 2.0))
def ca_for_range_traced_bounds(a, b, x):
    for i in range(a, b):
        x = x + i
    return x


@probe((10, 0, -3), (0, 10, -3), (9, 1, -2))
def ca_for_range_negative_step(a, b, s):
    t = 0
    for i in range(a, b, s):
        t = t * 2 + i
    return t


@probe((1.0,), (5.0,))
def ca_while_counter_returns_tuple(x):
    n = 0
    while x < 100:
        x = x * 3
        n += 1
    return x, n


@probe((0.5,), (-0.5,))
def ca_if_traced_returns_tuple(x):
    if x > 0:
        a, b = jnp.cos(x), jnp.sin(x)
    else:
        a, b = jnp.sin(x), jnp.cos(x)
    return a, b


def _ca_circuit(theta, n):
    acc = jnp.zeros(2)
    for i in range(n):
        acc = acc.at[i % 2].add(jnp.cos(theta * (i + 1)))
    return acc


@probe((0.3, 3), (1.2, 0))
def ca_nested_qnode_like(theta, n):
    res = _ca_circuit(theta, n)
    if res[0] > 0:
        res = res + _ca_circuit(theta * 2, 2)
    return res


@probe((4,), (0,))
def ca_for_loop_index_into_array(n):
    arr = jnp.zeros(5)
    for i in range(n):
        arr = arr.at[i].set(i * 2.0)
    return arr


@probe((2.0,), (-1.0,), (0.1,))
def ca_elif_chain_returns(x):
    if x > 1:
        return x, 1
    elif x > 0:
        return x * 2, 2
    else:
        return -x, 3


@probe((3, 1.0), (0, 1.0))
def ca_nested_traced_loops(n, x):
    for i in range(n):
        for j in range(i):
            x = x + j
    return x


@probe((3, 0.5), (0, 0.5))
def ca_while_inside_for(n, x):
    for i in range(n):
        k = 0
        while k < i:
            x = x * 1.1
            k += 1
    return x


@probe((2, 1.0), (5, 1.0))
def ca_if_inside_for_traced(n, x):
    for i in range(n):
        if i % 2 == 0:
            x = x + 1
        else:
            x = x * 2
    return x


@probe((3, 2.0), (1, 2.0))
def ca_loop_over_fixed_list_with_traced_body(n, x):
    for w in (1.0, 2.0, 3.0):
        if n > w:
            x = x * w
    return x


@probe((2.0,), (-2.0,))
def ca_closure_reads_outer_traced(x):
    scale = x * 2

    def f(v):
        if v > 0:
            return v * scale
        return v

    return f(x) + f(-x)


@probe((1.0, 3), (1.0, 0))
def ca_fori_style_with_python_counter(x, n):
    count = 0
    for _ in range(n):
        x = jnp.sin(x) + x
        count = count + 1
    return x, count


@probe((4, 1.0), (0, 1.0), (1, 1.0))
def ca_range_len_of_traced_range(n, x):
    r = range(n)
    return x * len(r)


# =========================================================================================
# Numba style
# =========================================================================================

@probe((5, 3), (5, 9))
def nb_for_else_search(n, target):
    found = -1
    for i in range(n):
        if i == target:
            found = i
            break
    else:
        found = 100
    return found


@probe((10,), (3,))
def nb_while_else(n):
    i = 0
    while i < n:
        if i * i > 20:
            break
        i += 1
    else:
        i = -i
    return i


@probe((4, 6), (1, 1), (0, 3))
def nb_nested_loops_break_inner(a, b):
    total = 0
    for i in range(a):
        for j in range(b):
            if j > i:
                break
            total += i * j
    return total


@probe((4, 2), (4, 10))
def nb_nested_break_with_flag(n, limit):
    done = False
    count = 0
    for i in range(n):
        for j in range(n):
            count += 1
            if count >= limit:
                done = True
                break
        if done:
            break
    return count


@probe((2.0,), vmap=False)
def nb_closures_over_loop_variable(x):
    fs = []
    for i in range(3):
        fs.append(lambda v: v + i)
    return fs[0](x) + fs[1](x)


@probe((2.0,), vmap=False)
def nb_closures_default_arg_capture(x):
    fs = [lambda v, k=k: v * k for k in range(1, 4)]
    s = 0.0
    for f in fs:
        s = s + f(x)
    return s


@probe((2.5, 1.5), (-1.0, 4.0), (3.0, 3.0))
def nb_min_max_builtins(a, b):
    return min(a, b), max(a, b), min(a, b, 0.0), max(a, -b, 1.0)


@probe((A(1, 5, 2),), (A(-1, -5, -2),))
def nb_sum_abs_builtins(x):
    return sum(x), abs(x[1]), sum(abs(v) for v in x)


@probe((7, 3), (-7, 3), (7, -3), (9, 4))
def nb_divmod_builtin(a, b):
    q, r = divmod(a, b)
    return q, r, a // b, a % b


@probe((2.0, 3), (1.5, 0))
def nb_pow_builtin(x, n):
    return pow(x, 2), pow(x, n), x ** n


@probe((2.4,), (2.6,), (-1.4,))
def nb_round_builtin(x):
    return round(x), round(x, 1)


@probe((A(3, 1, 2),))
def nb_reversed_over_array(x):
    out = []
    for v in reversed(x):
        out.append(v * 2)
    return jnp.stack(out)


@probe((3,), (0,))
def nb_reversed_range_traced(n):
    t = 0
    for i in reversed(range(n)):
        t = t * 10 + i
    return t


@probe((1.0, 2.0, 3.0), (3.0, 1.0, 2.0), vmap=False)
def nb_sorted_traced_values(a, b, c):
    s = sorted([a, b, c])
    return s[0], s[2]


@probe((1.0, -2.0), (-1.0, -2.0), (1.0, 2.0))
def nb_any_all_list(a, b):
    r = 0
    if any([a > 0, b > 0]):
        r += 1
    if all([a > 0, b > 0]):
        r += 10
    return r


@probe((3, 2.0), (4, 0.5))
def nb_int_float_mixing(n, x):
    acc = 0
    for i in range(n):
        acc = acc + i / 2 + x
    return acc, n / 2, n // 2


@probe((3,),)
def nb_tuple_unpacking_in_loop(n):
    pairs = [(1, 2.0), (3, 4.0), (5, 6.0)]
    s = 0.0
    for a, b in pairs:
        if n > a:
            s = s + b
    return s


@probe((3, 1.0), (0, 1.0))
def nb_unpack_enumerate_zip(n, x):
    xs = [x, x + 1, x + 2]
    ys = [2.0, 3.0, 4.0]
    t = 0.0
    for i, (a, b) in enumerate(zip(xs, ys)):
        if i < n:
            t = t + a * b
    return t


@probe((0, 5, True), (2, 5, False), (0, 0, False))
def nb_while_complex_condition(i, n, flag):
    steps = 0
    while (i < n and steps < 3) or (flag and steps < 1):
        i += 1
        steps += 1
    return i, steps


@probe((10,), (1,), (27,))
def nb_collatz_length(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


@probe((12, 18), (7, 3), (0, 5))
def nb_gcd_euclid(a, b):
    while b != 0:
        a, b = b, a % b
    return a


@probe((10,), (2,), (1,))
def nb_prime_count(n):
    count = 0
    for k in range(2, n):
        is_prime = True
        for d in range(2, k):
            if k % d == 0:
                is_prime = False
                break
        if is_prime:
            count += 1
    return count


@probe((5,), (0,))
def nb_fib_iterative(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


@probe((2.0, 3), (2.0, 0))
def nb_closure_modifies_via_list(x, n):
    acc = [x]

    def bump(v):
        acc[0] = acc[0] + v

    for i in range(3):
        bump(i)
    return acc[0] * n


@probe((1.0,), (-1.0,))
def nb_abs_of_expression_in_condition(x):
    if abs(x - 0.5) < 1:
        return x
    return x * 0


@probe((5, 2), (5, 7))
def nb_min_in_range_bound(n, m):
    t = 0
    for i in range(min(n, m)):
        t += i
    return t


@probe((3,), (0,))
def nb_sum_of_range_traced(n):
    return sum(range(n)), sum(i * 2 for i in range(4))


@probe((2.0, 1.0), (1.0, 2.0))
def nb_max_key_lambda(a, b):
    return max([a, b], key=lambda v: -v)


@probe((3.0,), (-3.0,))
def nb_float_and_int_builtins(x):
    return float(3) * x, int(2.7) + x, bool(1) * x


# =========================================================================================
# What JAX users post when jit refuses their control flow
# =========================================================================================

@probe((2.0,), (10.0,), (0.5,))
def us_newton_sqrt(a):
    x = a
    while abs(x * x - a) > 1e-4:
        x = 0.5 * (x + a / x)
    return x


@probe((0.0, 2.0), (1.0, 3.0))
def us_bisection(lo, hi):
    for _ in range(40):
        mid = (lo + hi) / 2
        if mid * mid - 2 > 0:
            hi = mid
        else:
            lo = mid
    return (lo + hi) / 2


@probe((0.0, 2.0), (1.0, 1.5))
def us_bisection_tolerance(lo, hi):
    while hi - lo > 1e-3:
        mid = (lo + hi) / 2
        if mid ** 3 - mid - 1 > 0:
            hi = mid
        else:
            lo = mid
    return lo


@probe((0.5, 5), (2.0, 10), (-1.0, 3))
def us_early_exit_on_nan(x, n):
    for i in range(n):
        x = jnp.log(x)
        if jnp.isnan(x):
            return -1.0, i
    return x, n


@probe((-2.0,), (0.5,), (3.0,), (1.0,))
def us_piecewise(x):
    if x < 0:
        return x * x
    elif x < 1:
        return x
    elif x < 2:
        return 2 - x
    return 0.0 * x


@probe((1.0, 4), (1.0, 0))
def us_traced_trip_count_accumulate(x, n):
    out = jnp.zeros(6)
    for i in range(n):
        out = out.at[i].set(x * i)
    return out


@probe((1.0,), (0.2,))
def us_fixed_point_cos(x):
    for _ in range(100):
        nx = jnp.cos(x)
        if abs(nx - x) < 1e-6:
            break
        x = nx
    return x


@probe((3.0, 0.1), (-2.0, 0.3))
def us_gradient_descent_converge(w, lr):
    g = 2 * w
    it = 0
    while abs(g) > 1e-3 and it < 500:
        w = w - lr * g
        g = 2 * w
        it += 1
    return w, it


@probe((A(1, -1, 2),), (A(-1, -2, -3),))
def us_while_any_positive(x):
    k = 0
    while jnp.any(x > 0):
        x = x - 1
        k += 1
    return x, k


@probe((np.float32(1.0), 3), (np.float32(1.0), 0))
def us_int_of_traced_in_range(x, n):
    for i in range(int(n)):
        x = x * 2
    return x


@probe((A(1, 2, 3),), (A(0, 0, 0),))
def us_normalize_if_nonzero(v):
    norm = jnp.linalg.norm(v)
    if norm > 0:
        v = v / norm
    return v


@probe((1.0, 5), (1.0, 1))
def us_euler_ode(y, steps):
    h = 0.1
    t = 0.0
    for _ in range(steps):
        y = y + h * (-2 * y + t)
        t = t + h
    return y, t


@probe((2.0, 3.0), (5.0, 1.0))
def us_clip_with_ifs(x, hi):
    lo = -hi
    if x > hi:
        x = hi
    if x < lo:
        x = lo
    return x


@probe((A(3, 1, 2, 5, 4),), (A(1, 2, 3, 4, 5),))
def us_bubble_sort_at_set(x):
    n = x.shape[0]
    for i in range(n):
        for j in range(n - 1 - i):
            if x[j] > x[j + 1]:
                a, b = x[j], x[j + 1]
                x = x.at[j].set(b).at[j + 1].set(a)
    return x


@probe((A(1, 3, 2, 5),), (A(5, 4, 3, 2),))
def us_argmax_loop(x):
    best, idx = x[0], 0
    for i in range(1, x.shape[0]):
        if x[i] > best:
            best, idx = x[i], i
    return best, idx


@probe((A(1, 2, 3, 4),), (A(4, 3, 2, 1),))
def us_cumsum_loop(x):
    out = jnp.zeros_like(x)
    s = 0.0
    for i in range(x.shape[0]):
        s = s + x[i]
        out = out.at[i].set(s)
    return out


@probe((F(0.7),), (F(0.1),))
def us_rejection_like_loop(u):
    k = 0
    while u < 0.95:
        u = (u + 0.137) % 1.0
        k += 1
        if k > 50:
            break
    return u, k


@probe((0.0, 1.0, 10), (0.0, 2.0, 0))
def us_trapezoid(a, b, n):
    h = (b - a) / 10
    s = 0.0
    for i in range(n):
        x0 = a + i * h
        s = s + 0.5 * h * (x0 * x0 + (x0 + h) * (x0 + h))
    return s


@probe((3.0, 2.0), (1.0, 4.0))
def us_lax_style_mixed(x, y):
    z = jax.lax.cond(x > y, lambda: x - y, lambda: y - x)
    if z > 1:
        z = z * 2
    return z


def _scan_oracle(x):
    c, ys = x, []
    for i in range(4):
        c = c - i if c > 0 else c + i
        ys.append(c)
    return c, np.asarray(ys)


@probe((2.0,), (-2.0,), oracle=_scan_oracle)
def us_if_inside_jax_scan_body(x):
    def body(c, i):
        if c > 0:
            c = c - i
        else:
            c = c + i
        return c, c
    c, ys = jax.lax.scan(body, x, jnp.arange(4.0))
    return c, ys


def _fori_oracle(x, n):
    for i in range(n):
        x = x + i if i % 2 == 0 else x * 2
    return x


@probe((1.0, 3), (1.0, 0), oracle=_fori_oracle)
def us_fori_loop_with_if_body(x, n):
    def body(i, v):
        if i % 2 == 0:
            return v + i
        return v * 2
    return jax.lax.fori_loop(0, n, body, x)


@probe((A(0.1, 0.5, 0.9),), (A(0.9, 0.8, 0.7),))
def us_count_threshold(p):
    c = 0
    for v in p:
        if v > 0.5:
            c += 1
    return c


@probe((4.0,), (1.0,))
def us_halving_until_small(x):
    n = 0
    while x > 1.0:
        x = x / 2
        n = n + 1
    return n, x


@probe((A(1, 2, 3), 1.5), (A(1, 2, 3), 10.0))
def us_find_first_above(x, t):
    idx = -1
    for i in range(3):
        if x[i] > t:
            idx = i
            break
    return idx


@probe((1.0, 2), (1.0, 0))
def us_python_float_accumulator(x, n):
    total = 0.0
    for _ in range(n):
        total += float(1.5)
        x = x + total
    return x


@probe((3.0,), (-3.0,))
def us_relu_branch_grad_ok(x):
    if x > 0:
        return x * x
    return 0.0 * x


@probe((2.0, 5), (0.5, 5), (2.0, 0))
def us_loop_with_break_and_return_after(x, n):
    i = 0
    for i in range(n):
        x = x * x
        if x > 1e3:
            break
    return x, i


@probe((A(1, 2), A(3, 4)), (A(-1, -2), A(3, 4)))
def us_tuple_state_while(a, b):
    state = (a, b, 0)
    while state[2] < 3 and state[0].sum() < 20:
        x, y, k = state
        state = (x + y, y, k + 1)
    return state


# =========================================================================================
# Harder corners (all styles)
# =========================================================================================

@probe((2.0,), (-2.0,))
def hx_traced_raise_caught(x):
    try:
        if x < 0:
            raise ValueError("neg")
        y = x * 2
    except ValueError:
        y = x * 0
    return y


@probe((3.0, 4), (0.5, 4), (3.0, 0))
def hx_break_inside_try_in_loop(x, n):
    k = 0
    for i in range(n):
        try:
            x = x * 2
            if x > 10:
                break
        finally:
            k = k + 1
    return x, k


@probe((3.0, 4), (-3.0, 4))
def hx_continue_inside_with(x, n):
    s = 0.0
    for i in range(n):
        with contextlib.nullcontext():
            if x * i > 5:
                continue
            s = s + i
    return s


@probe((2.0, 3), (2.0, 0))
def hx_sum_generator_traced_range(x, n):
    return sum(x * i for i in range(n))


@probe((1.0, 4), (1.0, 0))
def hx_zip_range_traced_with_array(x, n):
    xs = jnp.arange(5.0)
    for i, v in zip(range(n), xs):
        x = x + i * v
    return x


@probe((3, 1.0), (0, 1.0))
def hx_enumerate_range_start(n, x):
    for k, i in enumerate(range(n), start=1):
        x = x + k * i
    return x


@probe((1.0, 2), (1.0, 0))
def hx_python_table_indexed_by_loop(x, n):
    weights = [0.5, 2.0, 3.0]
    for i in range(n):
        x = x * weights[i]
    return x


@probe((A(1, 2, 3, 4),), (A(4, 3, 2, 1),))
def hx_while_shape_bound(x):
    i = 0
    while i < x.shape[0] and x[i] < 3:
        i += 1
    return i


@probe((2.0,), (9.0,))
def hx_math_in_loop(x):
    while x > 1.5:
        x = math.sqrt(x)
    return x, math.floor(x * 10)


@probe((A(1, -2, 3),), (A(-1, -2, -3),))
def hx_any_generator_over_array(x):
    if any(v > 0 for v in x):
        return x.max()
    return x.min()


@probe((A(1, -2, 3),), (A(-1, -2, -3),))
def hx_max_of_array_in_loop(x):
    best = max(x)
    k = 0
    for v in x:
        if v == best:
            break
        k += 1
    return best, k


@probe((2.0,), (-2.0,), (0.0,))
def hx_and_or_values(x):
    a = x > 0 and x
    b = x < 0 or x * 3
    return a, b


@probe((2.0,), (-2.0,), (12.0,))
def hx_nested_ternary(x):
    return 1 if x > 10 else (2 if x > 0 else 3)


@probe((1.0,), (20.0,))
def hx_python_bool_flag_becomes_traced(x):
    done = False
    while not done:
        x = x * 2
        done = x > 10
    return x


@probe((A(1, -2, 3, -4),), (A(-1, -2, -3, -4),))
def hx_conditional_counter_index(x):
    buf = jnp.zeros(4)
    k = 0
    for v in x:
        if v > 0:
            buf = buf.at[k].set(v)
            k += 1
    return buf, k


@probe((2.0,), (-2.0,))
def hx_walrus_in_while(x):
    n = 0
    while (y := x - n) > 0:
        n += 1
    return n, y


@probe((A(1, 2, 3, 4),))
def hx_star_unpacking(x):
    first, *rest = [x[0], x[1], x[2]]
    if first > 0:
        first = first + rest[0]
    return first, rest[1]


@probe((2.0, 3), (2.0, 0))
def hx_variable_defined_in_loop_used_after(x, n):
    y = 0.0
    for i in range(n):
        t = x * i
        y = y + t
    return y


@probe((3, 4, 5.0), (0, 4, 5.0), (3, 0, 5.0))
def hx_return_from_nested_traced_loops(a, b, x):
    for i in range(a):
        for j in range(b):
            if i * j > 2:
                return x * i + j
    return -x


@probe((1.0,), (30.0,))
def hx_return_in_while_true(x):
    while True:
        if x > 25:
            return x
        x = x * 3


@probe((2.0,), (-2.0,), vmap=False)
def hx_return_tuple_with_none(x):
    if x > 0:
        return x, None
    return -x, None


@probe((2.0,), (-2.0,))
def hx_return_dict_branches(x):
    if x > 0:
        return {"v": x, "s": 1}
    return {"v": -x, "s": -1}


@probe((2.0, [1.0]), (2.0, []), vmap=False)
def hx_python_list_truthiness(x, lst):
    if lst:
        x = x + lst[0]
    if x > 2:
        x = x * 2
    return x


@probe((2.0, 3), raises=[((-2.0, 3), AssertionError)], vmap=False)
def hx_assert_in_traced_loop(x, n):
    for i in range(n):
        assert x > 0, "went negative"
        x = x - 0.5
    return x


@probe((2.0, 3), raises=[((2.0, 6), ValueError)], vmap=False)
def hx_raise_in_traced_loop(x, n):
    for i in range(n):
        x = x - 0.5
        if x < 0:
            raise ValueError("below zero")
    return x


@probe((2.0,), (-2.0,))
def hx_del_then_rebind_in_branch(x):
    y = x * 2
    if x > 0:
        del y
        y = x * 3
    return y


@probe((A(1, -2, 3),), refuse=(), vmap=False)
def hx_filtered_list_length_is_data_dependent(x):
    pos = [v for v in x if v > 0]
    return jnp.stack(pos)


@probe((A(1, -2, 3),), (A(-1, -2, -3),))
def hx_filtered_reductions(x):
    return sum(v for v in x if v > 0), len([v for v in x if v < 0])


@probe((2.0,), (-2.0,))
def hx_inplace_array_ops(x):
    v = jnp.ones(3)
    if x > 0:
        v += x
    else:
        v *= x
    return v


@probe((7, 1.0), (4, 1.0))
def hx_int_mod_loop(n, x):
    while n > 1:
        if int(n) % 2 == 1:
            x = x + 1
        n = n // 2
    return x


@probe((2.0,), (0.5,))
def hx_float_cast_of_traced(x):
    y = float(x) * 2
    if y > 2:
        return int(y)
    return int(-y)


@probe((2.0,), (-2.0,))
def hx_not_on_array_expression(x):
    m = jnp.array([True, False])
    if not jnp.all(m) and x > 0:
        return x
    return -x


@probe((3.0, 1.0), (1.0, 3.0))
def hx_class_method_with_loops(a, b):
    acc = _Accumulator(a)
    for _ in range(3):
        acc.add(b)
    return acc.total, acc.n


class _Accumulator:
    def __init__(self, start):
        self.total = start
        self.n = 0

    def add(self, v):
        if self.total > 5:
            self.total = self.total - v
        else:
            self.total = self.total + v
        self.n += 1


@probe((2.0,), refuse=("_COUNTER",), vmap=False)
def hx_global_write_in_branch(x):
    global _COUNTER
    _COUNTER = 0
    if x > 0:
        _COUNTER = _COUNTER + 1
    return x * 2, _COUNTER


_COUNTER = 0


@probe((2.0, 3), (2.0, 0))
def hx_nonlocal_write_in_traced_loop(x, n):
    total = 0.0

    def add(v):
        nonlocal total
        total = total + v

    for i in range(n):
        add(x * i)
    return total


@probe((2.0,), (-2.0,))
def hx_closure_sees_rebinding_in_branch(x):
    k = 1.0

    def scaled(v):
        return v * k

    if x > 0:
        k = 10.0
    return scaled(x)


@probe((2.0, 4), (2.0, 0))
def hx_list_pop_in_loop(x, n):
    stack = [x, x + 1, x + 2]
    for _ in range(2):
        top = stack.pop()
        if top > 3:
            x = x + top
    return x * n


@probe((A(1, 2, 3),), (A(0, 0, 0),))
def hx_dataclass_like_state(x):
    st = _State(x, 0.0)
    for v in x:
        if v > 1:
            st.acc = st.acc + v
    return st.acc


class _State:
    def __init__(self, data, acc):
        self.data = data
        self.acc = acc


@probe((2.0,), (-2.0,), vmap=False)
def hx_fstring_in_branch(x):
    msg = "init"
    if x > 0:
        label = f"pos {1}"
    else:
        label = f"pos {1}"
    return x, label, msg


@probe((1.0, 5), (1.0, 0))
def hx_while_else_traced(x, n):
    i = 0
    while i < n:
        x = x * 2
        if x > 8:
            break
        i += 1
    else:
        x = -x
    return x, i


@probe((2.0, 3), (2.0, 0))
def hx_for_else_traced_no_break(x, n):
    for i in range(n):
        x = x + i
    else:
        x = x * 10
    return x


@probe((3, 4), (0, 4))
def hx_loop_over_dict_keys(n, m):
    d = {"a": 1, "b": 2}
    t = 0
    for k in d:
        for i in range(n):
            t = t + d[k] * m
    return t


@probe((2.0, 3), (2.0, 0))
def hx_tuple_accumulate_in_loop(x, n):
    acc = (x, 0)
    for i in range(n):
        acc = (acc[0] * 2, acc[1] + 1)
    return acc


@probe((A(3, 1, 2),), (A(1, 2, 3),))
def hx_sorted_array_then_loop(x):
    s = sorted(x)
    out = 0.0
    for i, v in enumerate(s):
        out = out + v * (i + 1)
    return out


@probe((1.0, 2.0), (2.0, 1.0))
def hx_min_with_key_tuple(a, b):
    pairs = [(a, 0), (b, 1)]
    best = min(pairs, key=lambda p: p[0])
    return best[1]


@probe((2.0, 3), (2.0, 0), (-1.0, 3))
def hx_early_return_value_and_int(x, n):
    for i in range(n):
        if x > 1:
            return i
        x = x + 1
    return n


@probe((0.5,), (3.0,))
def hx_if_else_with_recursion_static(x):
    return _fact(4) * x if x > 1 else x


def _fact(k):
    if k <= 1:
        return 1
    return k * _fact(k - 1)


@probe((3, 2.0), refuse=(), vmap=False)
def hx_recursion_on_traced_value(n, x):
    return _rec(n, x)


def _rec(n, x):
    if n <= 0:
        return x
    return _rec(n - 1, x * 2)


# =========================================================================================
# Third round: structures, methods, keys, gradients
# =========================================================================================

import collections  # noqa: E402
import functools  # noqa: E402

_Pair = collections.namedtuple("_Pair", ["a", "b"])


@probe((1.0,), (30.0,))
def r3_namedtuple_carry(x):
    p = _Pair(x, 0)
    while p.a < 20:
        p = _Pair(p.a * 2, p.b + 1)
    return p.a, p.b


@probe((2.0,), (-2.0,))
def r3_namedtuple_replace_in_branch(x):
    p = _Pair(x, x)
    if x > 0:
        p = p._replace(b=x * 3)
    return p


def _nested_jit_oracle(x, n):
    for _ in range(n):
        x = x - 1 if x > 3 else x + 1
    return x


@probe((2.0, 3), (2.0, 0), oracle=_nested_jit_oracle)
def r3_nested_jit_function_inside(x, n):
    @jax.jit
    def inner(v):
        if v > 3:
            return v - 1
        return v + 1

    for _ in range(n):
        x = inner(x)
    return x


@probe((2.0, 3), (-1.0, 2))
def r3_jax_grad_inside_loop(x, n):
    def f(v):
        if v > 0:
            return v * v
        return -v

    g = 0.0
    for _ in range(n):
        g = g + jax.grad(f)(x)
        x = x - 0.5
    return g


@probe((0.5,), (3.0,), grad=True)
def r3_grad_through_while(x):
    k = 0
    while x < 10 and k < 20:
        x = x * 1.5 + 0.1
        k += 1
    return x


@probe((0.5, 3), (3.0, 5), grad=True, vmap=False)
def r3_grad_static_for_with_if(x, n):
    y = x
    for i in range(4):
        if y > 1:
            y = y * 0.5
        else:
            y = y * y + i
    return y


@probe((2.0,), (-2.0,), grad=True)
def r3_grad_piecewise(x):
    if x < 0:
        return jnp.sin(x)
    elif x < 1:
        return x * x
    return 2 * x - 1


@probe((0,), (1,))
def r3_random_key_in_loop(seed):
    key = jax.random.PRNGKey(seed)
    total = 0.0
    for _ in range(4):
        key, sub = jax.random.split(key)
        u = jax.random.uniform(sub)
        if u > 0.5:
            total = total + u
    return total


@probe((0,), (3,))
def r3_random_rejection_while(seed):
    key = jax.random.PRNGKey(seed)
    u = 1.0
    tries = 0
    while u > 0.3:
        key, sub = jax.random.split(key)
        u = jax.random.uniform(sub)
        tries += 1
    return u, tries


class _Layer:
    def __init__(self, w):
        self.w = w

    def __call__(self, x):
        if x > 0:
            return x * self.w
        return x


class _Scaled(_Layer):
    def __call__(self, x):
        y = super().__call__(x)
        for _ in range(2):
            y = y + self.w
        return y


@probe((2.0,), (-2.0,))
def r3_callable_objects(x):
    layers = [_Layer(2.0), _Scaled(3.0)]
    for layer in layers:
        x = layer(x)
    return x


@probe((2.0, 3.0), (-1.0, 0.5))
def r3_make_adder_closure(x, k):
    def make(c):
        def add(v):
            if v > c:
                return v + c
            return v - c
        return add

    return make(k)(x) + make(1.0)(x)


@probe((2.0,), (-2.0,))
def r3_defaults_and_kwargs(x):
    return _with_kwargs(x) + _with_kwargs(x, n=1, scale=2.0)


def _with_kwargs(x, n=3, *, scale=1.0, **extra):
    for _ in range(n):
        if x > 0:
            x = x * scale + 1
    return x


@probe((2.0,), (-2.0,))
def r3_star_args(x):
    return _varargs(x, 1.0, 2.0, 3.0)


def _varargs(x, *ws):
    for w in ws:
        if x * w > 2:
            x = x - w
    return x


@probe((2.0,), (-2.0,))
def r3_functools_partial(x):
    f = functools.partial(_with_kwargs, n=2)
    return f(x)


@probe((A(1, 2, 3), A(4, 5, 6), A(7, 8, 9)))
def r3_nested_zip_unpacking(x, y, z):
    acc = 0.0
    for a, (b, c) in zip(x, zip(y, z)):
        if a + b > c:
            acc = acc + a
        else:
            acc = acc + c
    return acc


@probe((2.0,), (-2.0,))
def r3_dict_values_keys_loops(x):
    d = {"u": x, "v": x * 2}
    for v in d.values():
        if v > 3:
            x = x + v
    for k in sorted(d):
        d[k] = d[k] + 1
    return x, d


@probe((3.0,), (0.0,))
def r3_while_len_stack(x):
    stack = [1.0, 2.0, 3.0]
    while len(stack) > 0:
        v = stack.pop()
        if x > v:
            x = x - v
    return x


@probe((np.float32([1, 2, 3]), None), (np.float32([1, 2, 3]), np.float32(2.0)), vmap=False)
def r3_optional_argument(x, bias):
    if bias is not None and bias > 1:
        x = x + bias
    return x


@probe((A(1, 2, 3),), vmap=False)
def r3_shape_conditions(x):
    if x.shape[-1] == 3:
        x = x * 2
    if x.ndim > 1:
        x = x.sum(0)
    for i in range(x.shape[0] - 1, -1, -1):
        if x[i] > 3:
            x = x.at[i].set(0.0)
    return x


@probe((2.0,), (-2.0,))
def r3_isinstance_jax_array(x):
    y = jnp.asarray(x)
    if isinstance(y, jax.Array) and y > 0:
        return y
    return -y


@probe((2.0, 5), (0.1, 5))
def r3_nested_while_double_break(x, n):
    i = 0
    while i < n:
        j = 0
        while True:
            x = x * 1.5
            j += 1
            if j >= 2 or x > 50:
                break
        if x > 50:
            break
        i += 1
    return x, i


@probe((2.0,), (-2.0,))
def r3_shadowed_loop_variables(x):
    t = 0.0
    for i in range(3):
        for i in range(2):
            t = t + i
        if x > 0:
            t = t + i
    return t


@probe((2.0, 3), (2.0, 0))
def r3_return_in_for_else(x, n):
    for i in range(n):
        if x * i > 100:
            break
    else:
        return x * -1
    return x


@probe((A(1, 2, 3),), refuse=("x",), vmap=False)
def r3_item_in_condition(x):
    if x.sum().item() > 0:
        return x
    return -x


@probe((A(1, 0, 1, 1),), (A(0, 0, 0, 0),))
def r3_range_of_int_sum(mask):
    count = int(jnp.sum(mask))
    acc = 0
    for i in range(count):
        acc = acc + i
    return acc


@probe((2.0, 3), refuse=("n",), vmap=False)
def r3_dynamic_slice_traced_length(x, n):
    v = jnp.arange(5.0)
    return v[:n].sum() * x


@probe((A(1, 2, jnp.nan),), raises=[], vmap=False)
def r3_nan_guard_raise(x):
    total = 0.0
    for v in x:
        if jnp.isnan(v):
            total = total + 0
        else:
            total = total + v
    return total


@probe((A(3, 4),), (A(0.1, 0.1),))
def r3_while_norm_tolerance(g):
    steps = 0
    while jnp.linalg.norm(g) > 0.5:
        g = g * 0.5
        steps = steps + 1
    return g, steps


@probe((2.0,), (-2.0,))
def r3_list_to_array_static(x):
    rows = []
    for i in range(3):
        rows.append([x * i, x + i])
    return jnp.array(rows)


@probe((2.0, 3), (-2.0, 2))
def r3_map_builtin_with_lambda(x, n):
    vals = list(map(lambda v: v * x if x > 0 else v, [1.0, 2.0, 3.0]))
    for _ in range(n):
        vals[0] = vals[0] + 1
    return vals


@probe((A(1, -2, 3),), refuse=("x",), vmap=False)
def r3_filter_builtin_traced(x):
    kept = list(filter(lambda v: v > 0, x))
    return jnp.stack(kept)


@probe((3, 2), (5, 0), (0, 1))
def r3_pow_int_traced(a, b):
    return pow(2, b) + a ** 2, abs(-a)


@probe((7.5, 2.0), (-7.5, 2.0))
def r3_divmod_float(a, b):
    q, r = divmod(a, b)
    return q, r


@probe((2.0,), (-2.0,))
def r3_enumerate_reversed_list(x):
    ws = [1.0, 2.0, 3.0]
    for i, w in enumerate(reversed(ws)):
        if x * w > i:
            x = x + w
    return x


@probe((A(1, 2), A(3, 4)))
def r3_zip_star_transpose(a, b):
    pairs = [(a[0], b[0]), (a[1], b[1])]
    firsts, seconds = zip(*pairs)
    total = 0.0
    for f, s in zip(firsts, seconds):
        if f < s:
            total = total + s - f
    return total


@probe((1.0, 3), (1.0, 0))
def r3_loop_modifies_list_it_iterates(x, n):
    items = [1.0, 2.0]
    for v in items:
        if len(items) < 4:
            items.append(v * 10)
        x = x + v
    return x * n


@probe((1.0, 4), (1.0, 0))
def r3_iterator_next(x, n):
    it = iter([1.0, 2.0, 3.0])
    first = next(it)
    for _ in range(n):
        x = x + first
    return x, next(it)


@probe((2.0,), (-2.0,))
def r3_complex_numbers(x):
    z = x + 1j * x
    if z.real > 0:
        z = z * 1j
    return abs(z), z.imag


@probe((2.0,), (-2.0,))
def r3_try_except_zero_division_python(x):
    vals = [1, 0, 2]
    acc = x
    for v in vals:
        try:
            acc = acc + 1 / v
        except ZeroDivisionError:
            acc = acc - 1
    if acc > 3:
        acc = acc * 2
    return acc


@probe((2.0, 3), (2.0, 0))
def r3_aug_assign_attribute_in_traced_loop(x, n):
    ns = types.SimpleNamespace(total=0.0, log=[])
    for i in range(n):
        ns.total += x * i
    return ns.total


@probe((A(1, 2, 3),), (A(3, 2, 1),))
def r3_enumerate_break_return_index(x):
    for i, v in enumerate(x):
        if v > 2:
            return i, v
    return -1, x[0]


@probe((3, 2.0), (0, 2.0))
def r3_range_traced_step_negative(n, x):
    for i in range(n, 0, -1):
        x = x * i
    return x


# =========================================================================================
# Fourth round: Python idioms under traced values
# =========================================================================================

@probe((A(3, 1, 2),), (A(-1, -5, -2),))
def r4_best_starts_none(x):
    best = None
    for v in x:
        if best is None or v > best:
            best = v
    return best


@probe((A(1, 2, 4),), (A(4, 2, 1),))
def r4_previous_starts_none(x):
    prev = None
    total = 0.0
    for v in x:
        if prev is not None:
            total = total + (v - prev)
        prev = v
    return total


@probe((3.0,), (0.5,))
def r4_int_carry_becomes_float(x):
    k = 0
    while x > 1:
        x = x / 2
        k += 0.5
    return k


@probe((2.0, 3), (2.0, 0))
def r4_bool_carry_becomes_int(x, n):
    flag = False
    for i in range(n):
        flag = flag + 1
    return flag, x


@probe((A(1, 2, 3),), (A(0, 0, 3),))
def r4_dict_get_counter(x):
    counts = {}
    for k in ("a", "b", "a"):
        counts[k] = counts.get(k, 0) + x[0]
    if counts["a"] > 1:
        counts["b"] = counts["b"] * 10
    return counts


@probe((-2.0,), (3.0,))
def r4_max_with_int(x):
    return max(x, 0), min(x, 1), abs(x) if x < 0 else x


@probe((np.arange(6, dtype=np.float32).reshape(2, 3),))
def r4_sum_len_of_2d(x):
    s = sum(x)
    return s, len(x), any(x[0]), all(x[1])


@probe((12, 4.0), (3, 4.0), (0, 4.0))
def r4_range_min_traced(n, x):
    for i in range(0, min(n, 10), 2):
        x = x + i
    return x


@probe((F(2.3456),), (F(-1.2345),))
def r4_round_digits_traced(x):
    return round(x, 2), math.isclose(x, 2.3456, rel_tol=1e-3)


@probe((2.0,), (0.0,))
def r4_not_and_bool_of_float(x):
    a = not x
    if x:
        b = 1
    else:
        b = 2
    return a, b, bool(x)


@probe((5,), (0,))
def r4_while_int_truthiness(n):
    s = 0
    while n:
        s += n
        n -= 1
    return s


@probe((2.0, 4), (-2.0, 4))
def r4_try_continue_in_loop(x, n):
    s = 0.0
    for i in range(n):
        try:
            if i == 1:
                raise KeyError(i)
            s = s + x * i
        except KeyError:
            continue
    return s


@probe((2.0, 3), (2.0, 0), (-2.0, 3))
def r4_nested_helper_returns_early(x, n):
    for i in range(n):
        x = _helper_early(x, i)
    return x


def _helper_early(v, i):
    for k in range(3):
        if v * k > 5:
            return v - k
    if v < 0:
        return v + i
    return v * 2


@probe((3, 1.0), refuse=("n",), vmap=False)
def r4_arange_traced_length(n, x):
    return (jnp.arange(n) * x).sum()


@probe((2.0, 4), (-2.0, 4))
def r4_where_on_loop_index(x, n):
    for i in range(n):
        x = jnp.where(i % 2 == 0, x + 1, x * 2)
    return x


@probe((2.0,), (-2.0,))
def r4_mixed_dtype_outputs(x):
    count = 0
    flag = False
    if x > 0:
        count = 3
        flag = True
        x = x * 2
    return x, count, flag


@probe((2.0,), (-2.0,))
def r4_int_or_float_branches(x):
    if x > 0:
        y = 1
    else:
        y = 2.5
    return y


@probe((2.0, 3.0), (-2.0, 0.5))
def r4_loop_over_traced_params(a, b):
    x = 1.0
    for p in [a, b, a * b]:
        if p > 1:
            x = x * p
    return x


@probe((2.0,), (-2.0,))
def r4_return_none_all_paths(x):
    if x > 0:
        print("pos")
    return None


@probe((2.0, 5), (-2.0, 5))
def r4_bare_return_in_loop(x, n):
    for i in range(n):
        if x * i > 5:
            return
    return


@probe((2.0,), (-2.0,))
def r4_nested_list_write_in_branch(x):
    grid = [[x, 0.0], [0.0, x]]
    if x > 0:
        grid[0][1] = x * 5
    return grid


@probe((0.5, 10), (5.0, 10))
def r4_while_true_break_continue(x, n):
    i = 0
    while True:
        i += 1
        if i > n:
            break
        if x * i < 2:
            continue
        x = x - 0.5
    return x, i


@probe((5, 2, 1.0), (2, 5, 1.0))
def r4_empty_range_traced(a, b, x):
    for i in range(a, b):
        x = x * 2
    return x


@probe((2.0,), (-2.0,))
def r4_heterogeneous_tuple_loop(x):
    for c in (1, 2.5, 3):
        if x > c:
            x = x - c
    return x


@probe((3,), (7,))
def r4_list_comprehension_static_then_sum(n):
    xs = [i * n for i in range(4)]
    total = 0
    for v in xs[1:3]:
        if v > 5:
            total = total + v
    return total


@probe((1.0, 2.0, 3.0), (3.0, 2.0, 1.0))
def r4_chained_comparison_three(a, b, c):
    if a < b < c:
        return 1
    if a > b > c:
        return -1
    return 0


@probe((2,), (5,))
def r4_membership_in_tuple(n):
    if n in (1, 2, 3):
        return n * 10
    if n not in [4, 6]:
        return n
    return -n


@probe((4,), (1,), (3,))
def r4_complex_boolean(n):
    if n % 2 == 0 and n > 2 or n == 1:
        return 1
    return 0


@probe((2.0,), (-2.0,))
def r4_is_not_none_ternary(x):
    default = None
    y = default if default is not None else x * 2
    if y > 0:
        y = y + 1
    return y


@probe((A(1, 2, 3), A(2, 2, 2)))
def r4_rows_of_pairs_array(a, b):
    pairs = jnp.stack([a, b], axis=1)
    total = 0.0
    for p, q in pairs:
        if p < q:
            total = total + q
    return total


@probe((2.0,), (-2.0,))
def r4_loop_over_linspace(x):
    for t in jnp.linspace(0.0, 1.0, 5):
        if x > t:
            x = x - t
    return x


@probe((2.0, 3), (2.0, 0))
def r4_while_python_list_len_bound(x, n):
    ws = [0.5, 1.5, 2.5]
    i = 0
    while i < len(ws):
        if x > ws[i]:
            x = x + n
        i += 1
    return x


@probe((2.0,), (-2.0,))
def r4_match_in_loop_with_return(x):
    for mode in ("a", "b", "c"):
        match mode:
            case "a":
                x = x + 1
            case "b":
                if x > 2:
                    return x
            case _:
                x = x * 3
    return x


@probe((1.0, 3), (1.0, 0))
def r4_function_defined_in_loop_closes_over_carry(x, n):
    acc = 0.0
    for i in range(n):
        def f(v):
            return v + acc
        acc = f(x)
    return acc


@probe((2.0,), (-2.0,))
def r4_suppressing_context_manager(x):
    y = x
    with contextlib.suppress(ZeroDivisionError):
        if x > 0:
            y = x * 2
        z = 1 / 0
        y = z
    return y


@probe((2.0, 4), (2.0, 0))
def r4_generator_function_consumed(x, n):
    def gen():
        for i in range(3):
            yield x * i
    total = 0.0
    for v in gen():
        total = total + v
    for _ in range(n):
        total = total + 1
    return total


@probe((A(1, 2, 3),), (A(3, 2, 1),))
def r4_index_of_max_python_loop(x):
    idx = 0
    for i in range(1, len(x)):
        if x[i] > x[idx]:
            idx = i
    return idx, x[idx]


@probe((2.0,), (-2.0,))
def r4_exception_in_both_branches_caught(x):
    try:
        if x > 0:
            raise ValueError("pos")
        else:
            raise TypeError("neg")
    except ValueError:
        return 1
    except TypeError:
        return 2


@probe((2.0, 3), (0.5, 3))
def r4_finally_with_return_in_loop(x, n):
    hits = 0
    for i in range(n):
        try:
            if x * i > 3:
                return x, hits
        finally:
            hits += 1
    return -x, hits


@probe((2.0,), (-2.0,))
def r4_return_in_with_nested_if(x):
    with contextlib.nullcontext():
        if x > 0:
            if x > 1:
                return x * 2
            return x
        else:
            y = x - 1
    return y


@probe((2.0,), (-2.0,))
def r4_return_inside_try_except(x):
    try:
        if x > 0:
            return x + 1
        y = x - 1
    except ValueError:
        y = 0.0
    return y


@probe((2.0, 3), (-2.0, 3), (2.0, 0))
def r4_return_in_try_in_while(x, n):
    i = 0
    while i < n:
        try:
            if x > 1:
                return x * i
        finally:
            i += 1
    return -x


# =========================================================================================
# Fifth round: exits from try/with, effects in branches
# =========================================================================================

@probe((2.0,), (-2.0,), vmap=False, xfail=(
    "a `return` in `try` under a traced `if` is lowered to `retval = out`; the staged `if` "
    "gives `retval` as a new list, so the `finally`'s `out.append` no longer reaches the "
    "returned object (Python returns the one list, appended to): autoflow refuses with "
    "'returns values that differ' instead"))
def r5_finally_mutates_returned_list(x):
    out = [x]
    try:
        if x > 0:
            return out
    finally:
        out.append(x * 10)
    return out


@probe((2.0,), (-2.0,))
def r5_finally_rebinds_after_return_value(x):
    y = x * 2
    try:
        if x > 0:
            return y
        y = y + 1
    finally:
        y = 0.0
    return y


@probe((2.0,), (-2.0,), (0.0,))
def r5_return_in_except_handler(x):
    try:
        if x < 0:
            raise ValueError("neg")
        y = x + 1
    except ValueError:
        if x < -1:
            return -100.0
        y = 0.0
    return y


@probe((2.0,), (-2.0,))
def r5_return_in_try_else(x):
    try:
        y = x * 2
    except ValueError:
        y = 0.0
    else:
        if y > 1:
            return y + 1
    return y


@probe((2.0,), (10.0,))
def r5_return_in_with_in_while_true(x):
    while True:
        with contextlib.nullcontext():
            if x > 5:
                return x
            x = x * 2


@probe((2.0, 6), (0.5, 6), (2.0, 0))
def r5_break_and_return_in_with(x, n):
    for i in range(n):
        with contextlib.nullcontext():
            if x > 100:
                return x, i
            if x > 10:
                break
            x = x * 3
    return -x, n


@probe((2.0, 5), (-2.0, 5), (2.0, 0))
def r5_try_finally_break_traced_loop(x, n):
    done = 0
    for i in range(n):
        try:
            if x * i > 4:
                break
        finally:
            done = done + 1
    return done


@probe((2.0,), raises=[((-2.0,), ValueError)], vmap=False)
def r5_raise_through_finally(x):
    log = []
    try:
        if x < 0:
            raise ValueError("negative")
        y = x
    finally:
        log.append(1)
    return y, len(log)


@probe((2.0,), (-2.0,))
def r5_nested_try_in_with_in_loop(x):
    total = 0.0
    for i in range(3):
        with contextlib.nullcontext():
            try:
                if x * i > 3:
                    return total
                total = total + x
            finally:
                total = total + 0.5
    return total


@probe((2.0, 3), (-2.0, 3))
def r5_method_counter_in_while(x, n):
    c = _Counter()
    return c.run(x, n), c.count


class _Counter:
    def __init__(self):
        self.count = 0

    def run(self, x, n):
        i = 0
        while i < n:
            if x > 0:
                self.count += 1
            x = x - 1
            i += 1
        return x


@probe((1.0, 2.0), (3.0, -1.0))
def r5_list_state_while(a, b):
    lst = [a, b]
    k = 0
    while lst[0] < 10 and k < 5:
        lst = [lst[0] + 2, lst[1] * 2]
        k += 1
    return lst


@probe((0.5,), (-0.5,))
def r5_loop_over_tuple_of_functions(x):
    for f in (jnp.sin, jnp.cos, jnp.tanh):
        if x > 0:
            x = f(x)
        else:
            x = f(-x) - 1
    return x


@probe((2.0,), (-2.0,))
def r5_immediately_called_lambda_condition(x):
    if (lambda v: v > 0)(x):
        return x
    return -x


@probe((2.0,), refuse=("log",), vmap=False)
def r5_ternary_branch_side_effects(x):
    log = []

    def a():
        log.append("a")
        return x

    def b():
        log.append("b")
        return -x

    y = a() if x > 0 else b()
    return y, len(log)


@probe((2.0,), refuse=("log",), vmap=False)
def r5_ternary_inline_side_effects(x):
    log = []
    y = (log.append(1) or x) if x > 0 else (log.append(2) or -x)
    return y, len(log)


@probe((2.0,), (-2.0,), vmap=False)
def r5_ternary_calls_share_a_list(x):
    log = []

    def a():
        log.append(x)
        return x

    def b():
        log.append(-x * 3)
        return -x

    y = a() if x > 0 else b()
    return y, log


@probe((2.0,), (-2.0,))
def r5_if_temp_variable_in_loop(x):
    total = 0.0
    for i in range(3):
        if x > i:
            t = x - i
            total = total + t
    return total


@probe((A(1, -2, 3),), (A(-1, 2, -3),))
def r5_enumerate_traced_array_start(x):
    acc = 0.0
    for k, v in enumerate(x, 1):
        if v > 0:
            acc = acc + k * v
    return acc


@probe((2.0,), (-2.0,))
def r5_dict_items_modify_values(x):
    d = {"a": x, "b": -x}
    for k, v in d.items():
        if v > 0:
            d[k] = v * 10
    return d


@probe((3, 1.0), (0, 1.0), (5, -1.0))
def r5_return_different_dtypes_in_loop(n, x):
    for i in range(n):
        if x * i > 2:
            return i
        if x * i < -3:
            return x
    return 0.5


@probe((A(1, 2),), refuse=("x",), vmap=False)
def r5_numpy_of_traced(x):
    if np.asarray(x)[0] > 0:
        return x
    return -x


@probe((2.0,), (-2.0,))
def r5_while_in_except(x):
    try:
        if x < 0:
            raise ValueError
        y = x
    except ValueError:
        y = x
        while y < 0:
            y = y + 1.5
    return y


@probe((2.0, 4), (-2.0, 4))
def r5_for_else_return_traced(x, n):
    for i in range(n):
        if x * i > 5:
            break
    else:
        return -1.0
    return x


@probe((4, 3.0), (1, 3.0))
def r5_while_break_else_traced(n, x):
    i = 0
    while i < n:
        if x * i > 7:
            break
        i += 1
    else:
        x = x + 100
    return x, i


# =========================================================================================
# Sixth round: more Catalyst / Paddle / Numba / user-report shapes
# =========================================================================================

@probe((2.0, 3), (-2.0, 3))
def r6_lax_cond_inside_traced_loop(x, n):
    for i in range(n):
        x = jax.lax.cond(x > 0, lambda v: v - i, lambda v: v + i, x)
        if x > 5:
            x = x / 2
    return x


@probe((2.0,), (-2.0,))
def r6_mixed_tuple_carry(x):
    state = (0, x, False)
    while state[0] < 4:
        k, v, flag = state
        if v > 3:
            flag = True
        state = (k + 1, v * 1.5, flag)
    return state


def _is_small(v):
    return abs(v) < 0.1


@probe((3.0,), (0.05,))
def r6_while_test_calls_function(x):
    n = 0
    while not _is_small(x):
        x = x / 3
        n += 1
    return x, n


@probe((10, 3, 1.0), (10, 4, 1.0), (3, 1, 1.0))
def r6_range_traced_step(n, s, x):
    for i in range(0, n, s):
        x = x + i
    return x


@probe((2.0, True), (2.0, False))
def r6_ternary_on_bool_flag(x, flag):
    x = x + 1 if flag else x
    return x * 2


@probe((2.0, 3), refuse=("out",), vmap=False)
def r6_append_in_traced_while(x, n):
    out = []
    i = 0
    while i < n:
        out.append(x * i)
        i += 1
    return jnp.stack(out)


@probe((F(2.0),), (F(-2.0),))
def r6_isinstance_tuple_return(x):
    pair = (x, x * 2) if isinstance(x, float) else [x, x * 3]
    if isinstance(pair, tuple):
        return pair[0]
    return pair[1]


@probe((2.0,), (-2.0,))
def r6_return_list_of_arrays(x):
    if x > 0:
        return [x, x * 2]
    return [-x, x]


@probe((2.0, 5), (0.5, 5))
def r6_break_inside_with(x, n):
    for i in range(n):
        with contextlib.nullcontext():
            x = x * 2
            if x > 10:
                break
    return x


@probe((3, 1.0), (0, 1.0))
def r6_loop_variable_reassigned(n, x):
    s = 0
    for i in range(n):
        i = i * 2
        s = s + i
    return s * x


@probe((2.0, 10), (0.1, 10), (2.0, 0))
def r6_while_two_breaks(x, n):
    i = 0
    while i < n:
        x = x * 1.7
        if x > 50:
            break
        if x < 0.2:
            break
        i += 1
    return x, i


@probe((6, 1.0), (3, 1.0))
def r6_continue_in_while_else(n, x):
    i = 0
    while i < n:
        i += 1
        if i % 2 == 0:
            continue
        x = x + i
    else:
        x = x * 2
    return x


_TABLE = (1.0, 4.0, 9.0, 16.0)


@probe((2,), (0,), (3,))
def r6_global_table_traced_index(i):
    total = 0.0
    for k in range(i + 1):
        total = total + _TABLE[k]
    return total, _TABLE[i]


@probe((A(1, 2, 3, 4),))
def r6_iterate_reversed_slice(x):
    acc = 0.0
    for v in x[::-1]:
        acc = acc * 10 + v
    return acc


@probe((A(1, 2, 3), A(4, 5, 6)))
def r6_enumerate_zip(a, b):
    acc = 0.0
    for i, (u, v) in enumerate(zip(a, b)):
        if i % 2 == 0:
            acc = acc + u * v
    return acc


@probe((1.0, 0.1), (2.0, 0.5))
def r6_stop_when_loss_increases(w, lr):
    prev = 1e9
    loss = (w - 3.0) ** 2
    steps = 0
    while loss < prev and loss > 1e-4 and steps < 100:
        prev = loss
        w = w - lr * 2 * (w - 3.0)
        loss = (w - 3.0) ** 2
        steps += 1
    return w, steps


@probe((2.0,), (100.0,))
def r6_converged_flag(x):
    converged = False
    for it in range(30):
        nx = 0.5 * (x + 2.0 / x)
        if abs(nx - x) < 1e-5:
            converged = True
            break
        x = nx
    return x, converged


@probe((2.0, 3), (-2.0, 3))
def r6_pytree_dict_update_in_loop(x, n):
    params = {"w": jnp.ones(2) * x, "b": x}
    for i in range(n):
        if params["b"] > 0:
            params = {"w": params["w"] * 0.5, "b": params["b"] - 1}
        else:
            params = {"w": params["w"] + 1, "b": params["b"]}
    return params


@probe((0,), (7,))
def r6_random_walk_until_boundary(seed):
    key = jax.random.PRNGKey(seed)
    pos = 0
    steps = 0
    while abs(pos) < 3 and steps < 100:
        key, sub = jax.random.split(key)
        step = jnp.where(jax.random.bernoulli(sub), 1, -1)
        pos = pos + step
        steps += 1
    return pos, steps


@probe((A(1, 5, 2),), (A(3, 1, 0),))
def r6_at_add_with_argmax(x):
    acc = jnp.zeros(3)
    for _ in range(3):
        i = jnp.argmax(x)
        acc = acc.at[i].add(x[i])
        x = x.at[i].set(-1.0)
    return acc


@probe((np.float32([[2, 1], [1, 3]]),))
def r6_power_iteration(m):
    v = jnp.ones(2) / jnp.sqrt(2.0)
    lam = 0.0
    for _ in range(100):
        w = m @ v
        new_lam = jnp.linalg.norm(w)
        v = w / new_lam
        if abs(new_lam - lam) < 1e-6:
            break
        lam = new_lam
    return lam


@probe((5,), (0,), (1,))
def r6_factorial_while(n):
    acc = 1
    while n > 1:
        acc = acc * n
        n -= 1
    return acc


@probe((2.0, 1), (2.0, 0), (2.0, 2))
def r6_list_of_arrays_traced_index(x, i):
    mats = [jnp.eye(2) * x, jnp.ones((2, 2)), jnp.zeros((2, 2))]
    m = mats[i]
    if m.sum() > 2:
        m = m * 2
    return m


@probe((2.0,), (-2.0,))
def r6_return_from_nested_function_in_loop(x):
    def pick(v, k):
        for j in range(3):
            if v * j > k:
                return j
        return -1

    total = 0
    for k in range(3):
        total = total + pick(x, k)
    return total


@probe((A(1, 2, 3),), (A(-3, 2, 1),))
def r6_sum_of_tuples(x):
    pairs = [(x[0], 1), (x[1], 2), (x[2], 3)]
    s = 0.0
    for v, w in pairs:
        s = s + v * w if v > 0 else s
    return s


@probe((4, 2.0), (0, 2.0))
def r6_string_in_static_loop(n, x):
    name = ""
    for c in "abc":
        name = name + c
        if x > 1:
            x = x * 2
    for _ in range(n):
        x = x + len(name)
    return x


@probe((2.0,), (-2.0,))
def r6_chained_method_on_branch_result(x):
    v = (jnp.ones(3) * x if x > 0 else jnp.zeros(3)).sum()
    return v


@probe((3.0, 4), (3.0, 0))
def r6_shape_from_static_in_traced_loop(x, n):
    buf = jnp.zeros((3, 2))
    for i in range(n):
        row = jnp.full((2,), x * i)
        buf = buf.at[i % 3].set(row)
    return buf


@probe((2.0, 3), (-2.0, 3))
def r6_walrus_in_if(x, n):
    total = 0.0
    for i in range(n):
        if (y := x * i) > 2:
            total = total + y
    return total


@probe((1.0, 2.0), (2.0, 1.0))
def r6_swap_via_tuple_in_branch(a, b):
    if a < b:
        a, b = b, a
    return a - b


@probe((2.0,), (-2.0,))
def r6_nested_ternary_in_loop_accumulate(x):
    acc = 0.0
    for i in range(4):
        acc += x if i % 2 == 0 else (-x if x > 0 else x * 2)
    return acc


# =========================================================================================
# Seventh round: `return` inside `try`/`with` under traced conditions and loops
# =========================================================================================

@probe((2.0, 6), (0.1, 6), (2.0, 0))
def r7_return_in_with_traced_while(x, n):
    i = 0
    while i < n:
        with contextlib.nullcontext():
            x = x * 2
            if x > 20:
                return x, i
        i += 1
    return -x, i


@probe((2.0, 5), (-2.0, 5), (2.0, 0))
def r7_finally_counter_traced_for(x, n):
    count = 0
    for i in range(n):
        try:
            if x * i > 3:
                return count, i
        finally:
            count = count + 1
    return count, -1


@probe((2.0,), (-2.0,), (0.5,))
def r7_nested_withs_return(x):
    with contextlib.nullcontext():
        with contextlib.nullcontext():
            if x > 1:
                return x * 10
        y = x + 1
    return y


@probe((2.0, 3), (-2.0, 3))
def r7_with_for_with_if_return(x, n):
    with contextlib.nullcontext():
        for i in range(n):
            with contextlib.nullcontext():
                if x * i > 3:
                    return i
    return -1


@probe((2.0, 4), (-2.0, 4))
def r7_traced_raise_caught_in_loop(x, n):
    hits = 0
    for i in range(n):
        try:
            if x * i > 3:
                raise ValueError("big")
            hits = hits + 1
        except ValueError:
            hits = hits + 10
    return hits


@probe((2.0, 4), (-2.0, 4))
def r7_return_in_except_in_loop(x, n):
    for i in range(n):
        try:
            if x * i > 3:
                raise KeyError(i)
        except KeyError:
            return i
    return -1


@probe((2.0,), (-2.0,))
def r7_return_in_try_and_except_else(x):
    try:
        if x > 0:
            return x
    except ValueError:
        return 0.0
    else:
        y = -x
    finally:
        pass
    return y


@probe((2.0,), (-2.0,))
def r7_return_value_computed_in_with(x):
    with jax.named_scope("scope"):
        y = x * 3
        if y > 3:
            z = y - 3
            return z
        w = y + 3
    return w


@probe((2.0, 3), (-2.0, 3))
def r7_with_in_helper_called_in_loop(x, n):
    for _ in range(n):
        x = _with_helper(x)
    return x


def _with_helper(v):
    with contextlib.nullcontext():
        if v > 1:
            return v / 2
        if v < -1:
            return v + 3
    return v * 4


@probe((2.0,), (-2.0,))
def r7_try_finally_both_return_paths_value(x):
    out = 0.0
    try:
        if x > 0:
            out = x
            return out * 2
        else:
            out = -x
            return out * 3
    finally:
        out = 100.0


# =========================================================================================
# Eighth round: closures, builtins and integer tricks (Numba style)
# =========================================================================================

def _make_counter():
    count = 0

    def bump(v):
        nonlocal count
        count += 1
        return v * 2

    def read():
        return count

    return bump, read


@probe((1.0, 3), refuse=("count",), vmap=False)
def r8_counter_factory_in_traced_loop(x, n):
    bump, read = _make_counter()
    for _ in range(3):
        x = bump(x)
    for _ in range(n):
        x = x + 1
    return x, read()


@probe((2.0,), (-2.0,))
def r8_three_level_closure(x):
    a = x * 2

    def outer(v):
        b = v + a

        def inner(w):
            if w > b:
                return w - b
            return b - w

        return inner(v * 3)

    return outer(x)


@probe((3, 1.0), refuse=("f",), vmap=False)
def r8_lambda_made_in_traced_loop_used_after(n, x):
    f = lambda v: v  # noqa: E731
    for i in range(n):
        f = lambda v, i=i: v + i  # noqa: E731
    return f(x)


@probe((3, 1.0), (0, 1.0))
def r8_lambda_made_in_static_loop_used_after(n, x):
    f = None
    for i in range(3):
        f = lambda v, i=i: v + i  # noqa: E731
    for _ in range(n):
        x = f(x)
    return x


@probe((3,), refuse=(), vmap=False)
def r8_list_of_traced_range(n):
    return jnp.asarray(list(range(n)))


@probe((2.0,), (-2.0,))
def r8_enumerate_dict(x):
    d = {"a": 1.0, "b": 2.0}
    for i, k in enumerate(d):
        if x > d[k]:
            x = x - i
    return x


@probe((2.0,), (-2.0,))
def r8_map_two_iterables(x):
    vals = list(map(lambda a, b: a * b + x, [1.0, 2.0], [3.0, 4.0]))
    if vals[0] > vals[1] - 5:
        return vals[0]
    return vals[1]


@probe((A(1, 2, 3),), (A(1, -2, 3),))
def r8_all_generator_static_list(x):
    if all(v > 0 for v in [x[0], x[1], x[2]]):
        return min(v for v in [x[0], x[1], x[2]])
    return max(x[0], x[1])


@probe((2.0,), (-2.0,))
def r8_getattr_hasattr(x):
    ns = types.SimpleNamespace(scale=3.0)
    s = getattr(ns, "scale", 1.0) if hasattr(ns, "scale") else 0.0
    off = getattr(ns, "offset", 0.5)
    if x > 0:
        return x * s + off
    return x


@probe((2.0,), (-2.0,))
def r8_callable_and_type_checks(x):
    f = jnp.sin
    if callable(f) and type(x).__name__ != "str":
        y = f(x)
    else:
        y = x
    if y > 0:
        y = y * 2
    return y


@probe((2.0,), (-2.0,))
def r8_next_with_default(x):
    it = iter([])
    first = next(it, 5.0)
    if x > 0:
        x = x + first
    return x


@probe((-7, 3), (7, -3), (-8, 4))
def r8_int_mod_floor_semantics(a, b):
    return a % b, a // b, -a % b


@probe((13,), (0,), (255,))
def r8_popcount_bit_ops(n):
    count = 0
    while n > 0:
        count += n & 1
        n = n >> 1
    return count


@probe((-5,), (5,))
def r8_abs_int_and_max_mix(n):
    return abs(n), max(n, 0, -3), min(n, 2)


@probe((True, False), (True, True), (False, False))
def r8_not_of_and(a, b):
    if not (a and b):
        return 1
    return 2


@probe((2.5,), (-2.5,))
def r8_float_floor_div_mod(x):
    return x // 0.5, x % 0.75


@probe((2.0, 3), (2.0, 0))
def r8_zip_unequal_static_lengths(x, n):
    total = 0.0
    for a, b in zip([1.0, 2.0, 3.0], [10.0, 20.0]):
        if x * a > 3:
            total = total + b
    for _ in range(n):
        total = total + 1
    return total


@probe((2.0,), (-2.0,))
def r8_default_arg_captures_value(x):
    k = 3.0

    def f(v, k=k):
        if v > 0:
            return v * k
        return v

    k = 100.0
    return f(x), k


# =========================================================================================
# Ninth round: loops and state, traced bounds everywhere
# =========================================================================================

@probe((3, 4, 1.0), (0, 4, 1.0), (3, 0, 1.0))
def r9_inner_variable_used_after_outer(a, b, x):
    last = -1
    for i in range(a):
        for j in range(b):
            last = i * 10 + j
            if j > i:
                break
    return last, x


@probe((2.0, 5), (-2.0, 5))
def r9_dict_augassign_traced_while(x, n):
    d = {"s": 0.0, "k": 0}
    while d["k"] < n:
        d["s"] += x
        d["k"] += 1
    return d


@probe((2.0, 3), (2.0, 0))
def r9_del_loop_variable_after(x, n):
    for i in range(3):
        x = x + i
    del i
    for _ in range(n):
        x = x * 2
    return x


@probe((A(1, 2, 3), 2), (A(1, 2, 3), 0))
def r9_traced_trip_indexing(x, n):
    s = 0.0
    for i in range(n):
        s = s + x[i] * x[i + 1]
    return s


@probe((A(4, 3, 2, 1),), (A(1, 2, 3, 4),))
def r9_while_index_with_array_test(x):
    i = 0
    while i < 3 and x[i] > x[i + 1]:
        i += 1
    return i, x[i]


@probe((2.0, 3), (-2.0, 3))
def r9_nested_function_loops_both_levels(x, n):
    def inner(v, m):
        for k in range(m):
            if v > k:
                v = v - 1
        return v

    for i in range(n):
        x = inner(x, i)
    return x


@probe((1.0, 3), (1.0, 0))
def r9_loop_carries_python_int_and_array(x, n):
    k = 0
    arr = jnp.zeros(3)
    for i in range(n):
        arr = arr.at[k].set(x * i)
        k = (k + 1) % 3
    return arr, k


@probe((3.0,), (8.0,))
def r9_while_with_else_and_return(x):
    i = 0
    while i < 3:
        if x < 1:
            return i
        x = x / 2
        i += 1
    else:
        return -1


@probe((A(1, 2, 3),), (A(3, 2, 1),))
def r9_enumerate_early_return_tuple(x):
    for i, v in enumerate(x):
        if v == 2:
            return (i, v)
    return (-1, x[0])


@probe((2.0, 4), (0.5, 4), (2.0, 0))
def r9_for_break_else_traced_return(x, n):
    for i in range(n):
        x = x * x
        if x > 100:
            break
    else:
        return x, -1
    return x, i


@probe((2.0,), (-2.0,))
def r9_global_tuple_loop_with_if(x):
    for w in _TABLE:
        if x * w > 10:
            x = x - w
        elif x * w < -10:
            x = x + w
    return x


@probe((0.5, 20), (2.0, 20))
def r9_logistic_map_until_escape(r, n):
    x = 0.3
    i = 0
    while i < n and 0 <= x <= 1:
        x = r * 4 * x * (1 - x) + 0.01
        i += 1
    return i


@probe((2.0, 3), (-2.0, 3))
def r9_if_chain_in_loop_with_continue(x, n):
    s = 0.0
    for i in range(n):
        if x > 3:
            continue
        elif x > 1:
            s = s + 1
        elif x > -1:
            continue
        else:
            s = s - 1
        x = x + 0.5
    return s, x


# =========================================================================================
# the runner
# =========================================================================================

@pytest.mark.parametrize("fn, cases, opts", PROGRAMS)
def test_program_matches_python(fn, cases, opts):
    static = opts["static"]
    if opts["oracle"] is not None:
        for case in cases:
            want = opts["oracle"](*case)
            assert_same(autoflow.convert(fn)(*case), want, "convert (concrete)")
            assert_same(autoflow.jit(fn)(*case), want, "jit (traced)")
        return
    if opts["refuse"] is not None:
        # autoflow's own error (a ConversionError, or a JAX tracing error re-issued as an
        # AutoflowError), naming the variables and pointing at the user's line
        exc = check_error(fn, *cases[0], names=opts["refuse"], static_argnums=static,
                          error=autoflow.AutoflowError)
        text = str(exc)
        for name in opts["refuse"]:
            assert f"`{name}" in text, text
        path = inspect.getsourcefile(fn)
        hits = [int(m) for m in re.findall(re.escape(path) + r":(\d+)", text)]
        assert hits, text  # (a line of the program or of a helper it calls)
        return
    for case in cases:
        check(fn, *case, static_argnums=static, concrete=opts["concrete"], grad=opts["grad"])
    for case, exc in opts["raises"]:
        check(fn, *case, static_argnums=static, expect_raise=exc, concrete=opts["concrete"])
    if not static and all(isinstance(a, (int, float, np.ndarray, np.generic, jax.Array)) for a in cases[0]):
        # jax.jit of autoflow.convert, as a user writes it.
        want = fn(*cases[0])
        leaves = jax.tree_util.tree_leaves(want)
        if all(isinstance(v, (int, float, np.ndarray, np.generic, jax.Array)) for v in leaves):
            got = jax.jit(autoflow.convert(fn))(*cases[0])
            assert_same(got, want, "jax.jit(autoflow.convert(f))")
    if opts["vmap"] and len(cases) > 1:
        check(fn, *cases[0], concrete=False, traced=False, vmap=cases[1:], static_argnums=static)
