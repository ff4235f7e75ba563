"""The rest of Python on traced values: ``match``, builtins, Python tables
indexed by a traced loop index, ``print`` formatting, extended dtypes, PEP 695.

Each check runs the function eagerly (the oracle) and converted, on concrete
inputs (``autoflow.convert``: Python semantics, Python result types) and on
traced ones (``autoflow.jit``, ``jax.vmap``).
"""

from __future__ import annotations

import enum
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow.errors import ConversionError

from .equivalence import assert_same


def both(fn, *args, **jit_kwargs):
    """Eager vs converted-concrete (same values and types) vs jitted."""
    expected = fn(*args)
    concrete = autoflow.convert(fn)(*args)
    assert_same(concrete, expected, f"{fn.__name__}{args} concrete")
    for c, e in zip(jax.tree_util.tree_leaves(concrete), jax.tree_util.tree_leaves(expected)):
        assert type(c) is type(e), f"{fn.__name__}{args}: {type(c)} != eager {type(e)}"
    traced = autoflow.jit(fn, **jit_kwargs)(*args)
    assert_same(traced, expected, f"{fn.__name__}{args} jit")
    return traced


def _primitives(fn, *args):
    from autoflow.runtime.common.events import plain_loops

    with plain_loops():  # autoflow's own primitives shown as the lax operations they are
        jaxpr = jax.make_jaxpr(autoflow.convert(fn))(*args)
    out = set()

    def visit(j):
        for eqn in j.eqns:
            out.add(eqn.primitive.name)
            for p in eqn.params.values():
                for sub in (p if isinstance(p, (list, tuple)) else [p]):
                    if hasattr(sub, "jaxpr"):
                        visit(sub.jaxpr if hasattr(sub.jaxpr, "eqns") else sub.jaxpr.jaxpr)
                    elif hasattr(sub, "eqns"):
                        visit(sub)
    visit(jaxpr.jaxpr)
    return out


# ---------------------------------------------------------------------------
# match
# ---------------------------------------------------------------------------

class Mode(enum.IntEnum):
    FAST = 0
    SLOW = 1


def match_literals(mode, x):
    match mode:
        case 0 | 1:
            y = x + 1
        case 2:
            y = 2 * x
        case -1:
            y = -x
        case _:
            y = x * x
    return y


def match_guard_capture(mode, x, scale):
    match mode:
        case 0 if scale > 1:
            y = scale * x
        case 0:
            y = x
        case n if scale > 2:
            y = n * x + scale
        case n:
            y = n * x
    return y


def match_returns(mode, x):
    t = x * 2
    match mode:
        case 1:
            return t + 1
        case 2:
            tmp = t * 3   # a branch temporary
            return tmp - 1
        case Mode.SLOW:   # unreachable after `case 1`, as in Python
            return t
    return -t


def match_no_default(flag, x):
    y = x
    match flag:
        case True:
            y = x + 10
        case False:
            y = x - 10
    return y


def match_subject_expr(x, k):
    calls = []

    def mode():
        calls.append(1)
        return k % 3

    match mode():
        case 0:
            y = x
        case 1:
            y = x + 1
        case _:
            y = x + 2
    return y, len(calls)


def match_in_loop(x, n):
    total = x * 0
    for i in range(n):
        match i % 3:
            case 0:
                total = total + x
            case 1 | 2:
                total = total - 1.0
    return total


@pytest.mark.parametrize("mode", [0, 1, 2, -1, 7])
def test_match_literals(mode):
    both(match_literals, mode, 3.0)


@pytest.mark.parametrize("mode,scale", [(0, 2.0), (0, 0.5), (3, 3.0), (3, 1.0)])
def test_match_guard_capture(mode, scale):
    both(match_guard_capture, mode, 3.0, scale)


@pytest.mark.parametrize("mode", [1, 2, 5])
def test_match_early_return(mode):
    both(match_returns, mode, 1.5)


@pytest.mark.parametrize("flag", [True, False])
def test_match_bool_subject(flag):
    both(match_no_default, flag, 1.0)


@pytest.mark.parametrize("k", [0, 1, 2, 5])
def test_match_subject_evaluated_once(k):
    y, calls = autoflow.convert(match_subject_expr)(1.0, k)
    assert (y, calls) == match_subject_expr(1.0, k) and calls == 1
    y, calls = autoflow.jit(match_subject_expr)(1.0, k)
    assert_same(y, match_subject_expr(1.0, k)[0])


