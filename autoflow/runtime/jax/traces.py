"""JAX's traces as autoflow reads them: the trace state, tracebacks, which trace runs.

The trace state (``tracing``, ``current_trace``, ``is_concrete``: autoflow cannot run
without it), autoflow's frames left out of JAX's tracebacks and the user's line of an
equation (``frames``), whether ``jax.grad`` is linearizing (``reverse mode``), a
thunk traced to a jaxpr (``trace a thunk``: the branches of an ``if``), the trace a
staged block was started from (``parent trace``), and whether code runs inside a
``jax.custom_jvp``/``custom_vjp`` rule (``custom rules``).
"""

from __future__ import annotations

import inspect
import os
import sys

import jax
import numpy as np

from . import private
from .paths import FULL_RANGE, _check, _lose, _lose_late, _why, lost


# -- trace state (required) -----------------------------------------------------

_core = None


@_check("trace state")
def _find_trace_state():
    """JAX's trace state, which autoflow cannot do without: an ImportError naming the
    row where it is missing."""
    global _core
    try:
        core = private.core()
        core.trace_ctx.is_top_level, core.trace_ctx.trace, core.is_concrete  # noqa: B018
        core.Literal  # noqa: B018
    except (ImportError, AttributeError) as e:
        _lose("trace state", _why(e))
        raise ImportError(
            f"autoflow cannot run on this JAX ({jax.__version__}): it lacks the trace state "
            f"autoflow needs (trace state: {_why(e)}). JAX {FULL_RANGE} has everything "
            f"autoflow uses (pip install 'jax{FULL_RANGE}'); `autoflow doctor` says more."
        ) from None
    _core = core


_find_trace_state()

Tracer = jax.core.Tracer


def is_concrete(x) -> bool:
    """Is the tracer ``x``'s value known (``jax.grad`` without ``jit``)?"""
    return _core.is_concrete(x)


def concrete_value(x):
    """The value of the concrete tracer ``x`` (``jax.grad`` without ``jit``), or None where
    it has none or this JAX does not say (what shows it falls back to its type)."""
    get = getattr(_core, "to_concrete_value", None)
    try:
        return None if get is None or not _core.is_concrete(x) else get(x)
    except Exception:  # noqa: BLE001 - (no value to show: its type instead)
        return None


def tracing() -> bool:
    """Is a JAX transformation (jit, vmap, grad...) tracing right now?"""
    return not _core.trace_ctx.is_top_level()


def current_trace():
    return _core.trace_ctx.trace


def of_current_trace(x) -> bool:
    """Can ``x`` be used as an operand here: not a tracer, or a tracer of the current
    trace? A batching rule that JAX's own rules call while they batch a sub-jaxpr
    (``cond``, ``pjit``...) runs in a trace of their own, where a tracer of the trace
    around would be captured as a constant of that jaxpr."""
    if not isinstance(x, Tracer):
        return True
    trace = getattr(x, "_trace", None)
    return trace is None or trace is _core.trace_ctx.trace


def of_traces_around(x) -> bool:
    """Is ``x`` no tracer, or a tracer of a trace the current one was started from (a
    value of an enclosing trace, which code here may hold)? Not one of the current trace,
    nor of a trace that has ended (a leaked tracer). Where this JAX does not say which
    trace a tracer is of, or whose parent a trace is: yes, unless it is of this trace."""
    if not isinstance(x, Tracer):
        return True
    trace = getattr(x, "_trace", None)
    here = _core.trace_ctx.trace
    if trace is None:
        return True
    if trace is here:
        return False
    if parent_trace(here) is None:
        return True
    return encloses(trace, parent_trace(here))


def encloses(trace, start=None) -> bool:
    """Is ``trace`` the trace ``start`` (the current one by default), or one it was
    started from (a branch's or loop body's parent, and theirs)? (Only ``start`` itself
    where this JAX does not say.)"""
    t = _core.trace_ctx.trace if start is None else start
    for _ in range(64):
        if t is None:
            return False
        if t is trace:
            return True
        t = parent_trace(t)
    return False


