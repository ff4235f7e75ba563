"""autoflow's one boundary with JAX's private API.

Everything autoflow takes from JAX below its documented API (``jax``, ``jax.lax``,
``jax.numpy``, ``jax.tree_util``, ``jax.errors``) is here and nowhere else:
``jax._src``, ``jax.experimental.hijax``, lowering and partial-evaluation rules,
jaxpr objects and the params of their equations, the classes of JAX's traces, the
texts of JAX's error messages. The rest of autoflow asks this module small named
questions (``is_linearizing()``, ``hijax_prim_of(eqn)``, ``is_drop_var(v)``,
``matches_jax_error(kind, text)``, ``primitives()``...).

``PATHS`` is the table of these private paths, as data: for each, the private
names it reads, the JAX releases it is known to work on, the public path autoflow
takes without it, what a user loses then, and when it is checked. A path that is
missing or has another shape is recorded in ``lost`` (its key, and why), and the
code that uses it takes the public path. The checks (``recheck``) run when this
module is imported, at the first staged ``if`` or loop (``selfcheck``), or only
in the full check (``autoflow doctor``, ``selfcheck.report()``); a path that
fails while a program is lowered is lost then. ``selfcheck.warn_lost`` says once,
from the rows, what is lost and which JAX has all of it; ``autoflow doctor``
prints the table with each path on or off and why.

The JAX column: the releases on which ``selfcheck.report()`` finds the path working
(``benchmarks/JAX_MATRIX.md``: the newest patch of each minor from 0.4.38 to 0.10.2;
0.11.2 was checked before this module existed). The rows this table gained when it
became data (reverse mode, op names, ordered effect, parent trace, callback loggers,
weak types, jit wrapper, explain dce, cost model, error texts, run-time errors) were
checked on 0.4.38 and 0.10.2 only, the two ends CI runs; a range between them is what
the code assumed before. Elsewhere the public path runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import os
import re
import sys

import jax
import numpy as np

MIN_JAX = (0, 4, 38)
# The newest JAX the whole test suite has passed on (benchmarks/JAX_MATRIX.md).
NEWEST_TESTED = (0, 11, 2)
# The JAX releases on which every private path below is known to work: the pin a
# warning about a lost path suggests.
FULL_RANGE = ">=0.10.2,<=0.11.2"


@dataclasses.dataclass(frozen=True)
class Path:
    """One private path through JAX: a row of ``PATHS``."""

    key: str  # its name: in `lost`, the warning, `autoflow doctor` and the tests
    names: str  # what of JAX's private API it reads
    jax: str  # the JAX releases it is known to work on
    fallback: str  # the public path autoflow takes without it
    lost: str  # what a user loses then (the warning's words)
    checked: str  # when autoflow finds out (see CHECKED)
    # used only by autoflow's own primitives: not said where they are lost themselves
    primitives_only: bool = False
    required: bool = False  # no fallback: autoflow's runtime cannot be imported without it


CHECKED = {
    "import": "when autoflow's runtime is imported",
    "first use": "when a converted function first stages a traced `if` or loop (selfcheck)",
    "first loop with effects": "when a loop that prints or checks is first staged",
    "at use": "when it fails while a program is traced or lowered",
    "doctor": "by `autoflow doctor` (selfcheck.report())",
}

PATHS = (
    Path("trace state",
         "`core.trace_ctx` (`is_top_level`, `trace`), `core.is_concrete`, `core.Literal`",
         ">=0.4.36", "none: autoflow's floor (JAX 0.4.38)",
         "autoflow cannot run: importing its runtime raises ImportError",
         "import", required=True),
    Path("frames",
         "`traceback_util.register_exclusion`, `source_info_util` (`register_exclusion`, "
         "`current`, `user_frame`)",
         "0.4.38-0.11", "autoflow's frames are not hidden, and no line is named",
         "tracebacks through JAX show autoflow's own frames, and autoflow's internal errors "
         "do not name your line",
         "import, at use"),
    Path("reverse mode",
         "`interpreters.ad.LinearizeTrace`, `LinearizeTracer` (what `jax.grad` traces with "
         "where JAX linearizes directly: 0.10.2 does; 0.4.38 traces with `JVPTrace`)",
         "0.10-0.11 (0.4.38 has them, its jax.grad does not use them)",
         "`jax.grad` is not told from other transformations",
         "with autoflow's primitives off too, jax.grad through a staged loop that prints "
         "fails (autoflow would bound it), and through one whose trip count depends on "
         "traced values fails with JAX's error instead of autoflow's advice",
         "import, first use"),
    Path("primitives",
         "`jax.experimental.hijax.HiPrim` (`VJPHiPrimitive` to 0.10) with `vjp_fwd(nzs_in, "
         "...)`, `hijax.call_hi_primitive_p`, `_call_hi_primitive_to_lojax` and its rule "
         "tables; `core` (`ClosedJaxpr`, `Jaxpr`, `Literal`, `Var`, `DropVar`, `typeof`, "
         "`eval_jaxpr`), `ad_util.Zero`, `partial_eval` (`custom_staging_rules`, "
         "`convert_constvars_jaxpr`, `dce_jaxpr`), `batching` (`BatchTracer`, "
         "`batch_jaxpr`), `mlir.lower_fun`; equations' params (`_prim`, a call's `jaxpr`)",
         "0.9.2-0.11", "`lax.while_loop` and `lax.cond`",
         "jax.grad cannot differentiate a loop whose trip count depends on traced values "
         "(reverse mode), and every traced `if` is a lax.cond, never a cheaper select",
         "import, first use"),
    Path("named",
         "a `core.Primitive` per construct with `call_hi_primitive`'s rules (from JAX's rule "
         "tables), `hijax.tree_leaves_checked`/`tree_unflatten`, `core.pp_eqn_rules`",
         "0.9.2-0.11", "equations of `call_hi_primitive`",
         "jax.make_jaxpr and profiles name autoflow's loops and ifs `call_hi_primitive`",
         "import, first use", primitives_only=True),
    Path("direct lowering",
         "`mlir._get_lowering_rules`, `jaxpr_subcomp`, `LoweringRuleContext`, `convert_hlo`, "
         "`hlo.select`, `partial_eval.dce_jaxpr`",
         "0.10-0.11", "`mlir.lower_fun` of the primitive's `expand`",
         "the first call of a converted function compiles more slowly",
         "import, first use, at use", primitives_only=True),
    Path("op names",
         "`mlir.source_info_to_location(ctx, primitive, name_stack, traceback)`",
         "0.10-0.11 (0.4.38 lacks it)", "the operations keep the location of autoflow's equation",
         "profiles name a converted loop's operations `jit(f)/while_loop/jit(f)/while/body/...`, "
         "not `jit(f)/while/body/...` as hand-written lax.while_loop's",
         "import", primitives_only=True),
    Path("bind while/cond",
         "`lax.control_flow`'s `while_p` and `cond_p`",
         "0.4.38-0.11", "`lax.while_loop`/`lax.cond` (traced again)",
         "the first call of a converted function compiles more slowly",
         "import", primitives_only=True),
    Path("effects in loops",
         "an ordered effect lowered inside autoflow's loop primitive",
         "0.10-0.11", "such a loop is JAX's `while`",
         "a loop that prints (or checks a traced assert or raise) is a lax.while_loop, which "
         "jax.grad cannot differentiate in reverse mode when its trip count depends on traced "
         "values",
         "first loop with effects", primitives_only=True),
    Path("ordered effect",
         "`debugging.ordered_debug_effect` (the effect of `jax.debug.callback(..., "
         "ordered=True)`)",
         "0.4.38-0.11", "prints and checks are `jax.debug.callback(ordered=True)` calls",
         "a program with a traced assert or raise is dispatched the slow way (0.6-0.8 ms a "
         "call on a CPU), and under jax.vmap a print of values that are not batched happens "
         "once, not once per lane",
         "import", primitives_only=True),
    Path("parent trace",
         "`Trace.parent_trace` (`DynamicJaxprTrace(..., parent_trace)`)",
         "0.10-0.11 (0.4.38 lacks it)", "a staged block's trace is not followed outwards",
         "a traced assert or raise inside a staged loop or branch is an ordered callback: "
         "the program is dispatched the slow way",
         "import, doctor", primitives_only=True),
    Path("callback loggers",
         "the loggers `jax._src.debugging` and `jax._src.callback` (JAX logs a failed "
         "callback's exception there)",
         "0.4.38-0.11", "none needed",
         "JAX also logs the exception of a failed traced assert or raise, as an error",
         "import"),
    Path("trace a thunk",
         "`partial_eval.trace_to_jaxpr`, `api_util.debug_info`, `FlatTree.flatten`",
         "0.8.3-0.11", "`jax.make_jaxpr`",
         "tracing a traced `if` takes a little longer",
         "import, first use"),
    Path("weak types",
         "`lax.lax._convert_element_type(x, dtype, weak_type=True)`",
         "0.4.38-0.11", "`lax.convert_element_type` (strongly typed)",
         "the values are the same, but a loop carry that starts as a Python number is "
         "strongly typed: combined with a float16 or int8 array it gives a wider dtype than "
         "outside a loop",
         "import"),
    Path("body inputs",
         "`partial_eval.DynamicJaxprTrace.new_arg(aval, source_info)`",
         "0.6.2-0.11", "a second trace of the body",
         "a loop whose body binds a variable on some paths only is traced twice",
         "import"),
    Path("remat",
         "`partial_eval.partial_eval_jaxpr_custom_rules`, `new_jaxpr_eqn`, `ensure_enum`, "
         "`RecomputeType`",
         "0.9.2-0.11", "none: JAX's rule for a primitive without one",
         "jax.checkpoint around a converted data-dependent loop fails under jax.grad",
         "import", primitives_only=True),
    Path("custom rules",
         "the file `jax/_src/custom_derivatives.py` in the stack of a rule, "
         "`partial_eval.JaxprTrace`",
         "0.4.38-0.11", "every traced `if` is a `lax.cond`",
         "every traced `if` is a lax.cond (JAX's custom-derivative rules can no longer be "
         "told apart)",
         "first use"),
    Path("jit wrapper",
         "the private `_jit_info` of what `jax.jit(f)` returns (its static and donated "
         "arguments, shardings, layouts)",
         "0.10-0.11 (0.4.38 has no `_jit_info`)", "a `jax.jit(f)` made before autoflow saw `f` is called as it is",
         "a jax.jit(f) made outside converted code (at module level) and called from it runs "
         "`f` unconverted (a fallback: an error under strict=True), so a traced `if` in `f` "
         "raises JAX's TracerBoolConversionError",
         "import"),
    Path("explain dce",
         "`partial_eval.dce_rules`, `dce_jaxpr` (and its cache), a `while` equation's params "
         "(`cond_nconsts`, `body_nconsts`, `cond_jaxpr`, `body_jaxpr`)",
         "0.4.38-0.11", "the jaxpr as traced",
         "`autoflow explain` also prints operations whose results nothing uses (a loop test "
         "tried before the loop is staged)",
         "import, at use"),
    Path("cost model",
         "equations' params: `dot_general`'s `dimension_numbers`, `while`'s `cond_jaxpr`",
         "0.4.38-0.11", "a matrix product costs its output's size",
         "a traced `if` whose branches multiply matrices may be a select where a lax.cond "
         "would be cheaper",
         "doctor, at use"),
    Path("error texts",
         "JAX's messages: \"Shapes must be 1D sequences of concrete values\", \"Slice entries "
         "must be static integers\", \"... became a tracer due to JAX operations\", \"... "
         "depends on the value of the argument x\", \"traced array with shape ...\", \"The "
         "error occurred while tracing\", \"See https\"; a tracer's text (`JitTracer(`, "
         "`Traced<`)",
         "0.10-0.11 (0.4.38 words a traced slice otherwise)", "JAX's error as it is, or general advice",
         "JAX's errors about a traced shape or slice reach you as JAX gives them (pointing "
         "into autoflow's generated functions) or with general advice, and a string that "
         "shows a tracer's text is not caught",
         "doctor"),
    Path("run-time errors",
         "a failed callback reported as a `ValueError` whose text starts \"INTERNAL\" (JAX's "
         "C++ dispatch), with the callback's traceback in JAX's message",
         "0.4.38-0.11", "JAX's error as it is",
         "a traced assert or raise that fails when the compiled code runs raises JAX's "
         "error (your message inside it), not your exception",
         "doctor"),
)

_BY_KEY = {p.key: p for p in PATHS}
assert len(_BY_KEY) == len(PATHS), "two rows of PATHS share a key"

lost: dict = {}  # key -> why that path is not available (filled here and by selfcheck)
on_loss = None  # called when a path is lost while a program is lowered (selfcheck.warn_lost)
_CHECKS: dict = {}  # key -> the check of that row (`recheck`)


def path(key: str) -> Path:
    """The row of ``PATHS`` named ``key``."""
    return _BY_KEY[key]


def version() -> tuple:
    return tuple(int(p) for p in jax.__version__.split(".")[:3] if p.isdigit())


def _lose(key, why):
    """Record that the path ``key`` is lost (the first reason stays); None, for
    ``x = _lose(...)`` in a lookup that failed."""
    path(key)  # (a key that is no row is a bug here)
    lost.setdefault(key, why)
    return None


def _lose_late(key, why):
    """``_lose``, for a path found broken while a program is traced or lowered: said
    then (``on_loss``), not at the next check."""
    if key not in lost:
        _lose(key, why)
        if on_loss is not None:
            on_loss()


def _check(key):
    """Register the decorated function as the check of the row ``key`` (run by
    ``recheck``; those of the rows checked at import are run below, as defined)."""
    path(key)

    def register(fn):
        _CHECKS[key] = fn
        return fn
    return register


def recheck(key):
    """Check the path ``key`` again, and take the public path where it fails
    (``selfcheck.report()``, for every row but those its probe program turns off; the
    fault-injection tests, after changing what the path reads). True if it is on."""
    from . import selfcheck  # noqa: F401 - (the checks it runs register here)

    lost.pop(key, None)
    _CHECKS[key]()
    return key not in lost


def primitives(check: bool = True) -> bool:
    """May autoflow's own loop and ``if`` primitives be used (``while_prim``,
    ``cond_prim``)? The one place this is asked. The first call runs the self-check
    (``selfcheck.run``: 7 ms, once); ``check=False`` answers as far as is known now,
    without running it (what the names JAX has tell, at import)."""
    if check:
        from . import selfcheck

        selfcheck.ensure()
    return "primitives" not in lost


def _first_line(e) -> str:
    text = str(e).strip().splitlines()
    return text[0][:200] if text else ""


def _why(e) -> str:
    return f"{type(e).__name__}: {_first_line(e)}"


# -- trace state (required) -----------------------------------------------------

_core = None


@_check("trace state")
def _find_trace_state():
    """JAX's trace state, which autoflow cannot do without: an ImportError naming the
    row where it is missing."""
    global _core
    try:
        from jax._src import core
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
_PACKAGE = os.path.dirname(os.path.dirname(__file__))  # autoflow's own files


@_check("frames")
def _find_frames():
    """Find JAX's hooks and hide autoflow's frames from the tracebacks that pass through
    JAX, as JAX hides its own (a guarded call: where it fails, they show)."""
    global _traceback_util, _source_info_util
    try:
        from jax._src import source_info_util, traceback_util
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


_find_frames()


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
        from jax._src.interpreters import ad
        _LINEARIZE = (ad.LinearizeTrace, ad.LinearizeTracer)
    except (ImportError, AttributeError) as e:
        _LINEARIZE = None
        _lose("reverse mode", _why(e))


_find_reverse_mode()


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


# -- jaxprs and avals (the primitives' ground) -------------------------------------------

Missing = type("Missing", (), {})
ShapedArray = typeof = _pe = _ad_util = _batching = None
ClosedJaxpr = Jaxpr = Literal = Var = Zero = BatchTracer = Missing
DropVar: type | tuple = ()
batch_jaxpr = convert_constvars_jaxpr = dce_jaxpr = None
JAXPRS = False


def _find_jaxprs():
    global ShapedArray, typeof, _pe, _ad_util, _batching, ClosedJaxpr, Jaxpr, Literal, Var
    global Zero, BatchTracer, DropVar, batch_jaxpr, convert_constvars_jaxpr, dce_jaxpr, JAXPRS
    _pe = _ad_util = _batching = None
    try:
        from jax._src import ad_util
        from jax._src.interpreters import batching
        from jax._src.interpreters import partial_eval as pe

        _pe, _ad_util, _batching = pe, ad_util, batching
        found = (_core.ClosedJaxpr, _core.Jaxpr, _core.Literal, _core.Var, _core.ShapedArray,
                 _core.typeof, ad_util.Zero, batching.BatchTracer, batching.batch_jaxpr,
                 pe.convert_constvars_jaxpr, pe.dce_jaxpr)
    except (ImportError, AttributeError) as e:  # a JAX that moved them
        JAXPRS = False
        ShapedArray = getattr(jax.core, "ShapedArray", None)
        typeof = getattr(_core, "typeof", getattr(_core, "get_aval", None))
        ClosedJaxpr = Jaxpr = Literal = Var = Zero = BatchTracer = Missing
        return _lose("primitives", f"jaxpr internals: {e}")
    (ClosedJaxpr, Jaxpr, Literal, Var, ShapedArray, typeof, Zero, BatchTracer, batch_jaxpr,
     convert_constvars_jaxpr, dce_jaxpr) = found
    DropVar = getattr(_core, "DropVar", ())
    JAXPRS = True
    return None


def eval_jaxpr(jaxpr, consts, *args):
    """Run ``jaxpr`` (a ``Jaxpr`` or ``ClosedJaxpr``) on ``consts`` and ``args``."""
    if isinstance(jaxpr, ClosedJaxpr):
        return _core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *consts, *args)
    return _core.eval_jaxpr(jaxpr, (), *consts, *args)


# Equations that only call a jaxpr (a `jax.jit` inside the traced code, JAX's own
# jitted helpers): ``eval_inlined`` runs their jaxpr in place.
_CALLS = frozenset({"pjit", "jit", "closed_call", "core_call"})


def eval_inlined(jaxpr, consts, *args):
    """``eval_jaxpr``, with the jaxpr of each ``jit`` in it run in place (recursively).

    autoflow's batching rules run a loop body or a branch under ``vmap`` with the mask
    of the lanes still needed (``lanes``); JAX's batching rule of a ``jit`` batches
    its jaxpr in a trace of its own, where the mask cannot reach the loops inside it
    (a user's ``autoflow.jit`` helper in a loop body). Run in place, they are batched
    by autoflow's rules, with the mask."""
    closed_consts = ()
    if isinstance(jaxpr, ClosedJaxpr):
        jaxpr, closed_consts = jaxpr.jaxpr, jaxpr.consts
    if not any(e.primitive.name in _CALLS for e in jaxpr.eqns):
        return _core.eval_jaxpr(jaxpr, closed_consts, *consts, *args)
    env = {}

    def read(v):
        return v.val if isinstance(v, Literal) else env[v]

    env.update(zip(jaxpr.constvars, closed_consts))
    env.update(zip(jaxpr.invars, [*consts, *args]))
    for e in jaxpr.eqns:
        inner = e.params.get("jaxpr", e.params.get("call_jaxpr"))
        if e.primitive.name in _CALLS and isinstance(inner, (ClosedJaxpr, Jaxpr)):
            outs = eval_inlined(inner, (), *map(read, e.invars))
        else:
            params = e.primitive.get_bind_params(dict(e.params))
            subfuns = ()
            if isinstance(params, tuple):  # up to JAX 0.9: (subfuns, params)
                subfuns, params = params
            with e.ctx.manager:
                outs = e.primitive.bind(*subfuns, *map(read, e.invars), **params)
            if not e.primitive.multiple_results:
                outs = [outs]
        env.update(zip(e.outvars, outs))
    return [read(v) for v in jaxpr.outvars]


def closed(jaxpr):
    return jaxpr if isinstance(jaxpr, ClosedJaxpr) else ClosedJaxpr(jaxpr, ())


def consts_as_inputs(closed_jaxpr):
    """``(jaxpr taking its consts as its first inputs, consts)``."""
    return convert_constvars_jaxpr(closed_jaxpr.jaxpr), list(closed_jaxpr.consts)


def trace_fn(fn, avals):
    """``fn(*args)`` for args of ``avals``, as ``(jaxpr taking (*consts, *args), consts)``."""
    closed_jaxpr = jax.make_jaxpr(fn)(*[jax.ShapeDtypeStruct(
        a.shape, a.dtype, weak_type=getattr(a, "weak_type", False)) for a in avals])
    jaxpr, consts = consts_as_inputs(closed_jaxpr)
    return jaxpr, tuple(consts)


def with_inputs(jaxpr, invars):
    """``jaxpr`` with the inputs ``invars`` (Vars or avals for inputs it does not read);
    None where a jaxpr cannot be given other inputs."""
    try:
        return jaxpr.replace(invars=[v if isinstance(v, Var) else Var(v) for v in invars])
    except (AttributeError, TypeError, AssertionError):  # pragma: no cover - another JAX
        return None


def is_drop_var(v) -> bool:
    """Is ``v``, an output of an equation, one nothing reads (JAX's ``DropVar``)?"""
    return isinstance(v, DropVar)


def subjaxprs(eqn):
    """The jaxprs among ``eqn``'s params (a ``pjit``'s, a ``cond``'s branches...)."""
    for v in eqn.params.values():
        for x in (v if isinstance(v, (tuple, list)) else (v,)):
            if isinstance(x, ClosedJaxpr):
                yield x.jaxpr
            elif isinstance(x, Jaxpr):
                yield x


def is_batched(pred) -> bool:
    """Is ``pred`` batched by a ``jax.vmap`` visible from here (through JVPs)?"""
    for _ in range(8):
        if isinstance(pred, BatchTracer):
            return pred.batch_dim is not None
        pred = getattr(pred, "primal", None)
        if pred is None:
            return False
    return False


def has_effects(effects) -> bool:
    """Effects other than JAX's bookkeeping ones (named axes, internal mutation)."""
    quiet = tuple(getattr(_core, n) for n in ("NamedAxisEffect", "InternalMutableArrayEffect")
                  if hasattr(_core, n))
    return any(not isinstance(e, quiet) for e in effects)


def eval_without(jaxpr, consts, args, skip, rewrite):
    """Interpret ``jaxpr``, leaving out equations whose primitive is named in
    ``skip`` (and autoflow's effects) and passing each equation's params through
    ``rewrite(params)``."""
    env = {}

    def read(v):
        return v.val if isinstance(v, Literal) else env[v]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for e in jaxpr.eqns:
        if e.primitive.name in skip or getattr(hijax_prim_of(e), "is_effect", False):
            continue
        params = e.primitive.get_bind_params(rewrite(dict(e.params)))
        subfuns = ()
        if isinstance(params, tuple):  # up to JAX 0.9: (subfuns, params)
            subfuns, params = params
        with e.ctx.manager:
            outs = e.primitive.bind(*subfuns, *map(read, e.invars), **params)
        env.update(zip(e.outvars, outs if e.primitive.multiple_results else [outs]))
    return [read(v) for v in jaxpr.outvars]


# -- the params of JAX's own equations that autoflow's cost model reads --------------------

_DOT_DIMS = "dimension_numbers"  # dot_general's ((lhs contracting, rhs contracting), batch)
_WHILE_COND = "cond_jaxpr"


def dot_contracting_dims(eqn) -> tuple:
    """The contracting dimensions of the left operand of a ``dot_general`` equation
    (``()`` where this JAX's params differ: ``cost model``)."""
    try:
        (lc, _), _ = eqn.params[_DOT_DIMS]
        return tuple(lc)
    except (KeyError, TypeError, ValueError) as e:
        _lose_late("cost model", _why(e))
        return ()


def while_cond_jaxpr(eqn):
    """The ``Jaxpr`` of a ``while`` equation's condition (None where this JAX's params
    differ: ``cost model``)."""
    cond = eqn.params.get(_WHILE_COND)
    jaxpr = getattr(cond, "jaxpr", None)
    if jaxpr is None:
        _lose_late("cost model", f"a while equation has no {_WHILE_COND}")
    return jaxpr


@_check("cost model")
def _check_cost_model():
    from jax import lax

    a = np.ones((2, 3), np.float32)
    try:
        dot = jax.make_jaxpr(lambda x, y: lax.dot_general(x, y, (((1,), (0,)), ((), ()))))(
            a, a.T).jaxpr.eqns[-1]
        loop = jax.make_jaxpr(lambda x: lax.while_loop(lambda c: c < 3.0, lambda c: c + 1.0, x))(
            np.float32(0.0)).jaxpr.eqns[-1]
    except Exception as e:  # noqa: BLE001
        return _lose("cost model", _why(e))
    if dot.primitive.name != "dot_general" or dot_contracting_dims(dot) != (1,):
        return _lose("cost model", f"dot_general's {_DOT_DIMS} differ")
    if loop.primitive.name != "while" or not hasattr(while_cond_jaxpr(loop), "eqns"):
        return _lose("cost model", f"while's {_WHILE_COND} differs")
    return None


# -- tracing a thunk (the branches of an `if`) ------------------------------------

def _public_trace_thunk(fn):
    return jax.make_jaxpr(fn)()


private_trace_thunk = None
trace_thunk = _public_trace_thunk


def _find_trace_thunk():
    global private_trace_thunk, trace_thunk
    private_trace_thunk, trace_thunk = None, _public_trace_thunk
    try:
        from jax._src import api_util
        from jax._src.interpreters import partial_eval as pe
        try:  # 0.11+: a module; up to 0.10: a class in tree_util
            from jax._src import flattree as flat_tree
        except ImportError:
            from jax._src.tree_util import FlatTree as flat_tree
        flat_tree.flatten  # noqa: B018
        empty = flat_tree.flatten(((), {})).map(_core.typeof)
    except (ImportError, AttributeError) as e:
        return _lose("trace a thunk", str(e))

    def trace(fn):
        return pe.trace_to_jaxpr(fn, empty, api_util.debug_info("if", fn, (), {}))[0]
    private_trace_thunk = trace_thunk = trace
    return None


_find_trace_thunk()


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


# -- weak types --------------------------------------------------------------------

_convert_weak = None


@_check("weak types")
def _find_weak_converter():
    global _convert_weak
    _convert_weak = None
    try:
        from jax._src.lax.lax import _convert_element_type as convert
        if "weak_type" not in inspect.signature(convert).parameters:
            return _lose("weak types", "lax._convert_element_type has no weak_type")
    except (ImportError, AttributeError, TypeError, ValueError) as e:
        return _lose("weak types", str(e))
    _convert_weak = convert
    return None


_find_weak_converter()


def convert_weak(x, dtype):
    """``x`` as ``dtype``, weakly typed (as a Python scalar is: a loop carry that started
    as one keeps combining with a float16 array as float16). Without the private
    converter, strongly typed (``lax.convert_element_type``: the dtype of what it
    combines with may then be wider than Python's)."""
    if _convert_weak is None:
        return jax.lax.convert_element_type(x, dtype)
    return _convert_weak(x, dtype, weak_type=True)


# -- JAX's own loop and conditional primitives, bound with jaxprs already traced ------

while_p = cond_p = None


@_check("bind while/cond")
def _find_bind():
    global while_p, cond_p
    try:
        from jax._src.lax.control_flow.conditionals import cond_p
        from jax._src.lax.control_flow.loops import while_p
    except ImportError as e:
        while_p = cond_p = _lose("bind while/cond", str(e))


_find_bind()


# -- effects: the ordered one, the loggers of failed callbacks, a block's outer trace --

ORDERED_DEBUG = None  # the effect of `jax.debug.callback(..., ordered=True)` (later._Effect's)


@_check("ordered effect")
def _find_ordered_effect():
    global ORDERED_DEBUG
    try:
        from jax._src.debugging import ordered_debug_effect as ORDERED_DEBUG
    except ImportError as e:  # another JAX: later stages plain callbacks
        ORDERED_DEBUG = _lose("ordered effect", str(e))


_find_ordered_effect()

DEBUGGING_LOGGER = "jax._src.debugging"  # the logger failed debug callbacks report to
CALLBACK_LOGGER = "jax._src.callback"  # ... and failed pure callbacks (later._Check's)


@_check("callback loggers")
def _find_loggers():
    for name in (DEBUGGING_LOGGER, CALLBACK_LOGGER):
        try:
            logger = importlib.import_module(name).logger
            if logger.name != name:
                raise AttributeError(f"{name}.logger is named {logger.name}")
        except (ImportError, AttributeError) as e:
            return _lose("callback loggers", _why(e))
    return None


_find_loggers()

_PARENT_TRACE = False  # do JAX's staging traces say what they were started from?


@_check("parent trace")
def _check_parent_trace(probe=True):
    global _PARENT_TRACE
    try:
        from jax._src.interpreters import partial_eval as pe
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


_check_parent_trace(probe=False)


def parent_trace(trace):
    """The trace ``trace`` was started from (a loop body's: the trace the loop is staged
    in), or None where this JAX does not say (``later.fast_checks`` then keeps checks
    in staged blocks ordered, as before)."""
    return getattr(trace, "parent_trace", None) if _PARENT_TRACE else None


# -- jax.jit around a user function ------------------------------------------------

def _probe_fn(x, n=0):
    return x


_JIT_TYPE = None  # the type of what `jax.jit(f)` returns (PjitFunction)
_JIT_INFO = "_jit_info"  # its private attribute holding the arguments jax.jit was given


@_check("jit wrapper")
def _find_jit_wrapper():
    global _JIT_TYPE
    _JIT_TYPE = type(jax.jit(_probe_fn))
    want = dict(static_argnums=(1,), static_argnames=("n",), donate_argnums=(),
                donate_argnames=(), keep_unused=False, inline=False)
    got = jit_options(jax.jit(_probe_fn, static_argnums=1))
    if got != want:
        return _lose("jit wrapper", f"jax.jit's {_JIT_INFO} gives {got}")
    return None


def is_jit_wrapper(f) -> bool:
    """Is ``f`` what ``jax.jit(fn)`` returns, around a Python callable (``__wrapped__``)?
    (Told by its type: that of ``jax.jit`` of a function of autoflow's.)"""
    return type(f) is _JIT_TYPE and callable(getattr(f, "__wrapped__", None))


def jit_options(f):
    """The keyword arguments ``jax.jit`` was given for ``f`` that matter inside another
    trace (static and donated arguments, ``keep_unused``, ``inline``), read from its
    private ``_jit_info`` (0.4.3x-0.11); None where that is missing or where ``f`` was given
    shardings, layouts, a device or compiler options, which could not be given again
    faithfully (``jax.jit(f)`` of a converted ``f`` is then not made)."""
    info = getattr(f, _JIT_INFO, None)
    try:
        unset = type(info.in_shardings_leaves[0]).__name__ if info.in_shardings_leaves else None
        if info.user_specified_in_shardings or any(
                type(x).__name__ != unset for x in info.out_shardings_leaves) \
                or any(x is not None for x in info.in_layouts_leaves + info.out_layouts_leaves) \
                or info.device is not None or info.backend is not None \
                or getattr(info, "compiler_options_kvs", ()) or info.use_resource_env:
            return None
        return dict(static_argnums=tuple(info.static_argnums),
                    static_argnames=tuple(info.static_argnames),
                    donate_argnums=tuple(info.donate_argnums),
                    donate_argnames=tuple(info.donate_argnames),
                    keep_unused=bool(info.keep_unused), inline=bool(info.inline))
    except (AttributeError, IndexError, TypeError):
        return None


_find_jit_wrapper()


# -- dead code left out of a jaxpr shown to people (`autoflow explain`) ---------------

def _while_dce_rule(used_outs, eqn):
    """Dead-code elimination of a ``while`` equation's carries: a carry stays when its
    result is used, the condition reads it, or the body reads it to compute one that
    stays (JAX keeps every carry of a ``while``). Its constants are kept."""
    p = eqn.params
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    cond, body = p["cond_jaxpr"], p["body_jaxpr"]
    carry_in = eqn.invars[nc + nb:]
    need = [bool(u) for u in used_outs]
    _, cond_reads = _pe.dce_jaxpr(cond.jaxpr, [True])
    need = [a or b for a, b in zip(need, cond_reads[nc:])]
    while True:
        _, body_reads = _pe.dce_jaxpr(body.jaxpr, need)
        more = [a or b for a, b in zip(need, body_reads[nb:])]
        if more == need:
            break
        need = more
    if not any(need) and not _pe.has_effects(eqn):
        return [False] * len(eqn.invars), None
    kept = [i for i, k in enumerate(need) if k]
    new_body, _ = _pe.dce_jaxpr(body.jaxpr, need, instantiate=True)
    new_body = new_body.replace(invars=body.jaxpr.invars[:nb]
                                + [body.jaxpr.invars[nb + i] for i in kept])
    new_cond, _ = _pe.dce_jaxpr(cond.jaxpr, [True], instantiate=True)
    new_cond = new_cond.replace(invars=cond.jaxpr.invars[:nc]
                                + [cond.jaxpr.invars[nc + i] for i in kept])
    params = dict(p, cond_jaxpr=ClosedJaxpr(new_cond, cond.consts),
                  body_jaxpr=ClosedJaxpr(new_body, body.consts))
    new_eqn = eqn.replace(invars=eqn.invars[:nc + nb] + [carry_in[i] for i in kept],
                          outvars=[eqn.outvars[i] for i in kept], params=params)
    return [True] * (nc + nb) + need, new_eqn


@_check("explain dce")
def _find_dce():
    try:
        _pe.dce_rules, _pe.has_effects  # noqa: B018
        if "instantiate" not in inspect.signature(_pe.dce_jaxpr).parameters:
            raise TypeError("partial_eval.dce_jaxpr takes no instantiate")
    except (AttributeError, TypeError, ValueError) as e:
        return _lose("explain dce", _why(e))
    if while_p is None:
        return _lose("explain dce", "no while_p (bind while/cond)")
    return None


def dce_for_display(closed_jaxpr):
    """``closed_jaxpr`` without the equations (and loop carries) whose results nothing
    uses, its inputs as they were: what ``autoflow explain`` prints (a traced function
    computes values it then drops, such as a loop test tried before the loop is
    staged; XLA drops them too). The jaxpr as it is where JAX's internals differ."""
    if "explain dce" in lost:
        return closed_jaxpr
    try:
        jaxpr = closed_jaxpr.jaxpr
        rules = _pe.dce_rules
        previous = rules.get(while_p, None)
        rules[while_p] = _while_dce_rule
        try:
            new, _ = _pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars), instantiate=True)
        finally:
            if previous is None:
                rules.pop(while_p, None)
            else:
                rules[while_p] = previous
            # (DCE results are cached per jaxpr: none made with this rule stays behind)
            getattr(getattr(_pe, "_dce_jaxpr", None), "cache_clear", lambda: None)()
        return ClosedJaxpr(new, closed_jaxpr.consts)
    except Exception as e:  # noqa: BLE001 - only what is shown: show it all
        _lose_late("explain dce", _why(e))
        return closed_jaxpr


