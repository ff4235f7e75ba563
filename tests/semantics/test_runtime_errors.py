"""Python's run-time errors on traced values (issue 44, item 3).

Where eager Python raises for a value, the converted program raises the same exception,
with the same message, when the compiled code runs with that value; where it does not,
the converted program gives eager Python's value:

* a Python list, tuple or NumPy array indexed (or a list written) at a traced index out
  of range: ``IndexError`` (``list index out of range``; NumPy's message for an array),
  where JAX's indexing clamps;
* ``math.sqrt``/``log``/``acos``/``gamma``/``pow``/``fmod``/``floor``... of a traced value
  outside their domain, or whose result no float64 holds: ``ValueError``/``OverflowError``
  (``ZeroDivisionError`` for ``math.log(x, 1)``), where ``jnp`` gives NaN or an infinity;
* a dict key first set in a traced loop that ran no iteration: ``d["k"]`` is
  ``KeyError``, ``"k" in d`` false, ``d.get("k", v)`` the default, where the key held
  zeros.

The oracle is the same function run eagerly on each value: under ``autoflow.jit``, under
``jax.vmap(autoflow.convert(f))`` (a batch with one failing lane raises that lane's
exception; a batch without one gives the eager results lane by lane) and, for the
``math`` functions, under ``jax.grad`` (against a central difference of the eager function
where it is defined, the same exception where it is not).
"""

from __future__ import annotations

import math
import traceback

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow.runtime import jax as jx

# (the oldest supported JAX has no hijax primitives: no `check` equation to look for, no
# reverse mode through a `while`, and every function with a loop keeps the wrapper)
needs_primitives = pytest.mark.skipif(not jx.primitives(),
                                      reason="this JAX has no hijax primitives")

INF, NAN = float("inf"), float("nan")


# ---------------------------------------------------------------------------------------
# the oracle
# ---------------------------------------------------------------------------------------

def _run(thunk):
    try:
        return thunk(), None
    except Exception as e:  # noqa: BLE001 - the oracle records whatever Python raises
        return None, e


def _assert_same_error(got, want, context):
    """``got`` is Python's exception ``want``: its type and message. JAX's own wrappers
    (``jax.vmap``/``jax.jit`` without ``autoflow.jit``, which re-raises the user's
    exception) report it as a ``JaxRuntimeError`` whose message ends with it."""
    assert got is not None, f"{context}: returned a value where Python raised {want!r}"
    if type(got) is type(want):
        assert str(got) == str(want), f"{context}: {got!r} where Python raised {want!r}"
        return
    text = f"{type(want).__name__}: {want}"
    assert type(got).__name__ in ("JaxRuntimeError", "XlaRuntimeError") and \
        str(got).rstrip().endswith(text), \
        f"{context}: {type(got).__name__}: {got} where Python raised {text}"


def _assert_same_value(got, want, context):
    a, e = np.asarray(got), np.asarray(want)
    assert a.shape == e.shape, f"{context}: shape {a.shape} where Python gave {e.shape}"
    np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=2e-5,
                               atol=1e-6, equal_nan=True, err_msg=context)


def _check_one(fn, args, jitted):
    want, want_exc = _run(lambda: fn(*args))
    got, got_exc = _run(lambda: jitted(*args))
    context = f"{fn.__name__}{args}"
    if want_exc is not None:
        _assert_same_error(got_exc, want_exc, context)
    else:
        assert got_exc is None, f"{context}: raised {got_exc!r} where Python gave {want!r}"
        _assert_same_value(got, want, context)
    return want_exc


def _lanes(cases):
    return [jnp.asarray(np.asarray(col)) for col in zip(*cases)]


def _check_vmap(fn, batched, cases):
    """``batched`` (``jax.vmap(autoflow.convert(fn))``) over ``cases``: Python run lane by
    lane stops at the first lane that raises, with its exception; else the lanes'
    values."""
    results = [_run(lambda c=c: fn(*c)) for c in cases]
    got, got_exc = _run(lambda: batched(*_lanes(cases)))
    first = next((e for _, e in results if e is not None), None)
    context = f"vmap {fn.__name__} over {cases}"
    if first is not None:
        _assert_same_error(got_exc, first, context)
        return
    assert got_exc is None, f"{context}: raised {got_exc!r}"
    for k, (want, _) in enumerate(results):
        _assert_same_value(np.asarray(got)[k], want, f"{context}, lane {k}")


