"""Strings of traced values (issue 43), tables of a static size and the list and ``math``
vocabulary, against Python's own results.

The characters autoflow computes for a string made from traced integers
(``runtime.python.strings``) are checked against Python's ``format``/``str`` methods value by
value (mapped over many values at once); the programs below run eagerly, under
``autoflow.jit`` and under ``jax.vmap`` (``jax.grad`` for floats) through the oracle
of ``tests/semantics/oracle.py``. ``tests/test_algorithms.py`` (slow tier) has 160+
whole programs.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow import ConversionError
from autoflow.runtime.python import formatting, string_values, strings
from tests.semantics.oracle import check, check_error

VALUES = [0, 1, -1, 7, -7, 10, 42, -42, 255, -256, 1000, 65535, 123456789, -2147483648,
          2147483647]


def _texts(make, values, dtype=jnp.int32):
    """``make(n)`` (a string of a traced ``n``) for each of ``values``, decoded."""
    return _many_texts([make], values, dtype)[0]


def _many_texts(makers, values, dtype=jnp.int32):
    """``[[make(v) for v in values] for make in makers]``, decoded: one compile for all."""
    def one(n):
        return [tuple(formatting.content(make(n)).args) for make in makers]

    outs = jax.jit(jax.vmap(one))(jnp.asarray(values, dtype))
    return [[string_values._decode(c, n) for c, n in zip(np.asarray(codes), np.asarray(lengths))]
            for codes, lengths in outs]


SPECS = ["", "d", "5", "<6", "^7", "=+8", "+", " ", "-", "05", "010", "#b", "b", "08b", "#010b",
         "o", "#o", "x", "X", "#X", "#x", "x<9", "*^11", "0<5", "+#x", "3"]


def test_int_format_specs_give_pythons_characters():
    got = _many_texts([lambda n, spec=spec: strings.format(n, spec) for spec in SPECS], VALUES)
    for spec, texts in zip(SPECS, got):
        assert texts == [builtins.format(v, spec) for v in VALUES], spec


def test_str_repr_bin_oct_hex_of_traced_integers():
    names = ["str", "repr", "bin", "oct", "hex"]
    got = _many_texts([getattr(strings, name) for name in names], VALUES)
    for name, texts in zip(names, got):
        assert texts == [getattr(builtins, name)(v) for v in VALUES], name


def test_bools_and_other_integer_dtypes():
    assert _texts(strings.str, [True, False], jnp.bool_) == ["True", "False"]
    assert _texts(lambda b: strings.format(b, ">6"), [True, False], jnp.bool_) == ["     1",
                                                                                    "     0"]
    assert _texts(strings.str, [0, 200, 255], jnp.uint8) == ["0", "200", "255"]
    assert _texts(strings.hex, [-128, 127], jnp.int8) == ["-0x80", "0x7f"]


TEMPLATES = ["n={0}", "{0:>5}|{0:<5}|", "[{0!r:^9}]", "{0:+d}{0:x}", "{0!s:>7}"]
PERCENTS = ["%d", "%5d|%-5d", "%+05d", "%x %X %o %#x %#o", "%s!", "%r%%"]


def _percent(template):
    k = template.count("%") - 2 * template.count("%%")
    return lambda n: strings.percent(template, (n,) * k), lambda v: template % ((v,) * k)


def test_fstring_and_percent_templates():
    makers = [lambda n, t=t: strings.fstring(t, n) for t in TEMPLATES]
    pythons = [lambda v, t=t: t.format(v) for t in TEMPLATES]
    for t in PERCENTS:
        make, python = _percent(t)
        makers.append(make)
        pythons.append(python)
    for python, texts in zip(pythons, _many_texts(makers, VALUES)):
        assert texts == [python(v) for v in VALUES]


SLICES = [(None, None, -1), (1, None, None), (None, -1, None), (2, 5, None), (-3, None, None),
          (None, None, 2), (5, 1, -2), (-1, -4, -1), (10, 20, None), (None, 0, None)]


def test_slices():
    got = _many_texts([lambda n, sl=sl: strings.str(n)[slice(*sl)] for sl in SLICES], VALUES)
    for sl, texts in zip(SLICES, got):
        assert texts == [str(v)[slice(*sl)] for v in VALUES], sl


METHODS = [("zfill", (8,)), ("rjust", (7, "*")), ("ljust", (6,)), ("center", (9, "-")),
           ("strip", ("-1",)), ("lstrip", ("-",)), ("rstrip", ("0",)), ("upper", ()),
           ("replace", ("1", "one")), ("replace", ("42", "")), ("replace", ("5", "55", 1)),
           ("removeprefix", ("-",)), ("removesuffix", ("7",))]


def test_methods_giving_strings():
    def maker(name, args):
        return lambda n: getattr(strings.hex(n) if name == "upper" else strings.str(n),
                                 name)(*args)

    got = _many_texts([maker(name, args) for name, args in METHODS], VALUES)
    for (name, args), texts in zip(METHODS, got):
        want = [getattr(hex(v) if name == "upper" else str(v), name)(*args) for v in VALUES]
        assert texts == want, (name, args)


QUERIES = [("count", ("1",)), ("count", ("",)), ("count", ("55",)), ("find", ("4",)),
           ("find", ("", 3)), ("rfind", ("5",)), ("startswith", ("-",)), ("endswith", ("7",)),
           ("startswith", (("1", "2"),)), ("isdigit", ()), ("count", ("5", 1, -1))]


def test_methods_giving_numbers():
    def one(n):
        return [getattr(strings.str(n), name)(*args) for name, args in QUERIES]

    got = jax.jit(jax.vmap(one))(jnp.asarray(VALUES, jnp.int32))
    for (name, args), values in zip(QUERIES, got):
        assert [int(g) for g in values] == [int(getattr(str(v), name)(*args)) for v in VALUES], \
            (name, args)


def test_comparisons_and_in():
    def one(a, b):
        s, t = strings.str(a), strings.str(b)
        return (s == t, s != t, s < t, s <= t, s > t, s >= t, strings.string_contains(s, t),
                strings.string_contains("-1234567890", s), s == "42")

    pairs = [(a, b) for a in VALUES[:9] for b in VALUES[:9]]
    got = jax.jit(jax.vmap(one))(*[jnp.asarray(x, jnp.int32) for x in zip(*pairs)])
    want = [(str(a) == str(b), str(a) != str(b), str(a) < str(b), str(a) <= str(b),
             str(a) > str(b), str(a) >= str(b), str(b) in str(a), str(a) in "-1234567890",
             str(a) == "42") for a, b in pairs]
    assert [tuple(bool(got[k][i]) for k in range(9)) for i in range(len(pairs))] == want


# ---- programs, against Python, under jit and vmap -------------------------------------

def armstrong(n):
    k = len(str(n))
    total, m = 0, n
    while m > 0:
        total += (m % 10) ** k
        m //= 10
    return total == n


def digit_sum(n):
    return sum(int(d) for d in str(n))


def reverse_digits(n):
    return int(str(n)[::-1])


def palindrome(n):
    s = str(n)
    return s == s[::-1]


def digital_root(n):
    while True:
        if len(str(n)) == 1:
            break
        n = sum(int(d) for d in str(n))
    return n


def loop_over_characters(n):
    total = 0
    for i, c in enumerate(str(n)):
        total += (i + 1) * (ord(c) - ord("0"))
    return total


def binary_ones_and_gap(n):
    b = bin(n)[2:]
    return b.count("1"), len(b), len(b.strip("0"))


def joined_reverse(n):
    return int("".join(reversed(str(n))))


def parse_with_base(n):
    return int(hex(n), 16) + int(bin(n)[2:], 2) + int(f" {n}_0 ")


@pytest.mark.parametrize("fn, batched", [
    (armstrong, True), (digit_sum, True), (reverse_digits, False), (palindrome, True),
    (digital_root, False), (loop_over_characters, True), (binary_ones_and_gap, False),
    (joined_reverse, False), (parse_with_base, False)])
def test_digit_programs(fn, batched):
    # (each case is compiled again by the oracle: three cases, and `vmap` for some; the
    # slow tier's tests/test_algorithms.py runs more of each kind)
    cases = [(153,), (1230,), (12321,)] if batched else [(1230,)]
    for case in cases:
        check(fn, *case)
    if batched:
        check(fn, *cases[0], concrete=False, traced=False, vmap=cases[1:])


def message_before_raise(n):
    msg = f"number={n}"
    if n < 0:
        raise ValueError(msg)
    return n


def message_in_assert(n):
    detail = "n is %d" % n
    assert n % 2 == 0, detail
    return n // 2


def test_a_message_made_before_a_raise_shows_the_value():
    f = autoflow.jit(message_before_raise)
    assert f(3) == 3
    with pytest.raises(ValueError) as info:
        f(-3)
    assert str(info.value) == "number=-3"
    with pytest.raises(AssertionError) as info:
        autoflow.jit(message_in_assert)(5)
    assert str(info.value) == "n is 5"


def prints_strings(n):
    s = str(n)
    print(s, s[::-1], len(s), f"{n:#x}")
    return n


def test_a_string_printed_shows_the_value(capfd):
    prints_strings(255)
    eager = capfd.readouterr().out
    autoflow.jit(prints_strings)(255)
    jax.effects_barrier()
    assert capfd.readouterr().out == eager == "255 552 3 0xff\n"


def float_digits(x):
    return len(str(x))


def float_key(x):
    d = {}
    d[f"{x:.2f}"] = 1
    return x


def returns_text(n):
    return str(n)


def test_what_cannot_be_known_is_autoflows_error():
    assert float_digits(1.5) == 3
    exc = check_error(float_digits, 1.5, names=[])
    assert "`len()` of a string made from a traced float32" in str(exc)
    assert "return len(str(x))" in str(exc)
    exc = check_error(float_key, 1.5, names=[])
    assert "hashes (a dict key or a set item)" in str(exc)
    with pytest.raises(ConversionError, match="returns a string made from traced values"):
        autoflow.jit(returns_text)(5)


def bad_parse(n):
    return int(str(n) + "x")


def too_big(n):
    return int(str(n) + "0000000000")


def test_pythons_errors_when_the_compiled_code_runs():
    with pytest.raises(ValueError, match=r"invalid literal for int\(\) with base 10: '12x'"):
        autoflow.jit(bad_parse)(12)
    with pytest.raises(OverflowError, match="does not fit in int32"):
        autoflow.jit(too_big)(12)


def test_no_tracer_text_in_a_string_of_a_traced_value():
    out = io.StringIO()

    def f(x, n):
        a = str(x)
        b = f"{n}/{x:.3f}"
        print(a, b, repr(n))
        return x

    with contextlib.redirect_stdout(out):
        autoflow.jit(f)(1.5, 3)
        jax.effects_barrier()
    assert "Tracer" not in out.getvalue() and out.getvalue() == "1.5 3/1.500 3\n"


# ---- a string a traced `if` chooses --------------------------------------------------------

def status_of_a_solve(x, tol):
    err = x
    k = 0
    while err > tol and k < 50:
        err = err * 0.5
        k += 1
    if err <= tol:
        status = "converged"
    else:
        status = "stopped"
    print(f"{status} after {k} steps (err={err:.2e})")
    return err


def message_extended_on_one_path(x, n):
    msg = f"x={x:.3f} n={n}"
    if n > 2:
        msg = msg + " big"
    print(msg, msg.upper())
    return x


def label_of_a_sign(x):
    label = "pos" if x > 0 else "neg"
    if x > 3:
        raise ValueError(f"{label}: too big")
    print("label:", label)
    return x


def size_word(x):
    if x > 1:
        s = "big"
    elif x > 0:
        s = "small"
    else:
        s = "neg"
    t = "B" if x > 1 else ("S" if x > 0 else "N")
    print(s, t)
    return x


# (longer than a chunk of an `elif` chain: `transforms.chains.CHUNK`)
def grade_of(x):
    if x < 0:
        g = 'a'
    elif x < 1:
        g = 'b'
    elif x < 2:
        g = 'c'
    elif x < 3:
        g = 'd'
    elif x < 4:
        g = f"e{x:.1f}"
    elif x < 5:
        g = 'f'
    elif x < 6:
        g = 'g'
    elif x < 7:
        g = 'h'
    elif x < 8:
        g = 'i'
    elif x < 9:
        g = f"j{x:.1f}"
    elif x < 10:
        g = 'k'
    elif x < 11:
        g = 'l'
    elif x < 12:
        g = 'm'
    elif x < 13:
        g = 'n'
    elif x < 14:
        g = f"o{x:.1f}"
    elif x < 15:
        g = 'p'
    elif x < 16:
        g = 'q'
    elif x < 17:
        g = 'r'
    else:
        g = f"over {x:.1f}"
    print("grade", g)
    return x


def _refuse(message):
    raise ValueError("helper says " + message)


def raised_by_a_helper(x):
    m = "pos" if x > 0 else "neg"
    if x < 5:
        _refuse(m)  # (the exception made in a helper while tracing: its string at run time)
    return x


def _printed(run, *args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            run(*args)
        except ValueError as e:
            print("raised", e)
        jax.effects_barrier()
    return out.getvalue()


@pytest.mark.parametrize("fn, inputs", [
    (status_of_a_solve, [(1.0, 1e-3), (1.0, 1e-30), (1e-5, 1e-3)]),
    (message_extended_on_one_path, [(1.23456, 3), (1.23456, 1)]),
    (label_of_a_sign, [(1.0,), (-1.0,), (4.0,)]),
    (raised_by_a_helper, [(1.0,), (-1.0,), (6.0,)]),
    (size_word, [(2.0,), (0.5,), (-1.0,)]),
    (grade_of, [(-1.0,), (3.5,), (9.2,), (16.5,), (17.5,), (30.0,)]),
], ids=lambda v: getattr(v, "__name__", ""))
def test_a_string_a_traced_if_chooses_is_the_taken_paths(fn, inputs):
    # (two strings, Python's or made from traced values, were autoflow's error: a
    # string is no array; the text of the path taken is now made at run time)
    jitted = autoflow.jit(fn)
    for args in inputs:
        args = tuple(jnp.float32(a) if isinstance(a, float) else jnp.int32(a) for a in args)
        want = _printed(fn, *args)
        assert _printed(jitted, *args) == want and _printed(jitted, *args) == want
    if fn not in (label_of_a_sign, raised_by_a_helper):  # (under vmap: lane by lane)
        lanes = [tuple(jnp.float32(a) if isinstance(a, float) else jnp.int32(a) for a in args)
                 for args in inputs]
        batched = [jnp.stack(col) for col in zip(*lanes)]
        got = _printed(jax.vmap(autoflow.convert(fn)), *batched)
        assert sorted(got.splitlines()) == sorted("".join(_printed(fn, *a) for a in lanes)
                                                  .splitlines())


def test_an_elif_chain_of_strings_is_not_staged_2_to_the_n_times(monkeypatch):
    # (each `if` of the chain restarted its branches to choose between their strings,
    # the `elif`s inside again each time: 2^n stagings, 20 s for 14 branches; a chain
    # longer than a chunk was autoflow's error: `g` assigned on one path only)
    from autoflow.runtime.cond import statements
    staged, stage = [], statements._stage_branches

    def counted(*args, **kwargs):
        staged.append(1)
        return stage(*args, **kwargs)

    monkeypatch.setattr(statements, "_stage_branches", counted)
    jax.make_jaxpr(autoflow.convert(grade_of))(jnp.float32(2.0))
    # (each `if` still stages the rest of the chain twice, once to learn that it chooses,
    # the `elif`s inside it remembered: about n^2 / 2)
    assert 18 <= len(staged) < 18 * 18


def chosen_in_one_mode(x, mode):
    if x > 0:
        s = "pos"
    else:
        s = "neg" if mode else "pos"
    print(s)
    if mode:
        return x
    return x + len(s)  # (one string on both paths: Python's `str`, whose length is known)


def test_what_an_if_chose_before_is_checked_again():
    # (an `if` starts from the strings it chose when last staged: here another call,
    # whose paths give one string, must not find a chosen one)
    jitted = autoflow.jit(chosen_in_one_mode, static_argnames="mode")
    for x, mode in ((-1.0, True), (-1.0, False), (1.0, True), (1.0, False), (-2.0, True)):
        assert _printed(jitted, jnp.float32(x), mode) == _printed(chosen_in_one_mode,
                                                                  jnp.float32(x), mode)
        assert jitted(jnp.float32(x), mode) == chosen_in_one_mode(jnp.float32(x), mode)


# ---- tables of a static size ------------------------------------------------------------

def fib_table(n):
    fib = [0] * 20
    fib[1] = 1
    for i in range(2, n + 1):
        fib[i] = fib[i - 1] + fib[i - 2]
    return fib[n]


def grid_paths(m, n):
    grid = [[1] * 6 for _ in range(6)]
    for i in range(1, m):
        for j in range(1, n):
            grid[i][j] = grid[i - 1][j] + grid[i][j - 1]
    return grid[m - 1][n - 1]


def float_table(x, k):
    weights = [0.5] * 4 + [2.0]
    weights[k] = weights[k] * x
    return weights[k] + weights[4] * x


def display_read(x, i):
    return [1.0, 5.0, 10.0][i] * x + (2, 3)[i % 2]


@pytest.mark.parametrize("fn, cases, grad", [
    (display_read, [(1.5, 0), (2.0, 2), (-1.0, 1)], True),
    (fib_table, [(0,), (1,), (10,), (19,)], False),
    (grid_paths, [(1, 1), (3, 4), (6, 6), (2, 5)], False),
    (float_table, [(1.5, 0), (2.0, 3), (-1.0, 4)], True),
])
def test_tables_of_a_static_size(fn, cases, grad):
    for case in cases:
        check(fn, *case, grad=grad)
    check(fn, *cases[0], concrete=False, traced=False, vmap=cases[1:])


def aliased_rows(n):
    t = [[0] * 3] * 3
    t[n][1] = 5
    return t[0][1]


def write_through_a_row(n):
    t = [[0] * 3 for _ in range(3)]
    row = t[n]
    row[1] = 5
    return t[n][1]


def index_not_rewritten(n, xs):
    t = xs
    return t[n - 1]


def test_table_messages():
    exc = check_error(aliased_rows, 1, names=[])
    assert "some of its rows are the same list" in str(exc)
    exc = check_error(write_through_a_row, 1, names=[])
    assert "writes into a row read from a Python list of lists" in str(exc)
    with pytest.raises(autoflow.AutoflowError) as info:
        autoflow.jit(lambda n: index_not_rewritten(n, [1, 2, 3]))(2)
    assert "`n` (an argument of `index_not_rewritten`) is traced" in str(info.value)


def test_a_large_table_is_one_constant():
    table = list(range(5000))

    def read(i):
        return table[i] * 2

    closed = jax.make_jaxpr(autoflow.convert(read))(jnp.int32(3))
    assert sum(np.size(c) == 5000 for c in closed.consts) == 1
    assert len(closed.jaxpr.eqns) < 20
    assert autoflow.jit(read)(4321) == 8642


# ---- list methods and math of integers --------------------------------------------------

def sort_and_query(a, b, c, v):
    xs = [a, b, c]
    xs.sort()
    ys = [a, b, c]
    ys.sort(key=lambda t: -t, reverse=True)
    return xs, ys, xs.index(v), [a, b, c, v].count(v)


def reverse_in_loop(a, b, n):
    xs = [a, b, a + b]
    for _ in range(n):
        xs.reverse()
    return xs


def median(a, b, c):
    xs = [a, b, c]
    xs.sort()
    return xs[1]


def math_of_integers(a, b):
    return (math.gcd(a, b), math.lcm(a, b), math.isqrt(abs(a) + b * b), math.comb(abs(a) % 20, 3),
            math.perm(abs(b) % 10, 2), math.factorial(abs(a) % 13))


@pytest.mark.parametrize("fn, cases, grad", [
    (sort_and_query, [(3, 1, 2, 2), (1, 1, 5, 1), (9, 7, 8, 9)], False),
    (reverse_in_loop, [(1.0, 2.0, 3), (4.0, -1.0, 2)], False),
    (median, [(3.0, 1.0, 2.0), (1.0, 5.0, 0.5), (2.0, 2.0, 1.0)], True),
    (math_of_integers, [(12, 18), (-24, 7), (35, 64)], False),
])
def test_list_methods_and_math(fn, cases, grad):
    for case in cases:
        check(fn, *case, grad=grad)
    check(fn, *cases[0], concrete=False, traced=False, vmap=cases[1:])


def missing(a):
    return [1, 2, 3].index(a)


def comb_of(n, k):
    return math.comb(n, k)


def test_pythons_errors_of_list_and_math_vocabulary():
    for fn, args, exc in [(missing, (5,), ValueError), (comb_of, (-1, 2), ValueError),
                          (comb_of, (3, -1), ValueError), (math.factorial, (-2,), ValueError)]:
        with pytest.raises(exc) as eager:
            fn(*args)
        with pytest.raises(exc) as staged:
            autoflow.jit(fn if fn is not math.factorial else lambda n: math.factorial(n))(*args)
        assert str(staged.value) == str(eager.value)
    with pytest.raises(TypeError, match="cannot be interpreted as an integer"):
        autoflow.jit(lambda x: math.gcd(x, 4))(2.0)
    with pytest.raises(OverflowError, match=r"math.factorial\(13\) is 6227020800"):
        autoflow.jit(lambda n: math.factorial(n))(13)


def test_a_message_raised_while_tracing_shows_the_types_of_its_values():
    # every path reaches the `raise`: it is raised while tracing, when no value is known
    def always(x):
        raise ValueError(f"bad {x:.2f} of {x}")

    with pytest.raises(ValueError, match=r"^bad <traced float32\[\]> of <traced float32\[\]>\n"):
        autoflow.jit(always)(jnp.float32(1.5))