# -- inputs made while a loop body is traced ------------------------------------------

new_input = None


@_check("body inputs")
def _find_body_inputs():
    global new_input
    new_input = None
    try:
        from jax._src import source_info_util
        trace_type = _pe.DynamicJaxprTrace
        params = list(inspect.signature(trace_type.new_arg).parameters)
        if params != ["self", "aval", "source_info"]:
            return _lose("body inputs", f"DynamicJaxprTrace.new_arg{tuple(params[1:])}")
        source_info_util.current  # noqa: B018
    except (ImportError, AttributeError, TypeError, ValueError) as e:
        return _lose("body inputs", str(e))

    def make_input(trace, shape, dtype):
        if type(trace) is not trace_type:
            return None
        return trace.new_arg(ShapedArray(tuple(shape), dtype), source_info_util.current())
    new_input = make_input
    return None


# -- an `if` staged inside a custom_jvp / custom_vjp rule --------------------------------

_CUSTOM_DERIVATIVES = os.path.join("jax", "_src", "custom_derivatives.py")
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


in_custom_rule = _in_custom_rule


def _find_jaxpr_trace():
    global _JAXPR_TRACE, in_custom_rule
    try:
        from jax._src.interpreters import partial_eval as pe
        _JAXPR_TRACE = pe.JaxprTrace
    except (ImportError, AttributeError) as e:  # then every `if` is taken as inside one
        _JAXPR_TRACE, in_custom_rule = None, _always
        return _lose("custom rules", _why(e))
    in_custom_rule = _in_custom_rule
    return None


