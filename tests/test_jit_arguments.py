"""Lists and dicts passed to ``autoflow.jit`` and changed in place (``autoflow._arguments``).

``jax.jit`` hands the function lists and dicts of its own, built from the leaves of the
caller's: a change made to them in place was lost, silently, where Python makes it in
the caller's objects. Each program here runs eagerly (the oracle) and through
``autoflow.jit``, twice (the second call runs the compiled program), on deep copies of
the same arguments; the arguments after the call must hold what Python left in them,
in the same objects.
"""

from __future__ import annotations

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow import ConversionError


def raised_on_a_traced_path(x, out, d):
    if x > 0:
        out[0] += x
        d["k"] = d["k"] * 2
    return x


def appended_in_a_loop(x, out):
    for i in range(3):
        out.append(x * i)
    return x


def _add(lst, v):
    lst.append(v)


def through_a_helper(x, out):
    _add(out, x * 3.0)
    return x


def nested_state(x, state):
    state["hist"].append(x)
    state["n"] += 1
    return x


def extended_by_plus(x, xs):
    xs += [x, x + 1.0]
    return x


def copied_first(x, xs):
    xs = list(xs)
    xs.append(x)
    return x + xs[0]


def straight_line(x, out, d):
    out[0] = out[0] + x
    d["k"] = d["k"] * 2
    return x


def only_read(x, xs):
    return x + xs[0]


def keyword_only(x, *, acc):
    acc["s"] = acc["s"] + x
    return x


def _leaves(tree):
    return [np.asarray(v) for v in jax.tree_util.tree_leaves(tree)]


def _same(a, b):
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b), (a, b)
    for u, v in zip(_leaves(a), _leaves(b)):
        np.testing.assert_allclose(u, v, rtol=1e-6)


CASES = [
    (raised_on_a_traced_path, (2.5, [1.0, 2.0], {"k": 3.0}), {}),
    (raised_on_a_traced_path, (-2.5, [1.0, 2.0], {"k": 3.0}), {}),
    (appended_in_a_loop, (1.5, [0.5]), {}),
    (through_a_helper, (2.0, [1.0]), {}),
    (nested_state, (2.0, {"hist": [1.0], "n": 0}), {}),
    (extended_by_plus, (2.0, [1.0]), {}),
    (copied_first, (2.0, [1.0]), {}),
    (keyword_only, (2.0,), {"acc": {"s": 1.0}}),
]


@pytest.mark.parametrize("fn, args, kwargs", CASES,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)])
def test_a_list_or_dict_argument_changed_in_place_is_written_back(fn, args, kwargs):
    want_args, want_kwargs = copy.deepcopy(args), copy.deepcopy(kwargs)
    want = fn(jnp.float32(want_args[0]), *want_args[1:], **want_kwargs)
    jitted = autoflow.jit(fn)
    for _ in range(2):  # (the second call runs the compiled program)
        got_args, got_kwargs = copy.deepcopy(args), copy.deepcopy(kwargs)
        objects = [v for v in list(got_args[1:]) + list(got_kwargs.values())]
        inner = [v for o in objects if isinstance(o, dict) for v in o.values()
                 if isinstance(v, (list, dict))]
        got = jitted(jnp.float32(got_args[0]), *got_args[1:], **got_kwargs)
        _same(got, want)
        _same(list(got_args[1:]), list(want_args[1:]))
        _same(got_kwargs, want_kwargs)
        # the caller's objects, nested ones included, are the ones changed
        assert all(a is b for a, b in zip(objects, list(got_args[1:]) + list(got_kwargs.values())))
        assert all(any(v is w for o in objects if isinstance(o, dict) for w in o.values())
                   for v in inner)


def test_items_the_call_did_not_change_stay_the_callers_objects():
    marker = np.float32(7.0)
    out, d = [1.0, marker], {"k": 3.0, "m": marker}
    autoflow.jit(straight_line)(jnp.float32(2.5), out, d)
    assert out[1] is marker and d["m"] is marker
    assert float(out[0]) == 3.5 and float(d["k"]) == 6.0


_CHANGERS = {"add": _add}


def through_a_table_of_helpers(x, out):
    _CHANGERS["add"](out, x)  # (a helper the source does not name as a global)
    return x


def test_a_change_the_source_does_not_show_is_autoflows_error():
    out = [1.0]
    with pytest.raises(ConversionError) as info:
        autoflow.jit(through_a_table_of_helpers)(jnp.float32(2.0), out)
    text = str(info.value)
    assert "`out`" in text and "test_jit_arguments.py" in text and "Return the changed" in text
    assert out == [1.0]


def test_a_function_that_changes_no_argument_is_jax_jits_own():
    # (no wrapper where nothing is written back or checked: a call costs what jax.jit's does)
    # (on a JAX without checkpointed loops a file with loops gets the wrapper anyway)
    jitted = autoflow.jit(only_read)
    assert not getattr(jitted, "_writes", False)
    assert float(jitted(jnp.float32(1.0), [2.0])) == 3.0
    assert autoflow.jit(appended_in_a_loop)._writes
    from autoflow.runtime import jax as jx

    if jx.primitives():  # (an older JAX's `eval_shape` of a wrapped function differs)
        assert autoflow.jit(appended_in_a_loop).eval_shape(jnp.float32(1.0), [0.5]).shape == ()


def set_to_none(x, d):
    d["gone"] = None  # (a change of structure alone: no leaf changes)
    return x


