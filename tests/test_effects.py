"""``print``, ``assert``, index assignment and list ``append`` in converted code.

The oracle is the plain function run eagerly: Python's own ``print`` and
``assert``, and for index assignment on arrays the same code run on a NumPy
array (JAX arrays are immutable, so the plain function cannot run on them).

Known autoflow bugs are marked ``xfail(strict=True, raises=...)``: they xfail
only with the bug's own symptom and turn into failures once it is fixed.
"""

from __future__ import annotations

import io
import sys
import traceback

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow

from .equivalence import assert_same


def run(fn, *args, **options):
    """``autoflow.jit(fn, **options)(*args)``, waiting for its effects (prints, checks)."""
    out = autoflow.jit(fn, **options)(*args)
    jax.block_until_ready(out)
    jax.effects_barrier()
    return out


# ---- print ----------------------------------------------------------------------------------

def prints_traced(x):
    print("start", x)
    if x > 0:
        print("pos", x)
        x = x * 2.0
    else:
        print("neg", x)
    print("end", x, sep="|")
    return x


def test_traced_print_runs_every_call_in_program_order(capfd):
    capfd.readouterr()
    f = autoflow.jit(prints_traced)
    for x in (1.5, -2.5, 0.25):
        jax.block_until_ready(f(x))
        jax.effects_barrier()
    lines = capfd.readouterr().out.splitlines()
    assert lines == ["start 1.5", "pos 1.5", "end|3.0",
                     "start -2.5", "neg -2.5", "end|-2.5",
                     "start 0.25", "pos 0.25", "end|0.5"]


def prints_in_loop(x):
    print("static")  # concrete arguments only: printed at every call too
    while x < 3.0:
        print("it", x)
        x = x + 1.0
    print("done", x)
    return x


def test_traced_print_in_a_staged_loop(capfd):
    capfd.readouterr()
    f = autoflow.jit(prints_in_loop)
    for x in (0.5, 2.0):
        jax.block_until_ready(f(x))
        jax.effects_barrier()
    lines = capfd.readouterr().out.splitlines()
    for x in (0.5, 2.0):
        prints_in_loop(x)  # the oracle: Python
    assert lines == capfd.readouterr().out.splitlines()
    assert lines[0] == lines[5] == "static"


def test_traced_print_braces_and_separators(capfd):
    def f(x):
        print("{literal}", x, "{}", sep=", ", end="!\n")
        return x

    capfd.readouterr()
    run(f, 2.0)
    assert capfd.readouterr().out == "{literal}, 2.0, {}!\n"


@pytest.mark.parametrize("x", [3, -4, 0.5])
def test_concrete_print_is_python_print(capfd, x):
    capfd.readouterr()
    expected_result = prints_traced(x)
    expected = capfd.readouterr().out
    converted = autoflow.convert(prints_traced)
    assert converted(x) == expected_result
    assert capfd.readouterr().out == expected
    assert expected.count("start") == 1


def test_concrete_print_keyword_arguments():
    def f(x, buf):
        if x > 0:
            print("a", x, sep="-", end=";", file=buf)
        print("b", file=buf, flush=True)
        return x

    want, got = io.StringIO(), io.StringIO()
    f(2, want)
    autoflow.convert(f)(2, got)
    assert got.getvalue() == want.getvalue() == "a-2;b\n"


# ---- assert ---------------------------------------------------------------------------------

def positive_plus_one(x):
    assert x > 0, "x must be positive"
    return x + 1.0


def bare_assert(x):
    y = x * 2.0
    assert y < 10.0
    return y


def test_concrete_failing_assert_is_python_assert():
    with pytest.raises(AssertionError) as plain:
        positive_plus_one(-1.0)
    with pytest.raises(AssertionError) as converted:
        autoflow.convert(positive_plus_one)(-1.0)
    # (pytest rewrites the plain function's assert and appends its own explanation)
    assert plain.value.args[0].startswith("x must be positive")
    assert converted.value.args == ("x must be positive",)
    with pytest.raises(AssertionError) as bare:
        autoflow.convert(bare_assert)(20.0)
    assert bare.value.args == ()
    assert autoflow.convert(positive_plus_one)(1.0) == 2.0


