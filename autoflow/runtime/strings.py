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
import contextlib
import operator
import re
import string
import threading

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..core.origin import message, user_site
from ..errors import ConversionError
from . import jax_internals as jx
from . import later
from .later import Deferred, fail
from .values import Tracer, is_traced, staging as under_trace

_I32 = jnp.int32


def _traced(x):
    return isinstance(x, Tracer) and is_traced(x)


def _any_traced(tree):
    return builtins.any(_traced(x) for x in jax.tree_util.tree_leaves(tree))


class Unknown(Exception):
    """The characters of a string cannot be computed while tracing; ``reason`` says
    what they depend on (``"a traced float32"``)."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


def _cannot(s, what, todo=None):
    """autoflow's error: ``what`` (``"len() of"``) needs the characters of ``s``."""
    try:
        content(s)
        reason = "traced values"
    except Unknown as e:
        reason = e.reason
    raise ConversionError(message(
        user_site(), f"{what} a string made from {reason}: its characters are known only "
        "when the compiled code runs",
        todo or "Compute with the number itself rather than its text (digits of an integer "
        "are computable: `len(str(n))`, `str(n)[::-1]`), or make the string outside the "
        "jitted function; a string only printed or raised is made when the code runs."))


_STR_RESULTS = frozenset(
    "capitalize casefold center expandtabs format format_map join ljust lower lstrip "
    "removeprefix removesuffix replace rjust rstrip strip swapcase title translate upper "
    "zfill".split())


class String(Deferred):
    """A string made from traced values (see the module's docstring): a ``Deferred``
    made when the compiled code runs, whose characters ``content`` computes for the
    operations below."""

    __slots__ = ()
    autoflow_kind = "a string made from traced values"  # (what `values.describe` says)

    def __repr__(self):
        return "<a string made from traced values, made when the compiled code runs>"

    __str__ = __repr__

    # -- operations that compute with the characters -------------------------------

    def _text(self):
        try:
            return content(self)
        except Unknown:
            return None

    def __add__(self, other):
        if isinstance(other, (builtins.str, String)):
            return String(operator.add, (self, other))
        return NotImplemented

    def __radd__(self, other):
        if isinstance(other, builtins.str):
            return String(operator.add, (other, self))
        return NotImplemented

    def __mul__(self, k):
        if isinstance(k, (builtins.int, np.integer)) and not isinstance(k, builtins.bool):
            return String(operator.mul, (self, builtins.int(k)))
        if _traced(k):
            _cannot(self, "this line repeats a traced number of times",
                    "Repeat a static number of times, or pad with `rjust`/`ljust` to a "
                    "static width.")
        return NotImplemented

    __rmul__ = __mul__

    def __mod__(self, values):
        return String(operator.mod, (self, values))

    def __eq__(self, other):
        if not isinstance(other, (builtins.str, String)):
            return NotImplemented
        return _need(self, "this line compares").eq(_as_text(other, "this line compares"))

    def __ne__(self, other):
        out = self.__eq__(other)
        return out if out is NotImplemented else jnp.logical_not(out)

    def _order(self, other, op, name):
        if not isinstance(other, (builtins.str, String)):
            return NotImplemented
        a, b = _need(self, f"`{name}` compares"), _as_text(other, f"`{name}` compares")
        return op(a, b)

    def __lt__(self, other):
        return self._order(other, lambda a, b: a.less(b), "<")

    def __gt__(self, other):
        return self._order(other, lambda a, b: b.less(a), ">")

    def __le__(self, other):
        return self._order(other, lambda a, b: ~b.less(a), "<=")

    def __ge__(self, other):
        return self._order(other, lambda a, b: ~a.less(b), ">=")

    def __hash__(self):
        _cannot(self, "this line hashes (a dict key or a set item)",
                "Key the dict by the number itself, or make the string outside the jitted "
                "function.")

    def __getitem__(self, key):
        return _need(self, "this line indexes").getitem(key)

    def __len__(self):
        _cannot(self, "Python's `len` (outside converted code) of")

    def __iter__(self):
        _cannot(self, "this line iterates over the characters of",
                "Use it as the iterable of a `for` loop or of a `sum(...)`/`any(...)` in "
                "converted code (a loop of the string's traced length), or index it: "
                "`s[k]`.")

    def __reversed__(self):  # `reversed(s)`: its characters reversed, as a string
        return _need(self, "`reversed()` reads").slice(None, None, -1)

    def __contains__(self, item):
        _cannot(self, "`in` outside converted code tests")

    def __bool__(self):
        _cannot(self, "the truth value of", "Test its length instead: `len(s) > 0`.")

    def __int__(self):
        _cannot(self, "`int()` outside converted code of")

    __float__ = __index__ = __int__

    def __format__(self, spec):
        _cannot(self, "`format()` outside converted code of")

    # -- str's methods -----------------------------------------------------------

    def __getattr__(self, name):
        if name.startswith("_") or not hasattr(builtins.str, name):
            raise AttributeError(name)
        method = getattr(Text, "m_" + name, None)

        def call(*args, **kwargs):
            text = self._text()
            if text is not None and method is not None:
                return method(text, *args, **kwargs)
            if name in _STR_RESULTS:  # a string again: made later too
                return String(_method, (self, name) + args, kwargs)
            _cannot(self, f"`.{name}()` of")

        return call


