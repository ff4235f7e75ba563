"""autoflow's one boundary with JAX's private API.

Everything autoflow takes from JAX below its documented API (``jax``,
``jax.lax``, ``jax.numpy``, ``jax.tree_util``, ``jax.errors``) is named here and
nowhere else: ``jax._src``, ``jax.experimental.hijax``, ``jax.extend``, lowering
and partial-evaluation rules, jaxpr objects, and string matches on JAX's class
or file names. Each name is looked up once, when this module is imported; one
that is missing or has another shape leaves its path ``None`` (``lost`` says
why), and the code that uses it takes the public path instead. ``selfcheck``
then runs the private paths on tiny programs, compares them with the public
ones, and warns once naming what is lost and the JAX pin that restores it.

The JAX column: the releases on which ``selfcheck.report()`` finds the path working
(``benchmarks/JAX_MATRIX.md``: the newest patch of each minor from 0.4.38 to 0.10.2;
0.11.2 was checked before this module existed). Elsewhere the public path runs.

==================  ==============================================  ===========  ==========================
path                private names                                   JAX          public path without it
==================  ==============================================  ===========  ==========================
trace state         ``core.trace_ctx`` (``is_top_level``, ``trace``) >=0.4.36     (required: the floor)
                    ``core.is_concrete``
frames              ``traceback_util``/``source_info_util``         >=0.4.1      tracebacks show autoflow
                    ``.register_exclusion``
primitives          ``hijax.HiPrim`` (``VJPHiPrimitive`` to 0.10)   0.9.2-0.11   ``lax.while_loop`` (no
                    with ``vjp_fwd(nzs_in, ...)``, its                           ``jax.grad`` through a
                    ``call_hi_primitive_p`` and rule tables,                     data-dependent loop) and
                    ``core``, ``ad_util.Zero``, ``partial_eval``                 ``lax.cond`` (never a
                    (``custom_staging_rules``,                                   select)
                    ``convert_constvars_jaxpr``), ``batching``
named               a ``core.Primitive`` per construct with         0.9.2-0.11   equations read
                    ``call_hi_primitive``'s rules, ``pp_eqn_rules``              ``call_hi_primitive``
direct lowering     ``mlir._get_lowering_rules``, ``jaxpr_subcomp``,0.10-0.11    ``mlir.lower_fun`` of
                    ``LoweringRuleContext``, ``convert_hlo``,                    ``expand`` (slower first
                    ``dce_jaxpr``, ``hlo.select``                                compile)
effects in loops    an ordered effect lowered inside the primitive  0.10-0.11    such a loop is JAX's
                    (checked lazily: ``selfcheck.effects_ok``)                   ``while``
bind while/cond     ``lax.control_flow`` ``while_p``, ``cond_p``    any          ``lax.while_loop``/
                                                                                 ``lax.cond`` (traced again)
trace a thunk       ``partial_eval.trace_to_jaxpr``,                0.8.3-0.11   ``jax.make_jaxpr``
                    ``api_util.debug_info``, ``FlatTree.flatten``
body inputs         ``DynamicJaxprTrace.new_arg(aval, source_info)`` 0.6.2-0.11  a second trace of the body
remat               ``partial_eval.partial_eval_jaxpr_custom_rules`` 0.9.2-0.11  none: ``jax.checkpoint``
                    (``new_jaxpr_eqn``, ``ensure_enum``,                         around such a loop under
                    ``RecomputeType``)                                           ``jax.grad`` fails in JAX
custom rules        the file ``jax/_src/custom_derivatives.py`` in  any          (a ``lax.cond`` there, if
                    the stack (an ``if`` inside a ``custom_jvp``)                the file moved: JAX's error)
==================  ==============================================  ===========  ==========================
"""

from __future__ import annotations

import inspect
import os
import sys

import jax
import numpy as np

from jax._src import core as _core
from jax._src import source_info_util as _source_info_util
from jax._src import traceback_util as _traceback_util

