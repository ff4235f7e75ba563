"""autoflow's own primitives in JAX (hijax): bound, named, staged, lowered, rematerialized.

The hijax base class (``HiPrimitive``) the ``if`` and loop primitives subclass
(``primitives``), a ``core.Primitive`` of their own per construct (``named``), the
rules that stage them as low equations and lower a ``low_form`` directly (``direct
lowering``, ``op names``), the ``partial_eval_jaxpr_custom`` rule for
``jax.checkpoint`` (``remat``), and a jaxpr interpreted without autoflow's effects
(``eval_without``).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import inspect
import sys
import threading

import jax
import numpy as np

from . import private
from .paths import _check, _lose, _lose_late, _why, lost, primitives
from .traces import _core, _user_line
from . import callbacks, jaxprs
from .jaxprs import has_effects


def eval_without(jaxpr, consts, args, skip, rewrite):
    """Interpret ``jaxpr``, leaving out equations whose primitive is named in
    ``skip`` (and autoflow's effects) and passing each equation's params through
    ``rewrite(params)``."""
    env = {}

    def read(v):
        return v.val if isinstance(v, jaxprs.Literal) else env[v]

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
        hijax = private.hijax()
        hijax.call_hi_primitive_p, hijax._call_hi_primitive_to_lojax  # noqa: B018
        jaxprs._pe.custom_staging_rules[hijax.call_hi_primitive_p]  # noqa: B018
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
    jaxprs._find_jaxprs()
    HiPrimitive, _hi = _hijax()


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
            if not name.startswith(private.PREFIX) or module is None:
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
        mlir = private.interpreters_mlir()

        p = _hi.call_hi_primitive_p
        expand = _hi._call_hi_primitive_to_lojax
        orig_is_high, orig_staging, orig_impl = p.is_high, jaxprs._pe.custom_staging_rules[p], p.impl
        traced = mlir.lower_fun(expand, multiple_results=True)
    except (ImportError, AttributeError, KeyError, TypeError) as e:
        return _lose("primitives", f"low staging: {e}")

    def is_high(*avals, _prim):
        return False if _low(_prim) else orig_is_high(*avals, _prim=_prim)

    def impl(*args_flat, _prim):
        if not _low(_prim):
            return orig_impl(*args_flat, _prim=_prim)
        try:
            if _prim.effects or jax.config.jax_disable_jit:
                return expand(*args_flat, _prim=_prim)
            return _eager_compiled(functools.partial(expand, _prim=_prim), args_flat)
        except Exception as e:  # noqa: BLE001 - (`vmap` without `jit`): a staged `raise`
            # that failed in the compiled loop is the user's exception, as under `jit`
            user = callbacks.users_exception(e)
            if user is None:
                raise
            raise user from None

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
                    with _located(ctx, {"while": jaxprs.while_p, "cond": jaxprs.cond_p,
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


# Outside `jit` (`vmap` or `grad` of a converted function, run eagerly) JAX evaluates an
# autoflow equation by its `impl`, with arrays. Its expansion is compiled whole, once
# per distinct program: evaluated op by op, each `cond` and loop in it would be compiled
# on its own at every call, their jaxprs being new at every call (as JAX's own loops
# made of closures are: a `vmap` of `grad` of a Newton iteration recompiled four loops,
# 1.3 s, each call). The key is the lowered program's text (its constants printed in
# full) with the arguments' and results' types: two expansions with the same key compute
# the same thing. Equations with effects (a `print`, a check) run op by op, as before.
_EAGER_CACHE: collections.OrderedDict = collections.OrderedDict()
EAGER_CACHE_SIZE = 32
_eager_lock = threading.Lock()  # (calls from several threads share the cache)


def _types(values):
    return tuple((jax.typeof(v), getattr(v, "sharding", None)) for v in values)


def _eager_compiled(fn, args):
    lowered = jax.jit(fn).lower(*args)  # (an error of the user's program is raised here)
    try:
        outs = tuple((o.shape, o.dtype, getattr(o, "weak_type", None))
                     for o in jax.tree_util.tree_leaves(lowered.out_info))
        key = (lowered.as_text(), _types(args), outs)
    except AttributeError:  # (a JAX without these public names: compiled, not kept)
        return lowered.compile()(*args)
    with _eager_lock:
        compiled = _EAGER_CACHE.get(key)
        if compiled is not None:
            _EAGER_CACHE.move_to_end(key)
    if compiled is None:
        compiled = lowered.compile()
        with _eager_lock:
            _EAGER_CACHE[key] = compiled
            while len(_EAGER_CACHE) > EAGER_CACHE_SIZE:
                _EAGER_CACHE.popitem(last=False)
    return compiled(*args)


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
        mlir = private.interpreters_mlir()

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
    from ...errors import InternalError

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
    jaxprs._pe.custom_staging_rules[p] = _rules["staging_for"](p)
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
        mlir = private.interpreters_mlir()
        hlo = private.lib_mlir_dialects_hlo()

        mlir.convert_hlo  # noqa: B018
        rules_of, subcomp = mlir._get_lowering_rules, mlir.jaxpr_subcomp
        if len(inspect.signature(rules_of).parameters) != 3 or jaxprs.while_p is None:
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
            jaxpr = jaxprs._pe.dce_jaxpr(jaxpr, used, instantiate=True)[0]
        extra = {"outer_traceback": ctx.traceback} if with_traceback else {}
        out, _ = subcomp(ctx.module_context, jaxpr, ctx.name_stack, ctx.tokens_in, [],
                         *operands, dim_var_values=ctx.dim_var_values,
                         const_lowering=ctx.const_lowering, **extra)
        return iter(out)

    def emit(ctx, args, form):
        kind = form[0]
        if kind == "while":
            lower = rule(ctx, jaxprs.while_p)
            return None if lower is None else lower(ctx, *args, **form[1])
        if kind == "cond":  # the predicate as the index of JAX's cond
            lower = rule(ctx, jaxprs.cond_p)
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

_remat_split = None  # the rule's `split` (loops.while_primitive's), for `recheck`


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
        rules = jaxprs._pe.partial_eval_jaxpr_custom_rules
        for name in ("new_jaxpr_eqn", "ensure_enum", "RecomputeType"):
            getattr(jaxprs._pe, name)
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
    rules = getattr(jaxprs._pe, "partial_eval_jaxpr_custom_rules", None)
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
    return jaxprs._pe.new_jaxpr_eqn(invars, outvars, primitive_of(prim), dict(_prim=prim), effects,
                             like.source_info, like.ctx)


def residuals(eqn, inst_in):
    """The operands of ``eqn`` a staged equation reads from the known side."""
    return [v for v, inst in zip(eqn.invars, inst_in) if type(v) is jaxprs.Var and not inst]


def default_partial_eval(saveable, unks_in, inst_in, eqn):
    """What ``partial_eval_jaxpr_custom`` does with an equation of a primitive with no rule."""
    n = len(eqn.outvars)
    res = residuals(eqn, inst_in)
    if any(unks_in):
        return None, eqn, [True] * n, [True] * n, res
    policy = jaxprs._pe.ensure_enum(saveable(eqn.primitive, *[v.aval for v in eqn.invars],
                                      **eqn.params))
    if has_effects(eqn.effects) or not isinstance(policy, jaxprs._pe.RecomputeType):
        return eqn, None, [False] * n, [False] * n, []
    return eqn, eqn, [False] * n, [True] * n, res


def is_high(jaxpr) -> bool:
    """Is a traced jaxpr "high" (so ``jax.jit`` would dispatch it from Python)?"""
    return bool(getattr(jaxpr, "is_high", False))