_find_jaxpr_trace()


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


# -- autoflow's own primitives (hijax) --------------------------------------------------

HiPrimitive: type = object
_hi = None


def _hijax():
    try:  # 0.11 renamed VJPHiPrimitive to HiPrim (the same protocol)
        from jax.experimental.hijax import HiPrim as base
    except ImportError:
        try:
            from jax.experimental.hijax import VJPHiPrimitive as base
        except ImportError:
            return object, _lose("primitives", "no jax.experimental.hijax.HiPrim")
    try:
        from jax._src import hijax
        hijax.call_hi_primitive_p, hijax._call_hi_primitive_to_lojax  # noqa: B018
        _pe.custom_staging_rules[hijax.call_hi_primitive_p]  # noqa: B018
        # the protocol autoflow's primitives implement (0.9+; 0.8 had `vjp_fwd(*args)`
        # and a `prim=` parameter)
        fwd = list(inspect.signature(base.vjp_fwd).parameters)[:2]
        keyword = inspect.signature(hijax._call_hi_primitive_to_lojax).parameters
        if fwd != ["self", "nzs_in"] or "_prim" not in keyword:
            return object, _lose("primitives", f"hijax's protocol differs (vjp_fwd{tuple(fwd)})")
    except (ImportError, AttributeError, KeyError, NameError, TypeError, ValueError) as e:
        return object, _lose("primitives", f"hijax internals: {e}")
    return base, hijax