def check(fn, good, bad, *, vmap="jit", note=None):
    """``fn`` under ``autoflow.jit`` on each case (argument tuples) of ``good`` (Python
    returns) and ``bad`` (Python raises), and under ``jax.vmap(autoflow.convert(fn))``
    (``vmap="jit"``: under ``jax.jit`` too, which compiles it once, about 5 times faster
    than op by op; ``"plain"``: op by op; ``None``: not) on the good ones, and on the
    same lanes with the second one replaced by the first bad case. ``note``: a text the
    exception's notes must hold (the fix)."""
    jitted = autoflow.jit(fn)
    for args in good:
        assert _check_one(fn, args, jitted) is None, f"oracle: {fn.__name__}{args} raised"
    for args in bad:
        assert _check_one(fn, args, jitted) is not None, \
            f"oracle: {fn.__name__}{args} raised nothing"
        if note is not None:
            _, exc = _run(lambda: jitted(*args))
            assert any(note in n for n in getattr(exc, "__notes__", ())), \
                f"{fn.__name__}{args}: no note with {note!r} in {exc.__notes__!r}"
    if vmap and good:
        batched = jax.vmap(autoflow.convert(fn))
        if vmap == "jit":
            batched = jax.jit(batched)
        lanes = (list(good) * 2)[:max(len(good), 2)]  # (one shape: one compile)
        _check_vmap(fn, batched, lanes)
        for args in bad[:1]:
            _check_vmap(fn, batched, lanes[:1] + [args] + lanes[2:])


def _central_difference(fn, x, h=1e-4):
    return (fn(x + h) - fn(x - h)) / (2 * h)


def check_grad(fn, good, bad):
    """``jax.grad`` of the converted function under ``jit``: the eager function's
    derivative (a central difference in float64) where Python gives a value, Python's
    exception where it raises."""
    grad = jax.grad(autoflow.jit(fn))
    for x in good:
        want = _central_difference(fn, float(x))
        got = grad(jnp.float32(x))
        np.testing.assert_allclose(float(got), want, rtol=2e-3, atol=1e-4,
                                   err_msg=f"grad {fn.__name__}({x})")
    for x in bad:
        _, want = _run(lambda: fn(float(x)))
        _, got = _run(lambda: grad(jnp.float32(x)))
        _assert_same_error(got, want, f"grad {fn.__name__}({x})")


def f32(*vs):
    """Arguments as float32 values: Python's ``math`` sees the same float64 as the
    compiled code's float32 (a Python float would be rounded there)."""
    return tuple(np.float32(v) for v in vs)


# ---------------------------------------------------------------------------------------
# math: domain and range errors
# ---------------------------------------------------------------------------------------

def sqrt(x):
    return math.sqrt(x) + 1.0


def log(x):
    return math.log(x)


def log_base(x, b):
    return math.log(x, b)


def log2(x):
    return math.log2(x)


def log10(x):
    return math.log10(x)


def log1p(x):
    return math.log1p(x)


def exp(x):
    return min(math.exp(x), 1e30)  # (float32 holds no exp(700): compare where both hold)


def expm1(x):
    return min(math.expm1(x), 1e30)


def sin(x):
    return math.sin(x)


def cosh(x):
    return min(math.cosh(x), 1e30)


def asin(x):
    return math.asin(x)


def acos(x):
    return math.acos(x)


def acosh(x):
    return math.acosh(x)


def atanh(x):
    return math.atanh(x)


def pow_(x, y):
    return min(math.pow(x, y), 1e30)


def fmod(x, y):
    return math.fmod(x, y)


def gamma(x):
    return min(math.gamma(x), 1e30)


def lgamma(x):
    return math.lgamma(x)


def floor(x):
    return math.floor(x)


def trunc(x):
    return math.trunc(x)