def test_match_in_traced_loop_and_vmap():
    both(match_in_loop, 2.0, 7)
    both(match_in_loop, 2.0, 7, static_argnums=1)
    modes = jnp.array([0, 1, 2, -1, 9])
    out = jax.vmap(autoflow.convert(match_literals), in_axes=(0, None))(modes, 3.0)
    assert_same(out, jnp.array([match_literals(int(m), 3.0) for m in modes]))


def test_match_grad():
    g = jax.grad(autoflow.convert(match_literals), argnums=1)
    for mode in (0, 2, -1, 4):
        assert_same(jax.jit(g, static_argnums=())(mode, 3.0),
                    jax.grad(match_literals, argnums=1)(mode, 3.0))


def match_class(p):
    match p:
        case (a, b):
            return a + b
        case {"x": v}:
            return v
        case int():
            return p + 1
    return 0


def test_match_other_patterns_run_as_python():
    f = autoflow.convert(match_class)
    for p in [(1, 2), {"x": 5}, 3, "s"]:
        assert f(p) == match_class(p)


def test_match_unstageable_on_traced_subject_is_reported_at_the_case():
    f = autoflow.jit(match_class)
    with pytest.raises(ConversionError) as info:
        f(jnp.int32(3))
    msg = str(info.value)
    line = match_class.__code__.co_firstlineno + 2  # `case (a, b):`
    assert f"test_vocabulary.py:{line}:" in msg and "case (a, b):" in msg
    assert "cannot be staged" in msg


def test_match_traced_subject_switches_on_values():
    # staged per case: each a `lax.cond`, or a select of the one scalar its
    # cheap branches differ in (runtime/cond/select_or_cond.py)
    prims = _primitives(match_literals, jnp.int32(2), 3.0)
    assert prims & {"cond", "select_n"}
    for mode in (-1, 0, 1, 2, 5):
        assert autoflow.jit(match_literals)(jnp.int32(mode), 3.0) == match_literals(mode, 3.0)


# ---------------------------------------------------------------------------
# builtins
# ---------------------------------------------------------------------------

def builtins_scalars(x, y):
    return (max(x, 3.0), min(x, y, 0.5), max(x, y), min(y, x), abs(x - y), round(x),
            round(x, 1), divmod(x, 2.0), pow(x, 2), int(x), int(-x), float(y), bool(x),
            bool(x - x))


def builtins_loop(x, n):
    best = 0.0
    for i in range(n):
        best = max(best, x * i - i * i)
        best = min(best, 100.0)
    return best


def builtins_reductions(xs):
    ys = [xs[0], xs[1] * 2, xs[2] - 1]
    return (sum(xs), sum(xs, 10.0), sum(ys), any(xs > 2.5), all(xs > 0), any(ys),
            all([xs[0] > 0, True]), any([False, xs[1] < 0]), max(xs), min(xs), max(ys),
            len(xs))


@pytest.mark.parametrize("x,y", [(2.5, 1.0), (-1.7, 4.0), (3.5, 3.5), (0.0, -2.0)])
def test_builtins_on_scalars(x, y):
    both(builtins_scalars, x, y)


def test_builtin_max_in_traced_loop():
    both(builtins_loop, 3.0, 6)
    both(builtins_loop, 3.0, 6, static_argnums=1)


@pytest.mark.parametrize("xs", [np.array([1.0, 2.0, 3.0], np.float32),
                                np.array([-1.0, 0.0, 4.0], np.float32)])
def test_builtin_reductions(xs):
    expected = builtins_reductions(xs)
    actual = autoflow.jit(builtins_reductions)(xs)
    assert_same(actual, expected)
    assert_same(autoflow.convert(builtins_reductions)(jnp.asarray(xs)),
                builtins_reductions(jnp.asarray(xs)))


def test_max_picks_like_python_with_nan():
    def f(a, b):
        return max(a, b), min(a, b), max(b, a)
    for a, b in [(float("nan"), 1.0), (1.0, float("nan"))]:
        assert_same(autoflow.jit(f)(a, b), f(a, b))


def test_concrete_builtins_keep_python_types():
    f = autoflow.convert(lambda x: (max(x, 3), int(x), float(x), bool(x), sum([x, 1])))
    out = f(2)
    assert out == (3, 2, 2.0, True, 3) and [type(v) for v in out] == [int, int, float, bool, int]
    g = autoflow.convert(lambda xs: (max(xs, key=len), min([3, 1, 2]), int("12", 8), any([])))
    assert g(["a", "bbb"]) == ("bbb", 1, 10, False)


def test_shadowed_builtin_is_left_alone():
    def f(x):
        max = lambda a, b: a  # noqa: E731, A001
        return max(x, 10)
    assert autoflow.convert(f)(1) == 1
    assert "af.max" not in autoflow.to_source(f)


