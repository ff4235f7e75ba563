"""autoflow's runtime: the operators converted code calls.

This is the only part of autoflow that imports JAX. Converted code reaches it
through one alias (``af`` unless the user's code already uses that name), and only
through the names below. One package per construct (see the layout section of the
README), each package's ``__init__`` its entry points:

* ``cond``: ``if``, ``if``/``elif`` chains, ``a if c else b`` (``statements``); the
  ``if`` primitive and its rules (``primitive``); the select-or-cond cost rule
  (``select_or_cond``);
* ``loops``: ``while`` and ``for`` (``statements``), their iterables and traced
  ``range`` (``iterables``, ``ranges``), how a loop is staged (``staging``, ``body``,
  ``flags``), the loop primitive (``while_primitive``) with ``checkpointing`` for
  reverse mode, lane masks under ``vmap`` (``lanes``, ``flat_lanes``), ``debug``
  (``debug_loops=``);
* ``state``: attributes, cells and containers a staged statement changes
  (``shared``, ``writes``, ``scopes``, ``journal``, ``reach``, ``aliasing``,
  ``snapshots``, ``nnx``);
* ``python``: Python's vocabulary on traced values: builtins, comprehensions,
  tables, ``match``, ``math``, ``and``/``or``/``not``, strings, calls;
* ``effects``: ``print``, ``assert``, item writes (``statements``), what happens when
  the compiled code runs (``later``, ``path_condition``, ``primitive``, ``checks``),
  ``raise`` (``raising``), variables a loop may leave unset (``unset``);
* ``common``: what the constructs share: ``values``, ``carries``, ``coupling``,
  ``primitives``, ``events`` (for ``explain``), ``teach`` and ``advice`` (JAX's errors
  in the user's terms);
* ``jax``: the one boundary with JAX's private API (``PATHS``) and its self-check.
"""

# (Importing `jax` hides autoflow's own frames from tracebacks that pass through
# JAX, as JAX does for its internals.)
from .python import (all, and_, any, ascii, bin, bit_count, bit_length, bool, bound, call, chr, compare, contains,
                     converted, count, filtered, float, format, fstring, function_arg, generated, get, getitem, hex, index, int,
                     join, len, match_attribute, match_class, match_is, match_mapping, match_mapping_rest,
                     match_rest, match_sequence, match_subject, max, min, not_, oct, or_, ord, percent, python_condition,
                     python_operand, repr, sort, sorted, str, sum, truth)
from .cond import if_chain, if_exp, if_stmt
from .effects import (append, assert_, checks_after_finally, exception, finally_part, ld, print,  # noqa: A004
                      setitem, setitem_in)
from .effects import passthrough as _passthrough
from .loops import enumerate, for_stmt, range, reversed, roll, unroll, while_stmt, zip  # noqa: A004
from .state import mutates, mutates_global, rebinds_global, rebinds_nonlocal, state
from .common.values import Undefined

internal_errors = _passthrough()

__all__ = ["Undefined", "and_", "append", "assert_", "bound", "call", "checks_after_finally", "finally_part", "compare", "contains", "converted", "function_arg",
           "enumerate", "exception", "filtered", "generated", "get", "fstring", "percent", "repr", "str", "ascii", "format", "bin", "hex", "oct", "chr", "ord", "join", "getitem", "match_attribute", "match_class", "match_is", "match_mapping", "match_mapping_rest", "match_rest", "match_sequence", "match_subject", "max", "min", "sum", "sort", "sorted", "count", "index", "bit_length", "bit_count", "any", "all",
           "int", "float", "bool", "len", "truth", "for_stmt", "if_chain", "if_exp", "if_stmt", "internal_errors", "ld", "mutates", "mutates_global", "not_", "or_", "print",
           "python_condition", "python_operand", "range", "rebinds_global", "rebinds_nonlocal", "reversed", "roll", "setitem", "setitem_in", "state", "unroll", "while_stmt", "zip"]