@_check("primitives")
def _find_primitives():
    global HiPrimitive, _hi
    _find_jaxprs()
    HiPrimitive, _hi = _hijax()


_find_primitives()
_find_body_inputs()
_find_dce()
_named = {}  # class name -> the Primitive its equations are staged as
_tables = None  # JAX's rule tables holding call_hi_primitive (_rule_tables)


def hijax_prim_of(eqn):
    """The instance of one of autoflow's primitive classes an equation binds (its
    ``_prim`` param; ``prim`` in hijax up to 0.8), or None for any other equation."""
    if _hi is None:
        return None
    p = eqn.params.get("_prim")
    return p if p is not None else eqn.params.get("prim")


def _low(prim) -> bool:
    return getattr(prim, "stage_low", False)


def bind(prim, args):
    """``prim(*args)`` for an instance of one of autoflow's primitive classes: bound as
    the JAX primitive named for its construct (``name_primitives``), else as hijax does."""
    p = _named.get(type(prim).__name__)
    if p is None:
        return HiPrimitive.__call__(prim, *args)
    out = p.bind(*_hi.tree_leaves_checked(prim.in_tree, args), _prim=prim)
    return _hi.tree_unflatten(prim.out_tree, out)


def primitive_of(prim):
    """The JAX primitive equations of ``prim`` (an autoflow primitive) are staged as."""
    return _named.get(type(prim).__name__, _hi.call_hi_primitive_p)


