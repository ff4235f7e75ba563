"""The oracle is Python itself.

Every test program is an ordinary module-level Python function. ``check`` runs it

(a) eagerly, with concrete inputs: the oracle;
(b) through ``autoflow.convert(fn)`` with the same concrete inputs;
(c) through ``autoflow.jit(fn)`` with the numeric inputs as JAX arrays (traced);
(d) where asked, through ``jax.vmap(autoflow.convert(fn))`` and ``jax.grad``,

and asserts that each converted run gives what Python gave: the same structure and
the same values (to float tolerance), or, when Python raised, an exception of the same
type. A program that a test says cannot always be staged may instead raise
``autoflow.ConversionError`` whose message names the variable and points at the user's
file and line (``may_refuse=[...]``; ``check_error`` when refusing is the only answer).
No result may hold autoflow's internal objects or a JAX tracer.

Arguments are deep-copied before every run, so programs may mutate them. Arguments
listed in ``static_argnums``, and every non-numeric leaf (objects, ``None``,
callables, strings), stay Python values in the traced run: they are closed over.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import os
import re
import types

import jax
import jax.numpy as jnp
import numpy as np

import autoflow
from autoflow import ConversionError

__all__ = ["F", "I", "check", "check_cases", "check_error", "assert_same", "no_internals",
           "run_traced"]


def F(v):
    """A float32 scalar input."""
    return jnp.float32(v)


def I(v):  # noqa: E743
    """An int32 scalar input."""
    return jnp.int32(v)


# ---------------------------------------------------------------------------------------
# values
# ---------------------------------------------------------------------------------------

NUMERIC = (bool, int, float, complex, np.ndarray, np.generic, jax.Array)


def _is_numeric(v):
    return isinstance(v, NUMERIC)


def _is_tracer(v):
    return isinstance(v, jax.core.Tracer)


def _internal_reason(v):
    if _is_tracer(v):
        return f"a JAX tracer {type(v).__name__}"
    try:
        text = repr(v)
    except Exception:  # noqa: BLE001 - a repr that fails is reported as internal too
        return f"an object whose repr fails ({type(v).__module__}.{type(v).__qualname__})"
    if text.startswith("<undefined"):
        return f"the internal placeholder {text}"
    module = getattr(type(v), "__module__", "") or ""
    if module == "autoflow" or module.startswith("autoflow."):
        return f"the internal object {text[:80]} of type {module}.{type(v).__qualname__}"
    return None


def no_internals(value, where="result"):
    """Assert ``value`` (walked through containers and object attributes) holds no internals."""
    seen = set()

    def walk(v, path, depth):
        if id(v) in seen or depth > 6:
            return
        seen.add(id(v))
        reason = _internal_reason(v)
        assert reason is None, f"{where}{path} is {reason}"
        if isinstance(v, (str, bytes)) or _is_numeric(v):
            return
        if isinstance(v, dict):
            for k, item in v.items():
                walk(item, f"{path}[{k!r}]", depth + 1)
        elif isinstance(v, (list, tuple, set, frozenset)):
            for i, item in enumerate(v):
                walk(item, f"{path}[{i}]", depth + 1)
        elif isinstance(v, (types.FunctionType, types.BuiltinFunctionType, type, types.ModuleType)):
            return
        elif hasattr(v, "__dict__"):
            for k, item in vars(v).items():
                walk(item, f"{path}.{k}", depth + 1)

    walk(value, "", 0)


def _same_callable(a, e):
    if a is e:
        return True
    for cand in (a, getattr(a, "__wrapped__", None), getattr(a, "__func__", None)):
        if cand is e:
            return True
    return (callable(a) and getattr(a, "__qualname__", None) == getattr(e, "__qualname__", object())
            and getattr(a, "__module__", None) == getattr(e, "__module__", None))


def assert_same(actual, expected, context="result", rtol=1e-5, atol=1e-6):
    """``actual`` has ``expected``'s structure and values (floats to tolerance)."""

    def cmp(a, e, path):
        where = f"{context}{path}"
        if e is None:
            assert a is None, f"{where}: {a!r} where Python gave None"
        elif _is_numeric(e):
            assert _is_numeric(a) and not _is_tracer(a), \
                f"{where}: {type(a).__name__} {a!r} where Python gave the number {e!r}"
            an, en = np.asarray(a), np.asarray(e)
            assert an.shape == en.shape, f"{where}: shape {an.shape} where Python gave {en.shape}"
            if en.dtype.kind in "fc" or an.dtype.kind in "fc":
                np.testing.assert_allclose(an.astype(np.float64), en.astype(np.float64),
                                           rtol=rtol, atol=atol, err_msg=where)
            else:
                np.testing.assert_array_equal(an, en, err_msg=where)
        elif isinstance(e, (str, bytes)):
            assert a == e, f"{where}: {a!r} != Python's {e!r}"
        elif isinstance(e, dict):
            assert isinstance(a, dict), f"{where}: {type(a).__name__} where Python gave a dict"
            assert set(a) == set(e), f"{where}: keys {sorted(map(repr, a))} != Python's {sorted(map(repr, e))}"
            for k in e:
                cmp(a[k], e[k], f"{path}[{k!r}]")
        elif isinstance(e, (list, tuple)):
            assert type(a) is type(e), f"{where}: {type(a).__name__} where Python gave a {type(e).__name__}"
            assert len(a) == len(e), f"{where}: length {len(a)} != Python's {len(e)}: {a!r}"
            for i, (x, y) in enumerate(zip(a, e)):
                cmp(x, y, f"{path}[{i}]")
        elif isinstance(e, (types.FunctionType, types.MethodType, types.BuiltinFunctionType, type)):
            assert _same_callable(a, e), f"{where}: {a!r} is not Python's {e!r}"
        elif dataclasses.is_dataclass(e) or isinstance(e, types.SimpleNamespace) or hasattr(e, "__dict__"):
            assert type(a) is type(e), f"{where}: {type(a).__name__} where Python gave {type(e).__name__}"
            va, ve = vars(a), vars(e)
            assert set(va) == set(ve), f"{where}: attributes {sorted(va)} != Python's {sorted(ve)}"
            for k in ve:
                cmp(va[k], ve[k], f"{path}.{k}")
        else:
            assert a == e, f"{where}: {a!r} != Python's {e!r}"

    no_internals(actual, context)
    cmp(actual, expected, "")


