"""``and``, ``or``, ``not``, chained comparisons, and tests left as Python.

Plain Python::

    def and_(a, *thunks):
        for thunk in thunks:
            if not a:
                return a
            a = thunk()
        return a

Concrete operands short-circuit exactly so. A traced operand makes the result
``jnp.logical_and``/``jnp.logical_or`` of the booleans (``jnp.where`` for other
values), every later operand evaluated, as the staged code must; its run-time
effects and checks happen only where Python evaluates it.
"""

from __future__ import annotations

import builtins
import operator

import jax
import jax.numpy as jnp
import numpy as np

from ...core.origin import message, user_site
from ...errors import ConversionError
from ..effects.unset import maybe_unset
from ..effects import path_condition
from ..common.carries import caller_site
from ..loops.ranges import TracedRange, range_contains
from .string_values import String
from .strings import string_contains
from ..common.values import Mixed, Tracer, as_pred, is_array_like, is_traced, concrete_truth


def _logical(kind, a, thunks):
    for thunk in thunks:
        c = concrete_truth(a, caller_site, what=f"operand of `{kind}`")
        if c is not None:
            if (kind == "and") != c:  # `and` stops at a falsy value, `or` at a truthy one
                return a
            a = thunk()
            continue
        b = _evaluated_where(kind, a, thunk)
        if not is_array_like(b) or a.__class__ is Mixed:
            # `x or None`, `x > 0 and name`: Python's truth of the result is known
            # (a condition), its value is not (`common.values.Mixed`)
            c_b = concrete_truth(b, caller_site, what=f"operand of `{kind}`")
            pb = as_pred(b) if c_b is None else c_b
            pa = as_pred(a)
            pred = jnp.logical_and(pa, pb) if kind == "and" else jnp.logical_or(pa, pb)
            a = Mixed(pred, kind, b if not is_array_like(b) else a.other, user_site(3))
            continue
        if np.shape(b) != () and np.size(b) != 1:
            raise ConversionError(message(
                user_site(3), f"the right operand of `{kind}` is an array of shape "
                f"{tuple(np.shape(b))} while the left one is traced",
                f"Use `jnp.logical_{kind}` for elementwise logic."))
        a_arr, b_arr = jnp.asarray(a), jnp.asarray(b)
        a_arr, b_arr = (v.reshape(()) if v.ndim and v.size == 1 else v for v in (a_arr, b_arr))
        if a_arr.dtype == jnp.bool_ and b_arr.dtype == jnp.bool_:
            a = jnp.logical_and(a_arr, b_arr) if kind == "and" else jnp.logical_or(a_arr, b_arr)
        elif kind == "and":
            a = jnp.where(as_pred(a_arr), b_arr, a_arr)
        else:
            a = jnp.where(as_pred(a_arr), a_arr, b_arr)
        if not (isinstance(b, Tracer) and is_traced(b)) and (kind == "and") != bool(b):
            # A concrete operand that ends the chain (falsy for `and`, truthy for
            # `or`): on every path Python stops here, so the rest is never evaluated.
            return a
    return a


def _evaluated_where(kind, a, thunk):
    """``thunk()``, the next operand after the traced ``a``: staged code evaluates it on
    every path, Python only where ``a`` does not decide (truthy for ``and``, falsy for
    ``or``). What it checks or prints happens only there (``path_condition.on_path``:
    ``x > 0 and math.log(x) > 1`` raises nothing for ``x <= 0``); after a check in it
    that fails, nothing more runs (``path_condition.after_raise``)."""
    pred = as_pred(a)
    if kind == "or":
        pred = jnp.logical_not(pred)
    with path_condition.on_path(pred, carries_ok=True) as path:  # (its ok() is handed on)
        b = thunk()
        ok = path.ok()
    if ok is not None:
        path_condition.after_raise(jnp.logical_or(jnp.logical_not(pred), ok))
    return b


def and_(a, *thunks):
    """``a and b and ...`` (later operands as thunks, evaluated as Python would).

    A traced operand makes the result ``jnp.logical_and`` of the booleans
    (``jnp.where`` for other values), with every operand evaluated.
    """
    return _logical("and", a, thunks)


def or_(a, *thunks):
    """``a or b or ...``; see ``and_``."""
    return _logical("or", a, thunks)


