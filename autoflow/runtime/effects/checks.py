"""Exceptions raised when the compiled code runs, and checks at no cost (``fast_checks``).

``fail`` makes a user's exception ready for ``autoflow.jit`` to re-raise as itself
(``last_user_exception``). Under ``autoflow.jit`` a check is no ordered effect where
it can be: ``_Check``, a pure callback whose result the code after it reads.
"""

from __future__ import annotations

import builtins
import logging

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import jax as jx
from ..jax import CALLBACK_LOGGER, DEBUGGING_LOGGER, current_trace
from ..common.values import Tracer, as_pred
from .path_condition import _local, raise_gate
from .primitive import _effects_as_primitive, _lanes_of


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
    # Each block open here hands its result to the trace around it: its own, or, for a
    # branch or loop body JAX traces for autoflow (`fresh`), the one it was started
    # from; up to the function's. No trace of the user's own between (`jax.grad`, whose
    # primal results may be dropped; `jax.vmap`; the body of a `lax.scan`).
    prev = sink.trace
    for b in (getattr(_local, "blocks", ()) if getattr(_local, "depth", 0) else ()):
        if not b.carries_ok or b.trace is not prev and not (
                b.fresh and jx.parent_trace(b.trace) is prev):
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
