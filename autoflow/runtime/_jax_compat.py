"""Every use autoflow makes of JAX's private modules (``jax._src``), in one place.

JAX does not promise these across releases; each entry says what it needs
and since when it has been there. autoflow supports ``jax>=0.4.38`` (the
oldest release its test suite passes on; ``.ci/run`` checks it). Before
0.4.36 JAX had no ``trace_ctx``: the trace stack was a different object and
``is_top_level``/``trace_ctx.trace`` below cannot be written for it.

=========================== =============================================== ========
what                        private access                                  JAX
=========================== =============================================== ========
``is_concrete``             ``jax._src.core.is_concrete``                   >=0.4.36
``tracing``                 ``jax._src.core.trace_ctx.is_top_level()``      >=0.4.36
``current_trace``           ``jax._src.core.trace_ctx.trace``                >=0.4.36
``current_trace_kind``      ``type(jax._src.core.trace_ctx.trace).__name__`` >=0.4.36
                            (``LinearizeTrace`` under ``jax.grad``: 0.4.36+)
``hide_frames_of``          ``jax._src.traceback_util.register_exclusion``  >=0.4.1
                            ``jax._src.source_info_util.register_exclusion``>=0.4.1
``DEBUGGING_LOGGER``        the logger name ``jax._src.debugging``          >=0.4.1
``is_runtime_error``        the class name of a failed callback's error     any
                            (``XlaRuntimeError`` in 0.4.x)
``lowering_internals``      ``api_util.debug_info``, ``core.eval_jaxpr``,   newer
                            ``partial_eval.trace_to_jaxpr``,                than
                            ``batching.BatchTracer``, ``FlatTree.flatten``  0.4.38
                            (``tree_util.FlatTree`` up to 0.10,
                            ``flattree.flatten`` from 0.11; the
                            select-or-cond choice: without them every
                            traced ``if`` is a ``lax.cond``)
``is_constant``             ``DynamicJaxprTracer.val`` is a ``Literal``     newer
``checkpoint_internals``    ``jax.experimental.hijax.HiPrim`` (0.11;        newer
                            ``VJPHiPrimitive`` before),                     than
                            ``core``, ``ad_util.Zero``,
                            ``partial_eval.convert_constvars_jaxpr``,       0.4.38
                            ``batching.batch_jaxpr`` (the checkpointed
                            while loop: without them a data-dependent loop
                            is a ``lax.while_loop``, which ``jax.grad``
                            cannot differentiate in reverse mode)
``remat_internals``         ``hijax.call_hi_primitive_p``,                  newer
                            ``partial_eval.partial_eval_jaxpr_custom_rules``than
                            (``new_jaxpr_eqn``, ``ensure_enum``,            0.4.38
                            ``SaveableType``, ``RecomputeType``),
                            ``core.Var`` (``jax.checkpoint`` around a
                            data-dependent loop under ``jax.grad``: without
                            them, JAX's "Linearization failed" error)
=========================== =============================================== ========

``Tracer`` is public (``jax.core.Tracer``) but listed here too, so that the
one place to look is this module.
"""

from __future__ import annotations

import jax
from jax._src import core as _core
from jax._src import source_info_util as _source_info_util
from jax._src import traceback_util as _traceback_util

MIN_JAX = (0, 4, 38)
# The newest JAX autoflow's test suite has passed on (0.11.2: the whole suite,
# on a CPU, with the jaxlib of a GPU machine's image; PyPI here stops at
# 0.10.2, which CI runs). On a newer one whose private modules moved again (as
# 0.11 renamed hijax's ``VJPHiPrimitive`` to ``HiPrim`` and moved ``FlatTree``
# to ``jax._src.flattree``), autoflow falls back as on the oldest JAX, and says
# so once (``warn_degraded``).
NEWEST_TESTED = (0, 11, 2)

Tracer = jax.core.Tracer

# The logger JAX reports exceptions raised in debug callbacks to.
DEBUGGING_LOGGER = "jax._src.debugging"


