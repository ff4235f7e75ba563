"""autoflow's one boundary with JAX's private API.

Everything autoflow takes from JAX below its documented API (``jax``, ``jax.lax``,
``jax.numpy``, ``jax.tree_util``, ``jax.errors``) is in this package and nowhere else:
JAX's private modules, ``jax.experimental.hijax``, lowering and partial-evaluation rules,
jaxpr objects and the params of their equations, the classes of JAX's traces, the
texts of JAX's error messages. The rest of autoflow imports this package (as ``jx``)
and asks it small named questions (``is_linearizing()``, ``hijax_prim_of(eqn)``,
``is_drop_var(v)``, ``matches_jax_error(kind, text)``, ``primitives()``...):

* ``paths``: the table of these private paths, as data (``PATHS``), what is lost
  (``lost``), ``recheck`` and ``primitives()``;
* ``traces``: the trace state, autoflow's frames in tracebacks, reverse mode, a
  thunk traced to a jaxpr, a staged block's parent trace, custom-derivative rules;
* ``jaxprs``: jaxpr classes and helpers, the params the cost model reads, weak types,
  JAX's ``while_p``/``cond_p``, dead code left out for ``autoflow explain``;
* ``hijax``: autoflow's own primitives, named, staged low, lowered directly, remat;
* ``texts``: JAX's error messages as autoflow reads them; ``callbacks``: the ordered
  effect, the loggers and the run-time error of a failed callback; ``jit``: what
  ``jax.jit(f)`` returns;
* ``private``: the one file that names JAX's private modules, each import a function
  the others call where they import it;
* ``selfcheck``: whether the paths work on this JAX (``autoflow doctor``), imported
  by the primitives that stand on them.

``PATHS`` is the table of the private paths, as data: for each, the private names it
reads, the JAX releases it is known to work on, the public path autoflow takes
without it, what a user loses then, and when it is checked. A path that is missing
or has another shape is recorded in ``lost`` (its key, and why), and the code that
uses it takes the public path. The checks (``recheck``) run when this package is
imported (below, in this order), at the first staged ``if`` or loop (``selfcheck``),
or only in the full check (``autoflow doctor``, ``selfcheck.report()``); a path that
fails while a program is lowered is lost then. ``selfcheck.warn_lost`` says once, from
the rows, what is lost and which JAX has all of it; ``autoflow doctor`` prints the
table with each path on or off and why.

The JAX column: the releases on which ``selfcheck.report()`` finds the path working
(``benchmarks/JAX_MATRIX.md``: the newest patch of each minor from 0.4.38 to 0.10.2 on
Python 3.11, and 0.10.2, 0.11.2 and 0.12.0.1 on Python 3.13, each with every path on
from 0.10.2). The rows this table gained when it
became data (reverse mode, op names, ordered effect, parent trace, callback loggers,
weak types, jit wrapper, explain dce, cost model, error texts, run-time errors) were
checked on 0.4.38 and 0.10.2 only, the two ends CI runs; a range between them is what
the code assumed before. Elsewhere the public path runs.

The names a check may rebind (JAX's classes, the tracer of a thunk, ``DIRECT``...)
are read through this package when asked for (``__getattr__``), so ``jx.ClosedJaxpr``
is always the submodule's current value; a test that changes one patches the
submodule that holds it (``jx.jaxprs``, ``jx.hijax``...).
"""

from __future__ import annotations

from . import callbacks, hijax, jaxprs, jit, paths, texts, traces
from .callbacks import CALLBACK_LOGGER, DEBUGGING_LOGGER, interrupted_in_callback, is_runtime_error, raised_in_callback
from .hijax import (bind, default_partial_eval, eval_without, hijax_prim_of, install_low_staging, install_remat_rule,
                    internal_error, is_high, name_primitives, new_eqn, primitive_of, residuals, unname_primitives,
                    use_direct_lowering)
from .jaxprs import (Missing, closed, consts_as_inputs, convert_weak, dce_for_display, dot_contracting_dims,
                     eval_inlined, eval_jaxpr, has_effects, is_batched, is_drop_var, linear_values, live_equations, output_sources, probe_axis, pull_sparse, is_probe_axis,
                     subjaxprs, trace_fn,
                     while_cond_jaxpr, with_inputs)
