"""What happens when the compiled code runs: Python's effects, on the path taken.

Under a trace, Python code runs once, while JAX traces it: both branches of
a staged ``if``, one iteration standing for all of a staged loop, and the
whole body of a jitted function only at its first call. An effect that Python
would have (a ``print``, a warning, a log record, a failed ``assert``, a
``raise``) must instead happen each time the compiled code runs, on the path
it takes, in program order. ``later(fn, args, kwargs)`` stages that. Plain
Python::

    def later(fn, args=(), kwargs=None, site=None):
        fn(*args, **(kwargs or {}))

Staged, it is one ``jax.debug.callback(..., ordered=True)`` whose operands
are the traced values among ``args`` (nested in lists, tuples, dicts, and
in ``Deferred`` strings); the rest are kept as they are. When the compiled
code runs, the callback rebuilds ``args`` from the run-time values (see
``host_value``: counters as Python ints), and calls
``fn`` only where the *path condition* holds: the conjunction of the traced
conditions of the staged branches around the statement (``on_path``), and,
in a loop body under ``vmap``, whether this element's loop still runs.
``lax.cond`` alone would not do: a cheap ``if`` is staged as a select, and
under ``vmap`` every branch runs for every element.

``Deferred`` strings: ``f"{x:.3f}"``, ``"%d" % k``, ``"...".format(x)``,
``str(x)`` of a traced value cannot be made while tracing; the rewriter turns
them into ``af.fstring``/``af.percent``/``af.str`` (``runtime.python.strings``), which
give the string at once for concrete values and a ``Deferred`` (made when the
compiled code runs) for traced ones.

A callable whose closure holds traced values (an ``assert``'s message, a
``raise``'s exception) travels as a ``Thunk``: rebuilt at run time with the
run-time values in its cells, then called.

A check (an effect that raises: ``when``) under ``autoflow.jit`` is no effect at
all where it can be: ``checks._Check``, a pure callback whose result the code after
it reads (see ``checks.fast_checks``); one staged directly in a loop's body is carried
out of the loop (``Deferring``). Elsewhere an effect is the effect primitive
(``primitive._Effect``) or a ``jax.debug.callback``, where the path condition holds
(``path_condition``).
"""

from __future__ import annotations

import builtins
import operator
import types

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import jax as jx
from ..jax import current_trace
from ..common.values import Tracer, as_pred, is_extended, is_weak
from .path_condition import _local, after_raise, path_condition
from .primitive import _Effect, _effects_as_primitive
from . import checks
from .checks import _Check, _raise, fail


# ---------------------------------------------------------------------------
# Values seen at run time
# ---------------------------------------------------------------------------

def host_value(value, weak):
    """A run-time value as the user's code would hold it in eager Python.

    A weakly typed integer scalar comes back as a Python ``int`` (a loop counter,
    ``len(...)``, ``int(x)``, which Python holds as an ``int``); a boolean as a Python
    ``bool`` (JAX has no weakly typed booleans). A weakly typed
    float scalar stands for a Python ``float`` (an argument passed as one): it
    comes back as the Python float that prints as its float32 does (``0.1``,
    not ``0.10000000149011612``). Anything else is the JAX array the callback
    receives, which ``str``, ``repr`` and format specs show as eager JAX would
    (``f"{err}"`` of a float32 scalar shows all its digits, as there).
    """
    if np.ndim(value) != 0:
        return value
    v = np.asarray(value)
    kind = v.dtype.kind
    if kind == "b":
        return builtins.bool(v)
    if kind in "iu" and weak:
        return builtins.int(v)
    if not weak:
        return value
    if kind == "f":
        return builtins.float(v) if v.dtype == np.float64 else builtins.float(builtins.str(v))
    if kind == "c":
        return builtins.complex(v)
    return value


# ---------------------------------------------------------------------------
# Strings made at run time
# ---------------------------------------------------------------------------

class _InOrder:
    """A dict of an effect's or a ``Deferred``'s arguments, flattened in its own key order
    (JAX flattens a dict by sorted keys, and builds it again so: ``print(d)`` showed them
    sorted; keys of mixed types, ``{"a": x, 3: 1}``, JAX cannot sort at all)."""

    def __init__(self, keys, values):
        self.keys, self.values = tuple(keys), tuple(values)