MATH = [  # (MORE_MATH: the slow tier)
    (sqrt, [f32(4.0), f32(0.0), f32(-0.0), f32(NAN), f32(INF)], [f32(-1.0), f32(-INF)]),
    (log, [f32(2.0), f32(INF), f32(NAN)], [f32(0.0), f32(-0.0), f32(-1.0), f32(-INF)]),
    (log_base, [f32(8.0, 2.0), f32(8.0, 0.5)], [f32(8.0, 1.0), f32(8.0, 0.0), f32(0.0, 2.0),
                                                 f32(8.0, -2.0)]),
    (exp, [f32(1.0), f32(709.0), f32(INF), f32(-INF), f32(NAN)], [f32(710.0), f32(1e30)]),
    (acos, [f32(0.5), f32(1.0)], [f32(2.0), f32(-1.0001)]),
    (pow_, [f32(2.0, 3.0), f32(-8.0, 3.0), f32(0.0, 0.0), f32(0.0, -INF), f32(-1.0, INF),
            f32(10.0, 300.0)], [f32(0.0, -1.0), f32(-0.0, -2.0), f32(-1.0, 0.5),
                                f32(10.0, 400.0), f32(-2.0, 1025.0)]),
    (fmod, [f32(5.0, 3.0), f32(1.0, INF), f32(NAN, 0.0)], [f32(1.0, 0.0), f32(INF, 1.0),
                                                             f32(-INF, 2.0)]),
    (gamma, [f32(5.0), f32(-2.5), f32(-0.5), f32(0.5), f32(171.0), f32(INF)],
     [f32(0.0), f32(-1.0), f32(-3.0), f32(172.0), f32(-INF)]),
    (floor, [f32(2.5), f32(-2.5), f32(2.0e9)], [f32(NAN), f32(INF), f32(-INF)]),
]
MORE_MATH = [
    (log2, [f32(8.0)], [f32(0.0), f32(-2.0)]),
    (log10, [f32(100.0)], [f32(0.0)]),
    (log1p, [f32(0.5), f32(-0.5)], [f32(-1.0), f32(-2.0)]),
    (expm1, [f32(1.0), f32(-INF)], [f32(710.0)]),
    (sin, [f32(1.0), f32(NAN)], [f32(INF), f32(-INF)]),
    (cosh, [f32(1.0), f32(-700.0), f32(INF)], [f32(711.0), f32(-711.0)]),
    (asin, [f32(0.5), f32(-1.0), f32(NAN)], [f32(1.5), f32(-INF)]),
    (acosh, [f32(2.0), f32(1.0), f32(INF)], [f32(0.5), f32(-INF)]),
    (atanh, [f32(0.5), f32(-0.5)], [f32(1.0), f32(-1.0), f32(2.0)]),
    (lgamma, [f32(3.0), f32(-2.5), f32(-INF)], [f32(0.0), f32(-2.0)]),
    (trunc, [(-2.5,)], [(NAN,), (INF,)]),  # (NumPy's float32 has no `__trunc__`)
]


@pytest.mark.parametrize("fn,good,bad", MATH, ids=[c[0].__name__ for c in MATH])
def test_math_raises_pythons_error_under_jit_and_vmap(fn, good, bad):
    check(fn, good, bad, vmap="plain" if fn is sqrt else "jit")


@pytest.mark.parametrize("fn,good,bad", MORE_MATH, ids=[c[0].__name__ for c in MORE_MATH])
def test_more_math_functions(fn, good, bad):
    check(fn, good, bad)


def test_an_integer_too_large_for_its_dtype_is_an_overflow_error():
    # Python's `math.floor(3e9)` is the int 3000000000, which no int32 holds: as for
    # `math.factorial(13)` (runtime.python.integers), an OverflowError that names Python's value
    for x in (3.0e9, -3.0e9):
        with pytest.raises(OverflowError, match=f"is {math.floor(np.float32(x))}, which "
                           "does not fit in int32"):
            autoflow.jit(floor)(np.float32(x))


@pytest.mark.parametrize("fn,jnp_name", [(sqrt, "jnp.sqrt"), (log, "jnp.log"),
                                         (acos, "jnp.arccos"), (floor, "jnp.floor")],
                         ids=lambda v: getattr(v, "__name__", v))
def test_the_fix_names_the_jnp_function(fn, jnp_name):
    bad = [c for f, _, b in MATH if f is fn for c in b][:1]
    check(fn, [], bad, vmap=None, note=jnp_name)


@pytest.mark.parametrize("name,edge", [("exp", "exp"), ("cosh", "cosh"), ("exp2", "exp2"),
                                       ("gamma", "gamma")])
