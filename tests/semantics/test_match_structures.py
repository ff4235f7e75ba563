"""``match`` with sequence, mapping and class patterns over traced values, against
eager Python.

Python tests a pattern's structure (a sequence of this length, these keys, an
instance with these attributes) on the tuples, dicts and objects that hold the
traced values, and compares the leaves; the leaves' comparisons stage like any
``if``. A guard that reads a captured name, and goes on to the next case when it is
false, stages too. A traced array as the subject of such a pattern is autoflow's
error at its case (Python would need its structure).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import pytest

import autoflow
from autoflow import ConversionError

from .oracle import check, check_error


def signs(x, y):
    match (x > 0, y > 0):
        case (True, True):
            r = x + y
        case (True, False):
            r = x - y
        case (False, True):
            r = y - x
        case _:
            r = x * y
    return r


def pairs(mode, x):
    match (mode, x):
        case (0, v):
            return v * v
        case (1, v) | (2, v) if False:
            return v
        case (1, v):
            return jnp.sin(v)
        case (m, v) if m > 2:
            return v * m
    return x - 1.0


def starred(a, b, c):
    match [a, b, c]:
        case [first, *middle, 0]:
            return first + len(middle)
        case [*rest, last] if last > 5:
            return sum(rest) * last
        case [x, y, z]:
            return x - y - z
    return -1


def guard_reads_captures(x, y):
    match (x, y):
        case (a, b) if a > b:
            r = a - b
        case (a, b) if a + b > 3:
            r = a + b
        case (a, _):
            r = 2 * a
    return r


def mapping(d):
    match d:
        case {"kind": 0, "w": w}:
            return w * 2
        case {"kind": 1, **rest}:
            return sum(rest.values())
        case {"w": w} if w > 10:
            return w
    return d["w"] - 1


@dataclasses.dataclass
class Point:
    x: float
    y: float


@dataclasses.dataclass
class Circle:
    r: float
    center: Point


def shapes(x, y, r):
    p = Point(x, y)
    for shape in (p, Circle(r, p)):
        match shape:
            case Point(0, y0):
                out = y0
            case Point(x=px, y=py) if px > py:
                out = px - py
            case Point():
                out = shape.x * shape.y
            case Circle(r=rad, center=Point(x=cx)) if rad > 1:
                out = out + rad * cx
            case Circle(rad):
                out = out - rad
    return out


def nested(x, y):
    match ((x, y), {"s": x + y}):
        case ((0, _), {"s": s}):
            return s
        case ((a, b), {"s": s}) if s > 2:
            return a * b + s
        case ((a, b), _):
            return a - b
    return 0.0


def builtin_class(n, x):
    match (n, x):
        case (int(k), float(v)) if k > 1:
            return v * k
        case (int(), _):
            return x
    return -x


@pytest.mark.parametrize("x, y", [(1.0, 2.0), (1.0, -2.0), (-1.0, 2.0), (-3.0, -2.0)])
def test_sequence_of_conditions(x, y):
    check(signs, x, y, vmap=[(1.0, 2.0), (1.0, -2.0), (-1.0, 2.0), (-3.0, -2.0)])


@pytest.mark.parametrize("mode", [0, 1, 2, 3, 5])
def test_value_and_capture_leaves(mode):
    check(pairs, mode, 0.7, vmap=[(0, 1.5), (1, 2.0), (4, 0.5), (2, 1.0)], grad=True,
          argnums=1)


@pytest.mark.parametrize("args", [(1, 2, 0), (1, 2, 7), (4, 1, 2), (0, 0, 6)])
def test_starred_sequence(args):
    check(starred, *args, vmap=[(1, 2, 0), (1, 2, 7), (4, 1, 2)])


@pytest.mark.parametrize("x, y", [(3.0, 1.0), (1.0, 2.5), (0.5, 1.0), (2.0, 2.0)])
def test_guard_reads_what_the_pattern_captured(x, y):
    check(guard_reads_captures, x, y, vmap=[(3.0, 1.0), (1.0, 2.5), (0.5, 1.0)], grad=True,
          argnums=(0, 1))


@pytest.mark.parametrize("d", [{"kind": 0, "w": 3.0}, {"kind": 1, "w": 3.0, "b": 2.0},
                               {"kind": 2, "w": 12.0}, {"kind": 2, "w": 1.0}])
def test_mapping_patterns(d):
    check(mapping, d, vmap=[({**d, "w": 20.0},), ({**d, "w": -1.0},)])


@pytest.mark.parametrize("x, y, r", [(0.0, 2.0, 3.0), (3.0, 1.0, 0.5), (1.0, 4.0, 2.0)])
def test_class_patterns(x, y, r):
    check(shapes, x, y, r, vmap=[(0.0, 2.0, 3.0), (3.0, 1.0, 0.5), (1.0, 4.0, 2.0)],
          grad=True, argnums=(1, 2))


@pytest.mark.parametrize("x, y", [(0.0, 1.0), (2.0, 3.0), (0.5, 0.5)])
def test_nested_structures(x, y):
    check(nested, x, y, vmap=[(0.0, 1.0), (2.0, 3.0), (0.5, 0.5)], grad=True, argnums=1)


@pytest.mark.parametrize("n, x", [(3, 2.0), (1, 2.0)])
def test_builtin_class_patterns_on_python_values(n, x):
    # under jit the int becomes a traced array: not an `int()` any more
    check(builtin_class, n, x, traced=False)
    exc = check_error(builtin_class, n, x)
    assert "case (int(k), float(v)) if k > 1:" in str(exc)


def test_traced_array_subject_is_reported_at_its_case():
    def first_two(v):
        match v:
            case [a, b, *_]:
                return a + b
        return 0.0

    with pytest.raises(ConversionError, match=r"case \[a, b, \*_\]"):
        autoflow.jit(first_two)(jnp.arange(3.0))
    assert autoflow.convert(first_two)([1.0, 2.0, 5.0]) == 3.0


def test_python_errors_of_patterns_are_kept():
    def too_many(x):
        match Point(x, x):
            case Point(1, 2, 3):
                return 1
        return 0

    with pytest.raises(TypeError, match="accepts 2 positional sub-patterns"):
        too_many(1.0)
    with pytest.raises(TypeError, match="accepts 2 positional sub-patterns"):
        autoflow.jit(too_many)(jnp.float32(1))


def test_under_jit_of_vmap_and_vmap_of_jit():
    xs, ys = jnp.array([1.0, 1.0, -1.0, -3.0]), jnp.array([2.0, -2.0, 2.0, -2.0])
    want = jnp.array([signs(float(a), float(b)) for a, b in zip(xs, ys)])
    for f in (jax.jit(jax.vmap(autoflow.convert(signs))), jax.vmap(autoflow.jit(signs))):
        assert jnp.allclose(f(xs, ys), want)


# ---- a guarded case that returns, then a wildcard that returns ----------------------------

def guarded_then_wildcard(x, y):
    match (x, y):
        case (0, v) if v > 1:
            return v * 2
        case (1, v) if v < 0:
            raise ValueError("negative with 1")
        case _:
            return -1


@pytest.mark.parametrize("x, y", [(0, 3), (0, 1), (1, 5), (2, 3), (1, -2)])
def test_cases_that_return_leave_no_path_that_falls_off(x, y):
    # (a flag said whether a guarded case ran; the path where it ran and the wildcard was
    # skipped fell off the end: autoflow's "returns a value on one path" error)
    check(guarded_then_wildcard, jnp.int32(x), jnp.int32(y),
          vmap=[(jnp.int32(0), jnp.int32(5)), (jnp.int32(3), jnp.int32(3))] if (x, y) != (1, -2)
          else None, expect_raise=ValueError if (x, y) == (1, -2) else None)


def test_a_traced_subject_in_another_module_is_reported_in_that_module(tmp_path):
    """The error names the file of the `match`, not the file that calls its function
    (it named the caller's line 3, column 14, with the caller's source)."""
    import importlib.util

    path = tmp_path / "shapes_elsewhere.py"
    path.write_text("def match_seq(x):\n    match x:\n        case [a, b]:\n"
                    "            return a + b\n        case _:\n            return x\n")
    spec = importlib.util.spec_from_file_location("shapes_elsewhere", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(ConversionError) as info:
        autoflow.jit(module.match_seq)(jnp.float32(1.0))
    first = str(info.value).splitlines()
    assert first[0].startswith(f"{path}:3:14: "), first[0]
    assert first[1].strip() == "case [a, b]:"
