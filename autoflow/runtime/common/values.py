"""Classifying values: concrete or traced, static or array-like; pytree splitting.

Operators decide between Python and ``lax`` from these predicates, and stage
only the array-like leaves of their carries: other leaves (``None``, strings,
functions, ``Undefined``...) stay Python values and must come out of a staged
branch or loop unchanged.
"""

from __future__ import annotations

import collections

import math

import threading

import numpy as np
import jax
import jax.numpy as jnp

from .. import jax as jx
from ...core.origin import message, user_site
from ...errors import AutoflowError, ConversionError

Tracer = jx.Tracer
_ARRAY_SCALARS = (bool, int, float, complex)
_PLAIN = frozenset((bool, int, float, str, type(None), list, tuple, dict))


# The dicts JAX flattens as dicts (its own pytrees): read and changed in place as dicts.
DICTS = (dict, collections.OrderedDict, collections.defaultdict)


def dict_like(d, items):
    """A dict of ``d``'s kind holding ``items`` (a ``defaultdict`` with its factory)."""
    if type(d) is dict:
        return items
    if type(d) is collections.defaultdict:
        return collections.defaultdict(d.default_factory, items)
    return type(d)(items)


class UnboundVariableError(AutoflowError, UnboundLocalError):
    """A variable read where Python would raise ``UnboundLocalError`` (a user's
    ``except UnboundLocalError``/``except NameError`` catches it, as in Python).
    ``name`` and ``site``: the variable and the read, where known."""

    name = site = None

    @classmethod
    def at(cls, name, site, text, todo=None):
        exc = cls(message(site, text, todo))
        exc.name, exc.site = name, site
        return exc

    def python(self):
        """The same error with Python's own message (raised when compiled code runs)."""
        return self.pythons(self.name)

    @staticmethod
    def pythons(name):
        """The error Python raises reading the unbound variable ``name``."""
        return UnboundVariableError(f"cannot access local variable '{name}' where it "
                                    "is not associated with a value")


UnboundVariableError.__module__ = "autoflow.errors"  # (as a traceback names it: errors.__getattr__)


class Undefined:
    """The value of a variable that is not bound yet on this path.

    Generated code binds it where Python would have no binding at all, so
    that a branch or loop can take the variable as an argument. Using it in
    a computation raises an error that names the variable.
    """

    __slots__ = ("name", "guarded", "exit", "track")

    def __init__(self, name, guarded=False, exit=False, track=False):  # noqa: A002
        # ``guarded``: every read is guarded by a flag (``retval`` is only read
        # when ``returned`` is true), so a staged branch may fill it with zeros.
        # ``exit``: moreover the value is only read after the loop that binds it,
        # and only when it is bound in the iteration that leaves the loop (the
        # value of a `return` inside a loop): what an iteration that does not
        # leave binds, or does not, is never read (see `loops.staging.stage_loop`).
        # ``track``: filled like a guarded one, but its reads are not guarded (a
        # variable a loop's body binds first): where it is bound is tracked
        # (``effects.unset.bound_if``), and a read where it is not raises at run time.
        self.name = name
        self.guarded = guarded or exit
        self.exit = exit
        self.track = track

    def __repr__(self):
        return f"<undefined {self.name}>"

    def _fail(self, *args, **kwargs):
        raise UnboundVariableError.at(
            self.name, user_site(), f"local variable `{self.name}` is used before it is "
            "assigned on this path", f"Assign `{self.name}` before the statement that reads "
            "it (or on every path that leads to it).")

    __bool__ = __index__ = __int__ = __float__ = __call__ = __iter__ = __len__ = _fail
    __getitem__ = _fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _fail
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _fail
    __pow__ = __rpow__ = __matmul__ = __rmatmul__ = __neg__ = __pos__ = __abs__ = _fail
    __lt__ = __le__ = __gt__ = __ge__ = _fail
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = __invert__ = _fail

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        self._fail()


def is_traced(x) -> bool:
    """Is ``x`` an abstract tracer (its value unknown while tracing)?"""
    if not isinstance(x, Tracer):
        return False
    try:
        return not jx.is_concrete(x)
    except Exception:  # pragma: no cover - defensive across JAX versions
        return True


def staging() -> bool:
    """Is a JAX transformation (jit, vmap, grad...) tracing right now?"""
    return jx.tracing()


