"""``math``'s functions of floats on traced values.

``math.exp``, ``math.sqrt``, ``math.log``... of concrete values are Python's own
(``python.maths.math_call`` calls the functions here only when an argument is
traced). Of traced values they are the ``jnp`` functions that give the same
values, and they raise Python's exceptions where Python raises them, when the
compiled code runs, at the user's line. Plain Python::

    def sqrt(x):
        return math.sqrt(x)      # ValueError: math domain error, for x < 0

Staged: ``jnp.sqrt(x)``, and a check (``effects.later.later(..., when=bad)``) whose test
``bad`` is Python's own condition for an error, on the argument's value as Python
sees it (a float32 value is exact in float64, which Python computes in):

* a domain error, ``ValueError`` (``math.sqrt(-1.0)``, ``math.log(0.0)``,
  ``math.acos(2.0)``, ``math.sin(inf)``, ``math.fmod(x, 0.0)``, ``math.gamma(-1.0)``,
  ``math.pow(0.0, -1.0)``...), and ``math.log(x, 1)``'s ``ZeroDivisionError``;
* a finite argument whose result is too large for a float64, ``OverflowError``
  (``math.exp(710.0)``, ``math.cosh``, ``math.gamma(172.0)``, ``math.pow(10.0, 400.0)``):
  the last argument that fits is found once per dtype by asking ``math`` itself
  (``_last_ok``), so the test is exact; only ``pow`` of float32s tests
  ``y * log2(|x|) > 1024`` in float32, exact but within float32's rounding of
  that edge (a result within about 0.01% of the largest float64);
* ``math.floor``/``ceil``/``trunc`` of NaN (``ValueError``) or an infinity
  (``OverflowError``), and of a float whose integer the traced integer's dtype
  cannot hold (``OverflowError``, as ``runtime.python.integers`` does for its results).

A NaN argument gives NaN, as in Python (no error), and an infinite one what
Python gives (``math.exp(inf)`` is ``inf``, ``math.sin(inf)`` an error). (XLA on
CPU reads a float64 subnormal as zero: ``math.gamma(1e-309)`` is then
``gamma(0.0)``'s domain error, where Python's is a range error.) The
message is Python's own: the check calls ``math``'s function on the value that
failed (under ``vmap``, the first failing element's), so it is whatever the
running Python says. The exception's note gives the fix: the ``jnp`` function,
which gives NaN or an infinity instead.

A check is one host callback in the compiled program, called only where the
test holds (``later``): a ``math.sqrt`` in a loop body adds one conditional
callback to the body.
"""

from __future__ import annotations

import builtins
import functools
import math

import jax.numpy as jnp
import numpy as np

from ...core.origin import user_site
from ..effects import later
from ..effects.checks import fail
from ..common.values import Tracer, is_traced


def _traced(x):
    return isinstance(x, Tracer) and is_traced(x)


def _float():
    return jnp.result_type(builtins.float)


def _as_float(x):
    return jnp.asarray(x, dtype=_float())


class _Special:
    """``jax.scipy.special``, imported when one of its functions is first called (its
    import, about 3 ms, is otherwise paid by the first ``convert`` of a process)."""

    def __getattr__(self, name):
        from jax.scipy import special

        return getattr(special, name)


special = _Special()


# ---------------------------------------------------------------------------
# Where Python's function stops giving a float
# ---------------------------------------------------------------------------

def _bits(dtype):
    return np.int32 if np.dtype(dtype) == np.float32 else np.int64


def _last_ok(fn, dtype, lo, hi):
    """The largest ``v`` of ``dtype`` in ``[lo, hi]`` (both positive) where Python's
    ``fn(v)`` raises nothing, ``fn`` raising above it (``hi`` itself where it never
    raises). A bisection on the floats' bit patterns, which are in the floats' order."""
    dtype = np.dtype(dtype)

    def ok(b):
        return _ok(fn, builtins.float(np.array(b, _bits(dtype)).view(dtype)))

    a, b = (builtins.int(np.array(v, dtype).view(_bits(dtype))) for v in (lo, hi))
    if ok(b):
        return np.array(b, _bits(dtype)).view(dtype)[()]
    while b - a > 1:  # fn(a) is fine, fn(b) raises
        m = (a + b) // 2
        a, b = (m, b) if ok(m) else (a, m)
    return np.array(a, _bits(dtype)).view(dtype)[()]