def is_concrete(x) -> bool:
    """Is the tracer ``x``'s value known (``jax.grad`` without ``jit``)?"""
    return _core.is_concrete(x)


def tracing() -> bool:
    """Is a JAX transformation (jit, vmap, grad...) tracing right now?"""
    return not _core.trace_ctx.is_top_level()


def current_trace():
    """The innermost trace (``jax._src.core.trace_ctx.trace``)."""
    return _core.trace_ctx.trace


def current_trace_kind() -> str:
    """The class name of the innermost trace (``LinearizeTrace`` under ``jax.grad``)."""
    return type(_core.trace_ctx.trace).__name__


def hide_frames_of(path: str) -> None:
    """Leave frames of files under ``path`` out of the tracebacks JAX filters,
    and out of the source locations JAX gives operations (so a staged
    ``while``/``case`` points at the user's line in ``as_text(debug_info=True)``)."""
    _traceback_util.register_exclusion(path)
    _source_info_util.register_exclusion(path)


def is_symbolic_dim(x) -> bool:
    """Is ``x`` a symbolic dimension (``jax.export`` shape polymorphism)?
    Public: ``jax.export.is_symbolic_dim`` (JAX 0.4.30+)."""
    try:
        from jax.export import is_symbolic_dim as _is
    except ImportError:  # pragma: no cover - older JAX
        return False
    return not isinstance(x, int) and _is(x)


def is_runtime_error(e) -> bool:
    """Is ``e`` the error JAX raises when a callback raised while the compiled
    code ran? ``JaxRuntimeError`` now, ``XlaRuntimeError`` in JAX 0.4.x."""
    return type(e).__name__ in ("JaxRuntimeError", "XlaRuntimeError")


def version() -> tuple:
    return tuple(int(p) for p in jax.__version__.split(".")[:3] if p.isdigit())


_warned_degraded = set()

# What autoflow does without each private name (see `warn_degraded`).
SELECTS_LOST = "every traced `if` is a lax.cond (never a cheaper select)"
LOOPS_LOST = (SELECTS_LOST + ", and jax.grad cannot differentiate a loop whose trip count "
              "depends on traced values in reverse mode")


def warn_degraded(missing: str, lost: str) -> None:
    """Say once per process and name that ``missing`` (a private JAX name
    autoflow's own loop and ``if`` primitives need) is absent from a JAX newer
    than ``NEWEST_TESTED``, and what is ``lost`` without it: results stay
    right. On the older JAX releases autoflow supports the same fallback is
    documented and silent."""
    if missing in _warned_degraded or version() <= NEWEST_TESTED:
        return
    _warned_degraded.add(missing)
    import os
    import sys
    import warnings

    # (said at `import autoflow`: point at the user's import, past autoflow's
    # modules and the import machinery)
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    frame, level = sys._getframe(1), 2
    while frame is not None and (frame.f_code.co_filename.startswith(package)
                                 or frame.f_code.co_filename.startswith("<frozen")):
        frame, level = frame.f_back, level + 1

    tested = ".".join(map(str, NEWEST_TESTED))
    warnings.warn(
        f"autoflow was tested on JAX up to {tested}; this JAX ({jax.__version__}) lacks "
        f"{missing}, which autoflow's own loop and `if` primitives are built on. Converted "
        f"functions still give the same results, but {lost}. For all of it: "
        f"pip install 'jax<={tested}'.", UserWarning, stacklevel=level)


def lowering_internals():
    """``(api_util, core, batching, partial_eval, FlatTree)`` for
    ``runtime.lowering``, or None on a JAX without them (an ``if`` is then
    always a ``lax.cond``)."""
    try:
        from jax._src import api_util
        from jax._src import core
        from jax._src.interpreters import batching
        from jax._src.interpreters import partial_eval
    except ImportError:
        warn_degraded("jax._src.interpreters.partial_eval", SELECTS_LOST)
        return None
    try:  # JAX 0.11+: a module of its own, `flatten` a function of it
        from jax._src import flattree as FlatTree
    except ImportError:
        try:  # up to 0.10: a class in tree_util, `flatten` a static method
            from jax._src.tree_util import FlatTree
        except ImportError:
            warn_degraded("jax._src.flattree.FlatTree", SELECTS_LOST)
            return None
    return api_util, core, batching, partial_eval, FlatTree