def test_concrete_assert_message_is_evaluated_only_on_failure():
    calls = []

    def message(x):
        calls.append(x)
        return f"bad {x}"

    def f(x):
        assert x > 0, message(x)
        return x

    converted = autoflow.convert(f)
    assert converted(3) == 3
    assert calls == []
    with pytest.raises(AssertionError, match="bad -3"):
        converted(-3)
    assert calls == [-3]


def _described(v):
    print("described", v)
    return f"bad {v}"


def assert_with_a_printing_message(x):
    assert x < 5, _described(x)
    return x


def test_a_traced_asserts_message_is_made_only_where_it_fails(capfd):
    # (its message was made at trace time, and a print in it staged on every path: every
    # call printed "described", the cached ones too, and under vmap once per lane)
    f = autoflow.jit(assert_with_a_printing_message)
    for _ in range(2):
        assert_same(run(assert_with_a_printing_message, 3.0), 3.0)
    jax.vmap(autoflow.convert(assert_with_a_printing_message))(jnp.array([1.0, 2.0]))
    jax.effects_barrier()
    assert capfd.readouterr().out == ""
    with pytest.raises(AssertionError, match="bad 7"):
        jax.block_until_ready(f(7.0))
        jax.effects_barrier()
    assert capfd.readouterr().out == "described 7.0\n"


def test_traced_failing_assert_raises_when_run():
    f = autoflow.jit(positive_plus_one)
    assert_same(f(1.0), 2.0)
    with pytest.raises(AssertionError) as info:  # the user's AssertionError, re-raised
        jax.block_until_ready(f(-1.0))
        jax.effects_barrier()
    assert info.value.args == ("x must be positive",)
    text = "".join(traceback.format_exception_only(info.value))
    assert text.startswith("AssertionError: x must be positive\n")  # the message first, once
    assert text.count("x must be positive") == 1
    assert "traced `assert` at" in text and "test_effects.py" in text  # file and line
    assert_same(f(4.0), 5.0)  # and the compiled function still works afterwards


def test_traced_failing_bare_assert():
    assert_same(run(bare_assert, 2.0), 4.0)
    with pytest.raises(AssertionError) as info:
        run(bare_assert, 20.0)
    assert info.value.args == ()  # as Python's bare assert
    assert "traced `assert` at" in "".join(traceback.format_exception_only(info.value))


def assert_in_branch(x):
    if x > 0:
        assert x < 10.0, "too big"
        x = x * 3.0
    else:
        x = -x
    return x


@pytest.mark.parametrize("x", [2.0, -20.0, 9.5])
def test_traced_passing_assert_runs(x):
    assert_same(run(positive_plus_one, abs(x) + 0.5), positive_plus_one(abs(x) + 0.5))
    assert_same(run(assert_in_branch, x), assert_in_branch(x))


def test_traced_assert_in_a_branch_not_taken_does_not_fire():
    assert_same(run(assert_in_branch, -50.0), 50.0)
    with pytest.raises(Exception, match="too big"):
        run(assert_in_branch, 50.0)


def test_traced_assert_in_a_staged_loop():
    def f(x):
        while x < 100.0:
            assert x != 7.0, "hit seven"
            x = x * 2.0 + 1.0
        return x

    assert_same(run(f, 2.0), f(2.0))
    with pytest.raises(Exception, match="hit seven"):
        run(f, 3.0)


def test_asserts_false_drops_asserts():
    assert "assert" not in autoflow.to_source(positive_plus_one, asserts=False)
    assert "assert_" in autoflow.to_source(positive_plus_one)
    assert_same(run(positive_plus_one, -1.0, asserts=False), 0.0)
    assert autoflow.convert(positive_plus_one, asserts=False)(-1.0) == 0.0
    assert_same(run(assert_in_branch, 50.0, asserts=False), 150.0)