def is_constant(x) -> bool:
    """A constant while staging: not a tracer, or one of a jaxpr literal."""
    if not isinstance(x, Tracer):
        return True
    return isinstance(getattr(x, "val", None), getattr(_core, "Literal", ()))


def is_symbolic_dim(x) -> bool:
    """A symbolic dimension of ``jax.export`` (public since 0.4.30)."""
    try:
        from jax.export import is_symbolic_dim as _is
    except ImportError:  # pragma: no cover - older JAX
        return False
    return not isinstance(x, int) and _is(x)


# -- frames: autoflow's own left out of tracebacks; the user's line -------------------

_traceback_util = _source_info_util = None
_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))  # autoflow's own files


@_check("frames")
def _find_frames():
    """Find JAX's hooks and hide autoflow's frames from the tracebacks that pass through
    JAX, as JAX hides its own (a guarded call: where it fails, they show)."""
    global _traceback_util, _source_info_util
    try:
        source_info_util = private.source_info_util()
        traceback_util = private.traceback_util()
        for f in (traceback_util.register_exclusion, source_info_util.register_exclusion,
                  source_info_util.current, source_info_util.user_frame):
            if not callable(f):
                raise TypeError(f"{f!r} is not callable")
    except (ImportError, AttributeError, TypeError) as e:
        _traceback_util = _source_info_util = None
        return _lose("frames", _why(e))
    _traceback_util, _source_info_util = traceback_util, source_info_util
    hide_frames_of(_PACKAGE)
    return None


def hide_frames_of(path: str) -> None:
    """Leave frames under ``path`` out of JAX's filtered tracebacks and the source
    locations it gives operations (where this JAX lets autoflow: ``frames``)."""
    if _traceback_util is None:
        return
    try:
        _traceback_util.register_exclusion(path)
        _source_info_util.register_exclusion(path)
    except Exception as e:  # noqa: BLE001 - JAX's API changed: frames stay visible
        _lose("frames", _why(e))




def source_here():
    """JAX's source information for an equation staged here (the user's line in it)."""
    if _source_info_util is None:
        return None
    try:
        return _source_info_util.current()
    except Exception as e:  # noqa: BLE001 - JAX's API changed: no line
        _lose_late("frames", _why(e))
        return None


def _user_line(source_info):
    """``(file, line)`` of the user's frame in ``source_info``, or None."""
    if _source_info_util is None or source_info is None:
        return None
    try:
        frame = _source_info_util.user_frame(source_info.traceback)
    except Exception as e:  # noqa: BLE001 - JAX's traceback API changed: no line
        _lose_late("frames", _why(e))
        return None
    return None if frame is None else (frame.file_name, frame.start_line)


# -- reverse mode: is jax.grad linearizing? ------------------------------------------

_LINEARIZE = None  # (JAX's LinearizeTrace, LinearizeTracer)


def _find_reverse_mode():
    global _LINEARIZE
    try:
        ad = private.interpreters_ad()
        _LINEARIZE = (ad.LinearizeTrace, ad.LinearizeTracer)
    except (ImportError, AttributeError) as e:
        _LINEARIZE = None
        _lose("reverse mode", _why(e))




def _reverse_mode_problem():
    """None if ``is_linearizing()`` is true inside ``jax.grad``, else what is wrong."""
    seen = []

    def f(x):
        seen.append(is_linearizing())
        return x * x

    try:
        jax.make_jaxpr(jax.grad(f))(np.float32(1.0))
    except Exception as e:  # noqa: BLE001
        return _why(e)
    return None if seen == [True] else "jax.grad traces with another trace than LinearizeTrace"