@functools.lru_cache(maxsize=16)
def _edges(dtype):
    """``{name: the largest argument whose result Python's math still holds}`` for
    ``dtype``'s values (float32 or float64); ``gamma_tiny``: the smallest positive
    argument whose ``math.gamma`` is a float (0 where every one is)."""
    dtype = np.dtype(dtype)
    big = np.finfo(dtype).max
    out = {n: _last_ok(getattr(math, n), dtype, 1.0, big)
           for n in ("exp", "expm1", "exp2", "sinh", "cosh", "gamma", "lgamma")
           if hasattr(math, n)}
    out["gamma_tiny"] = _gamma_tiny(dtype)
    return out


def _ok(fn, v):
    try:
        fn(v)
    except (OverflowError, ValueError):
        return False
    return True


def _gamma_tiny(dtype):
    """The smallest positive ``v`` of ``dtype`` whose ``math.gamma`` is a float
    (0 where every one is)."""
    dtype = np.dtype(dtype)
    tiny = np.finfo(dtype).smallest_subnormal
    if _ok(math.gamma, builtins.float(tiny)):
        return dtype.type(0)
    a = builtins.int(np.array(tiny, dtype).view(_bits(dtype)))
    b = builtins.int(np.array(1.0, dtype).view(_bits(dtype)))
    while b - a > 1:  # gamma(a) raises, gamma(b) is fine
        m = (a + b) // 2
        a, b = (a, m) if _ok(math.gamma, builtins.float(np.array(m, _bits(dtype)).view(dtype))) \
            else (m, b)
    return np.array(b, _bits(dtype)).view(dtype)[()]


def _edge(name, x):
    edges = _edges(np.dtype(x.dtype))
    return jnp.asarray(edges[name], x.dtype)


def _finite(*xs):
    out = jnp.isfinite(xs[0])
    for x in xs[1:]:
        out = out & jnp.isfinite(x)
    return out


# ---------------------------------------------------------------------------
# The functions: jnp's value and Python's test for an error
# ---------------------------------------------------------------------------

def _over(name):
    """Python's ``OverflowError`` of ``math.NAME``, increasing: past its last argument."""
    return lambda x, out: (x > _edge(name, x)) & jnp.isfinite(x)


def _over_abs(name):
    return lambda x, out: (jnp.abs(x) > _edge(name, x)) & jnp.isfinite(x)


def _non_positive_integer(x):
    return (x <= 0) & (x == jnp.floor(x))


def _gamma(x):
    # |Γ(x)| = exp(lgamma(x)); negative where x < 0 and floor(x) is odd (Γ(-0.5) < 0)
    sign = jnp.where((x < 0) & (jnp.floor(x) % 2 == 1), -1.0, 1.0).astype(x.dtype)
    return jnp.exp(special.gammaln(x)) * sign


def _gamma_bad(x, out):
    tiny = _edge("gamma_tiny", x)
    return _non_positive_integer(x) | ((x > _edge("gamma", x)) & jnp.isfinite(x)) \
        | ((jnp.abs(x) < tiny) & (x != 0))


def _lgamma_bad(x, out):
    return (_non_positive_integer(x) & jnp.isfinite(x)) \
        | ((x > _edge("lgamma", x)) & jnp.isfinite(x))


def _log(x, base=None):
    return jnp.log(x) if base is None else jnp.log(x) / jnp.log(base)


def _log_bad(x, base=None):
    bad = x <= 0
    if base is not None:
        bad = bad | (base <= 0) | (base == 1)  # log(x, 1): ZeroDivisionError
    return bad