def test_traced_assert_message_formats_the_runtime_value():
    def f(x):
        assert x > 0, f"bad value {x}"
        return x

    with pytest.raises(AssertionError) as eager:
        f(-1.5)
    with pytest.raises(AssertionError) as info:
        run(f, -1.5)
    # (pytest's assertion rewriting adds the test's own text to the eager message)
    assert str(info.value) == str(eager.value).splitlines()[0] == "bad value -1.5"


# ---- index assignment on arrays ---------------------------------------------------------------

def update_1d(x, t):
    for i in range(x.shape[0]):
        if x[i] > t:
            x[i] = t
        else:
            x[i] += 1.0
    i = 0
    while x[i] < t and i < x.shape[0] - 1:
        x[i] *= 2.0
        i += 1
    x[1:3] = x[0]
    x[0] -= 0.5
    x[-1] /= 4.0
    return x


def update_2d(m, t):
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            if m[i, j] > t:
                m[i, j] = -m[i, j]
            else:
                m[i, j] -= t
    if m[0, 0] < 0:
        m[0] = m[1] * 2.0
    else:
        m[:, 1] *= 3.0
    m[1:, 2:] /= 2.0
    return m


def update_traced_count(x, n):
    for i in range(n):
        x[i % 4] += i
        if x[i % 4] > 5.0:
            x[(i + 1) % 4] -= 1.0
        x[:2] *= 1.5
    return x


def update_traced_index(x, t):
    i = 0
    while x[i] < t:
        x[i] = x[i] + t
        i = (i + 1) % 4
    x[i] /= 2.0
    return x


def _numpy_oracle(fn, array, *args):
    return fn(np.array(array, dtype=np.float32), *args)


CASES_1D = [np.array([1.0, 5.0, 2.0, 7.0]), np.array([-1.0, 0.5, 9.0, 2.5]),
            np.array([8.0, 8.0, 8.0, 8.0])]


@pytest.mark.parametrize("xs", CASES_1D, ids=["a", "b", "c"])
@pytest.mark.parametrize("t", [3.0, 0.0])
def test_index_assignment_1d(xs, t):
    expected = _numpy_oracle(update_1d, xs, t)
    assert_same(autoflow.jit(update_1d)(jnp.asarray(xs, jnp.float32), t), expected)
    assert_same(autoflow.convert(update_1d)(jnp.asarray(xs, jnp.float32), t), expected)


@pytest.mark.parametrize("t", [5.0, -100.0, 20.0])
def test_index_assignment_2d(t):
    m = np.arange(12, dtype=np.float32).reshape(3, 4) - 2.0
    expected = _numpy_oracle(update_2d, m, t)
    assert_same(autoflow.jit(update_2d)(jnp.asarray(m), t), expected)


@pytest.mark.parametrize("n", [0, 3, 7])
def test_index_assignment_in_loop_with_traced_trip_count(n):
    xs = np.array([1.0, 2.0, 3.0, 4.0])
    expected = _numpy_oracle(update_traced_count, xs, n)
    assert_same(autoflow.jit(update_traced_count)(jnp.asarray(xs, jnp.float32), n), expected)


@pytest.mark.parametrize("t", [0.5, 2.5, 9.0])
def test_index_assignment_with_traced_index(t):
    xs = np.array([1.0, 2.0, 3.0, 4.0])
    expected = _numpy_oracle(update_traced_index, xs, t)
    assert_same(autoflow.jit(update_traced_index)(jnp.asarray(xs, jnp.float32), t), expected)


def test_index_assignment_returns_new_arrays():
    x = jnp.arange(4.0)
    out = autoflow.jit(update_1d)(x, 2.0)
    np.testing.assert_array_equal(x, np.arange(4.0))  # the argument is untouched
    assert not np.array_equal(np.asarray(out), np.arange(4.0))
    assert "setitem(x, i, 1.0, '+')" in autoflow.to_source(update_1d)


