"""How many times autoflow traces each loop body and branch (issue 19: first calls).

A body retraced on every restart of the loops around it would make tracing time
exponential in the nesting depth. A counter in the user's own code (plain Python,
run each time the body is traced) counts the traces; results are checked against
Python.
"""

from __future__ import annotations

import collections
import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow.runtime import jax as jx
from autoflow.runtime.loops import staging, stored, while_primitive

COUNT = collections.Counter()


@autoflow.do_not_convert  # (bookkeeping of traces: a module global changed in a staged body)
def hit(key):
    COUNT[key] += 1


def nested3(x, n):
    for i in range(n):
        hit("l1")
        for j in range(n):
            hit("l2")
            for k in range(n):
                hit("l3")
                if x > 0:
                    hit("then")
                    t = x * 2.0
                else:
                    hit("else")
                    t = -x
                x = x * 0.5 + t * 0.1
                y3 = x  # first bound inside the loop: a `define` restart
            y2 = y3
        y1 = y2
    return x, y1


def one_sided(x, n):
    for i in range(n):
        hit("l1")
        for j in range(n):
            hit("l2")
            if x > 1.0:
                hit("then")
                r = x  # bound on one path of a traced `if`: a `fill`  # noqa: F841
            x = x * 0.5
        if x < 0.1:
            q = x  # noqa: F841 (a one-sided binding)
    return x


def _traces(fn, *args):
    COUNT.clear()
    jax.make_jaxpr(autoflow.convert(fn))(*args)
    return dict(COUNT)


def test_nested_loops_with_a_define_are_traced_a_few_times():
    counts = _traces(nested3, jnp.float32(3.0), jnp.int32(3))
    # each `define` restart retraces the loops inside it once more: at most
    # depth + 1 traces at depth `depth` (linear, not exponential, in the depth)
    assert counts["l1"] <= 2 and counts["l2"] <= 3 and counts["l3"] <= 4, counts
    assert counts["then"] == counts["else"] == counts["l3"], counts
    got = autoflow.jit(nested3)(jnp.float32(3.0), jnp.int32(3))
    COUNT.clear()
    want = nested3(3.0, 3)
    np.testing.assert_allclose([float(g) for g in got], want, rtol=1e-6)