class _Local(threading.local):
    depth = 0


_local = _Local()


class staged_block:
    """Context: Python code is being traced as a branch or loop body of ``lax``."""

    def __enter__(self):
        _local.depth += 1

    def __exit__(self, *exc):
        _local.depth -= 1


def in_staged_block() -> bool:
    return _local.depth > 0


def is_array_like(x) -> bool:
    if isinstance(x, Undefined):
        return False
    return isinstance(x, (jax.Array, np.ndarray, np.generic) + _ARRAY_SCALARS)


class Mixed:
    """``a or b`` / ``a and b`` with a traced ``a`` and a ``b`` that is no array
    (``None``, a string, a list): Python's value is ``a`` on some runs and ``b``
    on others, which no array can hold; its truth is known (a traced boolean),
    so it serves as a condition (``if x or None:``). Any other use is
    autoflow's error, naming the expression."""

    __slots__ = ("pred", "kind", "other", "site")

    def __init__(self, pred, kind, other, site):
        self.pred, self.kind, self.other, self.site = pred, kind, other, site

    def fail(self, *args, **kwargs):
        raise ConversionError(message(
            self.site, f"this `{self.kind}` has a traced operand and one that is "
            f"{describe(self.other)}: its value is the one or the other only when the "
            "compiled code runs, which no array can hold, so it can only be a condition",
            "Test and choose separately (`a if a is not None else b`, "
            "`jnp.where(a != 0, a, b)` for numbers), or make the operand static."))

    __index__ = __int__ = __float__ = __iter__ = __len__ = __getitem__ = __call__ = fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = fail
    __rtruediv__ = __lt__ = __le__ = __gt__ = __ge__ = __neg__ = __array__ = fail

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        self.fail()


# (Staged as a carry or returned from a jitted function, it says what it is.)
jax.tree_util.register_pytree_node(Mixed, lambda m: m.fail(), lambda aux, children: None)


def concrete_truth(x, site_fn, what="condition"):
    """``bool(x)`` when ``x`` is concrete; ``None`` when it is traced.

    A traced ``x`` must be a scalar; otherwise a ConversionError explains
    (Python's own ``bool`` would fail the same way on a concrete array).
    """
    if x.__class__ in _PLAIN:
        return bool(x)
    if x.__class__ is Mixed:
        return None
    if isinstance(x, Tracer) and is_traced(x):
        if np.shape(x) != () and np.size(x) != 1:
            site = site_fn()
            raise ConversionError(message(
                site, f"the {what} is a traced array of shape {tuple(np.shape(x))} "
                f"({x.dtype}), not a scalar, so it has no single truth value",
                "Reduce it to a scalar with `.any()` or `.all()`, or compute both "
                "results and choose elementwise with `jnp.where(cond, a, b)`."))
        return None
    return bool(x)


def as_pred(x):
    """A traced scalar as a boolean predicate (Python's truth rule)."""
    if x.__class__ is Mixed:
        return x.pred
    x = jnp.asarray(x)
    if x.ndim and x.size == 1:  # a size-1 array is a valid condition, as in NumPy
        x = x.reshape(())
    if x.dtype != jnp.bool_:
        x = x != 0
    return x


def as_pred_vec(x):
    """An array as booleans, elementwise (Python's truth rule for each item)."""
    x = jnp.asarray(x)
    return x if x.dtype == jnp.bool_ else x != 0


def any_traced(tree) -> bool:
    """Does the pytree ``tree`` hold a traced value (``is_traced``)?"""
    return any(is_traced(x) for x in jax.tree_util.tree_leaves(tree))


def any_tracer(tree) -> bool:
    """Does the pytree ``tree`` hold a tracer, concrete ones included (``jax.grad``
    without ``jit``, where JAX refuses ``float()``, ``math.sqrt`` and format specs of
    the value it differentiates, as it does under ``jit``)?"""
    return any(isinstance(x, Tracer) for x in jax.tree_util.tree_leaves(tree))


def is_leaf(x):
    return x is None or isinstance(x, Undefined)


def flatten(tree):
    return jax.tree_util.tree_flatten(tree, is_leaf=is_leaf)


def unflatten(treedef, leaves):
    return jax.tree_util.tree_unflatten(treedef, leaves)


