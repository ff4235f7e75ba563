"""Every row of ``runtime.jax.PATHS`` under a fault, in this process (fast tier).

For each private path autoflow takes through JAX, a fault does to JAX what a release
could (a name deleted, a signature changed, a text reworded) or, where JAX cannot be
changed from Python, makes the row's probe fail. The row's check then runs again
(``runtime.jax.recheck``): the path must be lost, a small converted program that
uses it must still give Python's results (which the private path gives too: the rest
of the suite asserts it) through the public path, and one warning must name the row.
``tests/test_jax_internals.py`` (slow) applies faults before autoflow is imported, in
fresh processes.

A row added to the table without a fault here fails ``test_every_row_has_a_fault``.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import sys
import types
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow.runtime import jax as jx
from autoflow.runtime.jax import selfcheck

# -- the programs (plain Python, converted by autoflow; the first six are those the
# fresh-process faults run, tests/jax_faults.py) ------------------------------------
from tests.jax_faults import (_custom_leaky, clamp_then_branch, first_bound_in_loop,  # noqa: E402,F401
                              halvings, leaky, polynomial)


def printing_loop(x):
    n = 0
    while x > 1.0:
        print("x is", x)
        x = x / 2.0
        n += 1
    return n


def checked(x):
    assert x < 10.0, "x must stay below 10"
    return x * 2.0


def checked_in_loop(x):
    total = 0.0
    for i in range(3):
        assert x > 0.0, "x must be positive"
        total = total + x
    return total


def matrix_branch(x, m):
    if x > 0.0:
        m = m @ m
    else:
        m = m - 1.0
    return m


def traced_size(n):
    return jnp.zeros(n)


def weak_count(x):
    k = 0
    for _ in range(3):
        k = k + 1
    return x * k


def _doubled(v):
    return v * 2.0


_double = jax.jit(_doubled)  # made before autoflow saw it (jit wrapper)


def through_module_jit(x):
    if x > 1.0:
        x = _double(x)
    return x


def _close(got, want):
    return bool(np.allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                            rtol=1e-5))


def _outcome(fn, *args):
    """What ``fn(*args)`` gives: its value, or the exception's class and message."""
    try:
        return ("value", jax.tree_util.tree_map(np.asarray, fn(*args)))
    except Exception as e:  # noqa: BLE001 - the outcome compared
        return ("raised", e)


def _same(got, want, same_type=True):
    if got[0] != want[0]:
        return False
    if got[0] == "raised":  # Python's exception (or its message) reaches the user
        first = str(want[1]).splitlines()[0]  # (pytest adds to an assert's message)
        return first in str(got[1]) and (not same_type or isinstance(got[1], type(want[1])))
    return all(_close(g, w) for g, w in zip(jax.tree_util.tree_leaves(got[1]),
                                            jax.tree_util.tree_leaves(want[1])))


def _run_loops():
    for fn in (halvings, clamp_then_branch):
        for x in (0.25, 37.0):
            assert _close(autoflow.jit(fn)(jnp.float32(x)), fn(x)), fn.__name__


def _run_primitives():
    _run_loops()
    _run_bound()
    xs = jnp.array([0.25, 2.0, 37.0], jnp.float32)
    got = jax.vmap(autoflow.convert(clamp_then_branch))(xs)
    assert _close(got, [clamp_then_branch(float(x)) for x in xs])
    assert _close(jax.grad(autoflow.convert(polynomial))(jnp.float32(1.5)), 2 * 1.5 + 2)


def _run_ifs():
    for x in (0.25, 2.0, 37.0):
        assert _close(autoflow.jit(clamp_then_branch)(jnp.float32(x)), clamp_then_branch(x))


def _run_bound():
    for x in (0.5, 4.0):
        assert _close(autoflow.jit(first_bound_in_loop)(jnp.float32(x)), first_bound_in_loop(x))


def _run_grad():
    assert _close(jax.grad(autoflow.convert(polynomial))(jnp.float32(1.5)), 2 * 1.5 + 2)
    grad = jax.grad(lambda x: autoflow.convert(halvings)(x)[0])
    assert _close(grad(jnp.float32(37.0)), 1 / 64)


def _run_custom():
    custom = autoflow.convert(_custom_leaky())
    for x, slope in ((2.0, 1.0), (-2.0, 0.1)):
        assert _close(jax.grad(custom)(jnp.float32(x)), slope)
        assert _close(jax.jit(jax.grad(custom))(jnp.float32(x)), slope)


