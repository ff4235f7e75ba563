"""Jaxprs and avals: the ground autoflow's primitives stand on.

JAX's jaxpr classes and helpers (``ClosedJaxpr``, ``Var``, ``typeof``, ``eval_jaxpr``,
``eval_inlined``...), the params of JAX's own equations the cost model reads
(``dot_contracting_dims``, ``while_cond_jaxpr``: ``cost model``), a weakly typed
conversion (``weak types``), JAX's ``while_p``/``cond_p`` (``bind while/cond``), the
jaxpr ``autoflow explain`` prints without dead code (``explain dce``), and the inputs
made while a loop body is traced (``body inputs``).
"""

from __future__ import annotations

import dataclasses

import inspect

import jax
import numpy as np

from . import private
from .paths import _check, _lose, _lose_late, _why, lost
from .traces import _core


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
        ad_util = private.ad_util()
        batching = private.interpreters_batching()
        pe = private.interpreters_partial_eval()

        _pe, _ad_util, _batching = pe, ad_util, batching
        # (JAX 0.12 merged `ClosedJaxpr` into `Jaxpr`: a jaxpr carries its consts, and
        # `Jaxpr(jaxpr, consts)` and `.jaxpr`/`.consts` keep the closed jaxpr's meaning)
        closed = getattr(_core, "ClosedJaxpr", None) or _core.Jaxpr
        found = (closed, _core.Jaxpr, _core.Literal, _core.Var, _core.ShapedArray,
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
    return _named_inputs(jaxpr), tuple(consts)


def _named_inputs(jaxpr):
    """``jaxpr`` with a name (blank) for each input its trace made after the arguments
    (``body inputs``): JAX 0.12 checks that a jaxpr's argument names match its inputs."""
    info = getattr(jaxpr, "debug_info", None)
    names = getattr(info, "arg_names", None)
    if names is None or len(names) >= len(jaxpr.invars):
        return jaxpr
    try:
        return jaxpr.replace(debug_info=info._replace(
            arg_names=tuple(names) + ("",) * (len(jaxpr.invars) - len(names))))
    except (AttributeError, TypeError, ValueError):  # pragma: no cover - another JAX
        return jaxpr


def linear_values(jaxpr):
    """``jaxpr`` (a ``Jaxpr``) with each ``stop_gradient`` read as its operand, and its
    dead equations dropped: the same values, as a map ``jax.linear_transpose`` can
    transpose (a ``stop_gradient`` only stops derivatives; JAX's batching of a branch
    leaves some where the values are linear, e.g. ``select_n(p, stop_gradient(x), x)``).
    None where this JAX's jaxprs cannot be rewritten so."""
    try:
        same = {}
        eqns = []
        for e in jaxpr.eqns:
            invars = [same.get(v, v) if isinstance(v, Var) else v for v in e.invars]
            if e.primitive.name == "stop_gradient" and isinstance(invars[0], Var):
                same[e.outvars[0]] = invars[0]
                continue
            eqns.append(e.replace(invars=invars))
        outvars = [same.get(v, v) if isinstance(v, Var) else v for v in jaxpr.outvars]
        return live_equations(jaxpr.replace(eqns=eqns, outvars=outvars))
    except (AttributeError, TypeError, AssertionError, ValueError):  # pragma: no cover - another JAX
        return None


def live_equations(jaxpr):
    """``jaxpr`` (a ``Jaxpr``) without the equations none of its outputs reads; its inputs
    kept, read or not."""
    used, _ = dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars), instantiate=True)
    return used.replace(invars=list(jaxpr.invars))


def with_inputs(jaxpr, invars):
    """``jaxpr`` with the inputs ``invars`` (Vars or avals for inputs it does not read);
    None where a jaxpr cannot be given other inputs."""
    try:
        return jaxpr.replace(invars=[v if isinstance(v, Var) else Var(v) for v in invars])
    except (AttributeError, TypeError, AssertionError):  # pragma: no cover - another JAX
        return None