def _pow_bad(x, y, out):
    finite = _finite(x, y)
    domain = finite & (((x < 0) & (y != jnp.floor(y))) | ((x == 0) & (y < 0)))
    if x.dtype == jnp.float64:
        over = jnp.isinf(out)
    else:  # |x| ** y past float64's largest: y * log2|x| > 1024 (in float32; see above)
        over = y * jnp.log2(jnp.abs(x)) > 1024
    return domain | (finite & (x != 0) & over)


def _fmod_bad(x, y, out):
    return (jnp.isinf(x) & ~jnp.isnan(y)) | ((y == 0) & ~jnp.isnan(x))


def _isclose(a, b, *, rel_tol=1e-09, abs_tol=0.0):
    tol = jnp.maximum(rel_tol * jnp.maximum(jnp.abs(a), jnp.abs(b)), abs_tol)
    return (a == b) | (jnp.abs(a - b) <= tol)


def _int_bad(x, out):
    bits = jnp.iinfo(jnp.result_type(builtins.int)).bits - 1
    big = jnp.asarray(2.0 ** bits, x.dtype)
    return jnp.isnan(x) | (out >= big) | (out < -big)  # (an infinity is out of range too)


# name: (the jnp function of float arrays, Python's error test of (args..., out) or None,
# the jnp spelling the fix names)
_FUNCTIONS = {
    "exp": (jnp.exp, _over("exp"), "jnp.exp"),
    "expm1": (jnp.expm1, _over("expm1"), "jnp.expm1"),
    "exp2": (jnp.exp2, _over("exp2"), "jnp.exp2"),
    "log": (_log, None, "jnp.log"),  # (its test takes `base`: _log_bad, below)
    "log2": (jnp.log2, lambda x, out: x <= 0, "jnp.log2"),
    "log10": (jnp.log10, lambda x, out: x <= 0, "jnp.log10"),
    "log1p": (jnp.log1p, lambda x, out: x <= -1, "jnp.log1p"),
    "sqrt": (jnp.sqrt, lambda x, out: x < 0, "jnp.sqrt"),
    "cbrt": (jnp.cbrt, None, None),
    "sin": (jnp.sin, lambda x, out: jnp.isinf(x), "jnp.sin"),
    "cos": (jnp.cos, lambda x, out: jnp.isinf(x), "jnp.cos"),
    "tan": (jnp.tan, lambda x, out: jnp.isinf(x), "jnp.tan"),
    "sinh": (jnp.sinh, _over_abs("sinh"), "jnp.sinh"),
    "cosh": (jnp.cosh, _over_abs("cosh"), "jnp.cosh"),
    "tanh": (jnp.tanh, None, None),
    "asin": (jnp.arcsin, lambda x, out: jnp.abs(x) > 1, "jnp.arcsin"),
    "acos": (jnp.arccos, lambda x, out: jnp.abs(x) > 1, "jnp.arccos"),
    "atan": (jnp.arctan, None, None),
    "atan2": (jnp.arctan2, None, None),
    "asinh": (jnp.arcsinh, None, None),
    "acosh": (jnp.arccosh, lambda x, out: x < 1, "jnp.arccosh"),
    "atanh": (jnp.arctanh, lambda x, out: jnp.abs(x) >= 1, "jnp.arctanh"),
    "hypot": (jnp.hypot, None, None),  # (Python's gives inf where it overflows)
    "copysign": (jnp.copysign, None, None),
    "degrees": (jnp.degrees, None, None),
    "radians": (jnp.radians, None, None),
    "fmod": (jnp.fmod, _fmod_bad, "jnp.fmod"),
    "fabs": (jnp.abs, None, None),
    "pow": (jnp.power, _pow_bad, "jnp.power"),
    "erf": (lambda x: special.erf(x), None, None),
    "erfc": (lambda x: special.erfc(x), None, None),
    "gamma": (_gamma, _gamma_bad, "jax.scipy.special.gamma"),
    "lgamma": (lambda x: special.gammaln(x), _lgamma_bad, "jax.scipy.special.gammaln"),
    "floor": (jnp.floor, _int_bad, "jnp.floor"),
    "ceil": (jnp.ceil, _int_bad, "jnp.ceil"),
    "trunc": (jnp.trunc, _int_bad, "jnp.trunc"),
}
_INTEGER_RESULTS = ("floor", "ceil", "trunc")