def _method(s, name, *args, **kwargs):
    return getattr(s, name)(*args, **kwargs)


def _need(s, what):
    try:
        return content(s)
    except Unknown:
        _cannot(s, what)


def _as_text(x, what):
    if isinstance(x, builtins.str):
        return Text.const(x)
    return _need(x, what)


jax.tree_util.register_pytree_node(
    String, lambda d: ((d.args, d.kwargs), d.fn),
    lambda fn, children: String(fn, children[0], children[1]))


def _decode(codes, length):
    return "".join(builtins.map(builtins.chr, np.asarray(codes)[:builtins.int(length)]))


# ---------------------------------------------------------------------------------------
# Text: the characters as an array
# ---------------------------------------------------------------------------------------

_WS = tuple(builtins.ord(c) for c in " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85")


def _isin(codes, chars):
    out = jnp.zeros(jnp.shape(codes), jnp.bool_)
    for c in chars:
        out = out | (codes == c)
    return out


def _digit_value(codes):
    """The value of each character as a digit of any base up to 36 (99 for none)."""
    return jnp.where((codes >= 48) & (codes <= 57), codes - 48,
                     jnp.where((codes >= 97) & (codes <= 122), codes - 87,
                               jnp.where((codes >= 65) & (codes <= 90), codes - 55, 99)))