def test_overflow_edge_is_pythons(name, edge):
    # the last float32 whose result Python's float holds, and the next one
    fn = getattr(math, name)
    last = np.float32(1.0)
    step = np.float32(1.0)
    while True:  # (a plain search here, not autoflow's: a test that can fail)
        try:
            fn(float(last + step))
            last = last + step
        except OverflowError:
            if step <= np.spacing(last):
                break
            step = np.float32(step / 2)
    nxt = np.nextafter(last, np.float32(np.inf))
    with pytest.raises(OverflowError):
        fn(float(nxt))

    def f(x):
        return min(fn(x), 1e30)

    f.__name__ = name
    check(f, [(last,)], [(nxt,)], vmap=None)


@pytest.mark.parametrize("fn,good,bad", [(sqrt, [0.25, 4.0], [-1.0]), (log, [0.5, 3.0], [0.0]),
                                         (acos, [0.3], [1.5]), (gamma, [2.5, -1.5], [-2.0])],
                         ids=lambda v: getattr(v, "__name__", ""))
def test_math_under_grad(fn, good, bad):
    check_grad(fn, good, bad)


# Only where Python evaluates the call does it raise.

def sqrt_in_branch(x):
    if x >= 0:
        y = math.sqrt(x)
    else:
        y = -1.0
    return y


def sqrt_in_if_expression(x):
    return math.sqrt(x) if x >= 0 else -1.0


def log_after_and(x):
    return x > 0 and math.log(x) > 1


def log_after_or(x):
    return x <= 0 or math.log(x) > 1


def sqrt_in_loop(x, n):
    s = 0.0
    for i in range(n):
        s = s + math.sqrt(x - i)
    return s


def log_in_while(x):
    s = 0.0
    while x > 0:  # under vmap the finished lanes run the body masked, with x <= 0
        s = s + math.log(x)
        x = x - 1.0
    return s


@pytest.mark.parametrize("fn,good,bad", [
    (sqrt_in_branch, [f32(4.0), f32(-1.0)], []),
    (sqrt_in_if_expression, [f32(4.0), f32(-1.0)], []),
    (log_after_and, [f32(4.0), f32(-1.0), f32(0.0)], []),
    (log_after_or, [f32(4.0), f32(-1.0), f32(0.0)], []),
    (sqrt_in_loop, [(np.float32(3.0), 3), (np.float32(3.0), 0)], [(np.float32(3.0), 5)]),
    (log_in_while, [f32(3.5), f32(1.5), f32(-2.0)], []),
], ids=lambda v: getattr(v, "__name__", ""))
def test_only_where_python_calls_it(fn, good, bad):
    check(fn, good, bad)


def test_nothing_after_a_failed_check_runs(capfd):
    def f(x):
        y = math.sqrt(x)
        print("after", y)
        return y

    jitted = autoflow.jit(f)
    assert float(jitted(4.0)) == 2.0
    jax.effects_barrier()
    assert capfd.readouterr().out == "after 2.0\n"
    with pytest.raises(ValueError, match="math domain error"):
        jitted(-4.0)
    jax.effects_barrier()
    assert "after" not in capfd.readouterr().out


# ---------------------------------------------------------------------------------------
# tables indexed at a traced index
# ---------------------------------------------------------------------------------------

COEFFS = [1.0, 2.0, 3.0]
PAIR = (10, 20)
GRID = np.arange(12.0).reshape(3, 4)
ROWS = [[1, 2], [3, 4], [5, 6]]
PAIRS = [(1, 2), (3, 4), (5, 6)]
ARRAYS = [np.arange(3.0), np.arange(3.0) + 10]


def list_item(i):
    return COEFFS[i]


def tuple_item(i):
    return PAIR[i]


def numpy_row(i):
    return GRID[i].sum()


def numpy_item(i, j):
    return GRID[i, j]


def numpy_row_item(i, j):
    return GRID[i][j]


def list_of_lists(i, j):
    return ROWS[i][j]


def list_of_tuples(i, j):
    return PAIRS[i][j]


def list_of_arrays(i, j):
    return ARRAYS[i][j]


def local_table(i):
    table = [4, 5, 6, 7]
    return table[i - 1]


def table_in_loop(x, n):
    acc = x
    for i in range(n):
        acc = acc + COEFFS[i] * x
    return acc


def list_write(i, v):
    xs = [0.0, 0.0, 0.0]
    xs[i] = v
    return xs[0] + xs[1] + xs[2]


