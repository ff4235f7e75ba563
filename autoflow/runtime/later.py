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
them into ``af.fstring``/``af.percent``/``af.str`` (``runtime.strings``), which
give the string at once for concrete values and a ``Deferred`` (made when the
compiled code runs) for traced ones.

A callable whose closure holds traced values (an ``assert``'s message, a
``raise``'s exception) travels as a ``Thunk``: rebuilt at run time with the
run-time values in its cells, then called.

A check (an effect that raises: ``when``) under ``autoflow.jit`` is no effect at
all where it can be: ``_Check``, a pure callback whose result the code after it
reads (see ``fast_checks``); one staged directly in a loop's body is carried out
of the loop (``Deferring``).
"""

from __future__ import annotations

import builtins
import logging
import operator
import threading
import types
import weakref

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..core.origin import user_site
from . import jax_internals as jx
from . import selfcheck
from .events import plain_now
from .jax_internals import CALLBACK_LOGGER, DEBUGGING_LOGGER, current_trace
from .values import Tracer, UnboundVariableError, Undefined, as_pred, is_extended, is_weak

_local = threading.local()


# ---------------------------------------------------------------------------
# The path condition
# ---------------------------------------------------------------------------

def _path():
    return getattr(_local, "path", [])


class _NoRaise:
    """An entry of the path: no staged ``raise`` (or failed check) before here.

    After a traced ``raise`` on a path, Python runs nothing more; the compiled
    code goes on (the check raises when it has run), so what follows must run
    only where nothing raised: effects check it, loops test it (``raise_gate``),
    so a loop after a raise guard cannot spin on the values Python never reached.
    Unlike a branch's condition it stays on the path until the block it was
    added in ends (the branch, the loop body, or the traced function)."""

    __slots__ = ("pred",)

    def __init__(self, pred):
        self.pred = pred

    def __call__(self):
        return self.pred() if callable(self.pred) else self.pred


class _Base:
    """The entries added outside every staged block, for the trace they were made in
    (a later trace of another program does not see them)."""

    trace = None
    entries = ()


def _base():
    base = getattr(_local, "base", None)
    if base is None:
        base = _local.base = _Base()
    return base


def _base_entries():
    base = getattr(_local, "base", None)
    if base is None or not base.entries:
        return ()
    # the trace the outermost open block was entered from (or the current one)
    outer = getattr(_local, "outer", None) if getattr(_local, "depth", 0) else current_trace()
    return base.entries if base.trace is outer else ()


class on_path:
    """Context: the code traced inside runs only where ``pred`` holds (no condition
    for ``pred=None``: a loop body's block). What it adds to the path after a
    ``raise`` (``after_raise``) ends with it; ``raised()`` tells it.

    ``carries_ok``: whoever opened the block reads ``ok()`` when it ends and hands
    it on to the code around (a branch's result, a loop's carry): then a check
    staged inside may be a ``_Check`` (see ``fast_checks``), whose result reaches
    the function's outputs through it."""

    def __init__(self, pred=None, carries_ok=False):
        self.pred, self.carries_ok = pred, carries_ok

    def __enter__(self):
        depth = getattr(_local, "depth", 0)
        if not depth:
            _local.outer = current_trace()
            _local.blocks = []
        _local.depth = depth + 1
        self.trace = current_trace()
        _local.blocks.append(self)
        self.saved = _path()
        _local.path = self.saved + ([self.pred] if self.pred is not None else [])
        self.start = len(_local.path)
        return self

    def ok(self):
        """Where nothing in this block raised (a traced boolean), or None if no
        ``raise`` was staged in it."""
        added = [e for e in _local.path[self.start:] if isinstance(e, _NoRaise)]
        return _conjunction(added) if added else None

    def __exit__(self, *exc):
        _local.path = self.saved
        _local.depth -= 1
        _local.blocks.pop()


def scope(carries_ok=False):
    """A block whose ``after_raise`` entries end with it (a loop body)."""
    return on_path(None, carries_ok)


def after_raise(pred):
    """From here to the end of the enclosing block, code runs only where ``pred``
    (a traced boolean, or a thunk of one) holds: nothing raised (see ``_NoRaise``)."""
    entry = _NoRaise(pred)
    if getattr(_local, "depth", 0):
        _local.path.append(entry)
        return
    base, trace = _base(), current_trace()
    if base.trace is not trace:
        base.trace, base.entries = trace, []
    base.entries.append(entry)


def _conjunction(preds):
    out = True
    for p in preds:
        p = _value_only(p) if callable(p) else p
        out = as_pred(p) if out is True else jnp.logical_and(out, as_pred(p))
    return out


def _value_only(thunk):
    """``thunk()`` (a loop's test, computed again in its body: whether this element's loop
    still runs) for its value only: the effects and checks it stages were staged where
    the loop tests it, and staging them again here would ask for the path condition
    being computed (``later`` stages nothing while this runs)."""
    if getattr(_local, "quiet", False):
        return thunk()
    _local.quiet = True
    try:
        return thunk()
    finally:
        _local.quiet = False


def path_condition():
    """The conjunction of the traced conditions leading here (``True`` if none)."""
    return _conjunction([*_base_entries(), *_path()])


def raise_gate():
    """Where no staged ``raise`` before here (on this path) raised, or None if none
    was staged: a loop staged here runs only there."""
    entries = [e for e in (*_base_entries(), *_path()) if isinstance(e, _NoRaise)]
    return _conjunction(entries) if entries else None


# ---------------------------------------------------------------------------
# Values seen at run time
# ---------------------------------------------------------------------------

def host_value(value, weak):
    """A run-time value as the user's code would hold it in eager Python.

    An integer or boolean scalar comes back as a Python ``int``/``bool``
    (mostly a loop counter, which Python holds as an ``int``). A weakly typed
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
    if kind in "iu":
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

class Deferred:
    """``fn(*args, **kwargs)``, a string made when the compiled code runs
    because some of ``args`` are traced. A pytree (its traced values are
    leaves), so ``later`` carries it to the run-time callback."""

    __slots__ = ("fn", "args", "kwargs")

    def __init__(self, fn, args, kwargs=None):
        self.fn, self.args, self.kwargs = fn, tuple(args), kwargs or {}

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
    if type(tree) is Thunk and _holds_deferred(tree):
        fn = tree.fn
        cells = tuple(_cell_value(c) for c in fn.__closure__)
        return Thunk(types.FunctionType(
            fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
            tuple(types.CellType() if v is _UNBOUND else types.CellType(resolve(v)) for v in cells)))
    return tree


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


# ---------------------------------------------------------------------------
# Exceptions raised when the compiled code runs
# ---------------------------------------------------------------------------

class _Last:
    """The user exception a run-time check raised last. A plain object, not a
    thread-local: JAX may run an ordered callback on another thread than the
    one that called the compiled function."""

    exc = None


_last = _Last()


class _QuietChecks(logging.Filter):
    """JAX logs every exception a debug callback raises; a staged ``raise``
    is the user's exception, re-raised to them: don't print it twice."""

    def filter(self, record):
        exc = record.exc_info[1] if record.exc_info else None
        return not (exc is not None and exc is getattr(_last, "exc", None))


for _name in (DEBUGGING_LOGGER, CALLBACK_LOGGER):
    logging.getLogger(_name).addFilter(_QuietChecks())


def last_user_exception():
    """The user exception a staged check raised last in this thread (then forgotten)."""
    exc = getattr(_last, "exc", None)
    _last.exc = None
    return exc


def fail(exc, site, note=None):
    """``exc``, raised by a run-time check for the user's statement at ``site``,
    made ready for ``autoflow.jit`` to re-raise as itself (``at_user_line``)."""
    if note:
        exc.add_note(note)
    exc.__autoflow_site__ = site
    _last.exc = exc
    return exc


def _raise(exc_type, text, site, note):
    raise fail(exc_type(text), site, note)


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


count = _Count()  # how many effects were staged so far (see `loops._rerunnable`)


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
    if raises and when is None and _fast_checks_here():
        when = True
    leaves, tree = jax.tree_util.tree_flatten((tuple(args), kwargs or {}),
                                              is_leaf=lambda x: x is None)
    where = [i for i, x in builtins.enumerate(leaves) if isinstance(x, Tracer)]
    weak = [is_weak(leaves[i]) for i in where]
    operands = [leaves[i] for i in where]
    static = [None if isinstance(x, Tracer) else x for x in leaves]  # (keeps no tracer)

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

    return stage(call, operands, when, check)


def stage(call, operands, when=None, check=False):
    """Stage ``call(*operands)`` (the run-time values of the traced ``operands``) as
    ``later`` does (see there). A check (``when``) staged directly in the body of a
    staged loop that carries its checks out (``deferring``) is recorded there instead:
    the loop stops where it fails, as after any check, and one check after the loop
    raises with the values it failed with (``stage`` again, out there)."""
    pred = path_condition()
    if when is not None:
        pred = as_pred(when) if pred is True else jnp.logical_and(pred, as_pred(when))
    count.staged += 1
    if when is not None:
        collector = _collector()
        if collector is not None and collector.record(call, operands, pred):
            after_raise(jnp.logical_not(as_pred(when)))
            return None
    if when is not None and _fast_checks_here():
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
    of its own, another trace), for ``loop_staging._deferring_checks``.

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


class deferring:
    """Context: the checks staged in this trace go to a ``Deferring`` (see there)."""

    def __init__(self, inputs):
        self.collector = Deferring(current_trace(), inputs)

    def __enter__(self):
        _local.__dict__.setdefault("deferring", []).append(self.collector)
        return self.collector

    def __exit__(self, *exc):
        _local.deferring.pop()


def _effects_as_primitive():
    """May ``later`` stage ``_Effect`` (autoflow's primitives, with ordered effects, on
    this JAX; not inside a JAX custom-derivative rule, nor for ``autoflow explain``,
    which shows the callbacks it compiles to)?"""
    return jx.ORDERED_DEBUG is not None and not plain_now() and jx.primitives() \
        and selfcheck.effects_ok() and not jx.in_custom_rule()


def _lanes_of(x, d, size):
    """``x``, batched along axis ``d`` (None: not batched), with its lanes first."""
    x = jnp.asarray(x)
    return jnp.moveaxis(x, d, 0) if d is not None else jnp.broadcast_to(x, (size,) + x.shape)


class _Effect(jx.HiPrimitive):
    """``call(*operands)`` when the compiled code runs, where ``gate`` (no gate: always,
    else one traced boolean) holds: an ordered host callback, in a ``cond`` of its own
    so that where the gate is false the host is not called.

    Under ``vmap`` it is what Python does lane by lane: an effect (a ``print``, a
    warning, a log record) happens once per lane whose gate holds, in lane order,
    whether or not its operands are batched (JAX's own callback would happen once
    for operands that are not); a check (``check``: ``call`` raises) calls the host
    once, for the first lane whose gate holds (Python would stop there)."""

    stage_low = True
    primitive_name = "effect"
    is_effect = True  # (left out of a backward pass's recomputation: prim_util.quiet_closed)

    def __init__(self, call, gate_avals, op_avals, check):
        self.in_avals = (gate_avals, op_avals)
        self.out_aval = ()
        self.params = dict(call=call, stops=bool(check))
        self.effects = frozenset({jx.ORDERED_DEBUG})
        super().__init__()

    def __call__(self, *args):
        return jx.bind(self, args)

    def expand(self, gate, ops):
        if not jx.tracing():
            # run now (`vmap` without `jit`): the user's exception itself, not JAX's
            # error about a failed callback
            if not gate or np.asarray(gate[0]):
                self.call(*ops)
            return ()
        if not gate:
            jax.debug.callback(self.call, *ops, ordered=True)
        else:
            # (the host checks the gate too: a `cond` batched by JAX's own rule runs the
            # callback for every lane)
            lax.cond(gate[0], lambda ok, ops: jax.debug.callback(
                         self._gated, ok, *ops, ordered=True),
                     lambda ok, ops: None, gate[0], tuple(ops))
        return ()

    def _gated(self, ok, *values):
        if np.asarray(ok):
            self.call(*values)

    def dce(self, used_outs):
        return True, True, self

    def jvp(self, primals, tangents):
        self(*primals)
        return (), ()

    def lin(self, nzs_in, *primals):
        return self(*primals), None  # (bound one level up: vmapped, its batching rule)

    def linearized(self, residuals, *tangents):
        return ()

    def vjp_fwd(self, nzs_in, gate, ops):
        return self(gate, ops), None

    def vjp_bwd_retval(self, res, out_ct):
        gate_av, op_av = self.in_avals
        return (tuple(jx.Zero(a.to_ct_aval()) for a in gate_av),
                tuple(jx.Zero(a.to_ct_aval()) for a in op_av))

    def batch(self, axis_data, args, dims):
        size = axis_data.size
        (gate, ops), (dgate, dops) = args, dims

        gate = _lanes_of(gate[0], dgate[0], size) if gate else jnp.ones((size,), bool)
        ops = [_lanes_of(x, d, size) for x, d in builtins.zip(ops, dops)]
        lane_avals = tuple(jx.typeof(x[0]) for x in ops)
        one = _Effect(self.call, (jx.typeof(gate[0]),), lane_avals, self.stops)
        if self.stops:  # Python stops at the first lane that raises: call once, for it
            first = jnp.argmax(gate)
            one((jnp.any(gate),), tuple(x[first] for x in ops))
        else:
            for i in builtins.range(size):
                one((gate[i],), tuple(x[i] for x in ops))
        return (), ()


# ---------------------------------------------------------------------------
# Checks at no cost
# ---------------------------------------------------------------------------

class _Sink:
    """The outermost trace of a function ``fast_checks`` runs, and what was staged in it."""

    __slots__ = ("trace", "checks", "ordered")

    def __init__(self, trace):
        self.trace, self.checks, self.ordered = trace, 0, False


def fast_checks(fn):
    """``fn`` (a converted function that ``jax.jit`` traces), whose run-time checks
    are ``_Check``s where they can be: a check with no ordered effect, an
    ``assert``, a read a loop may leave unbound, a ``range`` step of 0...

    JAX dispatches a program holding any effect (an ordered debug callback) on its
    slow path, about 0.2-0.5 ms a call on a CPU where the program takes 10 us. A
    ``_Check`` has no effect: its result, "nothing raised here", is what follows
    reads to know where it may run (``after_raise``), it leaves each staged block
    as the block's own result (a branch's, a loop's carry: ``on_path(carries_ok)``)
    and at the end it is tied to the function's first output, so that neither JAX
    nor XLA drops it. Where a check cannot be tied so (a block that does not hand
    its result on, a trace of the user's own ``jax.vmap`` inside, an ordered effect
    staged before it, which must happen before the check raises) it is an
    ordered effect as before."""
    import functools

    @functools.wraps(fn)
    def run(*args, **kwargs):
        # (module functions only: `cloudpickle` takes `run` by value, and them by name)
        saved, sink = _open_sink()
        try:
            return _tied(fn(*args, **kwargs), sink)
        finally:
            _close_sink(saved)
    return run


def _open_sink():
    saved = getattr(_local, "sink", None)
    sink = _local.sink = _Sink(current_trace())
    return saved, sink


def _close_sink(saved):
    _local.sink = saved


def _fast_checks_here():
    sink = getattr(_local, "sink", None)
    if sink is None or sink.ordered or not _effects_as_primitive():
        return False
    # Each block open here hands its result to the trace around it (its own, or the
    # one it was started from: no trace of the user's own `jax.vmap` between), up
    # to the function's.
    prev = sink.trace
    for b in (getattr(_local, "blocks", ()) if getattr(_local, "depth", 0) else ()):
        if not b.carries_ok or b.trace is not prev and jx.parent_trace(b.trace) is not prev:
            return False
        prev = b.trace
    return current_trace() is prev


def _tied(out, sink):
    """``out`` whose first array depends on where nothing raised (each ``_Check``'s
    result is in it): the checks run wherever ``out`` is computed. Without an array in
    ``out``, that goes to a callback that does nothing (an effect: JAX's slow path)."""
    ok = raise_gate() if sink.checks else None
    if ok is None or ok is True:
        return out
    leaves, tree = jax.tree_util.tree_flatten(out)
    for i, leaf in builtins.enumerate(leaves):
        if isinstance(leaf, Tracer) and jnp.issubdtype(leaf.dtype, np.number) | (
                leaf.dtype == np.bool_):
            poison = (lambda x: ~x) if leaf.dtype == np.bool_ else (lambda x: x + 1)
            # (never taken: where `ok` is false a check has raised)
            leaves[i] = lax.cond(as_pred(ok), lambda x: x, poison, leaf)
            return jax.tree_util.tree_unflatten(tree, leaves)
    jax.debug.callback(lambda ok: None, as_pred(ok))
    return out


class _Check(jx.HiPrimitive):
    """``call(*operands)`` (which raises) when the compiled code runs, where ``gate``
    holds; its result is ``not gate`` ("nothing raised here"), made by the ``cond``
    that calls the host, so that reading it keeps the check (``fast_checks``).

    A ``jax.pure_callback`` in a ``cond`` of its own: no effect, so JAX dispatches
    the program on its fast path, and where the gate is false the host is not
    called. Under ``vmap`` the host is called once, for the first lane whose gate
    holds (Python would stop there)."""

    stage_low = True
    primitive_name = "check"

    def __init__(self, call, gate_aval, op_avals):
        self.in_avals = (gate_aval, op_avals)
        self.out_aval = gate_aval
        self.params = dict(call=call)
        self.effects = frozenset()
        super().__init__()

    def __call__(self, *args):
        return jx.bind(self, args)

    def _raise(self, *values):
        self.call(*values)
        return np.bool_(False)  # (a check that did not raise: `call` raises)

    def expand(self, gate, ops):
        if not jx.tracing():  # run now (`vmap` without `jit`)
            if np.asarray(gate):
                self.call(*ops)
            return jnp.logical_not(gate)
        struct = jax.ShapeDtypeStruct((), np.bool_)
        return lax.cond(gate, lambda ops: jax.pure_callback(self._raise, struct, *ops), lambda ops: jnp.bool_(True), tuple(ops))

    def jvp(self, primals, tangents):
        return self(*primals), jx.Zero(self.out_aval.to_tangent_aval())

    def lin(self, nzs_in, *primals):
        return self(*primals), None

    def linearized(self, residuals, *tangents):
        return jx.Zero(self.out_aval.to_tangent_aval())

    def vjp_fwd(self, nzs_in, gate, ops):
        return self(gate, ops), None

    def vjp_bwd_retval(self, res, out_ct):
        gate_av, op_av = self.in_avals
        return (jx.Zero(gate_av.to_ct_aval()), tuple(jx.Zero(a.to_ct_aval()) for a in op_av))

    def batch(self, axis_data, args, dims):
        size = axis_data.size
        (gate, ops), (dgate, dops) = args, dims

        gate = _lanes_of(gate, dgate, size)
        ops = [_lanes_of(x, d, size) for x, d in builtins.zip(ops, dops)]
        first = jnp.argmax(gate)
        one = _Check(self.call, jx.typeof(gate[0]), tuple(jx.typeof(x[0]) for x in ops))
        ok = one(jnp.any(gate), tuple(x[first] for x in ops))
        return jnp.logical_and(jnp.logical_not(gate), ok), 0


# ---------------------------------------------------------------------------
# Variables a staged loop may leave unbound
# ---------------------------------------------------------------------------

class _Marks:
    """Values a staged statement marked, each with what it stands for (``info``), found
    again by their first leaf (a tracer; kept by weak reference, at most about 512)."""

    def __init__(self):
        self._by_id = {}

    def __bool__(self):
        return bool(self._by_id)

    def mark(self, value, *info):
        for leaf in jax.tree_util.tree_leaves(value)[:1]:
            if isinstance(leaf, Tracer):
                if len(self._by_id) > 512:
                    for k in [k for k, v in self._by_id.items() if v[0]() is None]:
                        del self._by_id[k]
                self._by_id[id(leaf)] = (weakref.ref(leaf), info)

    def get(self, value):
        """What ``value`` was marked with, or None."""
        if not self._by_id:
            return None
        for leaf in jax.tree_util.tree_leaves(value)[:1]:
            entry = self._by_id.get(id(leaf))
            if entry is not None and entry[0]() is leaf:  # (a live value: its info is too)
                return entry[1]
        return None


# A value a staged loop gave a variable first bound in its body -> (the variable's name,
# whether the loop ran: a traced boolean). Read through `ld`, which checks at run time.
_loop_bound = _Marks()


def bound_if(value, name, ran):
    """``value`` is the variable ``name`` after a staged loop that binds it in
    its body, and is bound only where ``ran`` (the loop ran at least once)."""
    _loop_bound.mark(value, name, ran)


def bound_flag(value):
    """Where ``value`` (a variable's) is bound, a traced boolean, if a staged statement
    registered it (``bound_if``); else None."""
    info = _loop_bound.get(value)
    return None if info is None else info[1]


def _unbound(ran, name):
    if not ran:
        raise UnboundVariableError.pythons(name)


def ld(value):
    """A read of a variable that a converted statement may have left unbound.

    Plain Python: ``value`` itself, where Python would have read the variable;
    where Python would raise ``UnboundLocalError`` (the variable was never
    assigned on this path) so does ``ld``. After a staged loop that binds it
    in its body (zeros if it runs no iteration), that is checked when the
    compiled code runs, and raised at the user's line.
    """
    if type(value) is Undefined:
        raise UnboundVariableError.at(
            value.name, user_site(2), f"cannot access local variable `{value.name}` where it "
            "is not associated with a value", f"Assign `{value.name}` on every path that "
            "reaches this line.")
    info = _loop_bound.get(value)
    if info is not None:
        name, ran = info
        later(_unbound, (ran, name), site=user_site(2), when=jnp.logical_not(ran))
    return value


# ---------------------------------------------------------------------------
# Dict keys a staged loop may not have set
# ---------------------------------------------------------------------------

# The value at a dict key that a staged loop sets in its body, the key absent before the
# loop -> (the key, where it is set: a traced boolean, False where the loop ran no
# iteration that set it). Read through `read_key` (`d[k]`), `key_flag` (`k in d`,
# `d.get(k)`, `len(d)`).
_key_set = _Marks()


def key_set_if(value, key, flag):
    """``value``, at the dict key ``key``, is there only where ``flag`` holds (a staged
    loop that sets it in its body ran an iteration)."""
    _key_set.mark(value, key, flag)


def key_flag(value):
    """Where the dict key holding ``value`` is set, a traced boolean, if a staged loop
    registered it (``key_set_if``); else None (it is)."""
    info = _key_set.get(value)
    return None if info is None else info[1]


def maybe_unset(d):
    """``{key: flag}`` of the keys of the dict ``d`` that a staged loop may not have set."""
    if not _key_set or type(d) is not dict:
        return {}
    out = {}
    for k, v in d.items():
        flag = key_flag(v)
        if flag is not None:
            out[k] = flag
    return out


def read_key(d, key, site=None):
    """``d[key]``: Python's ``KeyError`` when the compiled code runs where a staged loop
    that sets the key ran no iteration (the key holds zeros there)."""
    value = d[key]
    flag = key_flag(value)
    if flag is not None:
        check(jnp.logical_not(flag), KeyError, key, site or user_site(2))
    return value


if jx.install_low_staging():  # staged as a low equation, named `effect` (see jax_internals)
    jx.name_primitives([_Effect, _Check])