def _note(name):
    fix = _FUNCTIONS[name][2]
    if name in _INTEGER_RESULTS:
        return (f"`math.{name}` of a traced float is checked when the compiled code runs; "
                f"`{fix}(x)` keeps the float (NaN and infinities stay), and "
                "`jax.config.update('jax_enable_x64', True)` gives 64-bit integers.")
    return (f"`math.{name}` of a traced value is checked when the compiled code runs, as "
            f"Python checks it; for JAX's NaN or infinity instead of this error, call "
            f"`{fix}` in place of `math.{name}`.")


def _host_float(v):
    """A run-time argument as Python's ``math`` receives it (an array's element as
    a Python number, as ``float()``/``int()`` of it)."""
    if isinstance(v, (builtins.int, builtins.float)):
        return v
    a = np.asarray(v)
    return builtins.int(a) if a.dtype.kind in "biu" else builtins.float(a)


def _python_error(name, args, int_dtype, site):
    """Raise what Python's ``math.NAME(*args)`` raises, from the user's line ``site``
    (``args``: the values the compiled code ran with; of arrays, the first element
    that fails, in order)."""
    f = getattr(math, name)
    shape = np.broadcast_shapes(*(np.shape(a) for a in args))
    arrays = [np.broadcast_to(np.asarray(a), shape) for a in args]
    for at in np.ndindex(shape):
        xs = [a if isinstance(a, (builtins.int, builtins.float)) else _host_float(b[at])
              for a, b in builtins.zip(args, arrays)]
        try:
            value = f(*xs)
        except (ValueError, OverflowError, ZeroDivisionError) as e:
            raise fail(e, site, _note(name)) from None
        if name in _INTEGER_RESULTS and int_dtype is not None:
            info = np.iinfo(int_dtype)
            if not info.min <= value <= info.max:
                from .integers import _too_large

                _too_large(name, tuple(xs), int_dtype, site, note=_note(name))
    # (the test and Python disagree: only at float32's rounding of pow's overflow edge)
    raise fail(OverflowError("math range error"), site, _note(name))


def _check(name, args, bad, site):
    bad = jnp.any(bad)
    int_dtype = np.dtype(jnp.result_type(builtins.int)) if name in _INTEGER_RESULTS else None
    if not _traced(bad):
        if builtins.bool(bad):
            _python_error(name, tuple(args), int_dtype, site)
        return
    later.later(_python_error, (name, tuple(args), int_dtype, site), site=site, when=bad)


def _function(name):
    fn, test, _ = _FUNCTIONS[name]

    def call(*args, **kwargs):
        xs = [_as_float(a) for a in args]
        out = fn(*xs, **{k: _as_float(v) for k, v in kwargs.items()})
        if name == "log":
            _check(name, args, _log_bad(*xs), user_site())
        elif test is not None:
            _check(name, args, test(*xs, out), user_site())
        if name in _INTEGER_RESULTS:
            out = out.astype(jnp.result_type(builtins.int))
        return out

    call.__name__ = name
    return call


def _isclose_call(a, b, **kwargs):
    return _isclose(_as_float(a), _as_float(b), **kwargs)


def table():
    """``{name: the function of traced values}`` for ``math``'s functions of floats
    this Python has (``isnan``... too)."""
    out = {n: _function(n) for n in _FUNCTIONS if hasattr(math, n)}
    out.update(isnan=jnp.isnan, isinf=jnp.isinf, isfinite=jnp.isfinite, isclose=_isclose_call)
    return out


def truncated(x):
    """``int(x)`` of a traced float: ``math.trunc``'s value and checks (Python's own
    errors for NaN, an infinity, and an integer the default dtype cannot hold)."""
    return _function("trunc")(x)