MIN_JAX = (0, 4, 38)
# The newest JAX the whole test suite has passed on (benchmarks/JAX_MATRIX.md).
NEWEST_TESTED = (0, 11, 2)
# The JAX releases on which every private path below is known to work: the pin a
# warning about a lost path suggests.
FULL_RANGE = ">=0.10.2,<=0.11.2"

Tracer = jax.core.Tracer
try:  # the effect of `jax.debug.callback(..., ordered=True)` (later._Effect has it)
    from jax._src.debugging import ordered_debug_effect as ORDERED_DEBUG
except ImportError:  # pragma: no cover - another JAX: later stages plain callbacks
    ORDERED_DEBUG = None
DEBUGGING_LOGGER = "jax._src.debugging"  # the logger failed debug callbacks report to
CALLBACK_LOGGER = "jax._src.callback"  # ... and failed pure callbacks (later._Check's)
lost: dict = {}  # path -> why it is not available (filled here and by selfcheck)
on_loss = None  # called when a path is lost while a program is lowered (selfcheck.warn_lost)


def version() -> tuple:
    return tuple(int(p) for p in jax.__version__.split(".")[:3] if p.isdigit())


def _lose(path, why):
    lost.setdefault(path, why)
    return None


# -- trace state (required) ---------------------------------------------------

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


def source_here():
    """JAX's source information for an equation staged here (the user's line in it)."""
    try:
        return _source_info_util.current()
    except Exception:  # noqa: BLE001 - JAX's API changed: no line
        return None


def parent_trace(trace):
    """The trace ``trace`` was started from (a loop body's: the trace the loop is staged
    in), or None where this JAX does not say (``later.fast_checks`` then keeps checks
    in staged blocks ordered, as before)."""
    return getattr(trace, "parent_trace", None)


def current_trace_kind() -> str:
    """The class name of the innermost trace (``LinearizeTrace`` under ``jax.grad``)."""
    return type(_core.trace_ctx.trace).__name__


def hide_frames_of(path: str) -> None:
    """Leave frames under ``path`` out of JAX's filtered tracebacks and the source
    locations it gives operations."""
    _traceback_util.register_exclusion(path)
    _source_info_util.register_exclusion(path)


def is_symbolic_dim(x) -> bool:
    """A symbolic dimension of ``jax.export`` (public since 0.4.30)."""
    try:
        from jax.export import is_symbolic_dim as _is
    except ImportError:  # pragma: no cover - older JAX
        return False
    return not isinstance(x, int) and _is(x)


def is_runtime_error(e) -> bool:
    """The error JAX raises when a callback failed while compiled code ran (called
    through its C++ dispatch, a ``ValueError`` whose text starts ``INTERNAL:``)."""
    return type(e).__name__ in ("JaxRuntimeError", "XlaRuntimeError") or (
        type(e) is ValueError and "INTERNAL" in str(e)[:80])


def is_constant(x) -> bool:
    """A constant while staging: not a tracer, or one of a jaxpr literal."""
    if not isinstance(x, Tracer):
        return True
    return isinstance(getattr(x, "val", None), getattr(_core, "Literal", ()))


# -- jaxprs and avals -----------------------------------------------------------

try:
    from jax._src import ad_util as _ad_util
    from jax._src.interpreters import batching as _batching
    from jax._src.interpreters import partial_eval as _pe

    ClosedJaxpr, Jaxpr, Literal, Var = _core.ClosedJaxpr, _core.Jaxpr, _core.Literal, _core.Var
    ShapedArray, typeof, Zero = _core.ShapedArray, _core.typeof, _ad_util.Zero
    BatchTracer, batch_jaxpr = _batching.BatchTracer, _batching.batch_jaxpr
    convert_constvars_jaxpr, dce_jaxpr = _pe.convert_constvars_jaxpr, _pe.dce_jaxpr
    JAXPRS = True