jax.tree_util.register_pytree_node(
    _InOrder, lambda d: (d.values, d.keys), lambda keys, values: _InOrder(keys, values))


def _in_order(x):
    """``x`` with each dict in it (in lists, tuples and dicts) an ``_InOrder``."""
    if type(x) is dict:
        return _InOrder(x.keys(), (_in_order(v) for v in x.values()))
    if type(x) in (list, tuple):
        return type(x)(_in_order(v) for v in x)
    return x


class Deferred:
    """``fn(*args, **kwargs)``, a string made when the compiled code runs
    because some of ``args`` are traced. A pytree (its traced values are
    leaves), so ``later`` carries it to the run-time callback."""

    __slots__ = ("fn", "args", "kwargs")

    def __init__(self, fn, args, kwargs=None):
        self.fn, self.args, self.kwargs = fn, tuple(_in_order(a) for a in args), kwargs or {}

    def __repr__(self):
        return f"<a string made when the compiled code runs: {self.fn!r}>"

    def __add__(self, other):
        return Deferred(operator.add, (self, other))

    def __radd__(self, other):
        return Deferred(operator.add, (other, self))

    def __mod__(self, other):
        return Deferred(operator.mod, (self, other))

    def __mul__(self, other):
        return Deferred(operator.mul, (self, other))

    def __getattr__(self, name):
        # `f"{x}".upper()`, `("%.2f" % x).rjust(8)`: a str method, called later.
        if name.startswith("_") or not hasattr(builtins.str, name):
            raise AttributeError(name)
        return lambda *args, **kwargs: Deferred(_method, (self, name) + args, kwargs)


def _method(s, name, *args, **kwargs):
    return getattr(s, name)(*args, **kwargs)


jax.tree_util.register_pytree_node(
    Deferred, lambda d: ((d.args, d.kwargs), d.fn),
    lambda fn, children: Deferred(fn, children[0], children[1]))


def resolve(tree):
    """``tree`` with every ``Deferred`` in it made into its string (in the cells of a
    ``Thunk`` too: a message made before the ``raise`` that uses it)."""
    if isinstance(tree, Deferred):
        return tree.fn(*resolve(tree.args), **resolve(tree.kwargs))
    if type(tree) in (list, tuple):
        return type(tree)(resolve(x) for x in tree)
    if type(tree) is dict:
        return {k: resolve(v) for k, v in tree.items()}
    if type(tree) is _Holder:
        return tree.obj
    if type(tree) is _InOrder:
        return {k: resolve(v) for k, v in zip(tree.keys, tree.values)}
    if type(tree) is Thunk and _holds_deferred(tree):
        fn = tree.fn
        cells = tuple(_cell_value(c) for c in fn.__closure__)
        return Thunk(types.FunctionType(
            fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
            tuple(types.CellType() if v is _UNBOUND else types.CellType(resolve(v)) for v in cells)))
    return tree


class _Sketched:
    """A traced value in a string shown while tracing: its type, not its value."""

    def __init__(self, value):
        shape = ",".join(map(str, getattr(value, "shape", ())))
        self.text = f"<traced {getattr(value, 'dtype', '')}[{shape}]>"

    def __repr__(self):
        return self.text

    __str__ = __repr__

    def __format__(self, spec):
        return self.text


def sketch(deferred):
    """The string ``deferred`` will be, with each traced value shown as its type
    (``"bad <traced float32[]>"``): what a message raised while tracing can say."""
    def leaf(x):
        if not isinstance(x, Tracer):
            return x
        # (a concrete tracer, `jax.grad` without `jit`: its value, as the string will show)
        value = jx.concrete_value(x)
        return _Sketched(x) if value is None else host_value(value, is_weak(x))
    return resolve(jax.tree_util.tree_map(leaf, deferred))


def _holds_deferred(thunk):
    return builtins.any(
        isinstance(x, Deferred) for c in (thunk.fn.__closure__ or ())
        for x in jax.tree_util.tree_leaves(_cell_value(c), is_leaf=lambda v: isinstance(v, Deferred)))


