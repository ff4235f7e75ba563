"""autoflow's own primitives (``checkpoint._WhileLoop``, ``lowering._Cond``) as
ordinary equations of a jaxpr, so that ``jax.jit`` keeps its fast path.

They are ``jax.experimental.hijax.VJPHiPrimitive`` subclasses, bound through
JAX's ``call_hi_primitive``. JAX marks every jaxpr holding such an equation
"high" (``is_high``), and ``jax.jit`` never caches a high jaxpr for its C++
dispatch: each call of the jitted function re-enters Python, converts the jaxpr
to a "low" one (``_to_lojax``) and dispatches from Python - 0.3 to 0.6 ms per
call on a CPU, ten to twenty times the run time of a small loop.

Nothing about these primitives needs that: their operands and results are
plain arrays, and their meaning when evaluated or compiled is their
``expand`` (a ``lax.while_loop``, a ``lax.cond`` or a select). So for
instances of a class with ``stage_low = True``:

* ``call_hi_primitive``'s ``is_high`` answers False and its staging rule stages
  the equation without marking the jaxpr high;
* compiling lowers the equation by tracing its ``expand`` (an MLIR lowering
  rule for ``call_hi_primitive``), and evaluating it eagerly runs ``expand``.
  Where the primitive says what it is in JAX's own terms (``low_form``: a
  ``while``, a ``cond`` or a select of two branch jaxprs, which may depend on the
  platform compiled for: scalar branches are a select on a GPU), the rule emits that
  directly, as JAX's rules for ``while``/``cond`` and the branches' own
  equations, instead of tracing ``expand`` into a jaxpr first: the same
  program, without a trace per equation (lowering the natural BFGS of
  ``benchmarks/real_algorithms.py`` took 54 ms with the traces, 34 ms without;
  the library's BFGS, 30 ms).

Every other rule (``vmap``, JVP, linearize, transpose, DCE, remat) is JAX's
own for ``call_hi_primitive`` and does not look at ``is_high``, so those
transformations are unchanged. Other libraries' hijax primitives (without
``stage_low``) keep JAX's behaviour exactly. Where JAX's internals differ from
what this expects, nothing is installed and the primitives stay high (slower
calls, same results).
"""

from __future__ import annotations

_installed = None
# Lower the primitives that have a ``low_form`` without tracing their ``expand``
# (tests compare the two lowerings).
DIRECT = True


def _low(prim) -> bool:
    return getattr(prim, "stage_low", False)


def installed() -> bool:
    """Do ``stage_low`` primitives stage as low equations in this process?"""
    return bool(_installed)


def install() -> bool:
    """Make ``stage_low`` primitives stage as low equations (once per process)."""
    global _installed
    if _installed is not None:
        return _installed
    _installed = False
    try:
        from jax._src import hijax
        from jax._src.interpreters import mlir
        from jax._src.interpreters import partial_eval as pe

        p = hijax.call_hi_primitive_p
        expand = hijax._call_hi_primitive_to_lojax
        orig_is_high = p.is_high
        orig_staging = pe.custom_staging_rules[p]
        orig_impl = p.impl
    except (ImportError, AttributeError, KeyError):  # pragma: no cover - other JAX
        return False

    def is_high(*avals, _prim):
        if _low(_prim):
            return False
        return orig_is_high(*avals, _prim=_prim)

    def staging(trace, source_info, *args_flat, _prim):
        if _low(_prim):
            return trace.default_process_primitive(p, args_flat, dict(_prim=_prim),
                                                   source_info)
        return orig_staging(trace, source_info, *args_flat, _prim=_prim)

    def impl(*args_flat, _prim):
        if _low(_prim):
            return expand(*args_flat, _prim=_prim)
        return orig_impl(*args_flat, _prim=_prim)

    traced = mlir.lower_fun(expand, multiple_results=True)
    direct = _direct_lowering()

    def lowering(ctx, *args, _prim):
        if DIRECT and direct is not None and _low(_prim) and not _prim.effects:
            low_form = getattr(_prim, "low_form", None)
            form = None if low_form is None else low_form(
                platforms=tuple(getattr(ctx.module_context, "platforms", ())))
            if form is not None:
                out = direct(ctx, args, form)
                if out is not None:
                    return out
        return traced(ctx, *args, _prim=_prim)

    p.is_high = is_high
    pe.custom_staging_rules[p] = staging
    p.def_impl(impl)
    mlir.register_lowering(p, lowering)
    _installed = True
    return True


