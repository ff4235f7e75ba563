"""autoflow's primitives lowered to MLIR directly (``runtime.lowjit``: a
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
from autoflow.runtime import checkpoint, lowering, lowjit


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
    old = lowjit.DIRECT
    lowjit.DIRECT = direct
    try:
        jax.clear_caches()
        return _canonical(jax.jit(fn).lower(*args).compile().as_text())
    finally:
        lowjit.DIRECT = old


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


@pytest.mark.skipif(not lowjit.install(), reason="a JAX without hijax internals")
@pytest.mark.parametrize("index", range(4))
def test_direct_lowering_compiles_to_the_same_program(index):
    fn, args = _programs()[index]
    for variant, vargs in _variants(fn, args):
        direct = _compiled(variant, vargs, True)
        traced = _compiled(variant, vargs, False)
        assert direct == traced, fn.__name__


@pytest.mark.skipif(not lowjit.install(), reason="a JAX without hijax internals")
@pytest.mark.parametrize("index", range(4))
def test_direct_lowering_traces_no_expand(index, monkeypatch):
    fn, args = _programs()[index]
    conv = autoflow.convert(fn)
    calls = []
    for cls in (lowering._Cond, checkpoint._WhileLoop):
        orig = cls.expand

        def counted(self, *a, _orig=orig):
            calls.append(type(self).__name__)
            return _orig(self, *a)
        monkeypatch.setattr(cls, "expand", counted)
    jax.clear_caches()
    traced = jax.jit(conv).trace(*args)
    assert any(e.primitive.name == "call_hi_primitive" for e in traced.jaxpr.jaxpr.eqns)
    calls.clear()
    compiled = traced.lower().compile()
    assert calls == [], calls
    want = fn(*[np.asarray(a) for a in args])
    got = compiled(*args)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5)
