"""``math``'s functions of integers on traced integers.

``math.gcd``, ``math.lcm``, ``math.isqrt``, ``math.comb``, ``math.perm`` and
``math.factorial`` of concrete values are Python's own (``python.maths.math_call``
calls them only when an argument is traced). Of traced integers they compute
the same integer with ``jnp`` (a loop of the argument's length for ``comb``
and ``perm``, a table for ``factorial``) and raise Python's exceptions where
Python raises them:

* an argument that is not an integer (a traced float): Python's ``TypeError``,
  when tracing (a dtype is known then);
* a negative argument where Python refuses one: Python's ``ValueError``, with
  its message, when the compiled code runs (``later``, at the user's line);
* a result too large for the integer dtype (``math.factorial(13)`` in int32):
  Python's result would be a larger ``int``, which no array of that dtype can
  hold; ``OverflowError`` when the compiled code runs, naming the value Python
  gives. 64-bit integers (``jax_enable_x64``) hold up to ``factorial(20)``.
"""

from __future__ import annotations

import builtins
import math

import jax.numpy as jnp
import numpy as np
from jax import lax

from ...core.origin import user_site
from ..effects import later
from ..effects.checks import fail
from ..common.values import Tracer, is_traced


def _traced(x):
    return isinstance(x, Tracer) and is_traced(x)


def _ints(name, args):
    """The arguments as arrays of one integer dtype; Python's ``TypeError`` for a
    value that is no integer (a float), as ``math.NAME`` gives it."""
    for a in args:
        dtype = jnp.result_type(a) if _traced(a) else None
        if dtype is None:
            if not isinstance(a, (builtins.int, np.integer)) and not (
                    isinstance(a, (np.ndarray, jnp.ndarray)) and a.dtype.kind in "biu"):
                getattr(math, name)(*(0 if b is not a else a for b in args))  # Python's error
            continue
        if np.ndim(a) != 0:
            raise TypeError(f"math.{name}() needs integer scalars; got an array of shape "
                            f"{tuple(np.shape(a))}")
        if not (jnp.issubdtype(dtype, jnp.integer) or dtype == jnp.bool_):
            raise TypeError(f"'{_kind(dtype)}' object cannot be interpreted as an integer")
    dtype = jnp.result_type(*args, 0)
    if dtype == jnp.bool_:
        dtype = jnp.result_type(0)
    return [jnp.asarray(a).astype(dtype) for a in args], dtype


def _kind(dtype):
    return {"f": "float", "c": "complex"}.get(np.dtype(dtype).kind, str(dtype))


_NOTE = ("Enable 64-bit integers (`jax.config.update('jax_enable_x64', True)`) if it fits in "
         "int64, or compute with floats (`math.lgamma`) for large values.")


def _too_large(name, args, dtype, site, note=_NOTE):
    # (the integers the message shows as Python's: `math.factorial(13)`)
    args = tuple(builtins.int(a) if np.ndim(a) == 0 and np.asarray(a).dtype.kind in "iu" else a
                 for a in args)
    try:
        value = getattr(math, name)(*args)
    except (ValueError, TypeError):  # (reported by its own check first)
        return
    raise fail(OverflowError(
        f"math.{name}{tuple(args) if len(args) != 1 else '(' + repr(args[0]) + ')'} is "
        f"{value}, which does not fit in {np.dtype(dtype).name}: Python's integers have no "
        "limit, a traced integer has its dtype's"), site, note)


def _overflow(bad, name, args, dtype, site):
    if not _traced(bad):
        if bad:
            _too_large(name, tuple(builtins.int(a) for a in args), dtype, site)
        return
    later.later(_too_large, (name, tuple(args), dtype, site), site=site, when=bad)


def _max(dtype):
    return jnp.asarray(jnp.iinfo(dtype).max, dtype)


def gcd(*args):
    """``math.gcd`` of traced integers: ``jnp.gcd`` folded, non-negative (``gcd()`` is 0)."""
    if not args:
        return 0
    xs, _ = _ints("gcd", args)
    out = jnp.abs(xs[0])
    for x in xs[1:]:
        out = jnp.gcd(out, x)
    return out


