"""Lists that already hold items, dict keys first set in a loop, staged `raise`
checks under vmap, and `try`/`with` exits: each against eager Python."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow

from .oracle import F, I, check


def _equations(fn, *args):
    return len(jax.make_jaxpr(autoflow.convert(fn))(*args).jaxpr.eqns)


# ---- lists that already hold items -----------------------------------------------------------

def append_after_initial(x):
    ys = [x, x + 1.0]
    for i in range(40):
        x = x * 1.01
        ys.append(x)
    return jnp.stack(ys)


def test_append_after_initial_items_stays_rolled():
    check(append_after_initial, F(1.0))
    # The loop is one scan, not 40 copies of its body (a copy is >= 1 equation).
    assert any(e.primitive.name == "scan" for e in
               jax.make_jaxpr(autoflow.convert(append_after_initial))(F(1.0)).jaxpr.eqns)


def append_reads_length(x):
    ys = [x]
    for i in range(4):
        x = x * 1.5 + len(ys)
        ys.append(x)
    return jnp.stack(ys)


def test_append_while_reading_the_list_runs_as_python():
    # The body reads the list: it cannot be a stacked output; Python's answer all the same.
    check(append_reads_length, F(1.0))


def append_reads_last(x):
    ys = [x]
    for i in range(4):
        ys.append(ys[-1] * 2.0 + x)
    return jnp.stack(ys)


def test_append_reading_last_item():
    check(append_reads_last, F(0.5))


# ---- dict keys first set inside a traced loop --------------------------------------------------

def dict_key_set_in_traced_while(x, n):
    d = {"start": x}
    i = 0
    while i < n:
        d["last"] = x * i + d["start"]
        i += 1
    return d["last"]


def test_dict_key_first_set_in_traced_while():
    check(dict_key_set_in_traced_while, F(2.0), I(3))


def dict_key_set_in_static_loop(xs):
    d = {}
    for v in xs:
        d["acc"] = v * 2.0
    return d["acc"]


def test_dict_key_first_set_in_loop_over_array():
    check(dict_key_set_in_static_loop, jnp.arange(3.0, dtype=jnp.float32))


# ---- staged raise: a check that fires only on the offending path ------------------------------

def checked_sqrt(x):
    if x < 0:
        raise ValueError(f"negative input {x}")
    return jnp.sqrt(x)


def test_raise_check_under_vmap_fires_only_for_bad_elements():
    f = jax.jit(jax.vmap(autoflow.convert(checked_sqrt)))
    good = jnp.array([1.0, 4.0, 9.0], jnp.float32)
    np.testing.assert_allclose(f(good), [1.0, 2.0, 3.0])
    with pytest.raises(Exception, match="negative input -4.0"):
        f(jnp.array([1.0, -4.0, 9.0], jnp.float32))


def test_raise_check_reraises_the_users_exception_from_autoflow_jit():
    f = autoflow.jit(checked_sqrt)
    assert float(f(4.0)) == 2.0
    with pytest.raises(ValueError, match="negative input -1.0") as info:
        f(-1.0)
    assert any("checked when the compiled code ran" in n for n in info.value.__notes__)


def nested_raise(x, y):
    if x > 0:
        if y > 0:
            raise ValueError("both positive")
        x = x + y
    return x


def test_nested_raise_checks_the_whole_path():
    f = autoflow.jit(nested_raise)
    assert float(f(1.0, -1.0)) == 0.0
    assert float(f(-1.0, 5.0)) == -1.0   # y > 0 but x <= 0: the raise is not reached
    with pytest.raises(ValueError, match="both positive"):
        f(1.0, 5.0)


def raise_in_while(x):
    n = 0
    while x > 1.0:
        x = x / 2.0
        n += 1
        if n > 50:
            raise RuntimeError("did not converge")
    return x, n


def test_raise_in_traced_while_under_vmap():
    f = jax.jit(jax.vmap(autoflow.convert(raise_in_while)))
    xs = jnp.array([3.0, 100.0, 0.5], jnp.float32)
    out = f(xs)
    expected = [raise_in_while(float(v)) for v in xs]
    np.testing.assert_allclose(out[0], [e[0] for e in expected])
    np.testing.assert_array_equal(out[1], [e[1] for e in expected])


def both_branches_raise(x):
    if x > 0:
        raise ValueError("positive")
    else:
        raise ValueError("not positive")


def test_both_branches_raise_raises_when_traced():
    with pytest.raises(ValueError):
        autoflow.jit(both_branches_raise)(1.0)
    with pytest.raises(ValueError, match="not positive"):
        autoflow.convert(both_branches_raise)(-1.0)


# ---- try / with ------------------------------------------------------------------------------

def caught_by_tuple(a, b):
    try:
        if b == 0:
            raise ZeroDivisionError("b is zero")
        r = a / b
    except (ValueError, ZeroDivisionError):
        r = a * 0.0 - 1.0
    return r


def test_raise_caught_by_tuple_clause():
    check(caught_by_tuple, F(6.0), F(3.0))
    check(caught_by_tuple, F(6.0), F(0.0))


def caught_with_else(a, b):
    out = []
    try:
        if b < 0:
            raise KeyError("neg")
        t = a + b
    except KeyError:
        t = a - b
    else:
        out.append(1)
        t = t * 2.0
    return t, len(out)


def test_caught_raise_skips_else():
    check(caught_with_else, F(2.0), F(1.0), may_refuse=["out"])  # len(out) is data-dependent
    check(caught_with_else, F(2.0), F(-1.0), traced=False)


def caught_but_other_type(a):
    try:
        if a < 0:
            raise ValueError("neg")
        return a * 2.0
    except TypeError:
        return 0.0


def test_raise_not_caught_by_the_clause_is_a_check():
    f = autoflow.jit(caught_but_other_type)
    assert float(f(2.0)) == 4.0
    with pytest.raises(ValueError, match="neg"):
        f(-2.0)


def return_in_nested_with(x, log):
    class CM:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            log.append("enter " + self.name)

        def __exit__(self, *exc):
            log.append("exit " + self.name)

    with CM("a"):
        with CM("b"):
            if x > 0:
                return x * 2.0
            y = x - 1.0
        y = y * 3.0
    return y


@pytest.mark.parametrize("x", [2.0, -2.0])
def test_return_in_nested_with(x):
    log_e, log_c = [], []
    expected = return_in_nested_with(x, log_e)
    got = autoflow.convert(return_in_nested_with)(x, log_c)
    assert float(got) == float(expected) and log_c == log_e
    log_t = _Hashable()
    got = autoflow.jit(return_in_nested_with, static_argnums=(1,))(F(x), log_t)
    np.testing.assert_allclose(got, expected)
    assert list(log_t) == ["enter a", "enter b", "exit b", "exit a"]  # traced once


class _Hashable(list):
    __hash__ = object.__hash__
    __eq__ = object.__eq__


# ---- module-level state and tracers ------------------------------------------------------------

HISTORY = []


def global_history_traced_if(x):
    if x > 0:
        HISTORY.append(1.0)
    else:
        HISTORY.append(2.0)
    return x


def test_global_list_changed_under_traced_if_is_refused_not_leaked():
    del HISTORY[:]
    with pytest.raises(autoflow.ConversionError, match="HISTORY"):
        autoflow.jit(global_history_traced_if)(1.0)
    assert HISTORY == []   # left as it was: no tracer inside
    del HISTORY[:]
    assert autoflow.convert(global_history_traced_if)(1.0) == 1.0 and HISTORY == [1.0]