def test_index_assignment_on_numpy_array_is_in_place():
    xs = np.array([1.0, 5.0, 2.0, 7.0], dtype=np.float32)
    expected = update_1d(xs.copy(), 3.0)
    ys = xs.copy()
    out = autoflow.convert(update_1d)(ys, 3.0)
    assert out is ys
    np.testing.assert_array_equal(ys, expected)


# ---- lists and dicts keep Python semantics ---------------------------------------------------

def fill_containers(x):
    out = [0.0, 0.0, 0.0]
    d = {}
    for i in range(3):
        if x > i:
            out[i] = x * i
            d[i] = x
        else:
            out[i] = -x
            d[i] = -x
    out[0] += 10.0
    d[-1] = len(out)
    return out, d


@pytest.mark.parametrize("x", [1.5, -1.0, 5.0])
def test_lists_and_dicts_in_traced_ifs(x):
    expected = fill_containers(jnp.float32(x))
    actual = autoflow.jit(fill_containers)(x)
    assert isinstance(actual[0], list) and isinstance(actual[1], dict)
    assert_same(actual, expected)


def aliasing(x):
    xs = [x, x]
    other = xs
    other[0] = x * 3.0
    d = {"a": x}
    alias = d
    alias["b"] = x + 1.0
    return xs[0], d.get("b", -1.0)


def mutates_argument(xs, x):
    if x > 0:
        x = x * 2.0
    xs[0] = x
    return x


def test_list_mutation_is_visible_to_aliases_eagerly():
    assert autoflow.convert(aliasing)(1.0) == aliasing(1.0) == (3.0, 2.0)
    plain, converted = [0.0], [0.0]
    mutates_argument(plain, 1.0)
    autoflow.convert(mutates_argument)(converted, 1.0)
    assert converted == plain == [2.0]




def test_list_mutation_is_visible_to_aliases_under_jit():
    assert_same(autoflow.jit(aliasing)(1.0), aliasing(1.0))


def test_callee_mutating_a_list_under_jit():
    def caller(x):
        xs = [0.0]
        mutates_argument(xs, x)
        return xs[0]

    assert_same(autoflow.jit(caller)(1.0), caller(1.0))


# ---- list accumulation ------------------------------------------------------------------------

def accumulate(x):
    ys = []
    for i in range(4):
        if x > i:
            x = x - 1.0
        ys.append(x * i)
    return jnp.stack(ys)


def accumulate_pairs(x, v):
    ys, zs = [], []
    for i in range(3):
        while x < 2.0 * i:
            x = x + 0.75
        ys.append(x)
        zs.append(v[i] * x)
    return jnp.stack(ys), jnp.stack(zs)


@pytest.mark.parametrize("x", [3.0, 0.5, -2.0])
def test_list_append_in_static_loop(x):
    expected = accumulate(jnp.float32(x))
    assert_same(autoflow.jit(accumulate)(x), expected)
    assert "append(ys, x * i)" in autoflow.to_source(accumulate)
    v = jnp.array([1.0, -2.0, 3.0])
    assert_same(autoflow.jit(accumulate_pairs)(x, v), accumulate_pairs(jnp.float32(x), v))


def test_list_append_eager_is_in_place():
    def f(x, ys):
        for i in range(3):
            if x > i:
                ys.append(i)
        return len(ys)

    plain, converted = [9], [9]
    assert autoflow.convert(f)(2, converted) == f(2, plain) == 3
    assert converted == plain == [9, 0, 1]


def accumulate_traced_count(x, n):
    ys = []
    for i in range(n):
        ys.append(x * i)
    return jnp.stack(ys)


def accumulate_while(x):
    ys = []
    while x < 10.0:
        ys.append(x)
        x = x + 1.0
    return ys


