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
import math
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from tests.semantics.oracle import assert_same, check, check_error

PROGRAMS = []


def probe(*cases, vmap=True, static=(), raises=(), refuse=None, xfail=None, concrete=True,
          oracle=None):
    """Register ``fn`` with argument tuples ``cases``.

    ``raises``: ``[(args, ExceptionType)]`` on which Python raises. ``refuse``: names the
    ConversionError must mention when traced (the program cannot be staged). ``oracle``:
    where plain JAX refuses the program even eagerly (``if`` inside a ``lax.scan`` body),
    the same algorithm written in plain Python gives the expected values.
    """

    def deco(fn):
        marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
        opts = dict(vmap=vmap, static=tuple(static), raises=list(raises), refuse=refuse,
                    concrete=concrete, oracle=oracle)
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
        check_error(fn, *cases[0], names=opts["refuse"], static_argnums=static)
        return
    for case in cases:
        check(fn, *case, static_argnums=static, concrete=opts["concrete"])
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