# ---------------------------------------------------------------------------
# Python tables indexed by a traced loop index
# ---------------------------------------------------------------------------

BETA = np.array([0.5, 1.5, 2.5, 3.5, 4.5])
COEFFS = [1.0, -2.0, 0.5, 3.0, 0.25]
ROWS = (np.ones(2), np.arange(2.0), np.array([3.0, -1.0]), np.zeros(2), np.full(2, 7.0))


def horner(x, n):
    acc = x * 0.0
    for i in range(1, n):
        acc = acc * x + COEFFS[i] * BETA[i - 1]
    return acc


def rows_sum(x, n):
    acc = jnp.zeros(2)
    k = 0
    while k < n:
        acc = acc + ROWS[k] * x
        k += 1
    return acc


def local_table(x, n):
    table = [1.0, 2.0, 3.0, 4.0]
    out = x
    for i in range(n):
        out = out + table[i % 4]
    return out


def test_tables_indexed_by_traced_index():
    both(horner, 2.0, 5, static_argnums=1)
    both(horner, 2.0, 5)          # traced trip count
    both(rows_sum, 1.5, 4)
    both(local_table, 1.0, 6)


def test_table_loop_stays_rolled():
    prims = _primitives(horner, 2.0, 5)
    assert "while" in prims or "scan" in prims, prims
    src = autoflow.to_source(horner)
    assert "af.getitem(COEFFS, i)" in src and "af.getitem(BETA, i - 1)" in src


def test_array_parameters_keep_plain_indexing():
    def f(xs, n):
        s = 0.0
        for i in range(n):
            s = s + xs[i]
        return s
    assert "xs[i]" in autoflow.to_source(f) and "getitem" not in autoflow.to_source(f)


def list_writes(x, n):
    vals = [0.0, 0.0, 0.0, 0.0]
    for i in range(n):
        vals[i % 4] = vals[i % 4] + x * i
    return vals


def test_list_writes_with_traced_index():
    expected = list_writes(2.0, 6)
    assert_same(autoflow.jit(list_writes, static_argnums=1)(2.0, 6), expected)
    assert_same(autoflow.jit(list_writes)(2.0, 6), expected)
    assert autoflow.convert(list_writes)(2.0, 6) == expected


NAMES = ["a", "b", "c"]


def test_unstackable_table_is_a_clear_error():
    def f(n):
        out = 0
        for i in range(n):
            out = out + len(NAMES[i])
        return out
    with pytest.raises(ConversionError) as info:
        autoflow.jit(f)(3)
    msg = str(info.value)
    assert "NAMES[i]" in msg and "list" in msg and "cannot be stacked" in msg
    assert autoflow.convert(f)(3) == f(3)


# ---------------------------------------------------------------------------
# print with f-strings and str.format
# ---------------------------------------------------------------------------

def printing(x, n):
    loss = x
    for i in range(n):
        loss = loss * 0.5
        print(f"step {i}: loss={loss:.4f} {{lit}} r={loss!r} w=[{loss:>{8}.2f}]", "end", sep="|")
        print("fmt {:.2e} {name:03d}".format(loss, name=i + 1))
    return loss


def test_print_formats_traced_values_every_run(capfd):
    # (`x` a float32 array: eager `loss` is one too, so `!r` shows `Array(...)`
    # in both; a Python float carried through a traced loop becomes a float32)
    x = jnp.float32(1.0)
    printing(x, 3)
    eager = capfd.readouterr().out
    assert eager.count("step") == 3 and "loss=0.1250" in eager
    autoflow.convert(printing)(x, 3)
    assert capfd.readouterr().out == eager
    f = autoflow.jit(printing)
    for _ in range(2):  # printed on every call, not once at trace time
        f(x, 3)
        jax.effects_barrier()
        assert capfd.readouterr().out == eager
    autoflow.jit(printing, static_argnums=1)(x, 3)
    jax.effects_barrier()
    assert capfd.readouterr().out == eager


def test_print_fstring_source_reads_as_a_template():
    src = autoflow.to_source(printing)
    assert "af.fstring('step {0}: loss={1:.4f} {{lit}} r={2!r} w=[{3:>{4}.2f}]', i, loss" in src


# ---------------------------------------------------------------------------
# typed PRNG keys (extended dtypes) through traced if/while/for
# ---------------------------------------------------------------------------