# ---------------------------------------------------------------------------------------
# running the program four ways
# ---------------------------------------------------------------------------------------

def _copy(args):
    """A deep copy of the arguments that keeps functions (``jnp.tanh``) as they are."""
    memo = {}

    def seed(v, depth=0):
        if depth > 6:
            return
        if callable(v):
            memo[id(v)] = v
        elif isinstance(v, (list, tuple)):
            for item in v:
                seed(item, depth + 1)
        elif isinstance(v, dict):
            for item in v.values():
                seed(item, depth + 1)

    seed(args)
    return copy.deepcopy(args, memo)


class Raised:
    """What a run raised, in place of its result."""

    def __init__(self, exc):
        self.exc = exc
        self.wrapped_ok = False

    def __repr__(self):
        return f"Raised({type(self.exc).__name__}: {self.exc})"


def _run(thunk):
    try:
        return thunk()
    except Exception as exc:  # noqa: BLE001 - the oracle records whatever Python raises
        return Raised(exc)


def _split(args, static_argnums):
    """(leaves, treedef, traced mask): numeric leaves of non-static arguments are traced."""
    leaves, tree = jax.tree_util.tree_flatten(list(args))
    # Which argument each leaf comes from.
    owner = []
    for i, a in enumerate(args):
        owner += [i] * len(jax.tree_util.tree_leaves(a))
    mask = [(_is_numeric(v) and owner[k] not in static_argnums) for k, v in enumerate(leaves)]
    return leaves, tree, mask


