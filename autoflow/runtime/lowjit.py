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

Every other rule (``vmap``, JVP, linearize, transpose, DCE, remat) is JAX's
own for ``call_hi_primitive`` and does not look at ``is_high``, so those
transformations are unchanged. Other libraries' hijax primitives (without
``stage_low``) keep JAX's behaviour exactly. Where JAX's internals differ from
what this expects, nothing is installed and the primitives stay high (slower
calls, same results).
"""

from __future__ import annotations

_installed = None


def _low(prim) -> bool:
    return getattr(prim, "stage_low", False)


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

    p.is_high = is_high
    pe.custom_staging_rules[p] = staging
    p.def_impl(impl)
    mlir.register_lowering(p, mlir.lower_fun(expand, multiple_results=True))
    _installed = True
    return True