def test_one_sided_binding_in_nested_loops_is_traced_once():
    counts = _traces(one_sided, jnp.float32(3.0), jnp.int32(3))
    assert counts == {"l1": 1, "l2": 1, "then": 1}, counts
    np.testing.assert_allclose(float(autoflow.jit(one_sided)(jnp.float32(3.0), jnp.int32(3))),
                               one_sided(3.0, 3), rtol=1e-6)


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_trace_count_grows_linearly_with_depth(depth, tmp_path):
    # a generated nest of `depth` loops, each binding a new variable inside it
    lines = ["from tests.test_trace_counts import hit", "", "", "def f(x, n):"]
    for d in range(depth):
        lines.append("    " * (d + 1) + f"for i{d} in range(n):")
        lines.append("    " * (d + 2) + f"hit('l{d}')")
    lines.append("    " * (depth + 1) + "x = x * 0.5 + 1.0")
    for d in reversed(range(depth)):
        lines.append("    " * (d + 2) + f"y{d} = x")
    lines.append("    return x, y0")
    path = tmp_path / f"nest{depth}.py"
    path.write_text("\n".join(lines) + "\n")
    spec = importlib.util.spec_from_file_location(f"nest{depth}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    counts = _traces(module.f, jnp.float32(3.0), jnp.int32(2))
    for d in range(depth):
        assert 1 <= counts[f"l{d}"] <= d + 2, counts
    got = autoflow.jit(module.f)(jnp.float32(3.0), jnp.int32(2))
    np.testing.assert_allclose([float(g) for g in got], module.f(3.0, 2), rtol=1e-6)


# A search inside a search inside ...: each level a static `for` whose body
# calls the next level and may `return` early (an optimiser's loop around a line
# search around a zoom). A `return` in a loop binds the return value inside the
# loop. That used to restart the loop's trace once, and each trace of an outer
# body met the inner loops again: the traces of the innermost body were
# 2, 4, 8, 16 at depth 1..4, then (remembering what inner loops learned,
# staging._DEFINED) 2, 3, 4, 5. The return value is now a carry the first trace
# adds (it is only read when the loop is left through that `return`) where the
# body holds a loop of its own: every body with one is traced once. The innermost
# was traced twice (the second time passing the value through where it is not
# bound, which runs faster than writing zeros); the paths that do not return now
# pass an input its first trace makes for the carry (common.carries.Placeholders), so
# it is traced once too, where JAX can make one.

def search3(x, s):
    for i in range(5):
        hit("s3")
        x = x * 1.1 + s
        if x > 3.0:
            return x
    return -x


def search2(x, s):
    for i in range(5):
        hit("s2")
        x = search3(x, s) * 0.5 + 0.1
        if x > 2.0:
            return x
    return x + 1.0


def search1(x, s):
    for i in range(5):
        hit("s1")
        x = search2(x, s * 0.5) + 0.3
        if x > 1.0:
            return x
    return x


def search0(x, s):
    for i in range(5):
        hit("s0")
        x = search1(x, s) * 0.9
        if x > 0.5:
            return x
    return x


def test_nested_loops_with_returns_are_traced_linearly():

    staging._DEFINED.clear()  # what earlier tests taught it
    counts = _traces(search0, jnp.float32(0.2), jnp.float32(0.05))
    places = jx.primitives() and jx.new_input is not None
    assert counts == {"s0": 1, "s1": 1, "s2": 1, "s3": 1 if places else 2}, counts
    for x in (0.2, 0.6, 2.5, -1.0):
        for s in (0.05, -0.3):
            np.testing.assert_allclose(
                float(autoflow.jit(search0)(jnp.float32(x), jnp.float32(s))),
                search0(x, s), rtol=1e-5)


def inner_with_closure(x, scale):
    def g(v):
        return v * scale  # the type of `scale` decides the type of the return value

    for i in range(4):
        x = g(x) + 1.0
        if x > 10.0:
            return x
    return x


def test_a_remembered_definition_is_not_used_when_the_closure_differs():
    # the same loop entered with the same types, closing over a float32 and then
    # over a float16 value: its return value is float32 in one and float16 in the
    # other, as in Python (jnp's promotion)
    f = jax.jit(autoflow.convert(inner_with_closure))
    a = f(jnp.float16(1.5), jnp.float32(2.0))
    b = f(jnp.float16(1.5), jnp.float16(2.0))
    assert a.dtype == jnp.float32 and b.dtype == jnp.float16, (a.dtype, b.dtype)
    np.testing.assert_allclose(float(a), inner_with_closure(1.5, 2.0), rtol=1e-6)
    np.testing.assert_allclose(float(b), inner_with_closure(1.5, 2.0), rtol=1e-2)


def appends_per_step(x, xs):
    ys = [x]
    for v in xs:
        hit("body")
        x = x * 0.5 + v
        ys.append(x * 2.0)
    return jnp.stack(ys)


def reads_its_list(x, xs):
    ys = [x]
    for v in xs:
        hit("body")
        x = x * 0.5 + v + ys[0]  # a read: the list cannot be the scan's outputs
        ys.append(x)
    return x, len(ys)


def appends_in_a_branch(x, xs):
    ys = [x]
    for v in xs:
        hit("body")
        if v > 0:
            ys.append(v)
        x = x + v
    return x, ys


def test_a_scan_that_appends_is_traced_once():
    # the body's code appends to `ys`, a list: guessed to be the scan's stacked
    # outputs before the first trace, instead of learned from it and traced again
    xs = jnp.arange(5, dtype=jnp.float32)
    counts = _traces(appends_per_step, jnp.float32(1.0), xs)
    assert counts["body"] == 1, counts
    got = autoflow.jit(appends_per_step)(jnp.float32(1.0), xs)
    want = appends_per_step(1.0, np.arange(5, dtype=np.float32))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_a_wrong_guess_of_appends_keeps_the_results():
    xs = jnp.arange(4, dtype=jnp.float32)
    got = autoflow.jit(reads_its_list)(jnp.float32(1.0), xs)
    COUNT.clear()
    want = reads_its_list(1.0, np.arange(4, dtype=np.float32))
    np.testing.assert_allclose(float(got[0]), want[0], rtol=1e-6)
    assert int(got[1]) == want[1] == 5
    vs = jnp.asarray([1.0, -1.0, 2.0], jnp.float32)
    got = autoflow.convert(appends_in_a_branch)(jnp.float32(0.5), vs)  # (concrete: Python)
    want = appends_in_a_branch(0.5, np.asarray([1.0, -1.0, 2.0], np.float32))
    np.testing.assert_allclose(float(got[0]), want[0], rtol=1e-6)
    np.testing.assert_allclose([float(v) for v in got[1]], [float(v) for v in want[1]])


def prints_in_a_loop(x):
    while x < 10.0:
        print("x", x)
        x = x * 1.5 + 0.1
    return x


def test_a_loop_that_prints_traces_its_quiet_body_only_for_a_backward_pass(monkeypatch, capfd):
    # the body without its prints is what the backward pass recomputes: made when
    # first needed, not for every loop that prints
    # (by the stored steps' recomputation, or by the checkpointed pass's)
    made = []
    quiet = while_primitive.quiet_closed
    for module in (while_primitive, stored):
        monkeypatch.setattr(module, "quiet_closed", lambda c: made.append(1) or quiet(c))
    got = autoflow.jit(prints_in_a_loop)(jnp.float32(1.0))
    assert made == []
    assert np.allclose(float(got), prints_in_a_loop(1.0), rtol=1e-6)
    g = jax.jit(jax.grad(autoflow.convert(prints_in_a_loop)))(jnp.float32(1.0))
    assert made
    assert np.allclose(float(g), 1.5 ** 6, rtol=1e-5)
