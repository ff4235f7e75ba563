"""Python objects a staged statement would change in place, against eager Python.

Both paths of a staged ``if`` are traced, and a staged loop's body is traced once: an
iterator advanced with ``next()`` there would advance once (or on the path not taken),
silently giving another answer than Python's. autoflow refuses it with its own error at
the statement; run as Python (concrete conditions) it gives Python's answer. A traced
value put in a set, a list a traced loop pops from and a list appended to on one path
only get errors in the user's terms, whose advice, followed, gives Python's answer.
"""

from __future__ import annotations

import collections
import dataclasses
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow import ConversionError

from ..error_cases import python_objects as po
from ..test_errors import check_message


def _raises(fn, *args, catch=ConversionError):
    with pytest.raises(catch) as info:
        autoflow.jit(fn)(*args)
    return info.value


@pytest.mark.parametrize("fn, arg, name, what", [
    (po.iterator_in_while, 0.0, "it", "loop"),
    (po.generator_in_if, 1.0, "gen", "`if`"),
])
def test_an_iterator_advanced_in_a_staged_statement_is_refused(fn, arg, name, what):
    exc = _raises(fn, arg)
    msg = check_message(exc, fn, names=[name], mentions=[f"this traced {what}", "next()"])
    assert "xs[i]" in msg
    # under vmap too (the statement is staged for the batch)
    with pytest.raises(ConversionError):
        jax.vmap(autoflow.convert(fn))(jnp.array([arg, arg + 1.0]))
    # concrete: Python's statement, Python's answer
    assert autoflow.convert(fn)(arg) == fn(arg)


def test_the_iterator_advice_followed_gives_pythons_answer():
    def indexed(x):
        xs = jnp.asarray([1.0, 2.0, 3.0, 4.0, 5.0])
        i = 0
        while x < 7:
            x = x + xs[i]
            i = i + 1
        return x

    for x0 in (0.0, 2.5, 6.0, 9.0):
        assert float(autoflow.jit(indexed)(x0)) == po.iterator_in_while(x0)
    lanes = jnp.array([0.0, 2.5, 6.0, 9.0])
    assert np.allclose(jax.vmap(autoflow.convert(indexed))(lanes),
                       [po.iterator_in_while(float(v)) for v in lanes])


def test_an_iterator_in_a_static_loop_runs_as_python():
    def summed(x):
        it = iter([1.0, 2.0, 3.0])
        for _ in range(3):
            x = x * 2.0 + next(it)
        return x

    assert float(autoflow.jit(summed)(1.0)) == summed(1.0)
    assert float(jax.grad(autoflow.convert(summed))(1.0)) == 8.0


def test_a_set_changed_in_a_traced_if_is_refused_in_the_users_terms():
    # (its items traced too: a traced value has no hash; the set is refused first)
    exc = _raises(po.distinct_positives, jnp.array([1.0, 2.0, 1.0, -1.0]))
    msg = check_message(exc, po.distinct_positives, names=["seen"],
                        mentions=["set", "seen.at[i].set(True)"])
    assert "DynamicJaxprTracer" not in msg.splitlines()[0]


def test_a_list_a_traced_loop_pops_from():
    exc = _raises(po.popped_in_while, 0.0)
    check_message(exc, po.popped_in_while, names=["stack"], mentions=["shrinks", "count"])


@pytest.mark.parametrize("fn, arg, name, mentions", [
    (po.popped_in_test, 2.5, "stack", ["shrinks", "count"]),
    (po.iterator_in_test, 3.5, "it", ["next()"]),
])
def test_a_loop_test_that_changes_a_python_object(fn, arg, name, mentions):
    """The test of a `while` is evaluated before each iteration as Python does: a list
    it pops from, an iterator it advances, are refused as in the body (the test ran
    once, while tracing, and the compiled loop never ended)."""
    exc = _raises(fn, arg)
    check_message(exc, fn, names=[name], mentions=mentions)
    assert autoflow.convert(fn)(arg) == fn(arg)  # concrete: Python's answer


