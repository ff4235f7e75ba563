"""The table of JAX's private paths autoflow takes (``PATHS``), as data.

Each row (a ``Path``) names what of JAX's private API a path reads, the JAX releases
it is known to work on, the public path autoflow takes without it, what a user loses
then, and when it is checked (``CHECKED``). A path that is missing or has another
shape is recorded in ``lost`` (its key, and why) by its check (``_check``, ``_lose``;
``_lose_late`` while a program is lowered, said then through ``on_loss``);
``recheck`` runs a row's check again. ``primitives()`` is the one question "may
autoflow's own loop and ``if`` primitives be used?".
"""

from __future__ import annotations

import dataclasses

import jax


MIN_JAX = (0, 4, 38)
# The newest JAX the whole test suite has passed on (benchmarks/JAX_MATRIX.md).
NEWEST_TESTED = (0, 12, 0, 1)
# The JAX releases on which every private path below is known to work: the pin a
# warning about a lost path suggests.
FULL_RANGE = ">=0.10.2,<=0.12.0.1"


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
         "0.4.38-0.12", "autoflow's frames are not hidden, and no line is named",
         "tracebacks through JAX show autoflow's own frames, and autoflow's internal errors "
         "do not name your line",
         "import, at use"),
    Path("reverse mode",
         "`interpreters.ad.LinearizeTrace`, `LinearizeTracer` (what `jax.grad` traces with "
         "where JAX linearizes directly: 0.10.2 does; 0.4.38 traces with `JVPTrace`)",
         "0.10-0.12 (0.4.38 has them, its jax.grad does not use them)",
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
         "0.9.2-0.12", "`lax.while_loop` and `lax.cond`",
         "jax.grad cannot differentiate a loop whose trip count depends on traced values "
         "(reverse mode), and every traced `if` is a lax.cond, never a cheaper select",
         "import, first use"),
    Path("named",
         "a `core.Primitive` per construct with `call_hi_primitive`'s rules (from JAX's rule "
         "tables), `hijax.tree_leaves_checked`/`tree_unflatten`, `core.pp_eqn_rules`",
         "0.9.2-0.12", "equations of `call_hi_primitive`",
         "jax.make_jaxpr and profiles name autoflow's loops and ifs `call_hi_primitive`",
         "import, first use", primitives_only=True),
    Path("direct lowering",
         "`mlir._get_lowering_rules`, `jaxpr_subcomp`, `LoweringRuleContext`, `convert_hlo`, "
         "`hlo.select`, `partial_eval.dce_jaxpr`",
         "0.10-0.12", "`mlir.lower_fun` of the primitive's `expand`",
         "the first call of a converted function compiles more slowly",
         "import, first use, at use", primitives_only=True),
    Path("op names",
         "`mlir.source_info_to_location(ctx, primitive, name_stack, traceback)`",
         "0.10-0.12 (0.4.38 lacks it)", "the operations keep the location of autoflow's equation",
         "profiles name a converted loop's operations `jit(f)/while_loop/jit(f)/while/body/...`, "
         "not `jit(f)/while/body/...` as hand-written lax.while_loop's",
         "import", primitives_only=True),
    Path("bind while/cond",
         "`lax.control_flow`'s `while_p` and `cond_p`",
         "0.4.38-0.12", "`lax.while_loop`/`lax.cond` (traced again)",
         "the first call of a converted function compiles more slowly",
         "import", primitives_only=True),
    Path("effects in loops",
         "an ordered effect lowered inside autoflow's loop primitive",
         "0.10-0.12", "such a loop is JAX's `while`",
         "a loop that prints (or checks a traced assert or raise) is a lax.while_loop, which "
         "jax.grad cannot differentiate in reverse mode when its trip count depends on traced "
         "values",
         "first loop with effects", primitives_only=True),
    Path("ordered effect",
         "`debugging.ordered_debug_effect` (the effect of `jax.debug.callback(..., "
         "ordered=True)`)",
         "0.4.38-0.12", "prints and checks are `jax.debug.callback(ordered=True)` calls",
         "a program with a traced assert or raise is dispatched the slow way (0.6-0.8 ms a "
         "call on a CPU), and under jax.vmap a print of values that are not batched happens "
         "once, not once per lane",
         "import", primitives_only=True),
    Path("parent trace",
         "`Trace.parent_trace` (`DynamicJaxprTrace(..., parent_trace)`)",
         "0.10-0.12 (0.4.38 lacks it)", "a staged block's trace is not followed outwards",
         "a traced assert or raise inside a staged loop or branch is an ordered callback: "
         "the program is dispatched the slow way",
         "import, doctor", primitives_only=True),
    Path("callback loggers",
         "JAX's private loggers of debug callbacks and callbacks (JAX logs a failed "
         "callback's exception there)",
         "0.4.38-0.12", "none needed",
         "JAX also logs the exception of a failed traced assert or raise, as an error",
         "import"),
    Path("trace a thunk",
         "`partial_eval.trace_to_jaxpr`, `api_util.debug_info`, `FlatTree.flatten`",
         "0.8.3-0.12", "`jax.make_jaxpr`",
         "tracing a traced `if` takes a little longer",
         "import, first use"),
    Path("weak types",
         "`lax.lax._convert_element_type(x, dtype, weak_type=True)`",
         "0.4.38-0.12", "`lax.convert_element_type` (strongly typed)",
         "the values are the same, but a loop carry that starts as a Python number is "
         "strongly typed: combined with a float16 or int8 array it gives a wider dtype than "
         "outside a loop",
         "import"),
    Path("body inputs",
         "`partial_eval.DynamicJaxprTrace.new_arg(aval, source_info)`",
         "0.6.2-0.12", "a second trace of the body",
         "a loop whose body binds a variable on some paths only is traced twice",
         "import"),
    Path("symbolic zeros",
         "`ad_util.Zero` passed to a pullback `jax.vjp` returned (JAX's symbolic zero "
         "cotangent)",
         "0.10.2 and 0.12.0.1 (0.4.38 refuses it)", "the zeros passed as arrays",
         "jax.grad through a loop that carries a value only its test reads (`err = "
         "jnp.linalg.norm(x_new - x)` in `while err > tol:`) is NaN where that value's "
         "derivative is infinite at the last step (a norm or sqrt of zero), where Python's "
         "is finite",
         "doctor, at use", primitives_only=True),
    Path("remat",
         "`partial_eval.partial_eval_jaxpr_custom_rules`, `new_jaxpr_eqn`, `ensure_enum`, "
         "`RecomputeType`",
         "0.9.2-0.12", "none: JAX's rule for a primitive without one",
         "jax.checkpoint around a converted data-dependent loop fails under jax.grad",
         "import", primitives_only=True),
    Path("custom rules",
         "JAX's private custom-derivatives module in the stack of a rule, "
         "`partial_eval.JaxprTrace`",
         "0.4.38-0.12", "every traced `if` is a `lax.cond`",
         "every traced `if` is a lax.cond (JAX's custom-derivative rules can no longer be "
         "told apart)",
         "first use"),
    Path("jit wrapper",
         "the private `_jit_info` of what `jax.jit(f)` returns (its static and donated "
         "arguments, shardings, layouts)",
         "0.10-0.12 (0.4.38 has no `_jit_info`)", "a `jax.jit(f)` made before autoflow saw `f` is called as it is",
         "a jax.jit(f) made outside converted code (at module level) and called from it runs "
         "`f` unconverted (a fallback: an error under strict=True), so a traced `if` in `f` "
         "raises JAX's TracerBoolConversionError",
         "import"),
    Path("explain dce",
         "`partial_eval.dce_rules`, `dce_jaxpr` (and its cache), a `while` equation's params "
         "(`cond_nconsts`, `body_nconsts`, `cond_jaxpr`, `body_jaxpr`)",
         "0.4.38-0.12", "the jaxpr as traced",
         "`autoflow explain` also prints operations whose results nothing uses (a loop test "
         "tried before the loop is staged)",
         "import, at use"),
    Path("probe axis",
         "`batching.AxisData` as a dataclass with a `name` field (a batching rule's axis "
         "renamed with `dataclasses.replace`)",
         "0.4.38-0.12", "each loop's batched carries are found by batching its body over "
         "the real axis",
         "`vmap` of a loop holding loops compiles more slowly (each inner loop's batched "
         "form is built again at each round of the search for the outer loop's batched "
         "carries)",
         "import", primitives_only=True),
    Path("cost model",
         "equations' params: `dot_general`'s `dimension_numbers`, `while`'s `cond_jaxpr`",
         "0.4.38-0.12", "a matrix product costs its output's size",
         "a traced `if` whose branches multiply matrices may be a select where a lax.cond "
         "would be cheaper",
         "doctor, at use"),
    Path("error texts",
         "JAX's messages: \"Shapes must be 1D sequences of concrete values\", \"Slice entries "
         "must be static integers\", \"... became a tracer due to JAX operations\", \"... "
         "depends on the value of the argument x\", \"traced array with shape ...\", \"The "
         "error occurred while tracing\", \"See https\"; a tracer's text (`JitTracer(`, "
         "`Traced<`)",
         "0.10-0.12 (0.4.38 words a traced slice otherwise)", "JAX's error as it is, or general advice",
         "JAX's errors about a traced shape or slice reach you as JAX gives them (pointing "
         "into autoflow's generated functions) or with general advice, and a string that "
         "shows a tracer's text is not caught",
         "doctor"),
    Path("run-time errors",
         "a failed callback reported as a `ValueError` whose text starts \"INTERNAL\" (JAX's "
         "C++ dispatch), with the callback's traceback in JAX's message",
         "0.4.38-0.12", "JAX's error as it is",
         "a traced assert or raise that fails when the compiled code runs raises JAX's "
         "error (your message inside it), not your exception",
         "doctor"),
)