def grid_write(i, j):
    g = [[0] * 2 for _ in range(3)]
    g[i][j] = 7
    return g[0][0] + g[1][1] + g[2][1] + g[0][1]


TABLES = [  # (MORE_TABLES: the slow tier)
    (list_item, [(0,), (2,), (-1,), (-3,)], [(3,), (-4,), (100,)]),
    (tuple_item, [(1,), (-2,)], [(2,), (-3,)]),
    (numpy_item, [(1, 3), (-1, -4)], [(1, 4), (3, 0), (-1, -5)]),
    (list_of_lists, [(2, 1), (-1, -2)], [(2, 2), (3, 0), (0, -3)]),
    (table_in_loop, [(np.float32(1.0), 3), (np.float32(2.0), 0)], [(np.float32(1.0), 4)]),
    (list_write, [(1, np.float32(5.0)), (-3, np.float32(1.0))],
     [(3, np.float32(5.0)), (-4, np.float32(1.0))]),
]
MORE_TABLES = [
    (numpy_row, [(2,), (-3,)], [(3,), (-4,)]),
    (numpy_row_item, [(2, 3)], [(2, 4), (3, 0)]),
    (list_of_tuples, [(1, 1)], [(1, 2)]),
    (list_of_arrays, [(1, 2)], [(1, 3), (2, 0)]),
    (local_table, [(1,), (4,), (-3,)], [(5,), (-4,)]),
    (grid_write, [(1, 1), (2, -1)], [(3, 0), (0, 2)]),
]


@pytest.mark.parametrize("fn,good,bad", TABLES, ids=[c[0].__name__ for c in TABLES])
def test_table_index_out_of_range_raises_pythons_error(fn, good, bad):
    check(fn, good, bad, vmap="plain" if fn is list_item else "jit")


@pytest.mark.parametrize("fn,good,bad", MORE_TABLES, ids=[c[0].__name__ for c in MORE_TABLES])
def test_more_tables(fn, good, bad):
    check(fn, good, bad)


def test_table_fix_names_jax_indexing():
    check(list_item, [], [(3,)], vmap=None, note='jnp.take(table, i, mode="clip")')


def test_tuple_index_into_a_list_is_pythons_type_error():
    def f(i, j):
        return ROWS[i, j]

    check(f, [], [(1, 1)], vmap=None)


# A check in a loop's test: the loop ends where it fails (Python raised there), and a
# test's check inside another loop stays the inner test's (it once leaked its tracer).

def first_above(t):
    i = 0
    while COEFFS[i] < t and i < 10:  # (a bound: a clamped read would never end the loop)
        i += 1
    return i


def first_above_each(t, m):
    total = 0
    for k in range(m):
        i = 0
        while COEFFS[i] < t + k and i < 10:
            i += 1
        total += i
    return total


def insertion_sort(a, b, c):
    xs = [a, b, c]
    for i in range(1, len(xs)):
        key = xs[i]
        j = i - 1
        while j >= 0 and xs[j] > key:  # Python never reads xs[-1] here
            xs[j + 1] = xs[j]
            j -= 1
        xs[j + 1] = key
    return xs[0] * 100 + xs[1] * 10 + xs[2]


@pytest.mark.parametrize("fn,good,bad", [
    (first_above, [f32(2.5), f32(0.0)], [f32(10.0)]),
    (first_above_each, [(np.float32(0.5), 2), (np.float32(0.5), 0)], [(np.float32(0.5), 4)]),
    (insertion_sort, [f32(3.0, 1.0, 2.0), f32(1.0, 2.0, 3.0)], []),
], ids=lambda v: getattr(v, "__name__", ""))
def test_a_check_in_a_loop_test(fn, good, bad):
    check(fn, good, bad)


# `autoflow.jit` re-raises the user's exception (not JAX's `JaxRuntimeError`) where a
# check can fire: it wraps a function that calls `math.sqrt` or reads a table.

def plain_index(xs, i):
    return xs[i] * 2.0


@needs_primitives
def test_the_jit_wrapper_is_kept_where_a_check_can_fire():
    for fn in (sqrt, log_base, list_item, list_write, table_in_loop):
        assert type(autoflow.jit(fn)).__name__ == "_Jitted", fn.__name__
    assert type(autoflow.jit(plain_index)).__name__ != "_Jitted"