def _rule_tables():
    """Every dict of JAX's loaded modules holding a rule for ``call_hi_primitive``
    (looked for once: about 5 ms)."""
    global _tables
    if _tables is None:
        p, tables = _hi.call_hi_primitive_p, []
        for name, module in list(sys.modules.items()):
            if not name.startswith("jax._src") or module is None:
                continue
            for value in list(vars(module).values()):
                if type(value) is dict or type(value).__name__ == "defaultdict":
                    try:
                        if p in value:
                            tables.append(value)
                    except TypeError:
                        continue
        _tables = tables
    return _tables


@_check("named")
def _check_named():
    """Can equations be staged under a primitive of their own (hijax's helpers to flatten
    and rebuild a primitive's operands)? Where not, ``bind`` binds ``call_hi_primitive``."""
    if _hi is None or not all(hasattr(_hi, n) for n in ("tree_leaves_checked", "tree_unflatten")):
        _named.clear()
        return _lose("named", "hijax.tree_leaves_checked moved")
    return None


def unname_primitives():
    """Stage autoflow's primitives as ``call_hi_primitive`` (``selfcheck``, where their
    own names fail)."""
    _named.clear()


def name_primitives(classes) -> bool:
    """Give each of ``classes`` a ``core.Primitive`` of its own, named by its
    ``primitive_name``, with every rule JAX has for ``call_hi_primitive`` (so
    ``make_jaxpr`` and HLO op names read ``while_loop``, not ``call_hi_primitive``)."""
    if not primitives(check=False) or "lowering" not in _rules:
        return False
    _check_named()
    if "named" in lost:
        return False
    base = _hi.call_hi_primitive_p
    tables = _rule_tables()
    for cls in classes:
        p = _core.Primitive(cls.primitive_name)
        p.multiple_results = True
        for attr in ("is_high", "is_effectful", "to_lojax", "impl", "abstract_eval"):
            if attr in vars(base):
                setattr(p, attr, vars(base)[attr])
        for table in tables:
            table[p] = table[base]
        _install_rules(p)
        _pretty(p)
        _named[cls.__name__] = p
    return True