def run_traced(fn, args, static_argnums=(), options=None):
    """``autoflow.jit(fn)`` on the arguments' numeric leaves as JAX arrays.

    When every argument is numeric and the result is all numbers, this is literally
    ``autoflow.jit(fn, **options)(*args)``; otherwise it is the same thing,
    ``jax.jit(autoflow.convert(fn, **options))``, with the Python arguments closed over
    and the result's non-array leaves (functions, strings, objects) passed out beside it.
    """
    options = options or {}
    leaves, tree, mask = _split(args, static_argnums)
    dyn = [jnp.asarray(v) for v, m in zip(leaves, mask) if m]
    if all(mask) and not static_argnums:
        out = _run(lambda: autoflow.jit(fn, **options)(*jax.tree_util.tree_unflatten(tree, dyn)))
        if not isinstance(out, Raised) or not isinstance(out.exc, TypeError) \
                or "not a valid JAX type" not in str(out.exc):
            return out
    converted = autoflow.convert(fn, **options)
    box = {}

    def wrapper(*dyn_in):
        it = iter(dyn_in)
        full = [next(it) if m else v for v, m in zip(leaves, mask)]
        out = converted(*jax.tree_util.tree_unflatten(tree, full))
        out_leaves, out_tree = jax.tree_util.tree_flatten(out)
        arrays = [isinstance(v, NUMERIC) for v in out_leaves]
        box["tree"], box["leaves"], box["arrays"] = out_tree, out_leaves, arrays
        return [v for v, is_array in zip(out_leaves, arrays) if is_array]

    def call():
        outs = iter(jax.jit(wrapper)(*dyn))
        full = [next(outs) if is_array else v for v, is_array in zip(box["leaves"], box["arrays"])]
        return jax.tree_util.tree_unflatten(box["tree"], full)

    out = _run(call)
    if isinstance(out, Raised):  # (`jax.jit`, not `autoflow.jit`: JAX's own report of the
        out.wrapped_ok = True    # user's exception raised when the compiled code ran)
    return out


def _chain(exc):
    seen = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def _check_refusal(exc, fn, names, where, context):
    assert isinstance(exc, ConversionError), \
        f"{context}: expected a ConversionError, got {type(exc).__name__}: {exc}"
    msg = str(exc)
    for name in names:
        assert f"`{name}" in msg, f"{context}: the message does not name `{name}`:\n{msg}"
    target = where if where is not None else fn
    path = os.path.abspath(inspect.getsourcefile(inspect.unwrap(target)))
    hits = [int(m.group(1)) for m in re.finditer(re.escape(path) + r":(\d+)", msg)]
    assert hits, f"{context}: the message does not point at {path}:LINE:\n{msg}"
    if where is not None:
        lines, start = inspect.getsourcelines(inspect.unwrap(where))
        assert any(start <= h < start + len(lines) for h in hits), \
            f"{context}: the message points at lines {hits}, not inside {where.__qualname__} " \
            f"(lines {start}-{start + len(lines) - 1}):\n{msg}"
    else:
        with open(path) as fh:
            n = len(fh.read().splitlines())
        assert any(1 <= h <= n for h in hits), f"{context}: no real line of {path} in:\n{msg}"


def _expect(actual, expected, context, *, traced, fn, may_refuse, where):
    """``actual`` is what Python gave: the same value, or the same exception type."""
    if isinstance(actual, Raised) and may_refuse is not None and isinstance(actual.exc, ConversionError):
        _check_refusal(actual.exc, fn, may_refuse, where, context)
        return
    if isinstance(expected, Raised):
        e = expected.exc
        assert isinstance(actual, Raised), \
            f"{context}: returned {actual!r} where Python raised {type(e).__name__}: {e}"
        got = actual.exc
        if isinstance(got, type(e)):
            return
        if traced and getattr(actual, "wrapped_ok", False):
            # Under `jax.jit` (not `autoflow.jit`, which raises the user's exception
            # itself) JAX reports the user's error at run time, wrapped.
            text = str(e)
            if any(isinstance(c, type(e)) for c in _chain(got)) or (text and text in str(got)):
                return
        raise AssertionError(
            f"{context}: raised {type(got).__name__}: {got} where Python raised "
            f"{type(e).__name__}: {e}") from got
    if isinstance(actual, Raised):
        raise AssertionError(
            f"{context}: raised {type(actual.exc).__name__}: {actual.exc} where Python "
            f"returned {expected!r}") from actual.exc
    assert_same(actual, expected, context)