class Text(String):
    """A string's characters: ``codes`` (int32 code points, a static capacity) and its
    ``length`` (a traced int32); the codes past the length are 0. Its operations give
    what Python's ``str`` gives."""

    __slots__ = ("least",)

    def __init__(self, codes, length, least=0):
        super().__init__(_decode, (codes, length))
        self.least = least  # a length it has at least (static; 0 when not known)

    @property
    def codes(self):
        return self.args[0]

    @property
    def length(self):
        return self.args[1]

    @property
    def cap(self):
        return builtins.int(np.shape(self.codes)[0])

    @staticmethod
    def const(s):
        codes = [builtins.ord(c) for c in s] or [0]
        return Text(jnp.asarray(codes, _I32), jnp.asarray(len(s), _I32), len(s))

    def _at(self, k):
        """``codes[k]`` (0 outside ``[0, length)``), ``k`` an int array."""
        inside = (k >= 0) & (k < self.length)
        return jnp.where(inside, jnp.take(self.codes, jnp.clip(k, 0, self.cap - 1)), 0)

    def _index(self):
        return jnp.arange(self.cap, dtype=_I32)

    def padded(self, cap):
        k = jnp.arange(cap, dtype=_I32)
        return self._at(k)

    # -- building ----------------------------------------------------------------

    @staticmethod
    def concat(*parts):
        parts = [p for p in parts if p.cap]
        cap = builtins.sum(p.cap for p in parts) or 1
        k = jnp.arange(cap, dtype=_I32)
        out = jnp.zeros((cap,), _I32)
        offset = jnp.asarray(0, _I32)
        for p in parts:
            rel = k - offset
            out = jnp.where((rel >= 0) & (rel < p.length), p._at(rel), out)
            offset = offset + p.length
        return Text(out, offset, builtins.sum(p.least for p in parts))

    @staticmethod
    def fill(char, count, cap):
        """``char * count`` (``0 <= count <= cap``)."""
        count = jnp.clip(jnp.asarray(count, _I32), 0, cap)
        k = jnp.arange(builtins.max(cap, 1), dtype=_I32)
        return Text(jnp.where(k < count, builtins.ord(char), 0).astype(_I32), count)

    def repeat(self, k):
        return Text.concat(*([self] * builtins.max(k, 0))) if k > 0 else Text.const("")

    def slice(self, start, stop, step):
        if step is None:
            step = 1
        if _traced(step):
            raise ConversionError(message(
                user_site(), "this slice of a string made from traced values has a traced "
                "step; the string's characters must be placed at compile time",
                "Use a static step (`s[::-1]`, `s[::2]`)."))
        step = operator.index(step)
        if step == 0:
            raise ValueError("slice step cannot be zero")
        n = self.length

        def norm(v, default):
            if v is None:
                return default
            v = jnp.asarray(v, _I32)
            if step > 0:
                return jnp.where(v < 0, jnp.maximum(v + n, 0), jnp.minimum(v, n))
            return jnp.where(v < 0, jnp.maximum(v + n, -1), jnp.minimum(v, n - 1))

        if step > 0:
            lo, hi = norm(start, jnp.asarray(0, _I32)), norm(stop, n)
            count = jnp.maximum(0, (hi - lo + step - 1) // step)
        else:
            lo, hi = norm(start, n - 1), norm(stop, jnp.asarray(-1, _I32))
            count = jnp.maximum(0, (lo - hi - step - 1) // (-step))
        cap = -(-self.cap // builtins.abs(step))
        k = jnp.arange(cap, dtype=_I32)
        codes = jnp.where(k < count, self._at(lo + k * step), 0)
        return Text(codes, count.astype(_I32))

    def getitem(self, key):
        if isinstance(key, builtins.slice):
            return self.slice(key.start, key.stop, key.step)
        if not (isinstance(key, (builtins.int, np.integer)) or _traced(key)
                and jnp.issubdtype(jnp.result_type(key), jnp.integer) and np.ndim(key) == 0):
            raise TypeError(f"string indices must be integers, not '{_type_name(key)}'")
        i = jnp.asarray(key, _I32)
        i = jnp.where(i < 0, i + self.length, i)
        _check(~((i >= 0) & (i < self.length)), IndexError, "string index out of range")
        return Text(self._at(i)[None], jnp.asarray(1, _I32), 1)

    # -- what Python's operators give -----------------------------------------------

    def eq(self, other):
        cap = builtins.max(self.cap, other.cap)
        return (self.length == other.length) & jnp.all(self.padded(cap) == other.padded(cap))

    def less(self, other):
        cap = builtins.max(self.cap, other.cap)
        a, b = self.padded(cap), other.padded(cap)
        k = jnp.arange(cap, dtype=_I32)
        diff = (a != b) & (k < jnp.minimum(self.length, other.length))
        first = jnp.argmax(diff)
        return jnp.where(jnp.any(diff), a[first] < b[first], self.length < other.length)

    def _matches(self, pat):
        """Where ``pat`` (a ``Text``) occurs, at each position (``pat`` non-empty)."""
        k = self._index()
        hit = k + pat.length <= self.length
        for j in range(pat.cap):
            hit = hit & ((j >= pat.length) | (self._at(k + j) == pat._at(jnp.asarray(j, _I32))))
        return hit

    def _starts(self, pat):
        """The starts of ``pat``'s non-overlapping occurrences, left to right (Python's
        ``count`` and ``replace``)."""
        hit = self._matches(pat)
        if pat.cap == 1 and pat.least == 1:
            return hit
        m = pat.length

        def step(free, kh):
            k, h = kh
            take = h & (k >= free)
            return jnp.where(take, k + m, free), take

        _, taken = lax.scan(step, jnp.asarray(0, _I32), (self._index(), hit))
        return taken

    def contains(self, item):
        pat = _pattern(item, "`in` tests")
        return jnp.any(self._matches(pat)) | (pat.length == 0)

    # str's methods that Python programs compute with (the ``m_`` prefix: looked up by
    # ``String.__getattr__``)

    def m_count(self, sub, start=None, end=None):
        s = self if start is None and end is None else self.slice(start, end, 1)
        pat = _pattern(sub, "count")
        found = jnp.sum(s._starts(pat).astype(_I32))
        return jnp.where(pat.length == 0, s.length + 1, found)

    def _find(self, sub, start, end, last):
        pat = _pattern(sub, "rfind" if last else "find")
        s = self if start is None and end is None else self.slice(start, end, 1)
        offset = jnp.asarray(0, _I32) if start is None else jnp.where(
            jnp.asarray(start) < 0, jnp.maximum(jnp.asarray(start, _I32) + self.length, 0),
            jnp.asarray(start, _I32))
        hit = s._matches(pat)
        k = s._index()
        pos = jnp.max(jnp.where(hit, k, -1)) if last else jnp.min(jnp.where(hit, k, s.cap))
        found = jnp.where(jnp.any(hit), offset + pos, -1)
        empty = jnp.where(offset <= self.length, offset + (s.length if last else 0), -1)
        return jnp.where(pat.length == 0, empty, found).astype(_I32)

    def m_find(self, sub, start=None, end=None):
        return self._find(sub, start, end, False)

    def m_rfind(self, sub, start=None, end=None):
        return self._find(sub, start, end, True)

    def m_index(self, sub, start=None, end=None):
        out = self._find(sub, start, end, False)
        _check(out < 0, ValueError, "substring not found")
        return out

    def m_rindex(self, sub, start=None, end=None):
        out = self._find(sub, start, end, True)
        _check(out < 0, ValueError, "substring not found")
        return out

    def _affix(self, affix, start, end, where, at_end):
        s = self if start is None and end is None else self.slice(start, end, 1)
        out = jnp.asarray(False)
        for p in affix if isinstance(affix, tuple) else (affix,):
            pat = _pattern(p, where)
            base = s.length - pat.length if at_end else 0
            hit = s.length >= pat.length
            for j in range(pat.cap):
                hit = hit & ((j >= pat.length)
                             | (s._at(base + j) == pat._at(jnp.asarray(j, _I32))))
            out = out | hit
        return out

    def m_startswith(self, prefix, start=None, end=None):
        return self._affix(prefix, start, end, "startswith", False)

    def m_endswith(self, suffix, start=None, end=None):
        return self._affix(suffix, start, end, "endswith", True)

    def _all(self, pred, nonempty=True):
        k = self._index()
        ok = jnp.all((k >= self.length) | pred(self.codes))
        return ok & (self.length > 0) if nonempty else ok

    def m_isdigit(self):
        return self._all(lambda c: (c >= 48) & (c <= 57))

    m_isdecimal = m_isnumeric = m_isdigit

    def m_isalpha(self):
        return self._all(lambda c: ((c >= 65) & (c <= 90)) | ((c >= 97) & (c <= 122)))

    def m_isalnum(self):
        return self._all(lambda c: ((c >= 48) & (c <= 57)) | ((c >= 65) & (c <= 90))
                         | ((c >= 97) & (c <= 122)))

    def m_isspace(self):
        return self._all(lambda c: _isin(c, _WS))

    def _cased(self, upper):
        k = self._index()
        inside = k < self.length
        up = (self.codes >= 65) & (self.codes <= 90)
        low = (self.codes >= 97) & (self.codes <= 122)
        want, other = (up, low) if upper else (low, up)
        return jnp.any(inside & want) & ~jnp.any(inside & other)

    def m_isupper(self):
        return self._cased(True)

    def m_islower(self):
        return self._cased(False)

    def _map(self, fn):
        k = self._index()
        return Text(jnp.where(k < self.length, fn(self.codes), 0).astype(_I32), self.length)

    def m_upper(self):
        return self._map(lambda c: jnp.where((c >= 97) & (c <= 122), c - 32, c))

    def m_lower(self):
        return self._map(lambda c: jnp.where((c >= 65) & (c <= 90), c + 32, c))

    def m_swapcase(self):
        return self._map(lambda c: jnp.where((c >= 97) & (c <= 122), c - 32,
                                             jnp.where((c >= 65) & (c <= 90), c + 32, c)))

    def _pad(self, width, fillchar, where):
        width = _static_int(width, where)
        fillchar = _static_str(fillchar, where)
        if len(fillchar) != 1:
            raise TypeError("The fill character must be exactly one character long")
        pad = jnp.maximum(width - self.length, 0)
        return pad, width

    def m_rjust(self, width, fillchar=" "):
        pad, width = self._pad(width, fillchar, "rjust")
        return Text.concat(Text.fill(fillchar, pad, width), self)

    def m_ljust(self, width, fillchar=" "):
        pad, width = self._pad(width, fillchar, "ljust")
        return Text.concat(self, Text.fill(fillchar, pad, width))

    def m_center(self, width, fillchar=" "):
        pad, width = self._pad(width, fillchar, "center")
        left = pad // 2 + (pad & width & 1)
        return Text.concat(Text.fill(fillchar, left, width), self,
                           Text.fill(fillchar, pad - left, width))

    def m_zfill(self, width):
        width = _static_int(width, "zfill")
        pad = jnp.maximum(width - self.length, 0)
        c0 = self._at(jnp.asarray(0, _I32))
        signed = (self.length > 0) & ((c0 == 43) | (c0 == 45))
        sign = Text(c0[None] * signed, signed.astype(_I32))
        return Text.concat(sign, Text.fill("0", pad, width), self.slice(signed.astype(_I32),
                                                                        None, 1))

    def _strip(self, chars, left, right):
        if chars is None:
            codes = _WS
        else:
            codes = tuple(builtins.ord(c) for c in _static_str(chars, "strip"))
        k = self._index()
        inside = k < self.length
        keep = inside & ~_isin(self.codes, codes)
        any_keep = jnp.any(keep)
        first = jnp.where(any_keep, jnp.argmax(keep), self.length) if left else 0
        last = jnp.where(any_keep, self.cap - 1 - jnp.argmax(keep[::-1]), -1) if right \
            else self.length - 1
        start = jnp.asarray(first, _I32)
        stop = jnp.maximum(jnp.asarray(last, _I32) + 1, start)
        return self.slice(start, stop, 1)

    def m_strip(self, chars=None):
        return self._strip(chars, True, True)

    def m_lstrip(self, chars=None):
        return self._strip(chars, True, False)

    def m_rstrip(self, chars=None):
        return self._strip(chars, False, True)

    def m_removeprefix(self, prefix):
        prefix = _static_str(prefix, "removeprefix")
        has = self.m_startswith(prefix)
        return self.slice(jnp.where(has, len(prefix), 0), None, 1)

    def m_removesuffix(self, suffix):
        suffix = _static_str(suffix, "removesuffix")
        if not suffix:
            return self
        has = self.m_endswith(suffix)
        return self.slice(0, jnp.where(has, self.length - len(suffix), self.length), 1)

    def m_replace(self, old, new, count=-1):
        old, new = _static_str(old, "replace"), _static_str(new, "replace")
        count = _static_int(count, "replace")
        if not old:
            raise ConversionError(message(
                user_site(), "`replace` with an empty old string on a string made from traced "
                "values is not supported", "Join the characters instead."))
        m, r = len(old), len(new)
        starts = self._starts(Text.const(old))
        if count >= 0:
            starts = starts & (jnp.cumsum(starts.astype(_I32)) <= count)
        k = self._index()
        before = jnp.cumsum(starts.astype(_I32)) - starts.astype(_I32)  # matches before k
        # a character inside a replaced occurrence is dropped; the others move by
        # (r - m) per occurrence before them; each occurrence writes `new` at its start
        covered = jnp.zeros((self.cap,), jnp.bool_)
        for j in range(m):
            covered = covered | jnp.roll(jnp.pad(starts, (0, m)), j)[:self.cap]
        cap = self.cap + builtins.max(0, r - m) * (self.cap // m)
        out = jnp.zeros((builtins.max(cap, 1),), _I32)
        pos = k + (r - m) * before
        keep = (k < self.length) & ~covered
        out = out.at[jnp.where(keep, pos, cap + 1)].set(self.codes, mode="drop")
        for j, c in builtins.enumerate(new):
            out = out.at[jnp.where(starts, pos + j, cap + 1)].set(builtins.ord(c), mode="drop")
        total = jnp.sum(starts.astype(_I32))
        return Text(out, self.length + (r - m) * total)

    def to_int(self, base=10):
        """``int(self, base)``: Python's parse (whitespace around, a sign, the base's
        prefix, ``_`` between digits); ``ValueError`` when the compiled code runs where
        Python's ``int`` refuses the string."""
        if _traced(base) or not isinstance(base, (builtins.int, np.integer)) or base == 0:
            raise ConversionError(message(
                user_site(), f"`int()` of a string made from traced values with base {base!r}: "
                "only a static base from 2 to 36 is supported", "Give the base as a number."))
        base = builtins.int(base)
        if not 2 <= base <= 36:
            raise ValueError("int() base must be >= 2 and <= 36, or 0")
        dtype = jnp.result_type(builtins.int)
        site = user_site()
        if self.cap == 1:  # one character (`int(c) for c in str(n)`): one digit or an error
            d = _digit_value(self.codes[0])
            valid = (self.length == 1) & (d < base)
            _int_check(~valid, self, base, dtype, site)
            return jnp.where(valid, d, 0).astype(dtype)
        k = self._index()
        c = self.codes
        inside = k < self.length
        ws = _isin(c, _WS) & inside
        body = inside & ~ws
        any_body = jnp.any(body)
        lo = jnp.where(any_body, jnp.argmax(body), self.length).astype(_I32)
        hi = jnp.where(any_body, self.cap - jnp.argmax(body[::-1]), lo).astype(_I32)
        spaces_ok = jnp.all(~inside | ws | ((k >= lo) & (k < hi)))
        c_lo = self._at(lo)
        signed = (c_lo == 43) | (c_lo == 45)
        negative = c_lo == 45
        start = lo + signed.astype(_I32)
        prefix = {16: (120, 88), 8: (111, 79), 2: (98, 66)}.get(base)
        if prefix is not None:
            p1 = self._at(start + 1)
            has_prefix = (self._at(start) == 48) & ((p1 == prefix[0]) | (p1 == prefix[1])) \
                & (start + 2 < hi)
            start = start + 2 * has_prefix.astype(_I32)
        else:
            has_prefix = jnp.asarray(False)
        digit = _digit_value(c)
        region = (k >= start) & (k < hi)
        is_digit = digit < base
        under = c == 95
        prev_digit = jnp.concatenate([jnp.zeros((1,), jnp.bool_), is_digit[:-1]])
        next_digit = jnp.concatenate([is_digit[1:], jnp.zeros((1,), jnp.bool_)])
        # `_` between digits, or right after the base's prefix
        under_ok = under & next_digit & (prev_digit | (has_prefix & (k == start)))
        valid = spaces_ok & (hi > start) & jnp.all(~region | is_digit | under_ok) \
            & jnp.any(region & is_digit)
        top = jnp.iinfo(dtype).max

        def step(carry, kd):
            acc, big = carry
            use, d = kd
            d = d.astype(dtype)
            over = acc > (top - d) // base
            new = jnp.where(use, acc * base + d, acc)
            return (new, big | (use & over)), None

        (acc, big), _ = lax.scan(step, (jnp.zeros((), dtype), jnp.asarray(False)),
                                 (region & is_digit, jnp.minimum(digit, 35)))
        _int_check(~valid | big, self, base, dtype, site)
        return jnp.where(negative, -acc, acc)


def _pattern(x, where):
    """A ``str`` method's argument as a ``Text`` (a Python string, or one made from traced
    values); Python's ``TypeError`` for anything else."""
    if isinstance(x, builtins.str):
        return Text.const(x)
    if isinstance(x, String):
        return _need(x, f"`{where}` with")
    raise TypeError(f"must be str, not {_type_name(x)}")


def _static_str(x, where):
    if isinstance(x, builtins.str):
        return x
    if isinstance(x, String):
        raise ConversionError(message(
            user_site(), f"`{where}` with an argument made from traced values: only a Python "
            "string is supported there", "Pass a string literal or a static string."))
    raise TypeError(f"must be str, not {_type_name(x)}")


def _static_int(x, where):
    if _traced(x):
        raise ConversionError(message(
            user_site(), f"`{where}` of a string made from traced values with a traced width "
            "or count: the string's capacity must be known at compile time",
            "Give a static number (pad to the largest width, then slice)."))
    return operator.index(x)


def _type_name(x):
    if _traced(x):
        kind = np.dtype(jnp.result_type(x)).kind
        return {"b": "bool", "i": "int", "u": "int", "f": "float", "c": "complex"}.get(kind, "array")
    return type(x).__name__


def _check(bad, exc_type, text):
    """Python's ``exc_type(text)`` where ``bad`` holds (``later.check``), at the user's line."""
    later.check(bad, exc_type, text, user_site())

def _bad_int(s, base, dtype, site):
    """Python's error for ``int(s, base)``: its ``ValueError``, or where it parses, an
    ``OverflowError`` (the value does not fit the dtype)."""
    try:
        value = builtins.int(s, base)
    except ValueError as e:
        raise fail(e, site) from None
    raise fail(OverflowError(
        f"int({s!r}{'' if base == 10 else f', {base}'}) is {value}, which does not fit in "
        f"{np.dtype(dtype).name}: Python's integers have no limit, a traced integer has its "
        "dtype's"), site, "Enable 64-bit integers (`jax.config.update('jax_enable_x64', "
        "True)`) if it fits in int64.")


def _first_bad_int(bads, texts, bases, dtype, sites):
    i = builtins.int(np.argmax(np.asarray(bads)))
    _bad_int(texts[i], bases[i], dtype, sites[i])


_local = threading.local()


@contextlib.contextmanager
def gathering(checks):
    """The ``int()`` checks made in the block go into ``checks`` (with the path condition
    then) instead of one run-time check each; ``emit(checks)`` makes them one. A
    reduction over the characters of a string (``sum(int(d) for d in str(n))``) checks
    each character once, at the end: compiling one check per character costs a lot."""
    stack = _local.__dict__.setdefault("gather", [])
    stack.append(checks)
    try:
        yield
    finally:
        stack.pop()


def emit(checks):
    """One run-time check for the ``int()`` checks gathered: the first that fails raises
    Python's error for it."""
    if not checks:
        return
    bads = jnp.stack([jnp.asarray(b) for b, *_ in checks])
    _, texts, bases, dtypes, sites = zip(*checks)
    later.later(_first_bad_int, (bads, list(texts), list(bases), dtypes[0], list(sites)),
                site=sites[0], when=jnp.any(bads))
    del checks[:]


def _int_check(bad, text, base, dtype, site):
    stack = getattr(_local, "gather", None)
    if stack:
        path = later.path_condition()
        stack[-1].append((bad if path is True else jnp.logical_and(path, bad), text, base, dtype,
                          site))
        return
    later.later(_bad_int, (text, base, dtype, site), site=site, when=bad)


jax.tree_util.register_pytree_node(Text, lambda t: (t.args, None), lambda _, c: Text(*c))


# ---------------------------------------------------------------------------------------
# the characters of a string made from values
# ---------------------------------------------------------------------------------------

_SPEC = re.compile(r"(?:(?P<fill>.)?(?P<align>[<>=^]))?(?P<sign>[-+ ])?(?P<z>z)?(?P<alt>#)?"
                   r"(?P<zero>0)?(?P<width>\d+)?(?P<group>[,_])?(?:\.(?P<prec>\d+))?"
                   r"(?P<type>[bcdeEfFgGnosxX%])?\Z", re.S)


def _is_int(x):
    return _traced(x) and np.ndim(x) == 0 and (
        jnp.issubdtype(jnp.result_type(x), jnp.integer) or jnp.result_type(x) == jnp.bool_)


def _describe(x):
    if _traced(x):
        dtype = jnp.result_type(x)
        shape = np.shape(x)
        return f"a traced {dtype}" + (f" array of shape {shape}" if shape else "")
    return f"a {type(x).__name__}"


def _digits(n, base, upper):
    """The digits of ``abs(n)`` (a traced integer) in ``base``, most significant first."""
    dtype = jnp.result_type(n)
    bits = np.dtype(dtype).itemsize * 8
    unsigned = jnp.dtype(f"uint{bits}")
    signed = jnp.issubdtype(dtype, jnp.signedinteger)
    x = jnp.asarray(n)
    mag = jnp.where(x < 0, -(x.astype(unsigned)), x.astype(unsigned)) if signed \
        else x.astype(unsigned)
    biggest = (1 << (bits - 1)) if signed else (1 << bits) - 1
    cap = len(np.base_repr(biggest, base))
    ds, count, m = [], jnp.asarray(0, _I32), mag
    for _ in range(cap):
        count = count + (m > 0).astype(_I32)
        ds.append((m % base).astype(_I32))
        m = m // base
    count = jnp.maximum(count, 1)
    little = jnp.stack(ds)  # least significant first
    k = jnp.arange(cap, dtype=_I32)
    d = jnp.take(little, jnp.clip(count - 1 - k, 0, cap - 1))
    letters = 55 if upper else 87
    codes = jnp.where(d < 10, d + 48, d + letters)
    return Text(jnp.where(k < count, codes, 0).astype(_I32), count, 1)


def _aligned(body_parts, spec, numeric, sign_parts=()):
    """``body`` padded to the spec's width (``=``: after ``sign_parts``)."""
    fill = spec["fill"]
    align = spec["align"]
    if spec["zero"] and not align:
        fill, align = fill or "0", "=" if numeric else "<"
    elif spec["zero"] and not fill:
        fill = "0"
    fill = fill or " "
    align = align or (">" if numeric else "<")
    width = builtins.int(spec["width"] or 0)
    parts = list(sign_parts) + list(body_parts)
    if not width:
        return Text.concat(*parts)
    total = builtins.sum((p.length for p in parts), jnp.asarray(0, _I32))
    pad = jnp.maximum(width - total, 0)
    if align == "<":
        return Text.concat(*parts, Text.fill(fill, pad, width))
    if align == ">":
        return Text.concat(Text.fill(fill, pad, width), *parts)
    if align == "^":
        left = pad // 2
        return Text.concat(Text.fill(fill, left, width), *parts,
                           Text.fill(fill, pad - left, width))
    return Text.concat(*sign_parts, Text.fill(fill, pad, width), *body_parts)


def _format_int(x, spec_text):
    """``format(x, spec_text)`` of a traced integer or bool, as characters."""
    sample = True if jnp.result_type(x) == jnp.bool_ else 0
    builtins.format(sample, spec_text)  # Python's ValueError for a spec it refuses
    if sample is True and spec_text == "":
        x = jnp.asarray(x)
        return Text(jnp.where(x, jnp.asarray([84, 114, 117, 101, 0], _I32),
                              jnp.asarray([70, 97, 108, 115, 101], _I32)),
                    jnp.where(x, 4, 5).astype(_I32))
    spec = _SPEC.match(spec_text)
    kind = spec["type"] or "d"
    if kind in "eEfFgGn%" or spec["group"]:
        raise Unknown(f"{_describe(x)} formatted with {spec_text!r}")
    x = jnp.asarray(x)
    if x.dtype == jnp.bool_:
        x = x.astype(_I32)
    if kind == "c":
        _check((x < 0) | (x >= 0x110000), OverflowError, "%c arg not in range(0x110000)")
        return _aligned([Text(x.astype(_I32)[None], jnp.asarray(1, _I32), 1)], spec, True)
    base = {"d": 10, "b": 2, "o": 8, "x": 16, "X": 16}[kind]
    negative = x < 0
    sign_char = {"+": 43, " ": 32}.get(spec["sign"], 0)
    sign = Text(jnp.where(negative, 45, sign_char)[None].astype(_I32),
                (negative | (sign_char != 0)).astype(_I32))
    parts = [sign]
    if spec["alt"] and base != 10:
        parts.append(Text.const("0" + kind))
    return _aligned([_digits(x, base, kind == "X")], spec, True, parts)


def _format_text(t, spec_text):
    builtins.format("", spec_text)  # Python's ValueError for a spec a string refuses
    spec = _SPEC.match(spec_text)
    if spec["type"] not in (None, "s"):
        raise ValueError(f"Unknown format code '{spec['type']}' for object of type 'str'")
    if spec["prec"] is not None:
        t = t.slice(0, builtins.int(spec["prec"]), 1)
    return _aligned([t], spec, False)


def _format_value(value, conversion, spec):
    """The characters of ``format(value!conversion, spec)``."""
    if isinstance(value, String):
        if conversion in ("r", "a"):
            raise Unknown("the repr of a string made from traced values")
        return _format_text(content(value), spec)
    if _is_int(value):
        if conversion in ("s", "r", "a"):  # `f"{n!s:>5}"`: str first, then a string's spec
            text = _format_int(value, "")
            return _format_text(text, spec) if spec else text
        return _format_int(value, spec)
    if _any_traced(value):
        raise Unknown(_describe(value) if _traced(value) else f"a {type(value).__name__} "
                      "holding traced values")
    v = {"r": builtins.repr, "s": builtins.str, "a": builtins.ascii}.get(conversion, lambda v: v)(
        value)
    return Text.const(builtins.format(v, spec))


def _field(name, args, kwargs, auto):
    if name == "":
        i = next(auto)
        return args[i]
    first, rest = re.match(r"([^.\[]*)(.*)\Z", name, re.S).groups()
    value = args[builtins.int(first)] if first.isdigit() else kwargs[first]
    if rest:
        if _any_traced(value) or isinstance(value, String):
            raise Unknown("a field with attributes or items of traced values")
        value = string.Formatter().get_field(name, args, kwargs)[0]
    return value


def _template_content(template, args, kwargs):
    if not isinstance(template, builtins.str):
        raise Unknown("a template made from traced values")
    parts = []
    auto = iter(builtins.range(1 << 30))
    for literal, name, spec, conversion in string.Formatter().parse(template):
        if literal:
            parts.append(Text.const(literal))
        if name is None:
            continue
        value = _field(name, args, kwargs, auto)
        if spec and "{" in spec:  # a nested field: its values must be concrete
            inner = _template_content(spec, args, kwargs)
            if _traced(inner.length) or _traced(inner.codes):
                raise Unknown("a format spec made from traced values")
            spec = _decode(inner.codes, inner.length)
        parts.append(_format_value(value, conversion, spec or ""))
    return Text.concat(*parts) if parts else Text.const("")


_PERCENT = re.compile(r"%(?:\((?P<key>[^)]*)\))?(?P<flags>[-+ #0]*)(?P<width>\*|\d+)?"
                      r"(?:\.(?P<prec>\*|\d+))?[hlL]?(?P<type>[diouxXeEfFgGcrsa%])", re.S)


def _percent_content(template, values):
    if not isinstance(template, builtins.str):
        raise Unknown("a template made from traced values")
    if isinstance(values, dict):
        mapping, seq = values, None
    else:
        mapping, seq = None, list(values) if isinstance(values, tuple) else [values]
    parts, pos, used = [], 0, 0
    for m in _PERCENT.finditer(template):
        if m.start() > pos:
            parts.append(Text.const(template[pos:m.start()]))
        pos = m.end()
        kind = m["type"]
        if kind == "%":
            parts.append(Text.const("%"))
            continue
        if m["width"] == "*" or m["prec"] == "*":
            raise Unknown("a `*` width in a `%` template")
        if m["key"] is not None:
            value = mapping[m["key"]]
        else:
            value = seq[used]
            used += 1
        flags = m["flags"]
        if kind in "rsa":
            if _is_int(value) or isinstance(value, String):
                text = _format_value(value, "s" if kind == "s" else kind, "")
                spec = ("<" if "-" in flags else ">") + (m["width"] or "")
                if m["prec"] is not None:
                    spec += "." + m["prec"]
                parts.append(_format_text(text, spec if m["width"] or m["prec"] else ""))
                continue
        elif kind in "diuoxXc" and _is_int(value):
            spec = ("<" if "-" in flags else "") + ("+" if "+" in flags else " " if " " in flags
                                                    else "") + ("#" if "#" in flags and kind != "o"
                                                                else "") \
                + ("0" if "0" in flags and "-" not in flags else "") + (m["width"] or "") \
                + {"i": "d", "u": "d"}.get(kind, kind)
            if "#" in flags and kind == "o":  # `%#o` gives `0o17`, as `{:#o}` does
                spec = spec.replace("o", "#o") if "#" not in spec else spec
            if m["prec"] is not None:
                raise Unknown(f"{_describe(value)} formatted with a precision")
            parts.append(_format_int(value, spec))
            continue
        if _any_traced(value) or isinstance(value, String):
            raise Unknown(_describe(value))
        parts.append(Text.const(m.group(0) % (value,)))
    if seq is not None and used != len(seq):
        raise Unknown("a `%` template whose values do not match")  # (Python's TypeError later)
    if pos < len(template):
        parts.append(Text.const(template[pos:]))
    return Text.concat(*parts) if parts else Text.const("")


def content(s):
    """The characters of ``s`` (a ``String``, a Python ``str``) as a ``Text``; ``Unknown``
    where they cannot be computed while tracing."""
    if isinstance(s, Text):
        return s
    if isinstance(s, builtins.str):
        return Text.const(s)
    if not isinstance(s, String):
        raise Unknown(_describe(s))
    fn, args, kwargs = s.fn, s.args, s.kwargs
    if fn is builtins.str.format:
        return _template_content(args[0], args[1:], kwargs)
    if fn is operator.mod:
        return _percent_content(args[0], args[1])
    if fn is operator.add:
        return Text.concat(content(args[0]), content(args[1]))
    if fn is operator.mul:
        return content(args[0]).repeat(args[1])
    if fn in (builtins.str, builtins.repr, builtins.ascii) and len(args) == 1 and not kwargs:
        return _format_value(args[0], {builtins.str: "s", builtins.repr: "r",
                                       builtins.ascii: "a"}[fn], "")
    if fn is builtins.format:
        return _format_value(args[0], None, args[1] if len(args) > 1 else "")
    if fn in _PREFIXED:
        return _format_value(args[0], None, _PREFIXED[fn])
    if fn is _method:
        target, name, rest = args[0], args[1], args[2:]
        method = getattr(Text, "m_" + name, None)
        if method is not None:
            return method(content(target), *rest, **kwargs)
    if fn is _join:
        return _join_content(args[0], args[1])
    raise Unknown("traced values")


_PREFIXED = {builtins.bin: "#b", builtins.oct: "#o", builtins.hex: "#x"}


# ---------------------------------------------------------------------------------------
# what converted code calls
# ---------------------------------------------------------------------------------------

def _make(fn, args, kwargs=None):
    if _any_traced((args, kwargs)) or builtins.any(isinstance(a, String) for a in args) or (
            kwargs and builtins.any(isinstance(v, String) for v in kwargs.values())):
        return String(fn, args, kwargs)
    out = fn(*args, **(kwargs or {}))
    if isinstance(out, builtins.str) and under_trace() and jx.shows_tracer(out):
        # An object holding traced values that no pytree shows (a dataclass, a user
        # class): its own `__str__`/`__repr__` formatted a tracer.
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


def _join(sep, items):
    return sep.join(items)


def _join_content(sep, items):
    sep = _static_str(sep, "join")
    if isinstance(items, String):
        t = content(items)
        if not sep:
            return t
        m = len(sep)
        cap = t.cap + builtins.max(t.cap - 1, 0) * m
        p = jnp.arange(cap, dtype=_I32)
        block, r = p // (m + 1), p % (m + 1)
        seps = jnp.asarray([0] + [builtins.ord(c) for c in sep], _I32)
        length = t.length + jnp.maximum(t.length - 1, 0) * m
        codes = jnp.where(r == 0, t._at(block), seps[r])
        return Text(jnp.where(p < length, codes, 0), length.astype(_I32))
    parts = []
    for i, item in builtins.enumerate(items):
        if i and sep:
            parts.append(Text.const(sep))
        parts.append(content(item))
    return Text.concat(*parts) if parts else Text.const("")


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
    """``len(s)`` of a ``String``: a traced integer."""
    return _need(s, "`len()` of").length


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
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", "the function"))
    raise ConversionError(
        f"`{name}` returns a string made from traced values: a jitted function returns "
        "arrays only, and this string's characters are known only when the compiled code "
        "runs.\nReturn the number and make the string outside the jitted function (or call "
        "it without `jit`).")