except (ImportError, AttributeError) as e:  # pragma: no cover - a JAX that moved them
    JAXPRS = _lose("primitives", f"jaxpr internals: {e}") or False
    ShapedArray = getattr(jax.core, "ShapedArray", None)
    typeof = getattr(_core, "typeof", getattr(_core, "get_aval", None))
    ClosedJaxpr = Jaxpr = Literal = Var = Zero = BatchTracer = type("Missing", (), {})


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
    ``skip`` and passing each equation's params through ``rewrite(params)``."""
    env = {}

    def read(v):
        return v.val if isinstance(v, Literal) else env[v]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for e in jaxpr.eqns:
        if e.primitive.name in skip or getattr(e.params.get("_prim"), "is_effect", False):
            continue
        params = e.primitive.get_bind_params(rewrite(dict(e.params)))
        subfuns = ()
        if isinstance(params, tuple):  # up to JAX 0.9: (subfuns, params)
            subfuns, params = params
        with e.ctx.manager:
            outs = e.primitive.bind(*subfuns, *map(read, e.invars), **params)
        env.update(zip(e.outvars, outs if e.primitive.multiple_results else [outs]))
    return [read(v) for v in jaxpr.outvars]


# -- tracing a thunk (the branches of an `if`) ------------------------------------

def _private_trace_thunk():
    try:
        from jax._src import api_util
        from jax._src.interpreters import partial_eval as pe
        try:  # 0.11+: a module; up to 0.10: a class in tree_util
            from jax._src import flattree as flat_tree
        except ImportError:
            from jax._src.tree_util import FlatTree as flat_tree
        flat_tree.flatten  # noqa: B018
    except (ImportError, AttributeError) as e:
        return _lose("trace a thunk", str(e))
    empty = flat_tree.flatten(((), {})).map(_core.typeof)

    def trace(fn):
        return pe.trace_to_jaxpr(fn, empty, api_util.debug_info("if", fn, (), {}))[0]
    return trace


def _public_trace_thunk(fn):
    return jax.make_jaxpr(fn)()


private_trace_thunk = _private_trace_thunk()
trace_thunk = private_trace_thunk or _public_trace_thunk


def use_public_trace_thunk(why):
    global trace_thunk
    trace_thunk = _public_trace_thunk
    _lose("trace a thunk", why)


# -- weak types --------------------------------------------------------------------

def _weak_converter():
    try:
        from jax._src.lax.lax import _convert_element_type as convert
        if "weak_type" not in inspect.signature(convert).parameters:
            return _lose("weak types", "lax._convert_element_type has no weak_type")
        return convert
    except (ImportError, AttributeError, TypeError, ValueError) as e:
        return _lose("weak types", str(e))


_convert_weak = _weak_converter()


def convert_weak(x, dtype):
    """``x`` as ``dtype``, weakly typed (as a Python scalar is: a loop carry that started
    as one keeps combining with a float16 array as float16). Without the private
    converter, strongly typed (``lax.convert_element_type``: the dtype of what it
    combines with may then be wider than Python's)."""
    if _convert_weak is None:
        return jax.lax.convert_element_type(x, dtype)
    return _convert_weak(x, dtype, weak_type=True)


# -- JAX's own loop and conditional primitives, bound with jaxprs already traced ------

try:
    from jax._src.lax.control_flow.conditionals import cond_p
    from jax._src.lax.control_flow.loops import while_p
except ImportError as e:  # pragma: no cover - another JAX
    while_p = cond_p = _lose("bind while/cond", str(e))


# -- jax.jit around a user function ------------------------------------------------

def is_jit_wrapper(f) -> bool:
    """Is ``f`` what ``jax.jit(fn)`` returns, around a Python callable (``__wrapped__``)?
    (Told by the type's name: ``PjitFunction`` in every release since 0.4.)"""
    return type(f).__name__ == "PjitFunction" and callable(getattr(f, "__wrapped__", None))


def jit_options(f):
    """The keyword arguments ``jax.jit`` was given for ``f`` that matter inside another
    trace (static and donated arguments, ``keep_unused``, ``inline``), read from its
    private ``_jit_info`` (0.4.3x-0.11); None where that is missing or where ``f`` was given
    shardings, layouts, a device or compiler options, which could not be given again
    faithfully (``jax.jit(f)`` of a converted ``f`` is then not made)."""
    info = getattr(f, "_jit_info", None)
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


