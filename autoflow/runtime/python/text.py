"""``Text``: a string's characters as an array of code points, and Python's methods on it.

A fixed capacity and a traced length; each method (``upper``, ``strip``, ``find``,
``split``, slicing, ``int()``...) gives Python's result, Python's errors raised when
the compiled code runs (``gathering``/``emit`` collect the checks of ``int()``).
"""

from __future__ import annotations

import builtins
import contextlib
import operator
import threading

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ...core.origin import message, user_site
from ...errors import ConversionError
from ..effects import later, path_condition
from ..effects.checks import fail
from . import string_values
from .string_values import String, _I32, _decode, _need, _traced


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
    """Python's ``exc_type(text)`` where ``bad`` holds (``effects.later.check``), at the user's line."""
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
        path = path_condition.path_condition()
        stack[-1].append((bad if path is True else jnp.logical_and(path, bad), text, base, dtype,
                          site))
        return
    later.later(_bad_int, (text, base, dtype, site), site=site, when=bad)


jax.tree_util.register_pytree_node(Text, lambda t: (t.args, None), lambda _, c: Text(*c))


# ---------------------------------------------------------------------------------------


string_values.Text = Text  # (see `string_values`)
