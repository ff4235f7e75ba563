"""Strings made from traced values: ``str``, ``repr``, ``format``, ``bin``/``hex``/``oct``,
f-strings, ``"...".format(...)`` and ``%``, anywhere in converted code.

Each is Python's own on concrete values. With a traced value the rewriter's call
(``af.fstring(TEMPLATE, *values)``, ``af.str(x)``...) gives a ``String``: the string
is not made while tracing (a tracer has no digits), and nothing makes the tracer's
own text (``JitTracer(int32[])``) a user's value. What a ``String`` becomes depends
on where it goes:

* to an effect or an exception (``print``, ``warnings.warn``, a logger, a ``raise``'s
  or an ``assert``'s message, directly or through variables): it is made when the
  compiled code runs, from the run-time values, as Python makes it (``later``);
* into a computation (``len(s)``, ``s[::-1]``, ``s == t``, ``int(s)``, ``"7" in s``,
  ``s.count("1")``, ``for c in s:``, ``sum(int(d) for d in s)``...): where its
  characters follow from the traced values with ``jnp`` (the digits of a traced
  integer in any base and format spec, a traced bool's ``True``/``False``, and what
  slicing, joining, padding and stripping make of those), a ``Text``: its characters
  as an array of code points of a fixed capacity and a traced length, on which each
  operation gives Python's result (a traced integer or boolean, or another ``Text``);
  elsewhere (the digits of a traced float, whose shortest ``repr`` ``jnp`` does not
  compute) autoflow's ``ConversionError`` at that line, saying what cannot be known.

Python's errors keep their types: ``int("12-")`` raises ``ValueError`` (with Python's
message, the string shown) when the compiled code runs; ``s[9]`` past the end,
``IndexError``. An integer parsed from a string that does not fit the dtype raises
``OverflowError`` then (Python's integers have no limit). Only ASCII letters, digits
and whitespace are classified (``isdigit``, ``int``, ``upper``, ``strip``): a
non-ASCII character in a computed string counts as none of them.
"""

from __future__ import annotations

import builtins
import operator

import jax
import jax.numpy as jnp

from ...core.origin import message, user_site
from ...errors import ConversionError
from .. import jax as jx
from ..effects import later
from ..effects.checks import fail
from ..common.values import staging as under_trace
from .string_values import String, _I32, _any_traced, _as_text, _need, _traced
from .text import Text, _check, _type_name
from .formatting import _is_int, _join


def _make(fn, args, kwargs=None):
    if _any_traced((args, kwargs)) or builtins.any(isinstance(a, String) for a in args) or (
            kwargs and builtins.any(isinstance(v, String) for v in kwargs.values())):
        return String(fn, args, kwargs)
    out = fn(*args, **(kwargs or {}))
    if isinstance(out, builtins.str) and under_trace() and jx.shows_tracer(out):
        # An object holding traced values that no pytree shows (a dataclass, a user
        # class): its own `__str__`/`__repr__` formatted a tracer. Made when the compiled
        # code runs instead, from a copy holding the run-time values (`later._Holder`).
        held = tuple(later._held(a) for a in args)
        held_kw = {k: later._held(v) for k, v in (kwargs or {}).items()}
        if builtins.any(isinstance(h, later._Holder) for h in (*held, *held_kw.values())):
            return String(fn, held, held_kw)
        raise ConversionError(message(
            user_site(), "this string would show a traced value as a JAX tracer's text, "
            "not its value: an object holding traced values formats them with its own "
            "`__str__`/`__repr__`, while tracing, where only the tracer is known",
            "Format the traced values themselves (`f\"{p.x}\"`: made when the compiled code "
            "runs), register the class as a pytree (`jax.tree_util.register_dataclass`), or "
            "make the string outside the jitted function."))
    return out


def fstring(template, /, *args, **kwargs):
    """``template.format(*args, **kwargs)``: what ``f"..."`` and ``"...".format(...)`` become.

    Plain Python::

        def fstring(template, *args, **kwargs):
            return template.format(*args, **kwargs)

    With a traced value, a ``String`` (see the module's docstring): made when the
    compiled code runs where it is printed or raised, its characters computed where
    code computes with them (format specs honoured either way).
    """
    return _make(builtins.str.format, (template,) + args, kwargs)


def percent(template, values):
    """``template % values`` (``"step %d" % k``), a ``String`` if a value is traced."""
    return _make(operator.mod, (template, values))


def str(*args, **kwargs):  # noqa: A001 - mirrors the builtin
    """``str(x)``, a ``String`` if ``x`` is traced (``str`` of a ``String`` is itself)."""
    if len(args) == 1 and not kwargs and isinstance(args[0], String):
        return args[0]
    return _make(builtins.str, args, kwargs)


def repr(x):  # noqa: A001 - mirrors the builtin
    """``repr(x)``, a ``String`` if ``x`` is traced."""
    return _make(builtins.repr, (x,))


def ascii(x):  # noqa: A001 - mirrors the builtin
    """``ascii(x)``, a ``String`` if ``x`` is traced."""
    return _make(builtins.ascii, (x,))


def format(value, spec="", /):  # noqa: A001 - mirrors the builtin
    """``format(value, spec)``, a ``String`` if ``value`` is traced."""
    if _traced(spec) or isinstance(spec, String):
        raise ConversionError(message(
            user_site(), "`format()` with a format spec made from traced values",
            "Give the spec as a string literal."))
    return _make(builtins.format, (value, spec))