def test_a_change_of_structure_alone_is_written_back():
    d = {"k": 1.0}
    autoflow.jit(set_to_none)(jnp.float32(1.0), d)
    assert d == {"k": 1.0, "gone": None}


def through_each_row(x, rows):
    for row in rows:
        row.append(x)
    return x


def through_an_alias(x, out):
    kept = out
    kept.append(x * 2.0)
    return x


def keys_in_their_order(x, d):
    d["b"] = d["b"] * x
    d["z"] = x
    d["c"] = -x
    d[1] = x + 1.0
    return x


def test_changes_through_an_alias_or_a_loop_item_are_written_back():
    for fn, args in [(through_each_row, (2.0, [[0.0], [1.0]])), (through_an_alias, (2.0, [0.0]))]:
        want = copy.deepcopy(args)
        fn(*want)
        got = copy.deepcopy(args)
        autoflow.jit(fn)(jnp.float32(got[0]), *got[1:])
        _same(got[1], want[1])


def test_a_dict_keeps_its_keys_order_and_takes_keys_of_any_type():
    # (jax.jit hands the function the dict with sorted keys, and cannot sort 1 and "b")
    want, got = {"b": 1.0, "a": 3.0}, {"b": 1.0, "a": 3.0}
    keys_in_their_order(2.0, want)
    autoflow.jit(keys_in_their_order)(jnp.float32(2.0), got)
    assert list(got) == list(want) == ["b", "a", "z", "c", 1]
    _same(list(got.values()), list(want.values()))


def appends_to_both(x, a, b):
    a.append(x)
    b.append(x + 1.0)
    return x


def test_one_list_passed_twice_is_autoflows_error():
    shared = [0.0]
    with pytest.raises(ConversionError, match="`a` and `b` are the same list"):
        autoflow.jit(appends_to_both)(jnp.float32(1.0), shared, shared)
    assert shared == [0.0]


def appended_to_a_held_list(x, *, out):
    out.append(x * 2.0)
    return x


def test_a_list_a_partial_holds_is_autoflows_error_and_left_as_it_was():
    import functools

    held = [1.0]
    with pytest.raises(ConversionError, match="functools.partial"):
        autoflow.jit(functools.partial(appended_to_a_held_list, out=held))(jnp.float32(1.0))
    assert held == [1.0]  # (no tracer left in it)
    given = []
    autoflow.jit(functools.partial(appended_to_a_held_list))(jnp.float32(1.5), out=given)
    _same(given, [3.0])


def appends_python_numbers(x, out):
    out.append(1.0)
    out.append(2)
    out.append(x * 2)
    return x


def test_python_numbers_written_back_stay_python_numbers():
    # (they came back as weakly typed arrays: `jax.jit` returns arrays only)
    want, got = [], []
    appends_python_numbers(jnp.float32(1.5), want)
    autoflow.jit(appends_python_numbers)(jnp.float32(1.5), got)
    assert [type(v) for v in got[:2]] == [float, int] and got[:2] == want[:2]
    assert float(got[2]) == float(want[2])


def logs_after_a_loop(log, d, x):
    while x > 1:
        x = x / 2
    log.append(x)
    d["k"] = 3
    if x < 0:
        raise ValueError(f"negative: {x}")
    return x * 2


def test_written_back_under_disable_jit_and_through_lower_and_compile():
    # (under `jax.disable_jit()` autoflow's own wrapper of a Python number reached the
    # caller's dict; `lower(...).compile()` returned `(result, changes)` and wrote nothing
    # back, and a traced `raise` reached its caller as JaxRuntimeError)
    want_log, want_d = [], {}
    want = logs_after_a_loop(want_log, want_d, jnp.float32(20.0))
    f = autoflow.jit(logs_after_a_loop)
    with jax.disable_jit():
        log, d = [], {}
        assert float(f(log, d, jnp.float32(20.0))) == float(want)
        assert d == want_d and type(d["k"]) is int and [float(v) for v in log] == [0.625]
    compiled = f.lower([], {}, jnp.float32(20.0)).compile()
    log, d = [], {}
    assert float(compiled(log, d, jnp.float32(20.0))) == float(want)
    assert d == want_d and [float(v) for v in log] == [0.625]
    assert f.trace([], {}, jnp.float32(20.0)).out_info.shape == ()
    with pytest.raises(ValueError, match="negative: -3.0"):
        compiled([], {}, jnp.float32(-3.0))


def bubble_sorted_in_place(a):
    n = len(a)
    for i in range(n):
        for j in range(n - 1 - i):
            if a[j] > a[j + 1]:
                a[j], a[j + 1] = a[j + 1], a[j]
    return a


def test_a_numpy_array_changed_in_place_is_refused_and_the_advice_works():
    # (the caller's array was left unsorted, silently: jit hands the function a copy)
    f = autoflow.jit(bubble_sorted_in_place)
    with pytest.raises(ConversionError, match="`a` is a NumPy array") as info:
        f(np.array([5, 1, 4]))
    assert "a.tolist()" in str(info.value)
    xs = np.array([5, 1, 4]).tolist()  # (the advice, followed: a list is written back)
    f(xs)
    assert xs == [1, 4, 5]
    a = np.asarray(f(jnp.asarray(np.array([5, 1, 4]))))  # (or: return it, pass a JAX array)
    assert a.tolist() == [1, 4, 5]