@_check("reverse mode")
def check_reverse_mode():
    """Find JAX's classes and see ``jax.grad`` use them (``selfcheck`` asks where the
    primitives are lost, the only case that needs it)."""
    global _LINEARIZE
    _find_reverse_mode()
    if _LINEARIZE is not None:
        problem = _reverse_mode_problem()
        if problem is not None:
            _LINEARIZE = None
            _lose("reverse mode", problem)


def is_linearizing() -> bool:
    """Is ``jax.grad``/``jax.vjp`` linearizing the code traced now (its trace JAX's
    ``LinearizeTrace``)? False where this JAX does not say."""
    return _LINEARIZE is not None and type(_core.trace_ctx.trace) is _LINEARIZE[0]


def is_linearize_tracer(x) -> bool:
    """Is ``x`` a tracer of a ``LinearizeTrace`` (a value ``jax.grad`` differentiates)?"""
    return _LINEARIZE is not None and type(x) is _LINEARIZE[1]


# -- tracing a thunk (the branches of an `if`) ------------------------------------

def _public_trace_thunk(fn):
    return jax.make_jaxpr(fn)()


private_trace_thunk = None
trace_thunk = _public_trace_thunk


def _find_trace_thunk():
    global private_trace_thunk, trace_thunk
    private_trace_thunk, trace_thunk = None, _public_trace_thunk
    try:
        api_util = private.api_util()
        pe = private.interpreters_partial_eval()
        try:  # 0.11+: a module; up to 0.10: a class in tree_util
            flat_tree = private.flattree()
        except ImportError:
            flat_tree = private.tree_util_FlatTree()
        flat_tree.flatten  # noqa: B018
        empty = flat_tree.flatten(((), {})).map(_core.typeof)
    except (ImportError, AttributeError) as e:
        return _lose("trace a thunk", str(e))

    def trace(fn):
        return pe.trace_to_jaxpr(fn, empty, api_util.debug_info("if", fn, (), {}))[0]
    private_trace_thunk = trace_thunk = trace
    return None




def use_public_trace_thunk(why):
    global trace_thunk
    trace_thunk = _public_trace_thunk
    _lose("trace a thunk", why)


def trace_thunk_problem():
    """None if tracing a thunk privately gives the jaxpr ``jax.make_jaxpr`` gives (asked
    by ``selfcheck`` at first use), else what differs."""
    import jax.numpy as jnp

    seen = []

    def compare(y):
        got = private_trace_thunk(lambda: [jnp.sin(y) + 1.0])
        want = jax.make_jaxpr(lambda: [jnp.sin(y) + 1.0])()
        seen.append([e.primitive.name for e in got.jaxpr.eqns] ==
                    [e.primitive.name for e in want.jaxpr.eqns])
        return y

    try:
        jax.make_jaxpr(compare)(np.float32(2.0))
    except Exception as e:  # noqa: BLE001
        return _why(e)
    return None if seen == [True] else "it traces other operations than jax.make_jaxpr"


@_check("trace a thunk")
def check_trace_thunk():
    """Find the private path and compare it with ``jax.make_jaxpr`` on a tiny thunk;
    where it differs, branches are traced with ``jax.make_jaxpr``."""
    _find_trace_thunk()
    if private_trace_thunk is not None:
        problem = trace_thunk_problem()
        if problem is not None:
            use_public_trace_thunk(problem)


_PARENT_TRACE = False  # do JAX's staging traces say what they were started from?


@_check("parent trace")
def _check_parent_trace(probe=True):
    global _PARENT_TRACE
    try:
        pe = private.interpreters_partial_eval()
        _PARENT_TRACE = "parent_trace" in inspect.signature(pe.DynamicJaxprTrace).parameters
    except (ImportError, AttributeError, TypeError, ValueError) as e:
        _PARENT_TRACE = False
        return _lose("parent trace", _why(e))
    if not _PARENT_TRACE:
        return _lose("parent trace", "DynamicJaxprTrace takes no parent_trace")
    if probe:  # a loop body's trace names the trace the loop is staged in
        seen = []

        def body(c):
            seen.append(parent_trace(current_trace()))
            return c + 1.0

        def f(x):
            seen.append(current_trace())
            return jax.lax.while_loop(lambda c: c < 3.0, body, x)
        try:
            jax.make_jaxpr(f)(np.float32(0.0))
        except Exception as e:  # noqa: BLE001
            return _lose("parent trace", _why(e))
        if len(seen) != 2 or seen[1] is not seen[0]:
            _PARENT_TRACE = False
            return _lose("parent trace", "a loop body's trace does not name the loop's")
    return None