def dce_for_display(closed_jaxpr):
    """``closed_jaxpr`` without the equations (and loop carries) whose results nothing
    uses, its inputs as they were: what ``autoflow explain`` prints (a traced function
    computes values it then drops, such as a loop test tried before the loop is
    staged; XLA drops them too). The jaxpr as it is where JAX's internals differ."""
    try:
        jaxpr = closed_jaxpr.jaxpr
        rules = _pe.dce_rules
        previous = rules.get(while_p, None) if while_p is not None else None
        if while_p is not None:
            rules[while_p] = _while_dce_rule
        try:
            new, _ = _pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars), instantiate=True)
        finally:
            if while_p is not None:
                if previous is None:
                    rules.pop(while_p, None)
                else:
                    rules[while_p] = previous
            # (DCE results are cached per jaxpr: none made with this rule stays behind)
            getattr(getattr(_pe, "_dce_jaxpr", None), "cache_clear", lambda: None)()
        return ClosedJaxpr(new, closed_jaxpr.consts)
    except Exception:  # noqa: BLE001 - only what is shown: show it all
        return closed_jaxpr


# -- inputs made while a loop body is traced ------------------------------------------

def _body_input_maker():
    try:
        trace_type = _pe.DynamicJaxprTrace
        params = list(inspect.signature(trace_type.new_arg).parameters)
        if params != ["self", "aval", "source_info"]:
            return _lose("body inputs", f"DynamicJaxprTrace.new_arg{tuple(params[1:])}")
    except (NameError, AttributeError, TypeError, ValueError) as e:
        return _lose("body inputs", str(e))

    def new_input(trace, shape, dtype):
        if type(trace) is not trace_type:
            return None
        return trace.new_arg(ShapedArray(tuple(shape), dtype), _source_info_util.current())
    return new_input


new_input = _body_input_maker()


# -- an `if` staged inside a custom_jvp / custom_vjp rule --------------------------------

_CUSTOM_DERIVATIVES = os.path.join("jax", "_src", "custom_derivatives.py")


def in_custom_rule(depth=2) -> bool:
    """May JAX partially evaluate what is staged here with some operands unknown
    (a ``jax.custom_jvp``/``custom_vjp`` rule, or a ``JaxprTrace``)? Told by the
    trace, or by the frames of JAX's custom derivatives module (the rule may be
    traced to a jaxpr first, under ``jit``)."""
    if current_trace_kind() == "JaxprTrace":
        return True
    frame = sys._getframe(depth)
    for _ in range(200):
        if frame is None:
            return False
        if frame.f_code.co_filename.endswith(_CUSTOM_DERIVATIVES):
            return True
        frame = frame.f_back
    return False


# -- autoflow's own primitives (hijax) --------------------------------------------------

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


HiPrimitive, _hi = _hijax()
PRIMITIVES = bool(_hi) and JAXPRS  # (selfcheck may turn it off)
_named = {}  # class name -> the Primitive its equations are staged as
_tables = None  # JAX's rule tables holding call_hi_primitive (_rule_tables)


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