def output_sources(jaxpr, varying, inexact=False):
    """For each output of ``jaxpr`` (a ``Jaxpr`` or ``ClosedJaxpr``): ``(k, depends)``, ``k``
    the position of the input it is (None: it is computed, or a literal) and ``depends``
    whether it reads, directly or not, an input at a position in ``varying`` (an equation
    with jaxprs in it is taken to make each of its outputs read all its inputs).
    ``inexact``: read through values of inexact dtypes only (what a cotangent flows
    through: not a comparison's booleans, a select's predicate, an integer)."""
    if isinstance(jaxpr, ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    position = {v: k for k, v in enumerate(jaxpr.invars)}
    seen = {v for k, v in enumerate(jaxpr.invars) if k in set(varying)}
    for e in jaxpr.eqns:
        if any(isinstance(v, Var) and v in seen for v in e.invars):
            seen.update(v for v in e.outvars if not inexact or _is_inexact(v))
    return tuple((position.get(v) if isinstance(v, Var) else None,
                  isinstance(v, Var) and v in seen) for v in jaxpr.outvars)


def _is_inexact(v) -> bool:
    dtype = getattr(getattr(v, "aval", None), "dtype", None)
    return dtype is not None and jax.numpy.issubdtype(dtype, jax.numpy.inexact)


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


# -- weak types --------------------------------------------------------------------

_convert_weak = None


@_check("weak types")
def _find_weak_converter():
    global _convert_weak
    _convert_weak = None
    try:
        convert = private.lax_lax_convert_element_type()
        if "weak_type" not in inspect.signature(convert).parameters:
            return _lose("weak types", "lax._convert_element_type has no weak_type")
    except (ImportError, AttributeError, TypeError, ValueError) as e:
        return _lose("weak types", str(e))
    _convert_weak = convert
    return None




def convert_weak(x, dtype):
    """``x`` as ``dtype``, weakly typed (as a Python scalar is: a loop carry that started
    as one keeps combining with a float16 array as float16). Without the private
    converter, strongly typed (``lax.convert_element_type``: the dtype of what it
    combines with may then be wider than Python's)."""
    if _convert_weak is None:
        return jax.lax.convert_element_type(x, dtype)
    return _convert_weak(x, dtype, weak_type=True)


# -- symbolic zero cotangents --------------------------------------------------------


def _symbolic_zero(aval):
    """JAX's symbolic zero cotangent of ``aval``'s values (``symbolic zeros``)."""
    return Zero(aval.to_ct_aval())


@_check("symbolic zeros")
def _check_symbolic_zeros():
    def pulled(x):
        _, pull = jax.vjp(lambda v: (v, jax.numpy.sqrt(v)), x)
        return pull((x, _symbolic_zero(typeof(x))))
    try:
        jax.make_jaxpr(pulled)(np.float32(0.0))
    except Exception as e:  # noqa: BLE001
        return _lose("symbolic zeros", _why(e))
    return None


def pull_sparse(pullback, cts, zero):
    """``pullback(cts)`` (``pullback`` a function ``jax.vjp`` returned, ``cts`` a tuple),
    the cotangents where ``zero`` holds passed as JAX's symbolic zeros: the pullback
    leaves out what it would have multiplied them by, as JAX's reverse mode does for a
    value nothing differentiates (a zero times an infinite derivative, a norm's at
    zero, is NaN). Where this JAX's pullbacks refuse them (0.4.38: "unexpected tree
    structure"), the path is lost (said then) and the zeros are passed as arrays."""
    if not any(zero) or "symbolic zeros" in lost or Zero is Missing:
        return pullback(cts)
    try:
        sparse = tuple(_symbolic_zero(typeof(c)) if z else c for c, z in zip(cts, zero))
        return pullback(sparse)
    except (TypeError, ValueError, AttributeError) as e:
        _lose_late("symbolic zeros", _why(e))
    return pullback(cts)


# -- JAX's own loop and conditional primitives, bound with jaxprs already traced ------

while_p = cond_p = None


@_check("bind while/cond")
def _find_bind():
    global while_p, cond_p
    try:
        cond_p = private.lax_control_flow_conditionals_cond_p()
        while_p = private.lax_control_flow_loops_while_p()
    except ImportError as e:
        while_p = cond_p = _lose("bind while/cond", str(e))




# -- dead code left out of a jaxpr shown to people (`autoflow explain`) ---------------

def _while_dce_rule(used_outs, *rest):
    """Dead-code elimination of a ``while`` equation's carries: a carry stays when its
    result is used, the condition reads it, or the body reads it to compute one that
    stays (JAX keeps every carry of a ``while``). Its constants are kept. ``rest``: the
    equation, after (from JAX 0.12) which of its inputs are live."""
    eqn = rest[-1]
    live = rest[:-1]  # (passed on to `has_effects` where JAX gave it)
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
    if not any(need) and not _pe.has_effects(eqn, *live):
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
        source_info_util = private.source_info_util()
        trace_type = _pe.DynamicJaxprTrace
        params = list(inspect.signature(trace_type.new_arg).parameters)
        if params != ["self", "aval", "source_info"]:
            return _lose("body inputs", f"DynamicJaxprTrace.new_arg{tuple(params[1:])}")
        source_info_util.current  # noqa: B018
    except (ImportError, AttributeError, TypeError, ValueError) as e:
        return _lose("body inputs", str(e))

    def make_input(trace, shape, dtype, weak=False):
        if type(trace) is not trace_type:
            return None
        return trace.new_arg(ShapedArray(tuple(shape), dtype, weak_type=weak),
                             source_info_util.current())
    new_input = make_input
    return None


# -- a probe axis: batching that only asks which results are batched ---------------------
class _Probe:
    def __repr__(self):
        return "<autoflow probe axis>"


_PROBE = _Probe()
_AXIS_NAME = "name"  # the field of JAX's AxisData that names the axis


@_check("probe axis")
def _find_probe_axis():
    try:
        names = [f.name for f in dataclasses.fields(_batching.AxisData)]
    except (AttributeError, TypeError) as e:
        return _lose("probe axis", _why(e))
    if _AXIS_NAME not in names:
        return _lose("probe axis", f"AxisData has fields {tuple(names)}")
    return None


def probe_axis(axis_data):
    """``axis_data`` (a batching rule's axis) renamed to autoflow's probe axis: a loop
    batched over it says which of its results are batched and builds nothing else
    (``loops.while_primitive._WhileLoop.batched_carries``). JAX caches batched jaxprs
    by their axis, so what is batched over the probe is never reused for a real
    ``vmap``. None where the path is lost."""
    if "probe axis" in lost:
        return None
    try:
        return dataclasses.replace(axis_data, **{_AXIS_NAME: _PROBE})
    except (TypeError, ValueError) as e:  # pragma: no cover - (the check says so first)
        _lose_late("probe axis", _why(e))
        return None


def is_probe_axis(axis_data):
    """Is ``axis_data`` autoflow's probe axis (``probe_axis``)?"""
    return getattr(axis_data, _AXIS_NAME, None) is _PROBE