def parent_trace(trace):
    """The trace ``trace`` was started from (a loop body's: the trace the loop is staged
    in), or None where this JAX does not say (``effects.checks.fast_checks`` then keeps checks
    in staged blocks ordered, as before)."""
    return getattr(trace, "parent_trace", None) if _PARENT_TRACE else None


# -- an `if` staged inside a custom_jvp / custom_vjp rule --------------------------------

_CUSTOM_DERIVATIVES = private.CUSTOM_DERIVATIVES
_JAXPR_TRACE = None  # JAX's JaxprTrace (partial evaluation with unknowns)


def _in_custom_rule(depth=2) -> bool:
    """May JAX partially evaluate what is staged here with some operands unknown
    (a ``jax.custom_jvp``/``custom_vjp`` rule, or a ``JaxprTrace``)? Told by the
    trace, or by the frames of JAX's custom derivatives module (the rule may be
    traced to a jaxpr first, under ``jit``)."""
    if type(_core.trace_ctx.trace) is _JAXPR_TRACE:
        return True
    frame = sys._getframe(depth)
    for _ in range(200):
        if frame is None:
            return False
        if frame.f_code.co_filename.endswith(_CUSTOM_DERIVATIVES):
            return True
        frame = frame.f_back
    return False


def _always(depth=2):
    return True


def partially_evaluated() -> bool:
    """Is what is traced now partially evaluated, some of its values unknown (JAX's
    ``JaxprTrace`` here or around: the linearization of a ``jax.checkpoint``'s body from
    forward-mode rules, a ``jit`` inside it)? A rule must then keep known and unknown
    results in operations JAX can split. True where this JAX does not say."""
    if _JAXPR_TRACE is None:
        return True
    trace = _core.trace_ctx.trace
    for _ in range(64):
        if trace is None:
            return False
        if type(trace) is _JAXPR_TRACE:
            return True
        trace = getattr(trace, "parent_trace", None)
    return True


in_custom_rule = _in_custom_rule


def _find_jaxpr_trace():
    global _JAXPR_TRACE, in_custom_rule
    try:
        pe = private.interpreters_partial_eval()
        _JAXPR_TRACE = pe.JaxprTrace
    except (ImportError, AttributeError) as e:  # then every `if` is taken as inside one
        _JAXPR_TRACE, in_custom_rule = None, _always
        return _lose("custom rules", _why(e))
    in_custom_rule = _in_custom_rule
    return None




@_check("custom rules")
def check_custom_rules():
    """Does ``in_custom_rule`` tell a ``jax.custom_jvp`` rule being traced? Where it
    does not, every traced ``if`` is taken as inside one (a ``lax.cond``). (Run by
    ``selfcheck`` at first use.)"""
    global in_custom_rule
    _find_jaxpr_trace()
    if "custom rules" in lost:
        return None
    seen = []

    @jax.custom_jvp
    def probe(x):
        return x

    @probe.defjvp
    def probe_jvp(primals, tangents):
        seen.append(in_custom_rule(1))
        return primals[0], tangents[0]

    try:
        jax.make_jaxpr(lambda x: jax.jvp(probe, (x,), (x,)))(np.float32(1.0))
    except Exception:  # noqa: BLE001
        seen = []
    if seen != [True]:
        in_custom_rule = _always
        return _lose("custom rules",
                     f"{_CUSTOM_DERIVATIVES.replace(os.sep, '/')} is not in the stack of a rule")
    return None