def check(fn, *args, concrete=True, traced=True, vmap=None, grad=False, argnums=0,
          static_argnums=(), options=None, may_refuse=None, where=None, expect_raise=None):
    """Run ``fn`` eagerly and converted; the converted runs must do what Python did.

    ``vmap``: a list of further argument tuples; ``jax.vmap(autoflow.convert(fn))`` over
    the batch ``[args] + vmap`` must equal the eager results stacked. ``grad``:
    ``jax.grad(autoflow.convert(fn), argnums)`` must equal ``jax.grad(fn, argnums)`` run
    eagerly (Python control flow on concrete values). ``may_refuse``: names the
    ConversionError must mention if autoflow refuses to stage the program instead.
    ``expect_raise``: the exception type Python must raise on these inputs (a guard
    on the oracle). Returns the eager result.
    """
    name = getattr(fn, "__qualname__", repr(fn))
    static_argnums = tuple(static_argnums)
    options = options or {}
    expected = _run(lambda: fn(*_copy(args)))
    if expect_raise is not None:
        assert isinstance(expected, Raised) and isinstance(expected.exc, expect_raise), \
            f"oracle: Python gave {expected!r}, not {expect_raise.__name__}"
    elif isinstance(expected, Raised):
        raise AssertionError(f"oracle: {name}{args!r} raised eagerly; pass expect_raise=") \
            from expected.exc
    if concrete:
        actual = _run(lambda: autoflow.convert(fn, **options)(*_copy(args)))
        _expect(actual, expected, f"{name} convert (concrete)", traced=False, fn=fn,
                may_refuse=may_refuse, where=where)
    if traced:
        actual = run_traced(fn, _copy(args), static_argnums, options)
        _expect(actual, expected, f"{name} jit (traced)", traced=True, fn=fn,
                may_refuse=may_refuse, where=where)
    if vmap:
        _check_vmap(fn, [args] + list(vmap), static_argnums, options, name, may_refuse, where)
    if grad:
        argnums_t = argnums
        g_expected = jax.grad(fn, argnums=argnums_t)(*_copy(args))
        g_actual = _run(lambda: jax.grad(autoflow.convert(fn, **options), argnums=argnums_t)(
            *_copy(args)))
        _expect(g_actual, g_expected, f"{name} jax.grad", traced=True, fn=fn,
                may_refuse=may_refuse, where=where)
    return None if isinstance(expected, Raised) else expected


def _check_vmap(fn, cases, static_argnums, options, name, may_refuse, where):
    expected = [fn(*_copy(c)) for c in cases]
    stacked_expected = jax.tree_util.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs]),
                                              *expected)
    n = len(cases[0])
    in_axes = tuple(None if i in static_argnums else 0 for i in range(n))
    batched = []
    for i in range(n):
        if i in static_argnums:
            batched.append(cases[0][i])
        else:
            batched.append(jax.tree_util.tree_map(
                lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *[c[i] for c in cases]))
    converted = autoflow.convert(fn, **options)
    if static_argnums:
        static = {i: batched[i] for i in static_argnums}

        def call(*dyn):
            it = iter(dyn)
            return converted(*[static[i] if i in static else next(it) for i in range(n)])

        dyn_args = [b for i, b in enumerate(batched) if i not in static]
        actual = _run(lambda: jax.vmap(call)(*dyn_args))
    else:
        actual = _run(lambda: jax.vmap(converted, in_axes=in_axes)(*batched))
    _expect(actual, stacked_expected, f"{name} jax.vmap", traced=True, fn=fn,
            may_refuse=may_refuse, where=where)


def check_cases(fn, cases, **kw):
    """``check`` for each argument tuple in ``cases``."""
    for case in cases:
        check(fn, *case, **kw)


def check_error(fn, *args, error=ConversionError, names=(), static_argnums=(), options=None,
                where=None, concrete=True):
    """The traced run must raise ``error`` naming ``names`` at the user's file and line.

    Python must run the program on these (concrete) inputs, which shows the refusal is a
    staging limit; with ``concrete=True`` the converted program on the same concrete
    inputs must give Python's result.
    """
    name = getattr(fn, "__qualname__", repr(fn))
    expected = _run(lambda: fn(*_copy(args)))
    assert not isinstance(expected, Raised), f"oracle: Python itself raised {expected!r}"
    if concrete:
        actual = _run(lambda: autoflow.convert(fn, **(options or {}))(*_copy(args)))
        _expect(actual, expected, f"{name} convert (concrete)", traced=False, fn=fn,
                may_refuse=None, where=where)
    actual = run_traced(fn, _copy(args), tuple(static_argnums), options)
    context = f"{name} jit (traced)"
    assert isinstance(actual, Raised), \
        f"{context}: returned {actual!r} where a {error.__name__} naming {list(names)} was expected" \
        f" (Python gives {expected!r})"
    if not isinstance(actual.exc, error):
        raise AssertionError(f"{context}: raised {type(actual.exc).__name__}: {actual.exc}, "
                             f"not a {error.__name__}") from actual.exc
    if issubclass(error, ConversionError):
        _check_refusal(actual.exc, fn, names, where, context)
    return actual.exc