# ---------------------------------------------------------------------------
# Callables rebuilt at run time
# ---------------------------------------------------------------------------

class _Unbound:
    pass


_UNBOUND = _Unbound()


def _cell_value(cell):
    try:
        return cell.cell_contents
    except ValueError:
        return _UNBOUND


class Thunk:
    """A function of no arguments whose closure may hold traced values; a
    pytree whose leaves are its cells' contents, rebuilt with the run-time
    values by ``later`` (an ``assert``'s message, a ``raise``'s exception)."""

    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __call__(self):
        return self.fn()


def _flatten_thunk(t):
    fn = t.fn
    cells = tuple(_cell_value(c) for c in (fn.__closure__ or ()))
    return (cells,), (fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__)


def _unflatten_thunk(aux, children):
    code, globs, name, defaults = aux
    cells = tuple(types.CellType() if v is _UNBOUND else types.CellType(v) for v in children[0])
    return Thunk(types.FunctionType(code, globs, name, defaults, cells or None))


jax.tree_util.register_pytree_node(Thunk, _flatten_thunk, _unflatten_thunk)


class _Holder:
    """A user's object (not a pytree) holding traced values in its attributes, or an
    exception holding them in its ``args`` (``print("at", Meters(x))``,
    ``print(ValueError(x))``): a pytree whose leaves are what it holds, rebuilt at run
    time as a copy holding the run-time values, so that its ``str`` shows them (not a
    tracer's text)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj


def _flatten_holder(h):
    obj = h.obj
    fields = dict(vars(obj)) if hasattr(obj, "__dict__") else {}
    args = obj.args if isinstance(obj, BaseException) else None
    return (fields, args), (obj, tuple(fields))


def _unflatten_holder(aux, children):
    import copy

    obj, _ = aux
    fields, args = children
    try:
        new = copy.copy(obj)
        new.__dict__.update(fields)
        if args is not None:
            new.args = tuple(args)
    except Exception:  # noqa: BLE001 - an object that cannot be copied: shown as it is
        return obj
    return new


jax.tree_util.register_pytree_node(_Holder, _flatten_holder, _unflatten_holder)


def _held(x):
    """``x``, or a ``_Holder`` of it where it is an object that holds traced values."""
    if isinstance(x, (Tracer, Deferred, Thunk, type, types.FunctionType, types.ModuleType,
                      builtins.str, builtins.int, builtins.float, list, tuple, dict)) or x is None:
        return x
    held = (*vars(x).values(),) if hasattr(x, "__dict__") else ()
    if isinstance(x, BaseException):
        held += tuple(x.args)
    if not held or not jax.tree_util.all_leaves([x]):
        return x
    leaves = jax.tree_util.tree_leaves(held)
    return _Holder(x) if any(isinstance(v, Tracer) for v in leaves) else x


def check(bad, exc_type, text, site, note=None):
    """Python's ``exc_type(text)``, from the user's line ``site``, where ``bad`` holds:
    at once where ``bad`` is known now, else when the compiled code runs (a check:
    what follows runs only where it did not raise). ``note``: the fix, added to the
    exception's notes."""
    if not isinstance(bad, Tracer):
        if builtins.bool(np.any(np.asarray(bad))):
            raise fail(exc_type(text), site, note)
        return
    later(_raise, (exc_type, text, site, note), site=site, when=bad)


# ---------------------------------------------------------------------------
# Staging
# ---------------------------------------------------------------------------

class _Count:
    staged = 0


count = _Count()  # how many effects were staged so far (see `loops.statements._rerunnable`)