def _pretty(p):
    """Print an equation of ``p`` with its primitive's own params (the jaxprs of a
    loop's condition and body, an ``if``'s branches), as JAX prints ``while``."""
    pp_eqn, rules = getattr(_core, "_pp_eqn", None), getattr(_core, "pp_eqn_rules", None)
    if pp_eqn is None or rules is None:
        return

    def rule(eqn, context, settings):
        params = {k: v for k, v in eqn.params["_prim"].params.items()
                  if v is not None and v != () and v is not False}
        try:
            return pp_eqn(eqn.replace(params=params), context, settings)
        except Exception:  # noqa: BLE001 - JAX's printer changed: print as JAX would
            rules.pop(p, None)
            return pp_eqn(eqn, context, settings)
    rules[p] = rule


# The rules that stage autoflow's primitives as low equations: `jax.jit` never caches
# a "high" jaxpr for its C++ dispatch (each call would re-enter Python and convert it,
# 0.3-0.6 ms a call). Their operands and results are plain arrays, and their meaning
# when evaluated or compiled is their `expand` (or its `low_form`), so they need not be.
_rules = {}


def _low_rules():
    try:
        from jax._src.interpreters import mlir

        p = _hi.call_hi_primitive_p
        expand = _hi._call_hi_primitive_to_lojax
        orig_is_high, orig_staging, orig_impl = p.is_high, _pe.custom_staging_rules[p], p.impl
        traced = mlir.lower_fun(expand, multiple_results=True)
    except (ImportError, AttributeError, KeyError, TypeError) as e:
        return _lose("primitives", f"low staging: {e}")

    def is_high(*avals, _prim):
        return False if _low(_prim) else orig_is_high(*avals, _prim=_prim)

    def impl(*args_flat, _prim):
        return expand(*args_flat, _prim=_prim) if _low(_prim) else orig_impl(*args_flat, _prim=_prim)

    def staging_for(prim_p):
        def staging(trace, source_info, *args_flat, _prim):
            if _low(_prim):
                return trace.default_process_primitive(prim_p, args_flat, dict(_prim=_prim),
                                                       source_info)
            return orig_staging(trace, source_info, *args_flat, _prim=_prim)
        return staging

    _find_direct_lowering()
    _find_op_names()

    def lowering(ctx, *args, _prim):
        direct = _direct if DIRECT else None
        if direct is not None and _low(_prim) and not _prim.effects:
            low_form = getattr(_prim, "low_form", None)
            form = None if low_form is None else low_form(
                platforms=tuple(getattr(ctx.module_context, "platforms", ())))
            if form is not None:
                try:
                    # (a select is named as `jnp.where`'s `select_n`)
                    with _located(ctx, {"while": while_p, "cond": cond_p,
                                        "select": getattr(jax.lax, "select_n_p", None)
                                        }.get(form[0])):
                        out = direct(ctx, args, form)
                except Exception as e:  # noqa: BLE001 - JAX's private lowering API, or a bug
                    # Only autoflow's own probe program can tell that JAX's private
                    # lowering API changed (`selfcheck`); the failure of one program
                    # is autoflow's bug in that program, reported as such, and turns
                    # nothing off for the programs after it.
                    if probe_direct is None or probe_direct() is None:
                        raise internal_error(_prim, e) from e
                    use_direct_lowering(False)
                    _lose_late("direct lowering", f"{type(e).__name__}: {e}")
                    out = None
                if out is not None:
                    return out
        with _located(ctx, None):
            return traced(ctx, *args, _prim=_prim)

    return dict(is_high=is_high, impl=impl, staging_for=staging_for, lowering=lowering,
                register=mlir.register_lowering)


def _no_location(ctx, prim):
    return contextlib.nullcontext()


_located = _no_location


@_check("op names")
def _find_op_names():
    """``_located(ctx, jax_prim)``: a context in which the ops emitted for one of
    autoflow's equations are named as JAX names its own: ``jit(f)/while`` for a loop
    emitted as JAX's ``while`` (``jax_prim``), ``jit(f)`` for what a traced ``expand``
    emits (its equations add their own names). Without it the ops sit under the
    equation's name (``jit(f)/while_loop``), and XLA names the fused ops of a loop body
    ``jit(f)/while_loop/jit(f)/while/body/add``, where hand-written ``lax`` gives
    ``jit(f)/while/body/add`` (what a profiler shows). JAX's own location, unchanged,
    where ``mlir.source_info_to_location`` differs."""
    global _located
    _located = _no_location
    try:
        from jax._src.interpreters import mlir

        to_location = mlir.source_info_to_location
        if list(inspect.signature(to_location).parameters)[:4] != [
                "ctx", "primitive", "name_stack", "traceback"]:
            raise TypeError("mlir.source_info_to_location changed")
    except (ImportError, AttributeError, TypeError, ValueError) as e:
        return _lose("op names", _why(e))

    def located(ctx, prim):
        try:
            return to_location(ctx.module_context, prim, ctx.name_stack, ctx.traceback)
        except Exception as e:  # noqa: BLE001 - only names: keep JAX's own
            _lose_late("op names", _why(e))
            return contextlib.nullcontext()
    _located = located
    return None