def _run_prints(capsys):
    capsys.readouterr()
    n = autoflow.jit(printing_loop)(jnp.float32(5.0))
    jax.effects_barrier()
    printed = capsys.readouterr().out
    want = printing_loop(5.0)
    assert int(n) == want and printed.count("x is") == want, printed


def _run_checks(same_type=True):
    for fn, args in ((checked, (1.0,)), (checked, (20.0,)), (checked_in_loop, (1.0,)),
                     (checked_in_loop, (-1.0,))):
        got = _outcome(autoflow.jit(fn), *map(jnp.float32, args))
        assert _same(got, _outcome(fn, *args), same_type), (fn.__name__, args, got)


def _run_checks_any_type():
    # (without the path, the user's message reaches them inside JAX's own error)
    _run_checks(same_type=False)


def _run_matrix():
    m = np.arange(4.0, dtype=np.float32).reshape(2, 2)
    for x in (-1.0, 1.0):
        got = autoflow.jit(matrix_branch)(jnp.float32(x), m)
        assert _close(got, matrix_branch(x, m))


def _run_shape_error():
    with pytest.raises(TypeError):
        autoflow.jit(traced_size)(3)


def _run_weak():
    got = autoflow.jit(weak_count)(jnp.float16(1.5))
    assert _close(got, 4.5)


def _run_jit_wrapper():
    # (not strict: without the path, the jit of `_doubled` is a fallback, run unconverted)
    for x in (0.5, 3.0):
        assert _close(autoflow.jit(through_module_jit, strict=False)(jnp.float32(x)),
                      x * 2.0 if x > 1.0 else x)


def _run_explain():
    assert "while" in str(autoflow.explain(halvings, "f32"))
    _run_ifs()


def _run_nested_under_vmap():
    from tests.test_vmap_loops import three_deep  # (loops nested three deep)

    cs = np.array([[3.0, 10.0, 1.0], [40.0, 2.0, 9.0]], np.float32)
    ms = np.array([3, 2], np.int32)
    want = [three_deep(c, m) for c, m in zip(cs, ms)]
    got = jax.vmap(autoflow.convert(three_deep))(jnp.asarray(cs), jnp.asarray(ms))
    assert np.allclose(got, want)


# -- the faults, one per row -----------------------------------------------------------


@dataclasses.dataclass
class Fault:
    inject: object  # (monkeypatch) -> None: what a JAX release could do
    program: object  # () or (capsys) -> None: asserts the results
    why: str = ""  # what the fault stands for


def _module(name):
    return importlib.import_module(name)


def _hide(m, name, *attrs):
    """Module ``name`` as autoflow imports it from now on, without ``attrs`` (JAX's own
    code, which holds the module already, keeps them: a release that moved them)."""
    module = _module(name)
    proxy = types.ModuleType(name)
    proxy.__dict__.update({k: v for k, v in vars(module).items() if k not in attrs})
    m.setitem(sys.modules, name, proxy)
    parent, _, child = name.rpartition(".")
    m.setattr(_module(parent), child, proxy)
    return proxy


def _hijax_without(m, *attrs):
    proxy = types.SimpleNamespace(**{k: v for k, v in vars(jx.hijax._hi).items() if k not in attrs})
    m.setattr(jx.hijax, "_hi", proxy)


def _pass_through(original, drop=None):
    """A function that calls ``original`` with what it is given, whose signature has
    none of ``original``'s names (a release that changed it)."""
    def changed(*args, **kwargs):
        if drop is not None:
            kwargs.pop(drop, None)
        return original(*args, **kwargs)
    return changed


def _exclusion_fails(m):
    # (JAX's own modules, some imported later, still register theirs)
    traceback_util = _module("jax._src.traceback_util")
    original = traceback_util.register_exclusion

    def register_exclusion(path):
        if sys._getframe(1).f_code.co_filename == jx.traces.__file__:
            raise AttributeError("register_exclusion moved")
        return original(path)
    m.setattr(traceback_util, "register_exclusion", register_exclusion)


def _delete_hijax_classes(m):
    hijax = _module("jax.experimental.hijax")
    for name in ("HiPrim", "VJPHiPrimitive"):
        if hasattr(hijax, name):
            m.delattr(hijax, name)


