"""Python's vocabulary on traced values: builtins, comprehensions, tables, strings, calls.

Each function is the plain Python operation when its arguments are concrete, and
the ``jnp`` equivalent when one of them is traced:

* ``builtins``: ``max``, ``min``, ``sum``, ``sorted``, ``any``, ``all``, ``int``,
  ``float``, ``bool``, list methods (``index``, ``count``, ``sort``), bit counts;
* ``comprehensions``: the same reductions (and ``len``) of a comprehension with an
  ``if`` (``filtered``, ``generated``);
* ``tables``: Python tables indexed by traced integers (``getitem``, ``get``);
* ``match``: ``match`` on traced values; ``maths``, ``floats``, ``integers``: ``math``'s
  functions of traced values;
* ``logical``: ``and``/``or``/``not``, chained comparisons, ``in``;
* ``strings``: strings made from traced values (``str``, f-strings, ``%``...), with
  ``string_values`` (``String``), ``text`` (``Text``) and ``formatting``;
* ``calls``: converting what converted code calls, lazily, and only user code;
  ``through``: user methods that library code calls.
"""

from .builtins import all, any, bit_count, bit_length, bool, count, float, index, int, max, min, sort, sorted, sum
from .calls import bound, call, converted, function_arg, truth
from .comprehensions import filtered, generated, len  # noqa: A004
from .logical import and_, compare, contains, not_, or_, python_condition, python_operand
from .match import (match_attribute, match_class, match_is, match_mapping, match_mapping_rest, match_rest,
                    match_sequence, match_subject)
from .strings import ascii, bin, chr, format, fstring, hex, join, oct, ord, percent, repr, str  # noqa: A004
from .tables import get, getitem

__all__ = ["all", "and_", "any", "ascii", "bin", "bit_count", "bit_length", "bool", "bound", "call", "chr",
           "compare", "contains", "converted", "count", "function_arg", "filtered", "float", "format", "fstring", "generated",
           "get", "getitem", "hex", "index", "int", "join", "len", "match_attribute", "match_class", "match_is", "match_mapping",
           "match_mapping_rest", "match_rest", "match_sequence", "match_subject", "max", "min",
           "not_", "oct", "or_", "ord", "percent", "python_condition", "python_operand", "repr", "sort",
           "sorted", "str", "sum", "truth"]