# Lower primitives with a ``low_form`` by emitting it (tests compare the two lowerings).
DIRECT = True
_direct = None
# () -> None if autoflow's probe program lowers directly on this JAX, else why not
# (selfcheck.direct_problem, cached): asked when a program's direct lowering fails.
probe_direct = None


def internal_error(prim, exc):
    """autoflow's error for a program of the user's that autoflow failed to lower: an
    autoflow bug, at the user's line of the statement ``prim`` stands for (where JAX
    gave it a source location when it was staged)."""
    from ..errors import InternalError

    where = "a converted statement"
    line = _user_line(getattr(prim, "source_info", None))
    if line is not None:
        where = f"the statement at {line[0]}:{line[1]}"
    return InternalError(
        f"autoflow failed to compile {where} ({type(exc).__name__}: {exc}). This is a "
        f"bug in autoflow, not in your program or in JAX {jax.__version__}: please report "
        "it with the function and the arguments' shapes and dtypes.")


def use_direct_lowering(on: bool) -> None:
    global DIRECT
    DIRECT = on


def _install_rules(p):
    p.is_high = _rules["is_high"]
    p.def_impl(_rules["impl"])
    _pe.custom_staging_rules[p] = _rules["staging_for"](p)
    _rules["register"](p, _rules["lowering"])


def install_low_staging() -> bool:
    """Stage primitives with ``stage_low`` as low equations, for ``call_hi_primitive``
    itself too (where ``name_primitives`` is lost). False where JAX's internals differ."""
    if "lowering" in _rules:
        return True
    if not primitives(check=False):
        return False
    rules = _low_rules()
    if rules is None:
        return False
    _rules.update(rules)
    _install_rules(_hi.call_hi_primitive_p)
    return True


@_check("direct lowering")
def _find_direct_lowering():
    """``_direct = emit(ctx, args, form)``: the MLIR of a primitive's ``low_form`` (a
    ``while``, a ``cond`` or a select of two branch jaxprs) with JAX's own rules,
    without tracing ``expand`` into a jaxpr first (None: then it is traced)."""
    global _direct
    _direct = None
    try:
        from jax._src.interpreters import mlir
        from jax._src.lib.mlir.dialects import hlo

        mlir.convert_hlo  # noqa: B018
        rules_of, subcomp = mlir._get_lowering_rules, mlir.jaxpr_subcomp
        if len(inspect.signature(rules_of).parameters) != 3 or while_p is None:
            return _lose("direct lowering", "mlir._get_lowering_rules changed")
        keywords = set(inspect.signature(subcomp).parameters)
        if not {"dim_var_values", "const_lowering"} <= keywords:
            return _lose("direct lowering", "mlir.jaxpr_subcomp changed")
        with_traceback = "outer_traceback" in keywords
        fields = {"avals_in", "module_context", "name_stack", "tokens_in", "traceback",
                  "dim_var_values", "const_lowering", "jaxpr_eqn_ctx"}
        if not fields <= set(getattr(mlir.LoweringRuleContext, "__dataclass_fields__", ())):
            return _lose("direct lowering", "mlir.LoweringRuleContext changed")
        int32 = _core.ShapedArray((), np.dtype(np.int32))
    except (ImportError, AttributeError, TypeError, ValueError) as e:
        return _lose("direct lowering", str(e))

    def rule(ctx, prim):
        per_platform, common, _ = rules_of(ctx.module_context, prim, ctx.jaxpr_eqn_ctx)
        return None if per_platform else common

    def branch(ctx, closed_jaxpr, operands, used):
        jaxpr = closed_jaxpr.jaxpr
        if not all(used):  # (as tracing `expand` leaves the unused outputs out)
            jaxpr = _pe.dce_jaxpr(jaxpr, used, instantiate=True)[0]
        extra = {"outer_traceback": ctx.traceback} if with_traceback else {}
        out, _ = subcomp(ctx.module_context, jaxpr, ctx.name_stack, ctx.tokens_in, [],
                         *operands, dim_var_values=ctx.dim_var_values,
                         const_lowering=ctx.const_lowering, **extra)
        return iter(out)

    def emit(ctx, args, form):
        kind = form[0]
        if kind == "while":
            lower = rule(ctx, while_p)
            return None if lower is None else lower(ctx, *args, **form[1])
        if kind == "cond":  # the predicate as the index of JAX's cond
            lower = rule(ctx, cond_p)
            if lower is None:
                return None
            index = mlir.convert_hlo(ctx, args[0], ctx.avals_in[0], int32)
            return lower(ctx.replace(avals_in=[int32, *ctx.avals_in[1:]]), index, *args[1:],
                         branches=form[1])
        if kind == "select":  # (select, true, false, n true operands, free outputs)
            _, t, f, n, free = form
            pred, outs = args[0], range(len(t.out_avals))
            t_out = branch(ctx, t, args[1:1 + n], [True] * len(outs))
            f_out = branch(ctx, f, args[1 + n:], [i not in free for i in outs])
            return [next(t_out) if i in free else hlo.select(pred, next(t_out), next(f_out))
                    for i in outs]
        return None

    _direct = emit
    return None


# -- jax.checkpoint (remat) around a loop's JVP -----------------------------------------

_remat_split = None  # the rule's `split` (while_prim's), for `recheck`


def install_remat_rule(split):
    """Give ``call_hi_primitive`` (and the named primitives) a
    ``partial_eval_jaxpr_custom`` rule: ``split(saveable, unks_in, inst_in, eqn)`` for
    the equations it returns non-None for; JAX's behaviour without a rule otherwise."""
    global _remat_split
    _remat_split = split
    _find_remat()
    return "remat" not in lost


@_check("remat")
def _find_remat():
    """Install the rule (``install_remat_rule``) where JAX has what it needs; where not,
    leave JAX's own behaviour (remove autoflow's rule, on a ``recheck``)."""
    try:
        rules = _pe.partial_eval_jaxpr_custom_rules
        for name in ("new_jaxpr_eqn", "ensure_enum", "RecomputeType"):
            getattr(_pe, name)
    except (AttributeError, NameError) as e:
        _uninstall_remat_rule()
        return _lose("remat", str(e))
    if _remat_split is None or _hi is None:  # (no primitives: no rule to install)
        return None
    prims = [_hi.call_hi_primitive_p, *_named.values()]
    previous = rules.get(prims[0])
    if getattr(previous, "autoflow", False):
        previous = previous.previous

    def rule(saveable, unks_in, inst_in, eqn):
        out = _remat_split(saveable, unks_in, inst_in, eqn)
        if out is not None:
            return out
        if previous is not None:  # (another library's rule for call_hi_primitive)
            return previous(saveable, unks_in, inst_in, eqn)
        return default_partial_eval(saveable, unks_in, inst_in, eqn)

    rule.autoflow, rule.previous = True, previous
    for p in prims:
        rules[p] = rule
    return None


def _uninstall_remat_rule():
    rules = getattr(_pe, "partial_eval_jaxpr_custom_rules", None)
    if rules is None or _hi is None:
        return
    for p in [_hi.call_hi_primitive_p, *_named.values()]:
        ours = rules.get(p)
        if getattr(ours, "autoflow", False):
            if ours.previous is None:
                rules.pop(p, None)
            else:
                rules[p] = ours.previous