_BY_KEY = {p.key: p for p in PATHS}
assert len(_BY_KEY) == len(PATHS), "two rows of PATHS share a key"

lost: dict = {}  # key -> why that path is not available (filled here and by selfcheck)
on_loss = None  # called when a path is lost while a program is lowered (selfcheck.warn_lost)
# The self-check run at first use (selfcheck.ensure), registered by `selfcheck` when it
# is imported (the primitives import it, as the runtime does): no import circle.
on_first_use = None
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
    ``recheck``; those of the rows checked at import are run by the package's
    ``__init__``, in order)."""
    path(key)

    def register(fn):
        _CHECKS[key] = fn
        return fn
    return register


def recheck(key):
    """Check the path ``key`` again, and take the public path where it fails
    (``selfcheck.report()``, for every row but those its probe program turns off; the
    fault-injection tests, after changing what the path reads). True if it is on. (The
    check of ``effects in loops`` is ``selfcheck``'s, registered when it is imported.)"""
    lost.pop(key, None)
    _CHECKS[key]()
    return key not in lost


def primitives(check: bool = True) -> bool:
    """May autoflow's own loop and ``if`` primitives be used (``loops.while_primitive``,
    ``cond.primitive``)? The one place this is asked. The first call runs the self-check
    (``selfcheck.run``: 7 ms, once, through ``on_first_use``); ``check=False`` answers as
    far as is known now, without running it (what the names JAX has tell, at import)."""
    if check and on_first_use is not None:
        on_first_use()
    return "primitives" not in lost


def _first_line(e) -> str:
    text = str(e).strip().splitlines()
    return text[0][:200] if text else ""


def _why(e) -> str:
    return f"{type(e).__name__}: {_first_line(e)}"