def _direct_lowering():
    """``emit(ctx, args, form)``: the MLIR of a primitive's ``low_form`` (None
    where it cannot be emitted directly: then its ``expand`` is traced), or None
    where JAX's lowering internals are not the ones this was written for."""
    try:
        import inspect

        import numpy as np
        from jax._src import core
        from jax._src.interpreters import mlir
        from jax._src.interpreters import partial_eval as pe
        from jax._src.lax.control_flow.conditionals import cond_p
        from jax._src.lax.control_flow.loops import while_p
        from jax._src.lib.mlir.dialects import hlo

        mlir.convert_hlo  # noqa: B018
        rules_of = mlir._get_lowering_rules
        if len(inspect.signature(rules_of).parameters) != 3:
            return None
        subcomp = mlir.jaxpr_subcomp
        keywords = set(inspect.signature(subcomp).parameters)
        if not {"dim_var_values", "const_lowering"} <= keywords:
            return None
        with_traceback = "outer_traceback" in keywords
        ctx_fields = {"avals_in", "module_context", "name_stack", "tokens_in", "traceback",
                      "dim_var_values", "const_lowering", "jaxpr_eqn_ctx"}
        if not ctx_fields <= set(getattr(mlir.LoweringRuleContext, "__dataclass_fields__", ())):
            return None
        int32 = core.ShapedArray((), np.dtype(np.int32))
    except (ImportError, AttributeError, KeyError, TypeError, ValueError):  # pragma: no cover
        return None

    def rule(ctx, prim):
        """JAX's lowering rule for ``prim`` here: the one its own lowering would
        use (an override, else the common rule), or None if it has one per platform."""
        per_platform, common, _ = rules_of(ctx.module_context, prim, ctx.jaxpr_eqn_ctx)
        return None if per_platform else common

    def branch(ctx, closed, operands, used):
        """The MLIR of a branch's outputs that are ``used`` (the others' equations
        left out, as tracing ``expand`` leaves them out)."""
        jaxpr = closed.jaxpr
        if not all(used):
            jaxpr = pe.dce_jaxpr(jaxpr, used, instantiate=True)[0]
        extra = {"outer_traceback": ctx.traceback} if with_traceback else {}
        out, _ = subcomp(ctx.module_context, jaxpr, ctx.name_stack, ctx.tokens_in, [],
                         *operands, dim_var_values=ctx.dim_var_values,
                         const_lowering=ctx.const_lowering, **extra)
        return iter(out)

    def emit(ctx, args, form):
        kind = form[0]
        if kind == "while":  # (while, params): JAX's rule, on the same operands
            lower = rule(ctx, while_p)
            return None if lower is None else lower(ctx, *args, **form[1])
        if kind == "cond":  # (cond, branches): the predicate as the index of JAX's cond
            lower = rule(ctx, cond_p)
            if lower is None:
                return None
            index = mlir.convert_hlo(ctx, args[0], ctx.avals_in[0], int32)
            sub = ctx.replace(avals_in=[int32, *ctx.avals_in[1:]])
            return lower(sub, index, *args[1:], branches=form[1])
        if kind == "select":  # (select, true, false, n true operands, free outputs)
            _, t, f, n, free = form
            pred, outs = args[0], range(len(t.out_avals))
            t_out = branch(ctx, t, args[1:1 + n], [True] * len(outs))
            f_out = branch(ctx, f, args[1 + n:], [i not in free for i in outs])
            return [next(t_out) if i in free else hlo.select(pred, next(t_out), next(f_out))
                    for i in outs]
        return None

    return emit