def _thunk_tracer_fails(m):
    pe = _module("jax._src.interpreters.partial_eval")
    original = pe.trace_to_jaxpr

    def trace_to_jaxpr(fun, *args, **kwargs):
        import sys

        if sys._getframe(1).f_code.co_filename == jx.traces.__file__:
            raise TypeError("trace_to_jaxpr() missing 1 required keyword-only argument: 'flat'")
        return original(fun, *args, **kwargs)
    m.setattr(pe, "trace_to_jaxpr", trace_to_jaxpr)


def _new_arg_changed(m):
    pe = _module("jax._src.interpreters.partial_eval")
    original = pe.DynamicJaxprTrace.new_arg

    def new_arg(self, aval, source_info, *, kind="input"):
        return original(self, aval, source_info)
    m.setattr(pe.DynamicJaxprTrace, "new_arg", new_arg)


def _weak_converter_changed(m):
    lax_module = _module("jax._src.lax.lax")
    m.setattr(lax_module, "_convert_element_type",
              _pass_through(lax_module._convert_element_type))


def _trace_init_changed(m):
    pe = _module("jax._src.interpreters.partial_eval")
    m.setattr(pe.DynamicJaxprTrace, "__init__", _pass_through(pe.DynamicJaxprTrace.__init__))


def _dce_changed(m):
    pe = _module("jax._src.interpreters.partial_eval")
    m.setattr(pe, "dce_jaxpr", _pass_through(pe.dce_jaxpr))


def _location_changed(m):
    mlir = _module("jax._src.interpreters.mlir")
    m.setattr(mlir, "source_info_to_location", _pass_through(mlir.source_info_to_location))


FAULTS = {
    "trace state": Fault(lambda m: m.delattr(_module("jax._src.core"), "trace_ctx"), None,
                         "JAX's trace state moved"),
    "frames": Fault(_exclusion_fails, _run_loops, "traceback_util.register_exclusion moved"),
    "reverse mode": Fault(lambda m: m.setattr(jx.traces, "_reverse_mode_problem", lambda: "a fault"),
                          _run_grad, "jax.grad traces with another trace than LinearizeTrace"),
    "primitives": Fault(_delete_hijax_classes, _run_primitives, "hijax's classes deleted"),
    "named": Fault(lambda m: _hijax_without(m, "tree_leaves_checked"),
                   _run_loops, "hijax.tree_leaves_checked moved"),
    "direct lowering": Fault(lambda m: _hide(m, "jax._src.interpreters.mlir", "convert_hlo"),
                             _run_loops, "mlir.convert_hlo moved"),
    "op names": Fault(_location_changed, _run_loops,
                      "mlir.source_info_to_location takes another signature"),
    "bind while/cond": Fault(
        lambda m: _hide(m, "jax._src.lax.control_flow.conditionals", "cond_p"),
        _run_loops, "conditionals.cond_p moved"),
    "effects in loops": Fault(lambda m: m.setattr(selfcheck, "_effects_problem", lambda: "a fault"),
                              _run_prints, "the probe's loop with a print fails to lower"),
    "ordered effect": Fault(lambda m: _hide(m, "jax._src.debugging", "ordered_debug_effect"),
                            _run_checks, "debugging.ordered_debug_effect renamed"),
    "parent trace": Fault(_trace_init_changed, _run_checks,
                          "DynamicJaxprTrace takes no parent_trace"),
    "callback loggers": Fault(lambda m: _hide(m, "jax._src.callback", "logger"),
                              _run_checks, "jax._src.callback logs under another name"),
    "trace a thunk": Fault(_thunk_tracer_fails, _run_ifs,
                           "partial_eval.trace_to_jaxpr takes a new keyword"),
    "weak types": Fault(_weak_converter_changed, _run_weak,
                        "lax._convert_element_type takes no weak_type"),
    "body inputs": Fault(_new_arg_changed, _run_bound, "DynamicJaxprTrace.new_arg changed"),
    "symbolic zeros": Fault(lambda m: m.setattr(jx.jaxprs, "_symbolic_zero",
                                                lambda aval: ("not", "a cotangent")),
                            _run_grad, "a pullback refuses JAX's symbolic zeros"),
    "remat": Fault(lambda m: m.delattr(_module("jax._src.interpreters.partial_eval"), "ensure_enum"),
                   _run_grad, "partial_eval.ensure_enum deleted"),
    "custom rules": Fault(lambda m: m.setattr(jx.traces, "_CUSTOM_DERIVATIVES",
                                              "jax/_src/custom_derivatives_impl.py"),
                          _run_custom, "JAX's custom derivatives in a file of another name"),
    "jit wrapper": Fault(lambda m: m.setattr(jx.jit, "_JIT_INFO", "_jit_info_renamed"),
                         _run_jit_wrapper, "jax.jit's private _jit_info renamed"),
    "explain dce": Fault(_dce_changed, _run_explain, "partial_eval.dce_jaxpr changed"),
    "probe axis": Fault(lambda m: m.setattr(jx.jaxprs, "_AXIS_NAME", "axis_name_renamed"),
                        _run_nested_under_vmap, "AxisData's name field renamed"),
    "cost model": Fault(lambda m: m.setattr(jx.jaxprs, "_DOT_DIMS", "dimension_numbers_renamed"),
                        _run_matrix, "dot_general's dimension_numbers renamed"),
    "error texts": Fault(lambda m: m.setitem(jx.JAX_TEXTS, "traced shape",
                                             re.compile("Shapes must be concrete")),
                         _run_shape_error, "JAX rewords its traced-shape error"),
    "run-time errors": Fault(lambda m: (m.setattr(jx.callbacks, "_RUNTIME_ERRORS", ()),
                                        m.setitem(jx.JAX_TEXTS, "internal", re.compile("FAILED"))),
                             _run_checks_any_type, "a failed callback reported as another error"),
}