# ---------------------------------------------------------------------------------------
# a dict key first set in a traced loop that runs no iteration
# ---------------------------------------------------------------------------------------

def key_after_for(n):
    d = {}
    for i in range(n):
        d["k"] = i * 2
    return d["k"]


def key_after_while(n):
    d = {"other": 1}
    i = 0
    while i < n:
        d["k"] = i
        i += 1
    return d["k"] + d["other"]


def key_after_nested_loops(n, m):
    d = {}
    for j in range(m):
        for i in range(n):  # sets "k" only where some inner loop runs
            d["k"] = i + j
    return d["k"]


def key_incremented_after(n):
    d = {}
    for i in range(n):
        d["k"] = i
    d["k"] += 1
    return d["k"]


def key_tested_in_the_body(n):
    d = {"total": 0}
    for i in range(n):
        d["total"] = d["total"] + d["last"] if "last" in d else d["total"]
        d["last"] = i
    return d["total"]


def key_questions(n):
    d = {"a": 0.5}
    for i in range(n):
        d["k"] = i * 1.5
    return d.get("k", -1.0), len(d), "k" in d, "k" not in d


@pytest.mark.parametrize("fn,good,bad", [
    (key_after_for, [(3,), (1,)], [(0,)]),
    (key_after_while, [(2,)], [(0,), (-3,)]),
    (key_after_nested_loops, [(2, 3), (1, 1)], [(0, 3), (3, 0)]),
    (key_incremented_after, [(2,)], [(0,)]),
    (key_tested_in_the_body, [(3,), (0,), (1,)], []),
], ids=lambda v: getattr(v, "__name__", ""))
def test_a_key_a_loop_sets_is_there_only_where_it_ran(fn, good, bad):
    check(fn, good, bad)


def test_in_get_and_len_answer_where_the_loop_ran():
    jitted = autoflow.jit(key_questions)
    for n in (0, 1, 3):
        for got, want in zip(jitted(n), key_questions(n)):
            _assert_same_value(got, want, f"key_questions({n})")
    got = jax.jit(jax.vmap(autoflow.convert(key_questions)))(jnp.array([2, 0, 1]))
    for k, n in enumerate((2, 0, 1)):
        for g, want in zip(got, key_questions(n)):
            _assert_same_value(np.asarray(g)[k], want, f"vmap key_questions, lane {k}")


def test_a_get_without_a_default_of_the_values_kind_is_autoflows_error():
    def f(n):
        d = {}
        for i in range(n):
            d["k"] = i * 1.5
        return d.get("k") is None

    assert f(0) and not f(2)
    with pytest.raises(autoflow.ConversionError, match="reads the key 'k' with `get`"):
        autoflow.jit(f)(2)


def test_a_key_a_loop_sets_under_grad():
    def f(x, n):
        d = {}
        for i in range(n):
            d["k"] = x * i
        return d["k"] * x

    grad = jax.grad(autoflow.jit(f))
    np.testing.assert_allclose(float(grad(1.5, 3)), float(jax.grad(f)(1.5, 3)), rtol=1e-6)
    _, want = _run(lambda: jax.grad(f)(1.5, 0))
    _, got = _run(lambda: grad(1.5, 0))
    _assert_same_error(got, want, "grad f(1.5, 0)")


def test_only_reads_of_keys_a_loop_may_leave_unset_are_rewritten():
    src = autoflow.to_source(key_after_while)
    assert "af.getitem(d, 'k')" in src and "d['other']" in src, src
    assert "af.get(d, 'k', -1.0)" in autoflow.to_source(key_questions)


# ---------------------------------------------------------------------------------------
# checks in a loop body are carried out of the loop
# ---------------------------------------------------------------------------------------

def _primitives(jaxpr):
    """The names of the primitives of ``jaxpr`` and of the jaxprs inside it."""
    out = []
    for eqn in jaxpr.eqns:
        out.append(eqn.primitive.name)
        for v in eqn.params.values():
            for sub in (v if isinstance(v, (list, tuple)) else (v,)):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    out += _primitives(inner)
    return out