def same_static(a, b) -> bool:
    if a is b:
        return True
    if isinstance(a, Undefined) or isinstance(b, Undefined):
        return isinstance(a, Undefined) and isinstance(b, Undefined)
    try:
        return bool(type(a) is type(b) and a == b)
    except Exception:
        return False


def describe(x) -> str:
    """A value in the user's terms: ``float32[3]``, ``int (Python)``, ``None``..."""
    if isinstance(x, Undefined):
        return "unassigned"
    if x is None:
        return "None"
    if isinstance(x, _ARRAY_SCALARS):
        return f"a Python {type(x).__name__}"
    kind = getattr(type(x), "autoflow_kind", None)  # (autoflow's own values: their names)
    if kind is not None:
        return kind
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        shape = ",".join(str(d) for d in np.shape(x))
        dtype = x.dtype if is_extended(x.dtype) else np.dtype(x.dtype).name
        return f"{dtype}[{shape}]"
    return f"a {type(x).__name__}"


def is_extended(dtype) -> bool:
    """Is ``dtype`` one of JAX's extended dtypes (typed PRNG keys ``key<fry>``...),
    which NumPy cannot interpret?"""
    return jax.dtypes.issubdtype(dtype, jax.dtypes.extended)


def _np_dtype(dtype):
    return dtype if is_extended(dtype) else np.dtype(dtype)


def is_weak(x) -> bool:
    """Is the array or tracer ``x`` weakly typed (made from a Python scalar)?"""
    return bool(getattr(getattr(x, "aval", None), "weak_type", getattr(x, "weak_type", False)))


def aval_of(x):
    """(shape, dtype, weak) of an array-like leaf."""
    if isinstance(x, _ARRAY_SCALARS):
        return (), jnp.result_type(x), True
    return tuple(np.shape(x)), _np_dtype(x.dtype), is_weak(x)


def weak_rep(dtype, weak):
    """What ``jnp.result_type`` should see for a (dtype, weak) pair."""
    if not weak or is_extended(dtype):
        return dtype
    kind = np.dtype(dtype).kind
    return {"b": False, "i": 0, "u": 0, "f": 0.0, "c": 0j}.get(kind, dtype)


def promote(a, b):
    """Common (dtype, weak) of two avals, as NumPy/JAX promotion would give."""
    (_, da, wa), (_, db, wb) = a, b
    if is_extended(da) or is_extended(db):  # keys: no promotion (the same dtype or an error)
        if da != db:
            raise TypeError(f"{da} and {db} have no common dtype")
        return da, False
    # (JAX's own flag: weak where the result's type comes from weak values only, as
    # `True` against a weak `1` gives a weak int)
    dtype, weak = jax.dtypes.result_type(weak_rep(da, wa), weak_rep(db, wb),
                                         return_weak_type_flag=True)
    return np.dtype(dtype), bool(weak)


def _holds(dtype, value) -> bool:
    """Does ``dtype`` hold Python number ``value`` (anything else: yes)?"""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return True
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        if isinstance(value, float):
            return True
        info = np.iinfo(dt)
        return int(info.min) <= value <= int(info.max)
    if dt.kind == "f" and math.isfinite(value):
        return abs(value) <= float(jnp.finfo(dt).max)
    return True


def promote_values(a, av, b, bv):
    """``promote(av, bv)`` for values ``a`` and ``b`` (of those avals): where a Python
    number among them does not fit the common type (``300`` against an int8 array,
    ``1e6`` against float16), the type of a strong Python number instead, which holds
    it (Python keeps its value on that path; the cast would change it)."""
    dtype, weak = promote(av, bv)
    if _holds(dtype, a) and _holds(dtype, b):
        return dtype, weak
    strong = [(v, (x[0], x[1], False) if not _holds(dtype, v) else x)
              for v, x in ((a, av), (b, bv))]
    return promote(strong[0][1], strong[1][1])


def structure(x) -> str:
    """A container's layout in the user's terms: ``a tuple (float32[], float32[3])``..."""
    if isinstance(x, (list, tuple)):
        inner = ", ".join(structure(v) for v in x[:6]) + (", ..." if len(x) > 6 else "")
        return f"a {type(x).__name__} ({inner})" if x else f"an empty {type(x).__name__}"
    if isinstance(x, dict):
        return f"a dict with keys {sorted(map(str, x))}"
    return describe(x)