def _traced(x):
    return isinstance(x, Tracer) and is_traced(x)


def _one_truth(x):
    return is_array_like(x) and np.size(x) == 1


def contains(item, container, negate=False):
    """``item in container`` (``not in`` when ``negate``).

    Python's own test unless ``item`` or ``container`` is traced. Then, for a list or
    tuple of scalars, Python's ``any(e is item or e == item for e in container)`` with
    the traced equalities reduced by ``jnp.any``; for a ``range``, arithmetic on its
    bounds; for an array, ``(container == item).any()`` (NumPy's ``in``).
    """
    out = _contains(container, item)
    if negate:
        return (not out) if isinstance(out, builtins.bool) else jnp.logical_not(out)
    return out


def _contains(container, item):
    if type(container) is dict and not _traced(item):
        # a key a staged loop that ran no iteration left unset: where it is set
        unset = maybe_unset(container)
        if unset:
            try:
                flag = unset.get(item)
            except TypeError:  # (unhashable: Python's error below)
                flag = None
            if flag is not None:
                return as_pred(flag)
    if isinstance(container, String) or isinstance(item, String):
        return string_contains(container, item)  # made from traced values: a traced answer
    traced_item = _traced(item)
    if isinstance(container, (list, tuple)) and (traced_item or builtins.any(
            _traced(e) for e in container)):
        preds = []
        for e in container:
            if e is item:
                return True
            if not (_one_truth(e) and _one_truth(item)):
                return item in container  # Python's own answer (or error)
            eq = jnp.reshape(jnp.asarray(e) == jnp.asarray(item), ())
            if not _traced(eq):
                if builtins.bool(eq):
                    return True
                continue
            preds.append(eq)
        return jnp.any(jnp.stack(preds)) if preds else False
    if isinstance(container, TracedRange) or traced_item and isinstance(
            container, builtins.range) and _one_truth(item):
        return range_contains(jnp.reshape(item, ()), container)  # (arithmetic on the bounds)
    if (_traced(container) or traced_item) and isinstance(container, (jax.Array, np.ndarray)) \
            and np.ndim(container) >= 1 and is_array_like(item):
        return jnp.any(jnp.asarray(container) == item)
    return item in container


_COMPARISONS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
                "==": operator.eq, "!=": operator.ne, "is": operator.is_,
                "is not": operator.is_not, "in": contains,
                "not in": lambda a, b: contains(a, b, True)}


def compare(left, *rest):
    """A chained comparison ``left op1 b op2 c ...`` (``rest``: op, thunk, op, thunk...).

    As in Python each operand is evaluated at most once, left to right, and
    only while the comparisons so far hold; the parts are combined with
    ``and_`` (so traced parts give ``jnp.logical_and``).
    """
    ops, thunks = rest[0::2], rest[1::2]
    values = [left]

    def part(i):
        if len(values) == i + 1:
            values.append(thunks[i]())
        return _COMPARISONS[ops[i]](values[i], values[i + 1])

    return _logical("and", part(0), [lambda i=i: part(i) for i in builtins.range(1, len(ops))])


def not_(a):
    """``not a``; ``jnp.logical_not`` of a traced scalar."""
    c = concrete_truth(a, caller_site, what="operand of `not`")
    if c is not None:
        return not c
    return jnp.logical_not(as_pred(a))


_GLOBAL_ADVICE = ("Make the condition static, or move the assignment out of the statement "
                  "(return the value instead of assigning a global/nonlocal).")


def python_condition(cond, reason, advice=_GLOBAL_ADVICE):
    """A test autoflow left as Python (an ``if``/``while``, a comprehension's ``if``):
    it must be concrete."""
    c = concrete_truth(cond, caller_site)
    if c is None:
        raise ConversionError(message(user_site(2), f"this condition is traced, but {reason}",
                                      advice))
    return c


def python_operand(value, reason):
    """An operand of an ``and``/``or``/``if-else`` autoflow left as Python: it must be concrete."""
    if concrete_truth(value, caller_site, what="operand") is None:
        raise ConversionError(message(
            user_site(2), f"this operand is traced, but {reason}",
            "Move the `:=` out of the expression: assign the name in a statement of its own "
            "before this line, then use the name here."))
    return value