@needs_primitives
def test_a_loop_bodys_checks_run_once_after_the_loop():
    # a check in the body would be a host callback in a `cond` at every iteration (the
    # loop 60 times slower); the loop carries "failed yet" and the failing operands
    jaxpr = autoflow.jit(sqrt_in_loop).trace(np.float32(3.0), 5).jaxpr.jaxpr
    loops = [e for e in jaxpr.eqns if "while" in e.primitive.name or "scan" in e.primitive.name]
    assert loops, _primitives(jaxpr)
    for loop in loops:
        inside = [p for v in loop.params.values() if hasattr(getattr(v, "jaxpr", v), "eqns")
                  for p in _primitives(getattr(v, "jaxpr", v))]
        assert not any("check" in p or "effect" in p or "callback" in p for p in inside), inside
    assert "check" in [e.primitive.name for e in jaxpr.eqns]


def printing_loop(x, n):
    s = 0.0
    for i in range(n):
        print("before", i)
        s = s + math.sqrt(x - i)
        print("after", i)
    print("done")
    return s


def test_prints_around_a_failing_check_in_a_loop_are_pythons(capfd):
    for args in ((np.float32(2.5), 5), (np.float32(9.0), 3)):
        _, want = _run(lambda: printing_loop(*args))
        eager = capfd.readouterr().out
        _, got = _run(lambda: autoflow.jit(printing_loop)(*args))
        jax.effects_barrier()
        assert capfd.readouterr().out == eager
        if want is None:
            assert got is None, got
        else:
            _assert_same_error(got, want, f"printing_loop{args}")


def grid_walk(start, n):
    s = 0.0
    for k in range(n):
        s = s + GRID[start + 2 * k, 0]
    return s


def nested_sqrt(x, n, m):
    s = 0.0
    for j in range(m):
        for i in range(n):
            s = s + math.sqrt(x - i - j)
    return s


@pytest.mark.parametrize("fn,good,bad", [
    # lanes failing at other iterations, with other indices: the first failing lane's
    (grid_walk, [(0, 1), (0, 2), (1, 1)], [(2, 2), (1, 3)]),
    (nested_sqrt, [(np.float32(5.0), 2, 3), (np.float32(5.0), 0, 3)], [(np.float32(2.0), 2, 3)]),
], ids=lambda v: getattr(v, "__name__", ""))
def test_checks_carried_out_of_loops(fn, good, bad):
    check(fn, good, bad)
    batched = jax.jit(jax.vmap(autoflow.convert(fn)))
    _check_vmap(fn, batched, list(good[:1]) + list(bad) + list(good[1:2]))


@needs_primitives
def test_a_loop_bodys_check_under_grad():
    def f(x):
        return sqrt_in_loop(x, 3)

    grad = jax.grad(autoflow.jit(sqrt_in_loop))
    np.testing.assert_allclose(float(grad(jnp.float32(5.0), 3)), _central_difference(f, 5.0),
                               rtol=2e-3)
    _, want = _run(lambda: sqrt_in_loop(1.5, 3))
    _, got = _run(lambda: grad(jnp.float32(1.5), 3))
    _assert_same_error(got, want, "grad sqrt_in_loop(1.5, 3)")


def raise_in_a_loop(n):
    i = 0
    while i < n:
        if i == 3:
            raise ValueError(f"n={n} reached 3")
        i += 1
    return i


def sqrt_in_a_loop(x):
    total = 0.0
    for v in x:
        total = total + math.sqrt(v)
    return total


@needs_primitives  # (on a JAX without them a loop is JAX's own: its error is JAX's)
@pytest.mark.parametrize("fn, lanes", [
    (raise_in_a_loop, [jnp.array([1, 5, 2])]),
    (sqrt_in_a_loop, [jnp.array([[1.0, 4.0], [9.0, -4.0]])]),
])
def test_vmap_without_jit_raises_the_users_exception_itself(fn, lanes):
    # Op by op, a loop under `jax.vmap` runs compiled (JAX's own error of a failed
    # callback, `JaxRuntimeError`, was what reached the user); now Python's own, as
    # under `jit`, from the user's line
    want = _run(lambda: [fn(*lane) for lane in zip(*lanes)])[1]
    assert want is not None
    got = _run(lambda: jax.vmap(autoflow.convert(fn))(*lanes))[1]
    assert type(got) is type(want) and str(got) == str(want), repr(got)
    assert traceback.extract_tb(got.__traceback__)[-1].filename == __file__  # (the user's line)
