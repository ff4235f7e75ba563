"""Deeply nested early returns (issue 22, item 3): converted == eager Python, and the
converted code grows linearly with the nesting depth (no copies of the code after an
``if`` that may return)."""

from __future__ import annotations

import ast
import importlib.util
import itertools

import pytest

import autoflow
from .oracle import F, check


def _nested(depth, kind="float"):
    """Depth ``depth`` of ifs nested in each other's true branch; each level may return
    (a different value per level), and both branches of each level fall through."""
    lines = ["def f(x):", "    y = x"]
    for i in range(depth):
        ind = "    " * (i + 1)
        value = {"float": f"y * {i + 2}.0 + x", "int": f"{i}"}[kind]
        lines += [f"{ind}if x > {i}.5:",
                  f"{ind}    if x > {i + 1}.25:",
                  f"{ind}        if x > {2 * i + 1}.75:",
                  f"{ind}            return {value}",
                  f"{ind}        y = y + {i + 1}.0",
                  f"{ind}    z = y * 2.0",
                  f"{ind}    y = z - x"]
    lines += ["    " + ("    " * depth) + "y = y * 0.5"]
    for i in reversed(range(depth)):
        ind = "    " * (i + 1)
        lines += [f"{ind}else:", f"{ind}    y = y - {i}.0"]
    lines += ["    return y + 1.0" if kind == "float" else "    return -1"]
    return "\n".join(lines) + "\n"


def _load(src, tmp_path, name):
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


INPUTS = [F(v) for v in (-1.0, 0.7, 1.3, 1.9, 2.6, 3.3, 4.0, 5.8, 7.9, 12.0)]


@pytest.mark.parametrize("depth", [1, 2, 3, 5, 8])
def test_nested_returns_traced_conditions(depth, tmp_path):
    mod = _load(_nested(depth), tmp_path, f"nested_{depth}")
    for x in INPUTS:
        check(mod.f, x, vmap=[(v,) for v in INPUTS])


@pytest.mark.parametrize("depth", [1, 4])
def test_nested_returns_int_values_concrete(depth, tmp_path):
    mod = _load(_nested(depth, "int"), tmp_path, f"nested_int_{depth}")
    for x in INPUTS:
        check(mod.f, x)


def test_returns_of_different_types_and_none_concrete(tmp_path):
    src = '''
def f(x, mode):
    if mode > 0:
        if mode > 1:
            if mode > 2:
                return None
            w = "two"
        else:
            return (x, [x, x])
        if x > 0:
            return w
    else:
        if mode < -1:
            return
        v = x * 2
    return {"x": x}
'''
    mod = _load(src, tmp_path, "kinds")
    for x, mode in itertools.product([-1.0, 1.0], [-2, -1, 0, 1, 2, 3]):
        check(mod.f, x, mode, traced=False)


def test_return_inside_if_inside_loop(tmp_path):
    src = '''
def f(x):
    acc = 0.0
    for i in range(4):
        if x > i:
            if x > 2 * i + 1.5:
                return acc + x
            acc = acc + i
        else:
            acc = acc - 1.0
        if acc > 5.0:
            return acc
    if x > 0.5:
        if x > 9.0:
            return -x
        acc = acc * 2.0
    return acc
'''
    mod = _load(src, tmp_path, "inloop")
    xs = [F(v) for v in (-1.0, 0.7, 1.7, 2.2, 3.9, 5.1, 9.5)]
    for x in xs:
        check(mod.f, x, vmap=[(v,) for v in xs])


def test_variable_bound_only_where_nothing_returned(tmp_path):
    src = '''
def f(x):
    if x > 0:
        if x > 2:
            return x * 3.0
        y = x + 1.0
    else:
        y = x - 1.0
    return y
'''
    mod = _load(src, tmp_path, "bound")
    xs = [F(v) for v in (-1.0, 1.0, 3.0)]
    for x in xs:
        check(mod.f, x, vmap=[(v,) for v in xs])


def test_variable_unbound_on_a_falling_path_is_not_filled(tmp_path):
    # `y` is unbound when x <= 0 and nothing returned: Python raises there; autoflow
    # must not read zeros instead: the same exception, when the compiled code runs.
    src = '''
def f(x):
    if x > 0:
        if x > 2:
            return x * 3.0
        y = x + 1.0
    else:
        pass
    return y
'''
    mod = _load(src, tmp_path, "unbound")
    check(mod.f, F(1.0), vmap=[(F(3.0),)])
    check(mod.f, F(-1.0), expect_raise=UnboundLocalError)
    with pytest.raises(UnboundLocalError):
        autoflow.convert(mod.f)(F(-1.0))
    jitted = autoflow.jit(mod.f)  # one compiled function: the check is at run time
    assert float(jitted(F(1.0))) == 2.0
    with pytest.raises(UnboundLocalError):
        jitted(F(-1.0))


def test_different_structures_on_traced_paths_is_a_clear_error(tmp_path):
    src = '''
def f(x):
    if x > 0:
        if x > 2:
            return (x, x)
        y = x
    else:
        y = -x
    return y
'''
    mod = _load(src, tmp_path, "structs")
    check(mod.f, F(3.0), traced=False)
    with pytest.raises(autoflow.ConversionError):
        autoflow.jit(mod.f)(F(3.0))


def _statements(src):
    return sum(isinstance(n, ast.stmt) for n in ast.walk(ast.parse(src)))


def test_output_grows_linearly_with_depth(tmp_path):
    ratios = {}
    for depth in (2, 5, 10, 20, 30):
        src = _nested(depth)
        mod = _load(src, tmp_path, f"lin_{depth}")
        out = autoflow.to_source(mod.f)
        ratios[depth] = _statements(out) / _statements(src)
    # Copying doubled per level (2**30 statements); flags add a constant per level.
    assert max(ratios.values()) <= 1.25 * ratios[5], ratios
    assert ratios[30] < 8, ratios


def test_every_if_converts_at_depth_20(tmp_path):
    # The 400-statement cap is gone (copying needed 2**20 statements here): the
    # deepest `if` is staged too.
    mod = _load(_nested(20), tmp_path, "deep20")
    for x in (F(-1.0), F(10.3), F(18.9), F(21.0)):
        check(mod.f, x, concrete=False)