def key_walk(key, x, n):
    if x > 0:
        key, sub = jax.random.split(key)
        x = x + jax.random.normal(sub)
    for _ in range(n):
        key, sub = jax.random.split(key)
        x = x + jax.random.uniform(sub)
    while x < 10:
        key, sub = jax.random.split(key)
        x = x + 1 + jax.random.uniform(sub)
    return key, x


@pytest.mark.parametrize("impl", [None, "rbg"])
@pytest.mark.parametrize("x", [1.0, -1.0])
def test_typed_keys_carried(impl, x):
    key = jax.random.key(0) if impl is None else jax.random.key(0, impl=impl)
    k_e, x_e = key_walk(key, x, 3)
    for fn in (autoflow.jit(key_walk), autoflow.jit(key_walk, static_argnums=2)):
        k_a, x_a = fn(key, x, 3)
        assert k_a.dtype == k_e.dtype
        assert_same(jax.random.key_data(k_a), jax.random.key_data(k_e))
        assert_same(x_a, x_e)


def test_typed_keys_under_vmap():
    keys = jax.random.split(jax.random.key(1), 4)
    xs = jnp.array([1.0, -1.0, 3.0, 12.0])
    k_a, x_a = jax.vmap(autoflow.convert(key_walk), in_axes=(0, 0, None))(keys, xs, 2)
    for i in range(4):
        k_e, x_e = key_walk(keys[i], xs[i], 2)
        assert_same(jax.random.key_data(k_a[i]), jax.random.key_data(k_e))
        assert_same(x_a[i], x_e)


KEY = jax.random.key(3)  # (a concrete key the function reads: not an argument)


def walk_from_a_global_key(x, n):
    key = KEY
    for i in range(n):
        key, sub = jax.random.split(key)
        x = x + jax.random.normal(sub) * x
    return x


def test_a_concrete_typed_key_carried_by_a_staged_loop():
    # (staging read the key's bytes with NumPy, which a typed key refuses: TypeError)
    want = walk_from_a_global_key(jnp.float32(1.0), 3)
    assert_same(autoflow.jit(walk_from_a_global_key)(jnp.float32(1.0), 3), want)
    lanes = jax.vmap(autoflow.convert(walk_from_a_global_key), in_axes=(0, None))(
        jnp.array([1.0, 2.0]), 3)
    assert_same(lanes[1], walk_from_a_global_key(jnp.float32(2.0), 3))


def test_key_and_array_in_one_variable_is_a_clear_error():
    def f(key, x):
        if x > 0:
            k = key
        else:
            k = jnp.zeros((), jnp.uint32)
        return k
    with pytest.raises(ConversionError):
        autoflow.jit(f)(jax.random.key(0), 1.0)


# ---------------------------------------------------------------------------
# PEP 695 generic functions and methods (Python 3.12+)
# ---------------------------------------------------------------------------

GENERIC_SOURCE = '''
def clip[T](x: T, lo: T) -> T:
    if x < lo:
        x = lo
    return x


def named[T: (float, int)](x: T) -> T:
    y = x
    for i in range(3):
        y = y + i
    return y, T.__name__


class Box[T]:
    def __init__(self, v: T):
        self.v = v

    def grow[U](self, k: U) -> T:
        out = self.v
        while out < 10:
            out = out * k
        return out
'''