def later(fn, args=(), kwargs=None, site=None, when=None, check=False, raises=False):
    """``fn(*args, **kwargs)`` when the compiled code runs, where the path
    condition (and ``when``, a traced boolean, if given) holds, in program
    order (see the module's docstring). An exception it raises then is the
    user's, from their line ``site``. ``when`` is for checks, whose ``fn``
    raises: the code after one runs only where ``when`` is false
    (``after_raise``). ``check`` (implied by ``when``): ``fn`` raises, so under
    ``vmap`` it is called once, for the first lane where it applies, not once
    per lane (see ``_Effect``). ``raises``: ``fn`` always raises (a ``raise``
    statement), a check wherever the path is taken, if it can be a ``_Check``.

    Returns the ``_Check``'s result (where nothing raised) if the check is one,
    else None."""
    if getattr(_local, "quiet", False):  # (a loop's test computed for its value only)
        return None
    if raises and when is None and (checks._fast_checks_here() or _held_here()):
        when = True
    args = tuple(_in_order(_held(a)) for a in args)
    leaves, tree = jax.tree_util.tree_flatten((args, kwargs or {}),
                                              is_leaf=lambda x: x is None)
    where = [i for i, x in builtins.enumerate(leaves) if isinstance(x, Tracer)]
    weak = [is_weak(leaves[i]) for i in where]
    operands = [leaves[i] for i in where]
    static = [None if isinstance(x, Tracer) else x for x in leaves]  # (keeps no tracer)
    if site is not None and any(isinstance(x, builtins.str) and jx.shows_tracer(x)
                                for x in static):
        _tracer_text(site)

    def call(*values):
        full = list(static)
        for i, w, v in builtins.zip(where, weak, values):
            full[i] = host_value(v, w)
        a, kw = resolve(jax.tree_util.tree_unflatten(tree, full))
        try:
            fn(*a, **kw)
        except Exception as e:
            if getattr(e, "__autoflow_site__", None) is None:
                fail(e, site)
            raise

    # (a `raise` raises: under `vmap` it is called once, for the first lane on its
    # path, as a check is; once per lane, the program grew with the batch)
    return stage(call, operands, when, check or raises)


def _tracer_text(site):
    """autoflow's error: a string made while tracing (by library code: ``string.Template``,
    ``textwrap``) shows a tracer's text, which would be printed or raised."""
    from ...core.origin import message
    from ...errors import ConversionError

    raise ConversionError(message(
        site, "this line would show a JAX tracer's text, not a value: a string holding a "
        "traced value was made while tracing, where only the tracer is known (by code "
        "autoflow does not convert, as `string.Template` or `textwrap`)",
        "Make the string with an f-string, `%` or `str.format` in your own code (made when "
        "the compiled code runs), or make it outside the jitted function."))


class each_iteration:
    """Context: the effects staged inside (a ``lax.scan``'s body) read ``counter``, the
    scan's iteration counter, so that they depend on a carry. Under ``jax.grad`` JAX's
    scan partially evaluates its body and hoists what depends on no carry out of the
    loop, computed once: a ``print`` of constants in the body of a static ``for``
    would then run once, not once per iteration. Reading the counter (a host callback
    that ignores it) keeps each effect in the loop."""

    def __init__(self, counter):
        self.counter = counter

    def __enter__(self):
        _local.__dict__.setdefault("iterations", []).append(self.counter)
        return self

    def __exit__(self, *exc):
        _local.iterations.pop()


def _ignoring_last(call):
    def run(*values):
        return call(*values[:-1])
    return run