from .jit import is_jit_wrapper, jit_options
from .paths import CHECKED, FULL_RANGE, MIN_JAX, NEWEST_TESTED, PATHS, Path, lost, path, primitives, recheck, version
from .texts import JAX_TEXTS, jax_error_argument, jax_error_wants_shape, jax_text, matches_jax_error, shows_tracer
from .traces import (Tracer, check_custom_rules, check_reverse_mode, check_trace_thunk, current_trace, hide_frames_of,
                     encloses, concrete_value, is_concrete, is_constant, is_linearize_tracer, is_linearizing, is_symbolic_dim, of_current_trace,
                     of_traces_around,
                     partially_evaluated,
                     parent_trace, source_here, trace_thunk_problem, tracing, use_public_trace_thunk)

# The rows checked at import, in this order (a check reads what those before it found;
# the trace state, which autoflow cannot do without, was checked when `traces` was).
traces._find_frames()
traces._find_reverse_mode()
traces._find_trace_thunk()
jaxprs._find_weak_converter()
jaxprs._find_bind()
callbacks._find_ordered_effect()
callbacks._find_loggers()
traces._check_parent_trace(probe=False)
jit._find_jit_wrapper()
traces._find_jaxpr_trace()
hijax._find_primitives()
jaxprs._find_body_inputs()
jaxprs._find_dce()
jaxprs._find_probe_axis()

# Names a check may rebind: read from their module each time they are asked for.
_LIVE = {
    **dict.fromkeys(("in_custom_rule", "private_trace_thunk", "trace_thunk"), traces),
    **dict.fromkeys(("BatchTracer", "ClosedJaxpr", "DropVar", "JAXPRS", "Jaxpr", "Literal", "ShapedArray", "Var",
                     "Zero", "batch_jaxpr", "cond_p", "convert_constvars_jaxpr", "dce_jaxpr", "new_input",
                     "typeof", "while_p"), jaxprs),
    **dict.fromkeys(("DIRECT", "HiPrimitive"), hijax),
    "ORDERED_DEBUG": callbacks,
}


def __getattr__(name):
    module = _LIVE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(module, name)


__all__ = [
    "CALLBACK_LOGGER", "CHECKED", "DEBUGGING_LOGGER", "FULL_RANGE", "JAX_TEXTS", "MIN_JAX", "Missing", "NEWEST_TESTED",
    "PATHS", "Path", "Tracer", "bind", "callbacks", "check_custom_rules", "check_reverse_mode", "check_trace_thunk",
    "closed", "consts_as_inputs", "convert_weak", "current_trace", "dce_for_display", "encloses", "default_partial_eval",
    "dot_contracting_dims", "eval_inlined", "eval_jaxpr", "eval_without", "has_effects", "hide_frames_of", "hijax",
    "hijax_prim_of", "install_low_staging", "install_remat_rule", "internal_error", "interrupted_in_callback",
    "concrete_value", "is_batched", "is_concrete", "is_constant", "is_drop_var", "is_high", "is_jit_wrapper", "is_linearize_tracer",
    "is_linearizing", "is_runtime_error", "is_symbolic_dim", "jax_error_argument", "jax_error_wants_shape",
    "jax_text", "jaxprs", "jit", "jit_options", "linear_values", "live_equations", "is_probe_axis", "lost", "matches_jax_error", "name_primitives", "new_eqn",
    "of_current_trace", "of_traces_around", "output_sources", "parent_trace", "partially_evaluated", "path", "paths", "primitive_of", "primitives", "probe_axis", "pull_sparse", "raised_in_callback",
    "recheck", "residuals", "shows_tracer", "source_here", "subjaxprs", "texts", "trace_fn", "trace_thunk_problem",
    "traces", "tracing", "unname_primitives", "use_direct_lowering", "use_public_trace_thunk", "version",
    "while_cond_jaxpr", "with_inputs", *_LIVE,
]