def name_primitives(classes) -> bool:
    """Give each of ``classes`` a ``core.Primitive`` of its own, named by its
    ``primitive_name``, with every rule JAX has for ``call_hi_primitive`` (so
    ``make_jaxpr`` and HLO op names read ``while_loop``, not ``call_hi_primitive``)."""
    if not PRIMITIVES or "lowering" not in _rules:
        return False
    if not all(hasattr(_hi, n) for n in ("tree_leaves_checked", "tree_unflatten")):
        return _lose("named", "hijax.tree_leaves_checked moved") or False
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

    global _direct
    _direct = _direct_lowering()
    located = _op_location()

    def lowering(ctx, *args, _prim):
        direct = _direct if DIRECT else None
        if direct is not None and _low(_prim) and not _prim.effects:
            low_form = getattr(_prim, "low_form", None)
            form = None if low_form is None else low_form(
                platforms=tuple(getattr(ctx.module_context, "platforms", ())))
            if form is not None:
                try:
                    # (a select is named as `jnp.where`'s `select_n`)
                    with located(ctx, {"while": while_p, "cond": cond_p,
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
                    _lose("direct lowering", f"{type(e).__name__}: {e}")
                    if on_loss is not None:
                        on_loss()
                    out = None
                if out is not None:
                    return out
        with located(ctx, None):
            return traced(ctx, *args, _prim=_prim)

    return dict(is_high=is_high, impl=impl, staging_for=staging_for, lowering=lowering,
                register=mlir.register_lowering)


def _op_location():
    """``located(ctx, jax_prim)``: a context in which the ops emitted for one of
    autoflow's equations are named as JAX names its own: ``jit(f)/while`` for a loop
    emitted as JAX's ``while`` (``jax_prim``), ``jit(f)`` for what a traced ``expand``
    emits (its equations add their own names). Without it the ops sit under the
    equation's name (``jit(f)/while_loop``), and XLA names the fused ops of a loop body
    ``jit(f)/while_loop/jit(f)/while/body/add``, where hand-written ``lax`` gives
    ``jit(f)/while/body/add`` (what a profiler shows). JAX's own location, unchanged,
    where ``mlir.source_info_to_location`` differs."""
    import contextlib

    try:
        from jax._src.interpreters import mlir

        to_location = mlir.source_info_to_location
        if list(inspect.signature(to_location).parameters)[:4] != [
                "ctx", "primitive", "name_stack", "traceback"]:
            raise TypeError("mlir.source_info_to_location changed")
    except (ImportError, AttributeError, TypeError, ValueError):
        return lambda ctx, prim: contextlib.nullcontext()

    def located(ctx, prim):
        try:
            return to_location(ctx.module_context, prim, ctx.name_stack, ctx.traceback)
        except Exception:  # noqa: BLE001 - only names: keep JAX's own
            return contextlib.nullcontext()
    return located


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
    try:
        frame = _source_info_util.user_frame(getattr(prim, "source_info").traceback)
        if frame is not None:
            where = f"the statement at {frame.file_name}:{frame.start_line}"
    except Exception:  # noqa: BLE001 - JAX's traceback API changed: no line
        pass
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
    if not PRIMITIVES:
        return False
    rules = _low_rules()
    if rules is None:
        return False
    _rules.update(rules)
    _install_rules(_hi.call_hi_primitive_p)
    return True


def _direct_lowering():
    """``emit(ctx, args, form)``: the MLIR of a primitive's ``low_form`` (a ``while``,
    a ``cond`` or a select of two branch jaxprs) with JAX's own rules, without
    tracing ``expand`` into a jaxpr first (None: then it is traced)."""
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

    return emit


# -- jax.checkpoint (remat) around a loop's JVP -----------------------------------------

def install_remat_rule(split):
    """Give ``call_hi_primitive`` (and the named primitives) a
    ``partial_eval_jaxpr_custom`` rule: ``split(saveable, unks_in, inst_in, eqn)`` for
    the equations it returns non-None for; JAX's behaviour without a rule otherwise."""
    try:
        rules = _pe.partial_eval_jaxpr_custom_rules
        for name in ("new_jaxpr_eqn", "ensure_enum", "RecomputeType"):
            getattr(_pe, name)
    except (AttributeError, NameError) as e:
        return _lose("remat", str(e))
    prims = [_hi.call_hi_primitive_p, *_named.values()]
    previous = rules.get(prims[0])
    if getattr(previous, "autoflow", False):
        previous = previous.previous

    def rule(saveable, unks_in, inst_in, eqn):
        out = split(saveable, unks_in, inst_in, eqn)
        if out is not None:
            return out
        if previous is not None:  # (another library's rule for call_hi_primitive)
            return previous(saveable, unks_in, inst_in, eqn)
        return default_partial_eval(saveable, unks_in, inst_in, eqn)

    rule.autoflow, rule.previous = True, previous
    for p in prims:
        rules[p] = rule
    return True


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
