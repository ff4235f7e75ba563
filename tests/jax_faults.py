"""Run converted programs on a JAX whose private API changed as a release would change it.

``python tests/jax_faults.py FAULT`` applies one fault to JAX before autoflow is
imported, runs a few converted programs (a data-dependent ``while``, ``if``s that
are a select and a cond, ``vmap``, ``grad`` through a static loop), compares them
with eager Python, and prints one JSON line: whether every result matched, the
warnings autoflow gave, and what ``jax.make_jaxpr`` shows. Used by
``tests/test_jax_internals.py``, one fresh process per fault.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import warnings


class Moot(Exception):
    """The fault's target does not exist on this JAX (nothing for the fault to change)."""


def _original(module, name):
    if not hasattr(module, name):
        raise Moot(f"{module.__name__}.{name}")
    return getattr(module, name)


def _delete(module, *names):
    for name in names:
        if hasattr(module, name):
            delattr(module, name)


def hijax_classes_deleted():
    import jax.experimental.hijax as hijax

    _delete(hijax, "HiPrim", "VJPHiPrimitive")


def lowering_helper_deleted():
    from jax._src import hijax

    _delete(hijax, "_call_hi_primitive_to_lojax")


def _autoflow_dir():
    """autoflow's package directory, found without importing it (a fault is injected
    before autoflow is imported)."""
    import importlib.util

    return os.path.dirname(os.path.abspath(importlib.util.find_spec("autoflow").origin)) + os.sep


def _from_autoflow(depth=2):
    """Is the caller's caller autoflow's code (not JAX's own, which a release updates)?
    (By the package's directory: a checkout in a folder named autoflow holds JAX too,
    under .venv.)"""
    return os.path.abspath(sys._getframe(depth).f_code.co_filename).startswith(_AUTOFLOW_DIR)


_AUTOFLOW_DIR = _autoflow_dir()


def trace_to_jaxpr_new_keyword():
    # a keyword JAX's own callers pass after the release, and autoflow does not
    from jax._src.interpreters import partial_eval as pe

    original = _original(pe, "trace_to_jaxpr")

    def trace_to_jaxpr(fun, in_avals, debug_info, *rest, **kwargs):
        if _from_autoflow():
            raise TypeError("trace_to_jaxpr() missing 1 required keyword-only argument: 'flat'")
        return original(fun, in_avals, debug_info, *rest, **kwargs)
    pe.trace_to_jaxpr = trace_to_jaxpr


def lowering_rules_raise():
    # the private lowering helper autoflow calls now fails for it (JAX's own calls work)
    from jax._src.interpreters import mlir

    original = _original(mlir, "_get_lowering_rules")

    def _get_lowering_rules(module_context, prim, eqn_ctx):
        if _from_autoflow():
            raise ValueError("safe_zip() argument 1 has length 3 but argument 0 has length 4")
        return original(module_context, prim, eqn_ctx)
    mlir._get_lowering_rules = _get_lowering_rules


def new_arg_signature_changed():
    from jax._src.interpreters import partial_eval as pe

    original = _original(pe.DynamicJaxprTrace, "new_arg")

    def new_arg(self, aval, source_info, *, kind="input"):
        return original(self, aval, source_info)
    pe.DynamicJaxprTrace.new_arg = new_arg


def rule_tables_helpers_deleted():
    from jax._src import hijax

    _delete(hijax, "tree_leaves_checked")


def staging_rule_missing():
    from jax._src import hijax
    from jax._src.interpreters import partial_eval as pe

    pe.custom_staging_rules.pop(hijax.call_hi_primitive_p, None)


def frame_exclusion_missing():
    # JAX's traceback filtering without the hook autoflow registers its frames with
    # (autoflow's runtime calls it when imported: a guarded call, its row lost); JAX's
    # own modules, some imported later, still register theirs
    from jax._src import traceback_util

    original = _original(traceback_util, "register_exclusion")

    def register_exclusion(path):
        if _from_autoflow():
            raise AttributeError("module 'jax._src.traceback_util' has no attribute "
                                 "'register_exclusion'")
        return original(path)
    traceback_util.register_exclusion = register_exclusion