def _integer(name, x):
    if _traced(x) and not _is_int(x):
        raise TypeError(f"'{_type_name(x)}' object cannot be interpreted as an integer")


def bin(x):  # noqa: A001 - mirrors the builtin
    """``bin(x)``, a ``String`` if ``x`` is traced (``'-0b101'``, as Python's)."""
    _integer("bin", x)
    return _make(builtins.bin, (x,))


def oct(x):  # noqa: A001 - mirrors the builtin
    """``oct(x)``, a ``String`` if ``x`` is traced."""
    _integer("oct", x)
    return _make(builtins.oct, (x,))


def hex(x):  # noqa: A001 - mirrors the builtin
    """``hex(x)``, a ``String`` if ``x`` is traced."""
    _integer("hex", x)
    return _make(builtins.hex, (x,))


def chr(i):  # noqa: A001 - mirrors the builtin
    """``chr(i)``; of a traced integer, a one-character ``Text`` (Python's ``ValueError``
    when the compiled code runs if ``i`` is out of range)."""
    if not _traced(i):
        return builtins.chr(i)
    _integer("chr", i)
    _check((i < 0) | (i >= 0x110000), ValueError, "chr() arg not in range(0x110000)")
    return Text(jnp.asarray(i, _I32)[None], jnp.asarray(1, _I32), 1)


def ord(c):  # noqa: A001 - mirrors the builtin
    """``ord(c)``; of a one-character string made from traced values, its code point
    (Python's ``TypeError`` when the compiled code runs if it is not one character)."""
    if not isinstance(c, String):
        return builtins.ord(c)
    t = _need(c, "`ord()` reads")
    site = user_site()
    later.later(_not_one_char, (t.length, site), site=site, when=t.length != 1)
    return t._at(jnp.asarray(0, _I32))


def _not_one_char(n, site):
    raise fail(TypeError(f"ord() expected a character, but string of length {n} found"), site)


def join(sep, items, /):
    """``sep.join(items)``. Plain Python::

        def join(sep, items):
            return sep.join(items)

    Items made from traced values (or a ``String`` itself: its characters) make a
    ``String``; an item that is a traced number is Python's ``TypeError`` (a number is
    no string)."""
    if isinstance(items, String):
        return String(_join, (sep, items))
    if not isinstance(sep, builtins.str):
        return sep.join(items)
    items = list(items)
    for i, item in builtins.enumerate(items):
        if _traced(item):
            raise TypeError(f"sequence item {i}: expected str instance, {_type_name(item)} "
                            "found")
    if builtins.any(isinstance(v, String) for v in items):
        return String(_join, (sep, items))
    return sep.join(items)


def reversed_text(s):
    """``reversed(s)`` of a ``String``: its characters reversed (for ``"".join`` and
    ``for`` loops)."""
    return _need(s, "`reversed()` reads").slice(None, None, -1)


def length(s):
    """``len(s)`` of a ``String``: a traced integer, weakly typed as Python's ``int`` is
    (``x + len(str(n))`` keeps an int8 ``x``'s dtype)."""
    return jx.convert_weak(_need(s, "`len()` of").length, jnp.dtype(jnp.int32))


def to_int(s, base=10):
    """``int(s, base)`` of a ``String``."""
    return _need(s, "`int()` of").to_int(base)


def string_contains(container, item):
    """``item in container`` where either is a ``String`` (a traced boolean)."""
    if isinstance(container, String):
        if not isinstance(item, (builtins.str, String)):
            raise TypeError(f"'in <string>' requires string as left operand, not "
                            f"{_type_name(item)}")
        return _need(container, "`in` tests").contains(item)
    if isinstance(container, (list, tuple)):
        t = _need(item, "`in` tests")
        out = jnp.asarray(False)
        for v in container:
            if v is item:
                return True
            if isinstance(v, (builtins.str, String)):
                out = out | t.eq(_as_text(v, "`in` tests"))
        return out
    if isinstance(container, builtins.str):
        return Text.const(container).contains(item)
    return item in container


def characters(s):
    """``[(inside, character)]`` for each position of ``s``'s capacity: ``inside`` is None
    where a character is always there (a number has one digit at least), else whether
    the position is inside the traced length."""
    t = _need(s, "this line iterates over")
    out = []
    for k in builtins.range(t.cap):
        inside = None if k < t.least else jnp.asarray(k, _I32) < t.length
        out.append((inside, Text(t.codes[k:k + 1], jnp.asarray(1, _I32), 1)))
    return out


def items(s):
    """``(length, item)`` of a ``String`` iterated by a loop: its traced length and a
    function of the position giving each character."""
    t = _need(s, "this loop iterates over")
    return t.length, lambda k: Text(t._at(jnp.asarray(k, _I32))[None], jnp.asarray(1, _I32), 1)


def check_output(out, fn):
    """A jitted function's result must hold no ``String`` (a jitted function returns
    arrays; the string's characters are made only when the compiled code runs)."""
    found = [x for x in jax.tree_util.tree_leaves(out, is_leaf=lambda x: isinstance(x, String))
             if isinstance(x, String)]
    if not found:
        return
    from ..cond.chosen import refusal

    chosen = refusal(found)
    if chosen is not None:  # (a string a traced `if` chose: the error at that `if`)
        raise chosen()
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", "the function"))
    raise ConversionError(
        f"`{name}` returns a string made from traced values: a jitted function returns "
        "arrays only, and this string's characters are known only when the compiled code "
        "runs.\nReturn the number and make the string outside the jitted function (or call "
        "it without `jit`).")
