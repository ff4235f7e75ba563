"""``range`` with traced bounds.

``af.range(...)`` is Python's ``range`` on concrete bounds. A traced bound
gives a ``TracedRange``: a ``for`` loop over it is a ``lax.while_loop``
(``loops.statements.for_stmt``), and ``len``, ``sum``, ``max``, ``min``, indexing and
``.start``/``.stop``/``.step`` give traced integers, as Python's give ints
(``python.builtins`` and ``python.comprehensions`` dispatch to them). A traced step of 0 raises Python's
``ValueError`` when the compiled code runs.
"""

from __future__ import annotations

import builtins

import jax
import jax.numpy as jnp
import numpy as np

from ...core.origin import message, user_site
from ...errors import ConversionError
from ..effects import later
from ..jax import is_symbolic_dim
from ..effects.checks import fail
from ..common.values import Tracer, is_traced

def range_contains(x, r):
    """``x in r`` for a ``range`` ``r`` where ``x`` or a bound is traced
    (``python.logical.contains`` calls it): a traced bool, ``x`` between the bounds, on a
    step, as Python's ``range.__contains__`` decides (by ``==``, so ``2.0 in
    range(5)`` holds and ``2.5`` does not)."""
    if isinstance(r, TracedRange):
        start, step, length = r.parts()
    else:
        start, step, length = r.start, r.step, len(r)
    offset = x - start
    k = offset // step
    return jnp.logical_and(jnp.logical_and(k * step == offset, k >= 0), k < length)


class TracedRange:
    """``range(start, stop, step)`` where a bound is traced."""

    def __init__(self, start, stop, step):
        self.start, self.stop, self.step = start, stop, step

    def __iter__(self):
        raise ConversionError(message(
            user_site(2), "this `range` has a traced bound and cannot be iterated as Python",
            "Use it directly as a `for` loop's iterable in converted code."))

    def __len__(self):
        raise ConversionError(message(
            user_site(2), "`len` of a `range` with a traced bound is a traced integer, which "
            "Python's `len` cannot return here", "Compute it in converted code, where `len` "
            "gives it (or make the bound static)."))

    def __contains__(self, x):
        raise ConversionError(message(
            user_site(2), "`in` of a `range` with a traced bound has a traced answer, which "
            "Python's `in` cannot give", "Compare with the bounds instead: `start <= x < stop` "
            "(and `(x - start) % step == 0` for a step other than 1)."))

    def length(self):
        """``len(r)``: a traced integer."""
        return self.parts()[2]

    def __getitem__(self, i):
        """``r[i]`` (a negative ``i`` counts from the end, as in Python; no ``IndexError``)."""
        if isinstance(i, slice):
            return NotImplemented
        start, step, length = self.parts()
        i = jnp.asarray(i).astype(start.dtype)
        return start + jnp.where(i < 0, i + length, i) * step

    def total(self, start_value=0):
        """``sum(r)``: ``n * start + step * n * (n - 1) / 2``."""
        start, step, n = self.parts()
        return start_value + n * start + step * (n * (n - 1) // 2)

    def extreme(self, largest, site):
        """``max(r)``/``min(r)``; Python's ``ValueError`` for an empty range,
        raised when the compiled code runs."""
        start, step, n = self.parts()
        later.later(_empty, ("max" if largest else "min", site), site=site, when=n == 0)
        last = start + (n - 1) * step
        up = step > 0
        return jnp.where(up == largest, last, start)

    def parts(self):
        """``(start, step, length)`` as arrays of one integer dtype."""
        traced_step = isinstance(self.step, Tracer) and is_traced(self.step)
        start, stop, step = (jnp.asarray(v) for v in (self.start, self.stop, self.step))
        dtype = _index_dtype(jnp.result_type(start, stop, step))
        start, stop, step = (v.astype(dtype) for v in (start, stop, step))
        if not traced_step:
            return start, step, _length(start, stop, step)
        # A step of 0 raises ValueError when the compiled code runs (see `range`);
        # until then the loop runs no iteration (no division by zero).
        zero = step == 0
        length = _length(start, stop, jnp.where(zero, jnp.ones_like(step), step))
        return start, step, jnp.where(zero, jnp.zeros_like(length), length)


def _length(start, stop, step):
    """``len(range(start, stop, step))`` (a step other than 0), without overflow: the
    span between the bounds in the unsigned type of their width holds every span of
    two values of it (``range(-2**31 + 1, 2**31 - 1)``)."""
    unsigned = jnp.dtype(f"uint{8 * start.dtype.itemsize}")
    up = step > 0
    low, high = jnp.where(up, start, stop), jnp.where(up, stop, start)
    span = high.astype(unsigned) - low.astype(unsigned)
    n = (span - 1) // jnp.where(up, step, -step).astype(unsigned) + 1
    return jnp.where(high > low, n.astype(start.dtype), jnp.zeros_like(start))


def _index_dtype(dtype):
    """The integer type a traced range computes in: Python's range counts with ints of
    any size, so the bounds' type only where it is signed and at least as wide as the
    default integer (an unsigned bound would make a step of -1 its largest value, and a
    narrow one overflow ``stop - start``: ``range(int8(-100), int8(100))``)."""
    default = jnp.dtype(jax.dtypes.canonicalize_dtype(jnp.int_))
    if jnp.issubdtype(dtype, jnp.signedinteger) and jnp.dtype(dtype).itemsize >= default.itemsize:
        return dtype
    return default


def range(*args):  # noqa: A001 - mirrors the builtin
    """``range`` that also accepts traced bounds (for staged ``for`` loops),
    and symbolic ones (``range(x.shape[0])`` under ``jax.export`` with a
    symbolic dimension: a loop with a symbolic trip count)."""
    if not any(isinstance(a, Tracer) and is_traced(a) for a in args):
        if not any(is_symbolic_dim(a) for a in args):
            return builtins.range(*args)
        args = tuple(jnp.asarray(a) if is_symbolic_dim(a) else a for a in args)
    if len(args) == 1:
        start, stop, step = 0, args[0], 1
    elif len(args) == 2:
        (start, stop), step = args, 1
    else:
        start, stop, step = args
    for a in (start, stop, step):
        if np.shape(a) != () or not jnp.issubdtype(jnp.result_type(a), jnp.integer):
            raise TypeError(f"range() bounds must be integer scalars, got {a!r}")
    if not (isinstance(step, Tracer) and is_traced(step)):
        if step == 0:
            builtins.range(0, 0, step)  # Python's ValueError: range() arg 3 must not be zero
    else:
        _check_step(step)
    return TracedRange(start, stop, step)


def _zero_step(site):
    raise fail(ValueError("range() arg 3 must not be zero"), site,
               f"(the traced step of the `range` at {site} was 0 when the compiled code ran)")


def _check_step(step):
    """A traced step: Python's ValueError, raised when the compiled code runs
    with a step of 0 on a path that reaches this ``range``, at the user's line
    (``autoflow.jit`` re-raises it as itself, like a traced ``raise``). The
    host is called only then (``later``'s ``when``)."""
    site = user_site(2)
    later.later(_zero_step, (site,), site=site, when=step == 0)


def _empty(name, site):
    try:
        getattr(builtins, name)(())
    except ValueError as e:  # Python's own message for an empty sequence
        raise fail(e, site, f"(the `range` given to `{name}` at {site} was empty when the "
                   "compiled code ran)") from None
