"""autoflow's primitives lowered to MLIR directly (``runtime.jax``: a
``while``, a ``cond`` or a select of the branch jaxprs, by JAX's own rules)
compile to the same program as tracing their ``expand`` first, and lowering
them traces nothing (issue 19: first calls)."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow.runtime.cond import primitive as cond_primitive
from autoflow.runtime import jax as jx
from autoflow.runtime.loops import staging, while_primitive


def small_if(x, y):
    if x > y:
        z = x - y
    else:
        z = y * 2.0
    return z


def big_if(x, m):
    if x[0] > 0:  # branches over a matrix: a lax.cond
        for _ in autoflow.unroll(range(6)):
            m = jnp.tanh(m @ m) + 1.0
    else:
        m = m - 1.0
    return m.sum()


def loop_with_ifs(x, n):
    total = 0.0
    i = 0
    while i < n:
        if x > 1.0:
            x = x / 2.0
        elif x < -1.0:
            x = -x
        else:
            x = x + 0.7
        total = total + x
        i += 1
    return total, x


def search(xs, t):
    for i in range(xs.shape[0]):
        if xs[i] > t:
            return i
    return -1


def _programs():
    m = jnp.arange(16.0, dtype=jnp.float32).reshape(4, 4) / 20.0
    xs = jnp.linspace(0.0, 1.0, 50, dtype=jnp.float32)
    return [
        (small_if, (jnp.float32(3.0), jnp.float32(1.0))),
        (big_if, (jnp.ones(4, jnp.float32), m)),
        (loop_with_ifs, (jnp.float32(5.0), jnp.int32(9))),
        (search, (xs, jnp.float32(0.7))),
    ]


def _canonical(text):
    out, skip = [], False
    for line in text.splitlines():
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            skip = True
            continue
        if skip and (line.startswith("%") or line.startswith("ENTRY")):
            skip = False
        if skip:
            continue
        line = re.sub(r", metadata=\{[^}]*\}", "", line)
        line = re.sub(r",?\s*stack_frame_id=\d+", "", line)
        out.append(re.sub(r"%?[A-Za-z_][\w\-]*\.\d+(\.\d+)*|%[\w.\-]+", "v", line))
    return "\n".join(out)


def _compiled(fn, args, direct):
    old = jx.DIRECT
    jx.use_direct_lowering(direct)
    try:
        jax.clear_caches()
        # (traced from scratch each time: a loop that learned on its first trace what
        # its body binds starts from that on the next, with its carries in another order)
        staging._DEFINED.clear()
        return _canonical(jax.jit(fn).lower(*args).compile().as_text())
    finally:
        jx.use_direct_lowering(old)


def _variants(fn, args):
    """The converted function, its vmap over a batch, its gradient and its JVP
    (where the outputs are floats)."""
    conv = autoflow.convert(fn)
    batch = tuple(jnp.stack([a, a * 0.5 + 0.1]) if jnp.issubdtype(a.dtype, jnp.floating)
                  else jnp.stack([a, a]) for a in args)
    out = [(conv, args), (jax.vmap(conv), batch)]
    if fn is not search:  # derivatives in the first argument (a float)
        def scalar(x, *rest):
            r = conv(x, *rest)
            return sum(jnp.sum(v) for v in jax.tree_util.tree_leaves(r))
        out.append((jax.grad(scalar), args))
        out.append((lambda x, *rest: jax.jvp(lambda v: scalar(v, *rest), (x,), (x,)), args))
    return out


@pytest.mark.skipif(not jx.install_low_staging(), reason="a JAX without hijax internals")
@pytest.mark.parametrize("index", range(4))
def test_direct_lowering_compiles_to_the_same_program(index):
    fn, args = _programs()[index]
    for variant, vargs in _variants(fn, args):
        direct = _compiled(variant, vargs, True)
        traced = _compiled(variant, vargs, False)
        assert direct == traced, fn.__name__


@pytest.mark.skipif(not jx.install_low_staging(), reason="a JAX without hijax internals")
@pytest.mark.parametrize("index", range(4))
def test_direct_lowering_traces_no_expand(index, monkeypatch):
    fn, args = _programs()[index]
    conv = autoflow.convert(fn)
    calls = []
    for cls in (cond_primitive._Cond, while_primitive._WhileLoop):
        orig = cls.expand

        def counted(self, *a, _orig=orig):
            calls.append(type(self).__name__)
            return _orig(self, *a)
        monkeypatch.setattr(cls, "expand", counted)
    jax.clear_caches()
    traced = jax.jit(conv).trace(*args)
    assert any(e.primitive.name in ("while_loop", "if") for e in traced.jaxpr.jaxpr.eqns)
    calls.clear()
    compiled = traced.lower().compile()
    assert calls == [], calls
    want = fn(*[np.asarray(a) for a in args])
    got = compiled(*args)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5)


def bisect(f_lo, lo, hi, n):
    """Scalar branches that differ in two outputs: a cond on a CPU, a select on a GPU."""
    for _ in range(n):
        mid = lo + 0.5 * (hi - lo)
        if (mid * mid * mid - 2.0 * mid - 5.0 < 0) == (f_lo < 0):
            lo = mid
        else:
            hi = mid
    return lo, hi


def _bisect_args():
    return jnp.float32(-9.0), jnp.float32(0.0), jnp.float32(4.0), jnp.int32(30)


def _ops(fn, args, platform):
    text = jax.jit(fn).trace(*args).lower(lowering_platforms=(platform,)).as_text()
    return text.count("stablehlo.case"), text.count("stablehlo.select")


@pytest.mark.skipif(not jx.install_low_staging(), reason="a JAX without hijax internals")
def test_scalar_branches_differing_in_several_outputs_are_a_select_on_a_gpu():
    conv = autoflow.convert(bisect)
    args = _bisect_args()
    assert "if -> lax.cond (a select on GPU)" in str(autoflow.explain(bisect, *args))
    jax.clear_caches()
    cpu_cases, cpu_selects = _ops(conv, args, "cpu")
    assert cpu_cases == 1
    # lowered for a GPU (no GPU needed): a select of each of the two outputs instead
    assert _ops(conv, args, "cuda") == (0, cpu_selects + 2)
    # lowered for several platforms at once: the cond, which is right on each
    text = jax.jit(conv).trace(*args).lower(lowering_platforms=("cpu", "cuda")).as_text()
    assert text.count("stablehlo.case") >= 1


@pytest.mark.skipif(not jx.install_low_staging(), reason="a JAX without hijax internals")
def test_the_gpu_select_computes_what_python_does(monkeypatch):
    """The select form run here: the CPU counted among the platforms that take it."""
    jax.clear_caches()
    conv = autoflow.convert(bisect)
    plain = _ops(conv, _bisect_args(), "cpu")
    monkeypatch.setattr(cond_primitive, "GPU_PLATFORMS", ("cpu", "cuda", "rocm"))
    jax.clear_caches()
    conv = autoflow.convert(bisect)
    for f_lo, lo, hi, n in [_bisect_args(), (jnp.float32(3.0), jnp.float32(0.0),
                                             jnp.float32(4.0), jnp.int32(7))]:
        assert _ops(conv, (f_lo, lo, hi, n), "cpu") == (plain[0] - 1, plain[1] + 2)
        want = bisect(float(f_lo), float(lo), float(hi), int(n))
        got = jax.jit(conv)(f_lo, lo, hi, n)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want, np.float32), rtol=1e-6)
    # under vmap and grad too (their rules expand the `if`: the values of the cond)
    lanes = tuple(jnp.stack([a, b]) for a, b in zip(_bisect_args(), (
        jnp.float32(3.0), jnp.float32(0.0), jnp.float32(4.0), jnp.int32(30))))
    got = np.asarray(jax.jit(jax.vmap(conv))(*lanes))
    for k in range(2):
        want = bisect(*(float(a[k]) if a.dtype == jnp.float32 else int(a[k]) for a in lanes))
        np.testing.assert_allclose(got[:, k], np.asarray(want, np.float32), rtol=1e-6)

    def loss(lo, fn):
        return jnp.sum(jnp.stack(fn(jnp.float32(-9.0), lo, jnp.float32(4.0), jnp.int32(5))))

    with_select = jax.grad(loss)(jnp.float32(0.0), conv)
    monkeypatch.setattr(cond_primitive, "GPU_PLATFORMS", ("cuda", "rocm"))
    jax.clear_caches()
    assert jax.grad(loss)(jnp.float32(0.0), autoflow.convert(bisect)) == with_select


def count_from_constants(x):
    """A loop whose carries all start from constants, and an ``if`` on constants."""
    n, total, flag = 0, 0.0, False
    while total < x:
        total = total + 0.5 * (n + 1)
        n += 1
        if n > 3:
            flag = True
    return n, total, flag


def _barriers(fn, *args):
    return str(jax.make_jaxpr(fn)(*args)).count("optimization_barrier")


@pytest.mark.skipif(not jx.install_low_staging(), reason="a JAX without hijax internals")
def test_constant_operands_stay_constants_where_the_primitives_stage_low(monkeypatch):
    # Where autoflow's primitives stage as low equations, their constant operands
    # are literals XLA can fold (an optimization barrier in front of them, needed
    # when they were staged "high", hid them from XLA).
    conv = autoflow.convert(count_from_constants)
    x = jnp.float32(7.3)
    assert _barriers(conv, x) == 0

    def values(out):
        return [np.asarray(v).tolist() for v in out]
    assert values(jax.jit(conv)(x)) == pytest.approx(list(count_from_constants(7.3)))
    lanes = values(jax.vmap(conv)(jnp.array([7.3, 1.2], jnp.float32)))
    for k, lane in enumerate((7.3, 1.2)):
        assert [v[k] for v in lanes] == pytest.approx(list(count_from_constants(lane)))
    # where JAX's private API does not allow the primitives, the public path (lax)
    # gives the same results, with no autoflow primitive in the program
    try:
        with monkeypatch.context() as m:
            m.setitem(jx.lost, "primitives", "a test")
            jax.clear_caches()
            text = str(jax.make_jaxpr(conv)(x))
            assert "while_loop[" not in text and "call_hi_primitive" not in text
            assert values(jax.jit(conv)(x)) == pytest.approx(list(count_from_constants(7.3)))
    finally:
        jax.clear_caches()


def nested_search(x, limit):
    for i in range(6):
        k = 0
        while k < 3 and x < limit:
            x = x * 1.3 + 0.1
            k = k + 1
        if x > limit:
            return x, i
    return -x, -1


@pytest.mark.skipif(not jx.install_low_staging(), reason="a JAX without hijax internals")
@pytest.mark.parametrize("fn", [search, nested_search])
def test_a_loop_compiles_to_the_same_program_whatever_was_traced_before(fn):
    # A loop remembers what its body binds for its next trace (staging._DEFINED);
    # a loop that adds such a variable as it is traced must not start from that,
    # or it carries the variable in another place: `jax.vmap(f)` traced after `f`
    # was another program than traced first (the batched BFGS of
    # benchmarks/real_algorithms.py ran 1.2-1.3x slower so on a CPU).
    if fn is search:
        args = (jnp.linspace(0.0, 1.0, 50, dtype=jnp.float32), jnp.float32(0.7))
        batch = (jnp.stack([args[0], args[0] * 2]), jnp.array([0.7, 0.3], jnp.float32))
    else:
        args = (jnp.float32(0.5), jnp.float32(3.0))
        batch = (jnp.array([0.5, 0.1], jnp.float32), jnp.array([3.0, 30.0], jnp.float32))

    def batched_program():
        return sorted(_canonical(jax.jit(jax.vmap(autoflow.convert(fn))).lower(*batch)
                                 .compile().as_text()).splitlines())
    jax.clear_caches()
    staging._DEFINED.clear()
    first = batched_program()
    jax.clear_caches()
    staging._DEFINED.clear()
    jax.jit(autoflow.convert(fn)).lower(*args)  # the unbatched version first
    assert batched_program() == first
    got = jax.tree_util.tree_leaves(jax.vmap(autoflow.jit(fn))(*batch))
    for k in range(2):
        want = jax.tree_util.tree_leaves(fn(*[np.asarray(b[k]) for b in batch]))
        assert [np.asarray(g[k]).item() for g in got] == pytest.approx(
            [np.asarray(w).item() for w in want], rel=1e-5)


# ---- the names a profiler shows -----------------------------------------------------------

def _op_names(jitted, *args):
    text = jitted.lower(*args).compile().as_text()
    return {re.sub(r"jit\(\w+\)", "jit(f)", n) for n in re.findall(r'op_name="([^"]*)"', text)}


def _grow(x):
    while x < 10.0:
        x = x * 2.0 + 1.0
    return x


def _grow_lax(x):
    return jax.lax.while_loop(lambda x: x < 10.0, lambda x: x * 2.0 + 1.0, x)


def _pick(x):
    if x > 0:
        while x < 10.0:
            x = x * 2.0
    else:
        x = jnp.sin(x)
    return x


def test_compiled_op_names_are_those_of_hand_written_lax():
    """A converted loop's compiled operations carry the names JAX gives its own
    `while` (`jit(f)/while/body/mul`), as a hand-written `lax.while_loop`'s do, not
    `jit(f)/while_loop/jit(f)/while/body/mul` (issue 45)."""
    x = jnp.float32(1.0)
    ours, theirs = _op_names(autoflow.jit(_grow), x), _op_names(jax.jit(_grow_lax), x)
    assert {"jit(f)/while/body/mul", "jit(f)/while/body/add", "jit(f)/while/cond/lt"} <= ours
    assert ours - {"x"} <= theirs, (ours - theirs, theirs)
    for names in (ours, _op_names(autoflow.jit(_pick), x)):
        assert all(n.count("jit(") <= 1 and "while_loop" not in n for n in names), names