def new_eqn(invars, outvars, prim, effects, like):
    """A jaxpr equation binding ``prim`` (an instance of autoflow's primitives)."""
    return _pe.new_jaxpr_eqn(invars, outvars, primitive_of(prim), dict(_prim=prim), effects,
                             like.source_info, like.ctx)


def residuals(eqn, inst_in):
    """The operands of ``eqn`` a staged equation reads from the known side."""
    return [v for v, inst in zip(eqn.invars, inst_in) if type(v) is Var and not inst]


def default_partial_eval(saveable, unks_in, inst_in, eqn):
    """What ``partial_eval_jaxpr_custom`` does with an equation of a primitive with no rule."""
    n = len(eqn.outvars)
    res = residuals(eqn, inst_in)
    if any(unks_in):
        return None, eqn, [True] * n, [True] * n, res
    policy = _pe.ensure_enum(saveable(eqn.primitive, *[v.aval for v in eqn.invars],
                                      **eqn.params))
    if has_effects(eqn.effects) or not isinstance(policy, _pe.RecomputeType):
        return eqn, None, [False] * n, [False] * n, []
    return eqn, eqn, [False] * n, [True] * n, res


def is_high(jaxpr) -> bool:
    """Is a traced jaxpr "high" (so ``jax.jit`` would dispatch it from Python)?"""
    return bool(getattr(jaxpr, "is_high", False))


# -- JAX's texts: its error messages, a tracer's text ----------------------------------

# What autoflow reads in JAX's messages (``error texts``, ``run-time errors``).
JAX_TEXTS = {
    # `jnp.zeros(n)` with a traced `n` (a TypeError)
    "traced shape": re.compile(r"Shapes must be 1D sequences of concrete values"),
    # `x[:n]` with a traced `n` (an IndexError)
    "traced slice": re.compile(r"Slice entries must be static integers"),
    # a value computed from constants only, with `jnp`
    "from constants": re.compile(r"became a tracer due to JAX operations"),
    # that a value depends on an argument of the traced function (group 1: its name)
    "argument": re.compile(r"depends on the value of the argument(?: (\w+))?"),
    # where JAX's own explanation of the problem ends
    "details": re.compile(r"See https|The error occurred while tracing"),
    # how JAX describes every traced value ("traced array with shape float32[3]")
    "value shape": re.compile(r"with shape \w+\[[^\]]*\]"),
    "must be static": re.compile(r"must be static"),
    # a tracer's text (`JitTracer(~int32[])`, `VmapTracer(...)`, older JAX's `Traced<...>`)
    "tracer": re.compile(r"\b\w*Tracer\(|Traced<"),
    # a failed callback, as JAX's C++ dispatch reports it (a ValueError)
    "internal": re.compile(r"INTERNAL"),
    # Ctrl-C delivered inside a callback (the callback's traceback is in JAX's message)
    "interrupted": re.compile(r"\nKeyboardInterrupt"),
}


def jax_text(kind, text):
    """The match of JAX's text of ``kind`` (a key of ``JAX_TEXTS``) in ``text``, or None."""
    return JAX_TEXTS[kind].search(text)


def matches_jax_error(kind, text) -> bool:
    """Does ``text`` (an error's) hold JAX's text of ``kind``?"""
    return jax_text(kind, text) is not None


def jax_error_argument(text):
    """The argument of the traced function JAX's error ``text`` says a value depends on."""
    m = jax_text("argument", text)
    return m.group(1) if m else None


def jax_error_wants_shape(text) -> bool:
    """Does JAX's error ``text`` say that a shape or size was needed (``jnp.arange(n)``:
    "It arose in the jnp.arange argument 'stop'"), not a truth value or a Python number
    (``float(x)``: "The problem arose with the `float` function")?"""
    head = JAX_TEXTS["details"].split(text, maxsplit=1)[0]
    head = JAX_TEXTS["value shape"].sub("", head)
    if "shape" in head.lower() or matches_jax_error("must be static", head):
        return True
    return "argument" in head and re.search(r"\b(jnp|jax\.numpy|numpy|np)\.\w", head) is not None


def shows_tracer(text) -> bool:
    """Does ``text`` (a string made while tracing) show a JAX tracer's text?"""
    return matches_jax_error("tracer", text)


@_check("error texts")
def _check_error_texts():
    """Does JAX still word its errors as ``JAX_TEXTS`` reads them?"""
    import jax.numpy as jnp

    def raised(fn, *args):
        try:
            jax.make_jaxpr(fn)(*args)
        except Exception as e:  # noqa: BLE001 - the error looked for
            return e
        return None

    shown = []
    jax.make_jaxpr(lambda x: shown.append(str(x)) or x)(np.float32(1.0))
    shape = raised(lambda n: jnp.zeros((n,)), 1)
    sliced = raised(lambda x, n: x[:n], np.ones(3, np.float32), 1)
    constant = raised(lambda: int(jnp.ceil(jnp.float32(2.5))))
    argument = raised(lambda x: int(x), np.float32(1.0))
    arange = raised(lambda n: jnp.arange(n), 3)
    problems = [what for what, ok in (
        ("a tracer's text", bool(shown) and shows_tracer(shown[0])),
        ("traced shape", isinstance(shape, TypeError)
         and matches_jax_error("traced shape", str(shape))),
        ("traced slice", isinstance(sliced, IndexError)
         and matches_jax_error("traced slice", str(sliced))),
        ("from constants", constant is not None
         and matches_jax_error("from constants", str(constant))),
        ("argument", argument is not None and jax_error_argument(str(argument)) == "x"
         and matches_jax_error("details", str(argument))
         and not jax_error_wants_shape(str(argument))),
        ("a shape needed", arange is not None and jax_error_wants_shape(str(arange))),
    ) if not ok]
    if problems:
        return _lose("error texts", "JAX words these otherwise: " + ", ".join(problems))
    return None


# -- errors raised while the compiled code runs -------------------------------------------

_RUNTIME_ERRORS = tuple(t for t in (getattr(jax.errors, "JaxRuntimeError", None),)
                        if isinstance(t, type))


def is_runtime_error(e) -> bool:
    """The error JAX raises when a callback failed while compiled code ran
    (``jax.errors.JaxRuntimeError``; called through its C++ dispatch, a ``ValueError``
    whose text starts ``INTERNAL:``)."""
    return isinstance(e, _RUNTIME_ERRORS) or (
        type(e) is ValueError and matches_jax_error("internal", str(e)[:80]))


def raised_in_callback(e, user) -> bool:
    """Is ``e`` JAX's report of the exception ``user`` raised in a callback (its text
    holds the callback's traceback)?"""
    return is_runtime_error(e) and str(user) in str(e)


def interrupted_in_callback(e) -> bool:
    """Is ``e`` JAX's report of a Ctrl-C delivered inside a callback?"""
    return is_runtime_error(e) and matches_jax_error("interrupted", str(e))


@_check("run-time errors")
def _check_runtime_errors():
    """Does a failed callback reach autoflow as ``is_runtime_error`` expects, with the
    callback's exception, and its traceback, in its text?"""
    probe = ValueError("autoflow's probe of a failed callback")

    def fail(x):
        raise probe

    import logging

    f = jax.jit(lambda x: jax.pure_callback(fail, jax.ShapeDtypeStruct((), np.float32), x))
    logger = logging.getLogger(CALLBACK_LOGGER)
    was, logger.disabled = logger.disabled, True  # (JAX logs the probe's failure)
    try:
        for _ in range(2):  # (the first call, then through JAX's C++ dispatch)
            try:
                jax.block_until_ready(f(np.float32(1.0)))
            except Exception as e:  # noqa: BLE001 - the error looked for
                if not (raised_in_callback(e, probe) and f"\n{type(probe).__name__}" in str(e)):
                    return _lose("run-time errors", f"a failed callback raised {_why(e)}")
            else:
                return _lose("run-time errors", "a failed callback raised nothing")
    finally:
        logger.disabled = was
    return None