def test_list_append_with_traced_trip_count_is_a_conversion_error():
    assert_same(accumulate_traced_count(2.0, 3), jnp.array([0.0, 2.0, 4.0]))
    with pytest.raises(autoflow.ConversionError, match="`ys`") as info:
        autoflow.jit(accumulate_traced_count)(2.0, 3)
    assert "test_effects.py" in str(info.value)
    with pytest.raises(autoflow.ConversionError, match="`ys`"):
        autoflow.jit(accumulate_while)(1.0)
    # With a static trip count it works.
    assert_same(autoflow.jit(accumulate_traced_count, static_argnums=1)(2.0, 3),
                accumulate_traced_count(2.0, 3))


# ---- any/all over items made one after another ------------------------------------------

def _positive(v, i):
    print("item", i)
    if v <= 0:
        raise ValueError(f"not positive: {v}")
    return v > 1


def any_of_made_items(x):
    return any(_positive(x - i, i) for i in range(4))


def all_of_made_items(x):
    return all(_positive(x + i, i) for i in range(4) if i != 2)


@pytest.mark.parametrize("fn, x", [(any_of_made_items, 2.5), (any_of_made_items, 1.5),
                                   (any_of_made_items, 3.5), (all_of_made_items, 0.5),
                                   (all_of_made_items, 2.0), (all_of_made_items, -0.5)])
def test_any_and_all_make_their_items_as_python_does(fn, x, capfd):
    # (every item was made on every path: four prints where Python stops at the first
    # that decides, and a ValueError of an item Python never makes)
    try:
        want = fn(x)
    except ValueError as e:
        want = e
    expected = capfd.readouterr().out
    for _ in range(2):  # (the second call: the cached program)
        try:
            got = run(fn, jnp.float32(x))
        except ValueError as e:
            got = e
        assert capfd.readouterr().out == expected
        if isinstance(want, ValueError):
            assert isinstance(got, ValueError) and str(got) == str(want)
        else:
            assert bool(got) == want


# ---- sys.stdout replaced by the user's own object -----------------------------------------

class _Tee:
    """Not an `io` stream: any object with `write` may be `sys.stdout`."""

    def __init__(self):
        self.parts = []

    def write(self, s):
        if s:  # (the truth value of what it is given: a Python string)
            self.parts.append(s)
        return len(s)

    def flush(self):
        pass


def writes_to_stdout(x):
    if x > 0:
        sys.stdout.write(f"pos {x}\n")
    print("value", x)
    return x


def test_a_users_object_as_sys_stdout_is_written_when_the_code_runs(monkeypatch):
    # (its `write` was called while tracing, with a string made from a traced value:
    # autoflow's error in the user's `if s:`)
    tee = _Tee()
    monkeypatch.setattr(sys, "stdout", tee)
    writes_to_stdout(1.5)
    want, tee.parts = "".join(tee.parts), []
    for _ in range(2):
        run(writes_to_stdout, jnp.float32(1.5))
        assert "".join(tee.parts) == want
        tee.parts = []


# ---- raise ... from ... -------------------------------------------------------------------

def raises_with_a_cause(x):
    if x > 1:
        raise ValueError(f"outer {x}") from KeyError("inner")
    if x < -1:
        raise ValueError("no context") from None
    return x


@pytest.mark.parametrize("x", [3.0, -3.0])
def test_a_traced_raise_keeps_its_cause(x):
    # (autoflow.jit raised the user's exception `from None`, and a staged raise never
    # reached its `from`: the cause was lost)
    with pytest.raises(ValueError) as want:
        raises_with_a_cause(x)
    for fn in (autoflow.jit(raises_with_a_cause), autoflow.convert(raises_with_a_cause)):
        with pytest.raises(ValueError) as got:
            jax.block_until_ready(fn(jnp.float32(x)))
            jax.effects_barrier()
        assert str(got.value) == str(want.value)
        assert repr(got.value.__cause__) == repr(want.value.__cause__)
        assert got.value.__suppress_context__