def countdown(x):
    calls = 0

    def dec():
        nonlocal x, calls
        calls += 1
        x = x - 1
        return x

    while dec() > 0:
        pass
    return calls, x


def test_a_loop_test_that_rebinds_the_loops_variables_through_a_closure():
    """`dec()` rebinds `x` and `calls` (`nonlocal`): the body saw them as they were
    before the test (concrete, the loop never ended; traced, it gave 0)."""
    for x0 in (5.0, 2.5, -1.0):
        want = countdown(x0)
        assert autoflow.convert(countdown)(x0) == want
        got = autoflow.jit(countdown)(jnp.float32(x0))
        assert (int(got[0]), float(got[1])) == want, x0
    lanes = jnp.array([5.0, 2.5, -1.0])
    calls, xs = jax.vmap(autoflow.convert(countdown))(lanes)
    assert [(int(c), float(v)) for c, v in zip(calls, xs)] == \
        [countdown(float(v)) for v in lanes]


def test_a_list_appended_on_one_path_and_its_advice():
    xs = jnp.array([1.0, -2.0, 3.0])
    exc = _raises(po.appended_on_one_path, xs)
    msg = check_message(exc, po.appended_on_one_path, names=["out"],
                        mentions=["out = out.at[count].set(item)", "count = count + 1"])
    assert "out = jnp.zeros((capacity,), jnp.float32)" in msg

    def buffered(xs):  # the advice, followed as written
        out = jnp.zeros((3,), jnp.float32)
        count = 0
        for i in range(xs.shape[0]):
            if xs[i] > 0:
                out = out.at[count].set(xs[i])
                count = count + 1
        return out, count

    out, count = autoflow.jit(buffered)(xs)
    assert [float(v) for v in out[:int(count)]] == [float(v) for v in po.appended_on_one_path(xs)]


def test_strings_made_on_two_paths_print_the_path_taken(capsys):
    # (it was autoflow's error, naming `msg`: a string is no array; both paths' strings
    # are now kept and the one of the path taken made at run time)
    import jax

    for x in (1.0, -2.0):
        po.labelled(x)
        want = capsys.readouterr().out
        autoflow.jit(po.labelled)(jnp.float32(x))
        jax.effects_barrier()
        assert capsys.readouterr().out == want


def test_a_none_test_on_the_first_iteration_runs_as_python():
    xs = jnp.array([3.0, 7.0, 2.0])
    assert int(autoflow.jit(po.first_best)(xs)) == po.first_best(xs) == 1
    batch = jnp.array([[3.0, 7.0, 2.0], [9.0, 1.0, 4.0]])
    assert [int(v) for v in jax.vmap(autoflow.convert(po.first_best))(batch)] == [
        po.first_best(row) for row in batch]


@dataclasses.dataclass
class Tagged:
    a: jax.Array
    n: int = 0


jax.tree_util.register_dataclass(Tagged, data_fields=["a"], meta_fields=["n"])


def retagged(x):
    s = Tagged(x, 0)
    if x > 0:
        s = Tagged(x, 1)
    return s.a * 2, s.n


def test_a_static_field_that_differs_between_paths_is_named():
    with pytest.raises(ConversionError, match=r"`s` is a `Tagged` on both paths.*static fields"):
        autoflow.jit(retagged)(3.0)
    assert autoflow.convert(retagged)(3.0) == retagged(3.0)  # concrete: Python


# Python's containers a staged statement cannot carry, changed in place inside it: both
# paths of a traced `if` (a loop's body, once) changed them while tracing, whatever the
# data (silently: `len(seen)` counted every path's items).


def set_in_static_loop(x):
    seen = set()
    for i in range(3):
        if x > i:
            seen.add(i)
    return x + len(seen)


def set_in_traced_while(x):
    s = set()
    while x > 1:
        s.add("big")
        x = x / 2
    return x + len(s)


