"""autoflow's runtime: the operators converted code calls.

This is the only part of autoflow that imports JAX. Converted code reaches it
through one alias (``af`` unless the user's code already uses that name). One
module per construct (see the layout section of the README):

* ``cond`` (``if``, ``elif`` chains, ``a if c else b``), ``loops`` (``while``,
  ``for`` and their iterables), ``logical`` (``and``/``or``/``not``,
  comparisons), ``vocabulary`` (builtins, tables, list methods and ``match``),
  ``strings`` (strings made from traced values), ``integers`` (``math.gcd``...),
  ``floats`` (``math.sqrt``...), ``effects``
  (``print``, ``assert``, item writes), ``raising`` (``raise``/``try`` when
  traced), ``state`` (attributes, cells and containers), ``calls``;
* how they are staged: ``carries``, ``loop_staging``, the primitives
  ``cond_prim`` (with its cost rule, ``cond_cost``) and ``while_prim`` (with
  ``checkpointing`` for reverse mode), ``lanes`` (masks under ``vmap``),
  ``coupling`` (what a traced ``if`` and a staged loop tell each other);
* ``values`` (traced or concrete, ``Undefined``), ``events`` (for ``explain``),
  ``teach`` (JAX's errors in the user's terms), ``loopdebug``;
* ``jax_internals``: every private JAX name, and ``selfcheck``: whether they work.
"""

# (Importing jax_internals hides autoflow's own frames from tracebacks that pass
# through JAX, as JAX does for its internals.)
from .calls import bound, call, converted, truth
from .cond import if_chain, if_exp, if_stmt
from .effects import append, assert_, print, setitem, setitem_in  # noqa: A004
from .later import ld
from .logical import and_, compare, contains, not_, or_, python_condition, python_operand
from .loops import enumerate, for_stmt, range, reversed, roll, unroll, while_stmt, zip  # noqa: A004
from .raising import exception, passthrough as _passthrough
from .strings import ascii, bin, chr, format, fstring, hex, join, oct, ord, percent, repr, str  # noqa: A004
from .state import mutates, mutates_global, rebinds_global, rebinds_nonlocal, state
from .values import Undefined
from .vocabulary import (all, any, bit_count, bit_length, bool, count, filtered, float, generated, get, getitem, index, int, len,  # noqa: A004
                         match_is, match_subject, max, min, sort, sorted, sum)

internal_errors = _passthrough()

__all__ = ["Undefined", "and_", "append", "assert_", "bound", "call", "compare", "contains", "converted",
           "enumerate", "exception", "filtered", "generated", "get", "fstring", "percent", "repr", "str", "ascii", "format", "bin", "hex", "oct", "chr", "ord", "join", "getitem", "match_is", "match_subject", "max", "min", "sum", "sort", "sorted", "count", "index", "bit_length", "bit_count", "any", "all",
           "int", "float", "bool", "len", "truth", "for_stmt", "if_chain", "if_exp", "if_stmt", "internal_errors", "ld", "mutates", "mutates_global", "not_", "or_", "print",
           "python_condition", "python_operand", "range", "rebinds_global", "rebinds_nonlocal", "reversed", "roll", "setitem", "setitem_in", "state", "unroll", "while_stmt", "zip"]