def stage(call, operands, when=None, check=False):
    """Stage ``call(*operands)`` (the run-time values of the traced ``operands``) as
    ``later`` does (see there). A check (``when``) staged directly in the body of a
    staged loop that carries its checks out (``deferring``) is recorded there instead:
    the loop stops where it fails, as after any check, and one check after the loop
    raises with the values it failed with (``stage`` again, out there). An effect in
    a scan's body also reads its iteration counter (``each_iteration``)."""
    iterations = getattr(_local, "iterations", None)
    if iterations and when is None:
        operands, call = (*operands, iterations[-1]), _ignoring_last(call)
    pred = path_condition()
    if when is not None:
        pred = as_pred(when) if pred is True else jnp.logical_and(pred, as_pred(when))
    count.staged += 1
    if when is not None:
        collector = _collector()
        if collector is not None and collector.record(call, operands, pred):
            after_raise(jnp.logical_not(as_pred(when)))
            return None
    if when is not None and checks._fast_checks_here():
        # a check tied to the function's outputs (no ordered effect: see `fast_checks`)
        gate = as_pred(pred)
        ok = _Check(call, jx.typeof(gate), tuple(jx.typeof(x) for x in operands))(
            gate, tuple(operands))
        _local.sink.checks += 1
        after_raise(ok)
        return ok
    if when is not None:  # a check that raises: what follows runs only where it did not
        after_raise(jnp.logical_not(as_pred(when)))
    elif getattr(_local, "sink", None) is not None:
        _local.sink.ordered = True
    if _effects_as_primitive():
        gate = () if pred is True else (as_pred(pred),)
        _Effect(call, tuple(jx.typeof(x) for x in gate),
                tuple(jx.typeof(x) for x in operands), check or when is not None)(
                    gate, tuple(operands))
        return

    def run(ok, *values):
        if np.asarray(ok):
            call(*values)

    if pred is True:
        jax.debug.callback(call, *operands, ordered=True)
        return
    # Where the path is not taken the host is not called at all (a cheap `if` is
    # a select, so the callback is in a `cond` of its own); under `vmap` that
    # `cond` runs for every element, and `run` checks each element's `ok`.
    lax.cond(pred, lambda ok, ops: jax.debug.callback(run, ok, *ops, ordered=True),
             lambda ok, ops: None, pred, operands)


# ---------------------------------------------------------------------------
# Checks carried out of a staged loop
# ---------------------------------------------------------------------------

class Deferring:
    """The checks staged directly in a staged loop's body (not inside a branch or a loop
    of its own, another trace), for ``loops.flags._deferring_checks``.

    A check in a loop body is a host callback in a ``cond`` at every iteration, which
    keeps XLA from compiling the loop into one tight kernel: about 0.2 us an iteration
    on a CPU (a loop adding ``math.sqrt(x + i)`` or a table's items took 60 times as
    long). Instead the loop carries, for each check, "failed yet" and the operands it
    failed with (``stop_gradient``-ed), and one check after the loop raises with them.
    Nothing Python shows changes: a failed check stops the loop and what follows it in
    the body (``after_raise``), as before, and the check after the loop comes before
    anything after the loop.

    ``inputs``: None while a first trace finds the checks (``found``: their operands'
    avals; they are not staged: the loop is traced again); else each check's carried
    ``(failed, operands, avals)``, matched in staging order (``records``: ``(call,
    pred, operands)``; ``mismatch`` where the body staged other checks this time).
    """

    def __init__(self, trace, inputs):
        self.trace, self.inputs = trace, inputs
        self.found, self.records, self.mismatch = [], [], False

    def record(self, call, operands, pred):
        if current_trace() is not self.trace or self.mismatch:
            return False
        avals = tuple(jx.typeof(x) for x in operands)
        if builtins.any(is_extended(a.dtype) for a in avals):  # (a PRNG key: no zeros, no where)
            return False
        if self.inputs is None:
            self.found.append(avals)
            return True
        k = len(self.records)
        if k >= len(self.inputs) or self.inputs[k][2] != avals:
            self.mismatch = True
            return False
        self.records.append((call, jnp.bool_(True) if pred is True else as_pred(pred),
                             list(operands)))
        return True


def _collector():
    stack = getattr(_local, "deferring", None)
    return stack[-1] if stack else None


def collect(collector):
    """From now on, the checks staged in ``collector.trace`` go to ``collector`` (its
    ``record(call, operands, pred)`` keeps one, or says no), until ``uncollect``."""
    _local.__dict__.setdefault("deferring", []).append(collector)


def uncollect(collector):
    _local.deferring.remove(collector)


def _held_here():
    """Are the checks staged here held for later (``raising.checks_after_finally``)?"""
    c = _collector()
    return getattr(c, "holds", False) and c.trace is current_trace()


class deferring:
    """Context: the checks staged in this trace go to a ``Deferring`` (see there)."""

    def __init__(self, inputs):
        self.collector = Deferring(current_trace(), inputs)

    def __enter__(self):
        collect(self.collector)
        return self.collector

    def __exit__(self, *exc):
        uncollect(self.collector)


if jx.install_low_staging():  # staged as a low equation, named `effect` (see runtime.jax)
    jx.name_primitives([_Effect, _Check])