def test_every_row_has_a_fault():
    """A row added to ``PATHS`` needs a fault here (and a row gone, its fault gone)."""
    assert sorted(FAULTS) == sorted(p.key for p in jx.PATHS)


def test_the_table_is_data_with_every_field():
    for row in jx.PATHS:
        assert row.key and row.names and row.jax and row.fallback and row.lost, row
        assert all(part.strip() in jx.CHECKED for part in row.checked.split(",")), row
        assert jx.path(row.key) is row


# The boundary's modules (the package, each module of it that holds what a check
# rebinds) and the self-check.
BOUNDARY = (jx, jx.paths, jx.traces, jx.jaxprs, jx.hijax, jx.texts, jx.callbacks, jx.jit,
            jx.private, selfcheck)


@pytest.fixture
def boundary(monkeypatch):
    """Whatever a fault and a check change in the boundary and the self-check, put back
    (JAX's own names too, with the row checked again where it installs rules in JAX)."""
    saved = {m: dict(vars(m)) for m in BOUNDARY}
    contents = [(v, type(v)(v)) for m in saved for v in vars(m).values()
                if type(v) in (dict, set)]
    rows = []
    yield monkeypatch, rows
    monkeypatch.undo()
    for key in rows:
        if key != "trace state":
            jx.recheck(key)
    for m, before in saved.items():
        for name in set(vars(m)) - set(before):
            delattr(m, name)
        for name, value in before.items():
            if vars(m).get(name) is not value:
                setattr(m, name, value)
    for value, copy in contents:
        value.clear()
        value.update(copy)
    jax.clear_caches()


@pytest.mark.parametrize("key", [p.key for p in jx.PATHS])
def test_a_lost_path_keeps_results_and_is_said_once(key, boundary, capsys):
    monkeypatch, rows = boundary
    row, fault = jx.path(key), FAULTS[key]
    if key in jx.lost:
        pytest.skip(f"this JAX lacks {key} to begin with ({jx.lost[key]})")
    if row.primitives_only and not jx.primitives():
        pytest.skip(f"{key} is used only by autoflow's primitives, which this JAX lacks")
    rows.append(key)
    if row.required:  # no public path: autoflow says so, naming the row
        with monkeypatch.context() as m:
            fault.inject(m)
            with pytest.raises(ImportError, match=f"trace state: .*pip install 'jax{re.escape(jx.FULL_RANGE)}'"):
                jx.recheck(key)
        assert key in jx.lost
        return
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fault.inject(monkeypatch)
        jx.recheck(key)
        assert key in jx.lost, f"the fault ({fault.why}) did not lose {key}"
        jax.clear_caches()
        fault.program(*([capsys] if fault.program is _run_prints else []))
        selfcheck.warn_lost()
    ours = [str(w.message) for w in seen if "lacks private APIs" in str(w.message)]
    assert len(ours) == 1, ours
    assert f"({key}: " in ours[0] and row.lost in ours[0] and "Results are the same" in ours[0]