def deque_rotated(x):
    q = collections.deque([1.0, 2.0, 3.0])
    if x > 0:
        q.rotate(1)
    return q[0] * x


def numpy_flag(x):
    mask = np.zeros(3)
    if x > 0:
        mask[0] = 1.0
    return x + mask.sum()


def bytearray_written(x):
    buf = bytearray(b"ab")
    if x > 0:
        buf[0] = ord("z")
    return x + buf[0]


def numpy_scratch_made_inside(x):  # (made inside the branch: new at every run, fine)
    if x > 0:
        tmp = np.zeros(2)
        tmp[1] = 3.0
        x = x + tmp.sum()
    return x


@pytest.mark.parametrize("fn, name", [
    (set_in_static_loop, "seen"), (set_in_traced_while, "s"), (deque_rotated, "q"),
    (numpy_flag, "mask"), (bytearray_written, "buf")], ids=lambda v: getattr(v, "__name__", v))
def test_a_python_container_a_staged_statement_cannot_carry_is_refused(fn, name):
    for x in (-1.0, 0.5, 2.5):
        with pytest.raises(ConversionError) as info:
            autoflow.jit(fn)(jnp.float32(x))
        msg = str(info.value)
        assert os.path.basename(__file__) in msg and "jnp" in msg, msg
        if fn not in (numpy_flag, bytearray_written):
            assert f"`{name}`" in msg.splitlines()[0], msg
        assert autoflow.convert(fn)(x) == fn(x)  # concrete: Python's statement
    with pytest.raises(ConversionError):
        jax.vmap(autoflow.convert(fn))(jnp.array([-1.0, 2.5]))


def test_a_numpy_array_made_inside_the_branch_is_written_as_python():
    for x in (-1.0, 2.5):
        assert float(autoflow.jit(numpy_scratch_made_inside)(jnp.float32(x))) == \
            numpy_scratch_made_inside(x)


HISTORY: list = []


def recorded_halvings(x):
    while x > 1:
        x = x / 2
        HISTORY.append(x)
    return x


def recorded_halvings_advised(x):  # (the advice applied as written, capacity 16)
    history = jnp.zeros((16,), jnp.float32)
    count = 0
    while x > 1:
        x = x / 2
        history = history.at[count].set(x)
        count = count + 1
    return x, history, count


def test_a_module_level_list_grown_in_a_traced_loop_gets_advice_that_works():
    """The advice for a list grown in a traced loop rebound the list where it is made: a
    module global rebound in the function is a local (UnboundLocalError); a static bound
    appends while tracing only."""
    with pytest.raises(ConversionError) as info:
        autoflow.jit(recorded_halvings)(jnp.float32(20.0))
    msg = str(info.value)
    assert "`HISTORY` is a module global" in msg and "static_argnames" not in msg, msg
    assert "history = history.at[count].set(item)" in msg, msg
    HISTORY.clear()
    want = recorded_halvings(20.0)
    x, history, count = autoflow.jit(recorded_halvings_advised)(jnp.float32(20.0))
    assert float(x) == want and [float(v) for v in history[:int(count)]] == HISTORY
    HISTORY.clear()


def early_stopped(x):
    history = []
    bad = 0
    for epoch in range(20):
        x = x * 0.9
        history.append(x)
        if x < 1.0:
            bad = 1
        if bad >= 1:
            break
    return x, len(history)


def test_a_list_appended_before_a_traced_break_is_said_so():
    """The append is unconditional; what skips it is the traced `break`. The message said
    "two branches of this traced `if`" under the `for` and advised keeping the append
    unconditional."""
    with pytest.raises(ConversionError) as info:
        autoflow.jit(early_stopped)(jnp.float32(5.0))
    msg = str(info.value)
    first = msg.splitlines()[0]
    assert "traced `break`" in first and "this traced `if`" not in first, first
    assert "history = history.at[count].set(item)" in msg and "unconditional" not in msg