def lcm(*args):
    """``math.lcm`` of traced integers (``lcm()`` is 1, a 0 gives 0)."""
    if not args:
        return 1
    site = user_site()
    xs, dtype = _ints("lcm", args)
    out = jnp.abs(xs[0])
    big = jnp.asarray(False)
    for x in xs[1:]:
        b = jnp.abs(x)
        g = jnp.gcd(out, b)
        part = out // jnp.where(g == 0, 1, g)
        big = big | ((b != 0) & (part > _max(dtype) // jnp.where(b == 0, 1, b)))
        out = part * b
    _overflow(big, "lcm", xs, dtype, site)
    return out


def isqrt(n):
    """``math.isqrt`` of a traced integer: the floor of its square root, exact
    (a float square root corrected by at most two steps each way; the products are
    compared by division, so nothing overflows)."""
    site = user_site()
    (n,), dtype = _ints("isqrt", (n,))
    later.check(n < 0, ValueError, "isqrt() argument must be nonnegative", site)
    m = jnp.maximum(n, 0)
    r = jnp.floor(jnp.sqrt(m.astype(jnp.result_type(builtins.float)))).astype(dtype)
    r = jnp.clip(r, 0, None)
    for _ in range(2):  # r * r > m
        r = jnp.where((r > 0) & (r > m // jnp.maximum(r, 1)), r - 1, r)
    for _ in range(2):  # (r + 1) ** 2 <= m
        r1 = r + 1
        r = jnp.where(r1 <= m // r1, r1, r)
    return r


def _factorials(dtype):
    limit = jnp.iinfo(dtype).max
    out = [1]
    while out[-1] * len(out) <= limit:
        out.append(out[-1] * len(out))
    return out


def factorial(n):
    """``math.factorial`` of a traced integer: a table of the factorials that fit the
    dtype (``0!`` to ``12!`` in int32)."""
    site = user_site()
    (n,), dtype = _ints("factorial", (n,))
    later.check(n < 0, ValueError, "factorial() not defined for negative values", site)
    table = _factorials(dtype)
    _overflow(n >= len(table), "factorial", (n,), dtype, site)
    return jnp.asarray(np.asarray(table, dtype=dtype))[jnp.clip(n, 0, len(table) - 1)]


def _product(dtype, count, factor):
    """``prod(factor(i) for i in range(count))`` in a loop, and whether it left the
    dtype on the way (each step is checked by division before it multiplies)."""
    top = _max(dtype)

    def body(i, carry):
        acc, big = carry
        f = factor(i)
        over = (f != 0) & (acc > top // jnp.where(f == 0, 1, f))
        return acc * f, big | over

    return lax.fori_loop(jnp.zeros_like(count), count, body,
                         (jnp.ones((), dtype), jnp.asarray(False)))


def _negative(n, k, site):
    later.check(n < 0, ValueError, "n must be a non-negative integer", site)
    later.check(k < 0, ValueError, "k must be a non-negative integer", site)


def comb(n, k):
    """``math.comb`` of traced integers: ``0`` where ``k > n``, else the product
    ``C = C * (n - kk + i) / i`` for ``i`` up to ``kk = min(k, n - k)``, each step an
    exact integer (divided by the gcd first, so no step exceeds the result)."""
    site = user_site()
    (n, k), dtype = _ints("comb", (n, k))
    _negative(n, k, site)
    kk = jnp.clip(jnp.minimum(k, n - k), 0, None)
    top = _max(dtype)

    def body(i, carry):
        c, big = carry
        j = i + 1
        m = n - kk + j
        g = jnp.gcd(c, j)
        a, b = c // g, m // (j // g)
        return a * b, big | ((b != 0) & (a > top // jnp.where(b == 0, 1, b)))

    c, big = lax.fori_loop(jnp.zeros_like(kk), kk, body, (jnp.ones((), dtype), jnp.asarray(False)))
    out = jnp.where((n < 0) | (k < 0) | (k > n), jnp.zeros((), dtype), c)
    _overflow(big & (k <= n), "comb", (n, k), dtype, site)
    return out


def perm(n, k=None):
    """``math.perm`` of traced integers: ``n * (n - 1) * ... * (n - k + 1)``, ``0`` where
    ``k > n``; ``perm(n)`` is ``n!``."""
    site = user_site()
    if k is None:
        (n,), dtype = _ints("perm", (n,))
        later.check(n < 0, ValueError, "n must be a non-negative integer", site)
        table = _factorials(dtype)
        _overflow(n >= len(table), "perm", (n,), dtype, site)
        return jnp.asarray(np.asarray(table, dtype=dtype))[jnp.clip(n, 0, len(table) - 1)]
    (n, k), dtype = _ints("perm", (n, k))
    _negative(n, k, site)
    count = jnp.where((k > n) | (k < 0) | (n < 0), jnp.zeros_like(k), k)
    p, big = _product(dtype, count, lambda i: n - i)
    _overflow(big, "perm", (n, k), dtype, site)
    return jnp.where((k > n) | (k < 0), jnp.zeros((), dtype), p)


FUNCTIONS = {"gcd": gcd, "lcm": lcm, "isqrt": isqrt, "factorial": factorial, "comb": comb,
             "perm": perm}