def test_the_doctor_prints_every_row_on_or_off_and_why(boundary, capsys):
    """``autoflow doctor`` (``python -m autoflow doctor`` is the same ``main``): the
    versions, every row, and for a row that is off why, the public path and the loss."""
    from autoflow.cli import main

    monkeypatch, rows = boundary
    if "body inputs" not in jx.lost:  # (one row off, whatever this JAX has)
        rows.append("body inputs")
        FAULTS["body inputs"].inject(monkeypatch)
    # (the probe program compiled under jit, vmap, grad and jvp: the slow
    # tests/test_jax_internals.py runs it; here, the rest of the check)
    monkeypatch.setattr(selfcheck, "_problem", lambda full=False: None)
    capsys.readouterr()
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert f"JAX {jax.__version__}" in out and "Python " in out and "jaxlib " in out
    for row in jx.PATHS:
        off = row.key in jx.lost or row.primitives_only and not jx.primitives(check=False)
        assert re.search(rf"^  {'off' if off else 'on'}\s+{re.escape(row.key)}\s+JAX ",
                         out, re.M), row.key
        if off:
            assert f"instead: {row.fallback}\n        lost: {row.lost}\n" in out, row.key
    row = jx.path("body inputs")
    assert re.search(r"^  off\s+body inputs", out, re.M)
    assert f"why: {jx.lost['body inputs']}" in out


def test_primitives_are_asked_one_way():
    """``runtime.jax.primitives()`` is the one question; nothing else answers it."""
    from autoflow.runtime.loops import while_primitive

    assert not hasattr(selfcheck, "ready") and not hasattr(while_primitive, "available")
    assert not hasattr(jx, "PRIMITIVES")
    assert jx.primitives() == ("primitives" not in jx.lost)


# What only the boundary may say: JAX's private modules, the classes of its traces,
# hijax's param, the params and texts autoflow reads.
_PRIVATE = re.compile(r"jax\._src|_src\.|Linearize|JaxprTrace|DropVar|[\"']_prim[\"']|"
                      r"dimension_numbers|Shapes must be|Slice entries|became a tracer|"
                      r"depends on the value of the argument|PjitFunction|_jit_info|"
                      r"ordered_debug_effect")


def test_private_jax_knowledge_is_in_the_boundary_only():
    from pathlib import Path

    package = Path(autoflow.__file__).parent
    boundary = {Path(m.__file__) for m in BOUNDARY if m is not selfcheck}
    found = [f"{path.relative_to(package)}:{n}: {line.strip()}"
             for path in sorted(package.rglob("*.py")) if path not in boundary
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if _PRIVATE.search(line)]
    assert not found, "\n".join(found)
    # JAX's private modules are named in one file of the boundary
    named = sorted(str(path.relative_to(package)) for path in package.rglob("*.py")
                   if re.search(r"jax\._src|[\"']_src[\"']", path.read_text(encoding="utf-8")))
    assert named == [str(Path("runtime/jax/private.py"))], named


def test_a_pullback_that_refuses_symbolic_zeros_is_lost_at_use(boundary):
    """``symbolic zeros`` is found out where a backward pass first passes one: the path
    is lost then, said once, and the zeros go as arrays (the gradient as before it)."""
    monkeypatch, rows = boundary
    if "symbolic zeros" in jx.lost or not jx.primitives():
        pytest.skip("this JAX has no symbolic zeros path to lose")
    rows.append("symbolic zeros")
    FAULTS["symbolic zeros"].inject(monkeypatch)
    jax.clear_caches()

    def halve(x):  # (`err` only the test reads: its cotangent is a symbolic zero)
        err = x
        while err > 1.0:
            x = x * 0.5
            err = jnp.abs(x)
        return x

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = jax.jit(jax.grad(autoflow.convert(halve)))(jnp.float32(37.0))
    assert "symbolic zeros" in jx.lost
    assert _close(got, 1 / 64)
    ours = [str(w.message) for w in seen if "lacks private APIs" in str(w.message)]
    assert len(ours) == 1 and "(symbolic zeros: " in ours[0], ours