def checkpoint_internals():
    """``(VJPHiPrimitive, core, ad_util, partial_eval, batching)`` for
    ``runtime.checkpoint``, or None on a JAX without user-defined primitives
    (``jax.experimental.hijax``): data-dependent loops are then plain
    ``lax.while_loop``s."""
    try:  # JAX 0.11 renamed it HiPrim (the protocol autoflow uses is the same)
        from jax.experimental.hijax import HiPrim as VJPHiPrimitive
    except ImportError:
        try:
            from jax.experimental.hijax import VJPHiPrimitive
        except ImportError:
            warn_degraded("jax.experimental.hijax.HiPrim", LOOPS_LOST)
            return None
    try:
        from jax._src import ad_util
        from jax._src import core
        from jax._src.interpreters import batching
        from jax._src.interpreters import partial_eval
    except ImportError:
        return None
    return VJPHiPrimitive, core, ad_util, partial_eval, batching


def body_input_maker():
    """``new_input(trace, shape, dtype)``: a new input of the jaxpr being traced by
    ``trace`` (JAX's ``DynamicJaxprTrace.new_arg``), made while the trace is under
    way; or None on a JAX whose jaxpr traces cannot take one (then a loop body that
    needs one is traced again instead: ``staging.loop``)."""
    try:
        import inspect

        from jax._src import source_info_util
        from jax._src.interpreters import partial_eval

        trace_type = partial_eval.DynamicJaxprTrace
        if list(inspect.signature(trace_type.new_arg).parameters) != ["self", "aval",
                                                                         "source_info"]:
            return None
        shaped = _core.ShapedArray
    except (ImportError, AttributeError, TypeError, ValueError):  # pragma: no cover
        return None

    def new_input(trace, shape, dtype):
        if type(trace) is not trace_type:
            return None
        return trace.new_arg(shaped(tuple(shape), dtype), source_info_util.current())

    return new_input


def is_constant(x) -> bool:
    """Is ``x`` a constant while staging (not a tracer, or a tracer of a jaxpr
    literal: ``DynamicJaxprTracer.val`` is a ``core.Literal`` in newer JAX)?"""
    if not isinstance(x, Tracer):
        return True
    return isinstance(getattr(x, "val", None), getattr(_core, "Literal", ()))


def control_flow_primitives():
    """``(while_p, cond_p)``, JAX's own loop and conditional primitives, to bind
    with jaxprs autoflow already traced (lowering without tracing them again);
    None where JAX keeps them elsewhere (then ``lax.while_loop``/``lax.cond``
    trace the bodies again)."""
    try:
        from jax._src.lax.control_flow.loops import while_p
        from jax._src.lax.control_flow.conditionals import cond_p
    except ImportError:
        return None
    return while_p, cond_p


def remat_internals():
    """``(call_hi_primitive_p, partial_eval, core)`` for ``runtime.checkpoint``'s
    rule that lets ``jax.checkpoint`` (remat) split a converted loop's JVP into a
    known primal loop and a staged tangent loop
    (``partial_eval.partial_eval_jaxpr_custom_rules``, ``new_jaxpr_eqn``,
    ``ensure_enum``, ``SaveableType``, ``RecomputeType``; ``core.Var``), or None
    on a JAX without them (then ``jax.checkpoint`` around such a loop under
    ``jax.grad`` fails with JAX's "Linearization failed" error)."""
    try:
        from jax._src import core
        from jax._src.hijax import call_hi_primitive_p
        from jax._src.interpreters import partial_eval
        for name in ("partial_eval_jaxpr_custom_rules", "new_jaxpr_eqn", "ensure_enum",
                     "SaveableType", "RecomputeType"):
            getattr(partial_eval, name)
        core.Var  # noqa: B018
    except (ImportError, AttributeError):
        return None
    return call_hi_primitive_p, partial_eval, core