@pytest.mark.skipif(sys.version_info < (3, 12), reason="PEP 695 syntax needs Python 3.12")
def test_pep695_generics(tmp_path):
    import importlib.util
    path = tmp_path / "generic_module.py"
    path.write_text(GENERIC_SOURCE)
    spec = importlib.util.spec_from_file_location("generic_module", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for x in (1.0, 3.0):
        both(mod.clip, x, 2.0)
    assert autoflow.convert(mod.named)(1.0) == mod.named(1.0)
    assert mod.clip.__type_params__ and autoflow.convert(mod.clip).__annotations__ == \
        mod.clip.__annotations__
    box = mod.Box(1.5)
    assert_same(autoflow.jit(box.grow)(2.0), box.grow(2.0))


# ---------------------------------------------------------------------------
# symbolic shapes (jax.export shape polymorphism)
# ---------------------------------------------------------------------------

def weighted_rows(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + x[i] * i
    for i in range(1, x.shape[0] - 1, 2):
        s = s - x[i]
    return s


def sum_rows(x):
    s = jnp.zeros(x.shape[1:])
    for row in x:
        s = s + row
    return s


@pytest.mark.parametrize("fn,spec,shape", [(weighted_rows, "b", (5,)), (weighted_rows, "b", (2,)),
                                           (sum_rows, "b, 3", (4, 3))])
def test_range_over_symbolic_dimension(fn, spec, shape):
    from jax import export
    exp = export.export(autoflow.jit(fn))(
        jax.ShapeDtypeStruct(export.symbolic_shape(spec), jnp.float32))
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    assert_same(exp.call(x), fn(x))


def test_a_jitted_conversion_is_a_jax_jit_by_its_class():
    # `jax.export.export` asks `isinstance(f, jax.stages.Wrapped)`, which from Python 3.12
    # looks for the protocol's methods on the class, not through `__getattr__`.
    import inspect
    jitted = autoflow.jit(weighted_rows)
    assert isinstance(jitted, jax.stages.Wrapped)
    for name in ("__call__", "trace", "lower", "eval_shape"):
        assert inspect.getattr_static(jitted, name, None) is not None, name
    x = jnp.arange(4.0)
    assert_same(jitted.lower(x).compile()(x), weighted_rows(np.arange(4.0)))
    assert jitted.eval_shape(x).shape == ()
    assert jitted.trace(x).jaxpr.out_avals[0].shape == ()


# ---------------------------------------------------------------------------
# locations in compiled code
# ---------------------------------------------------------------------------

def located(x, n):
    if x > 0:
        x = x * 2
    else:
        x = x - 1
    i = 0
    while i < n:
        x = x + jnp.sin(x)
        i += 1
    for j in range(n):
        x = x * j
    match n:
        case 1:
            x = -x
        case 2:
            x = x + 1
    return x


def test_compiled_locations_are_the_users_lines():
    import os
    import re
    lowered = autoflow.jit(located).lower(1.0, 3)
    try:
        text = lowered.as_text(debug_info=True)
    except TypeError:
        pytest.skip("this JAX's as_text has no debug_info")
    files = set(re.findall(r'loc\("([^"]+\.py)":\d+', text))
    package = os.path.dirname(autoflow.__file__)
    assert files and not any(f.startswith(package) for f in files), files
    first = located.__code__.co_firstlineno
    lines = {int(n) for n in re.findall(r'test_vocabulary\.py":(\d+):', text)}
    for offset in (1, 6, 9, 12):  # the `if`, `while`, `for` and first `case` lines
        assert first + offset in lines, (first + offset, sorted(lines))


A_TABLE = np.arange(12.0).reshape(3, 4)
MATS = [jnp.eye(2) * k for k in range(4)]


def mixed_program(x, n):
    hist = [0.0, 0.0, 0.0]
    i = 0
    while i < n:
        match i % 4:
            case 0:
                x = x + A_TABLE[i % 3, 1]
            case 1 | 2:
                x = x * 0.9
            case _:
                if x > 50:
                    break
                x = x + 1
        hist[i % 3] = max(hist[i % 3], x)
        i += 1
    v = MATS[n % 4] @ jnp.ones(2)
    return x, hist, v, divmod(n, 3), len(hist)


@pytest.mark.parametrize("n", [0, 1, 5, 9])
def test_mixed_program(n):
    expected = mixed_program(2.0, n)
    assert_same(autoflow.jit(mixed_program)(2.0, n), expected)
    assert_same(autoflow.convert(mixed_program)(2.0, n), expected)


def match_break_continue(x, n):
    total = x * 0
    for i in range(n):
        match i % 4:
            case 0:
                continue
            case 3:
                match n:
                    case 7:
                        break
                    case _:
                        total = total + 100.0
            case k:
                total = total + k * x
    return total


@pytest.mark.parametrize("n", [3, 7, 9])
def test_match_with_break_continue_and_nesting(n):
    both(match_break_continue, 2.0, n)
    both(match_break_continue, 2.0, n, static_argnums=1)


def test_check_reports_each_case_of_matches():
    from autoflow.check import check_source
    src = (
        "def f(mode, x):\n"
        "    match mode:\n"
        "        case 0 | 1:\n"
        "            x = x + 1\n"
        "        case 2 if x > 0:\n"
        "            x = 2 * x\n"
        "        case _:\n"
        "            pass\n"
        "    return x\n"
        "\n"
        "def g(p):\n"
        "    match p:\n"
        "        case (a, b):\n"
        "            return a\n"
        "    return p\n")
    found = check_source(src, "m.py")
    cases = [(f.line, f.kind, f.becomes) for f in found if f.function == "f"]
    assert cases == [(3, "case", "lax.cond"), (5, "case", "lax.cond")]
    # a sequence pattern's structure is Python's test, its leaves stage: a case too
    (g,) = [f for f in found if f.function == "g"]
    assert (g.line, g.kind, g.status) == (13, "case", "fails") and "sequence pattern" in g.reason