def custom_derivatives_moved():
    # JAX's custom_jvp/custom_vjp machinery in a file of another name
    from autoflow.runtime import jax as jx

    jx.traces._CUSTOM_DERIVATIVES = "jax/_src/custom_derivatives_impl.py"


FAULTS = {f.__name__: f for f in (hijax_classes_deleted, lowering_helper_deleted,
                                   trace_to_jaxpr_new_keyword, lowering_rules_raise,
                                   new_arg_signature_changed, rule_tables_helpers_deleted,
                                   staging_rule_missing, custom_derivatives_moved,
                                   frame_exclusion_missing)}


# -- the programs (plain Python, converted by autoflow) ---------------------------------

def halvings(x):
    n = 0
    while x > 1.0:
        x = x / 2.0
        n += 1
    return x, n


def clamp_then_branch(x):
    if x < 0.5:
        x = x + 1.0
    if x > 3.0:
        y = x * x
    else:
        y = x - 1.0
    return y


def first_bound_in_loop(x):
    for i in range(5):
        if x > 3.0:
            last = x
            break
        x = x * 1.5
    else:
        last = x
    return last


def polynomial(x):
    acc = 0.0
    for k in range(4):
        acc = acc * x + k
    return acc


def leaky(x):
    if x > 0.0:
        y = x
    else:
        y = 0.1 * x
    return y


def _custom_leaky():
    import jax

    @jax.custom_jvp
    def f(x):
        return leaky(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        if x > 0.0:
            slope = 1.0
        else:
            slope = 0.1
        return f(x), slope * t
    return f


def main(fault):
    if fault != "none":
        try:
            FAULTS[fault]()
        except (Moot, ImportError) as e:
            print(json.dumps({"moot": str(e)}))
            return
    import jax
    import jax.numpy as jnp
    import numpy as np

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        import autoflow

        ok = []
        for fn in (halvings, clamp_then_branch, first_bound_in_loop):
            conv = autoflow.jit(fn)
            for x in (0.25, 2.0, 37.0):
                want = fn(x)
                got = conv(jnp.float32(x))
                ok.append(bool(np.allclose(np.asarray(got, dtype=np.float64), np.asarray(want), rtol=1e-5)))
        xs = jnp.array([0.25, 2.0, 37.0], jnp.float32)
        got = jax.jit(jax.vmap(autoflow.convert(clamp_then_branch)))(xs)
        ok.append(bool(np.allclose(got, [clamp_then_branch(float(x)) for x in xs], rtol=1e-5)))
        grad = jax.grad(autoflow.convert(polynomial))(jnp.float32(1.5))
        ok.append(bool(np.isclose(grad, 3 * 1.5 ** 2 * 0 + 2 * 1.5 * 1 + 2, rtol=1e-5)))
        custom = autoflow.convert(_custom_leaky())
        for x, slope in ((2.0, 1.0), (-2.0, 0.1)):
            ok.append(bool(np.isclose(jax.jit(jax.grad(custom))(jnp.float32(x)), slope)))
            ok.append(bool(np.isclose(jax.grad(custom)(jnp.float32(x)), slope)))
        text = str(jax.make_jaxpr(autoflow.convert(halvings))(jnp.float32(9.0)))
        hlo = jax.jit(autoflow.convert(halvings)).lower(jnp.float32(9.0)).as_text(debug_info=True)
    ours = [str(w.message) for w in seen if "autoflow" in str(w.message)
            and "lacks private APIs" in str(w.message)]
    print(json.dumps({"ok": ok, "warnings": ours, "jaxpr": text, "hlo_names": sorted(set(
        n.split("/")[1] for n in __import__("re").findall(r'"(jit\(halvings\)/[^"]*)"', hlo)
        if n.count("/") >= 1))}))


if __name__ == "__main__":
    assert inspect  # (kept for faults that inspect signatures)
    main(sys.argv[1])
