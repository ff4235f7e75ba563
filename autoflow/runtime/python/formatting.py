"""The characters of a string made from values: format specs, ``%``, templates, ``join``.

``content(s)`` makes the ``Text`` of a ``String``: the digits of a traced integer in
any base and format spec, a traced bool's ``True``/``False``, what ``str.format``,
``%`` and ``join`` make of them.
"""

from __future__ import annotations

import builtins
import operator
import re
import string

import jax.numpy as jnp
import numpy as np

from . import string_values
from .string_values import String, Unknown, _I32, _any_traced, _decode, _method, _traced
from .text import Text, _check, _static_str


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
    if isinstance(fn, _chosen()):  # (a traced `if` chose it: the path taken's characters)
        pred, if_true, if_false = args
        return _either(pred, content(if_true), content(if_false))
    raise Unknown("traced values")


def _chosen():
    from ..cond.chosen import _Pick

    return _Pick


def _either(pred, a, b):
    """The characters of ``a`` where ``pred`` holds, else of ``b``."""
    cap = max(a.cap, b.cap)

    def padded(t):
        return t.codes if t.cap == cap else jnp.pad(t.codes, (0, cap - t.cap))

    return Text(jnp.where(pred, padded(a), padded(b)), jnp.where(pred, a.length, b.length),
                min(a.least, b.least))


_PREFIXED = {builtins.bin: "#b", builtins.oct: "#o", builtins.hex: "#x"}


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


string_values.content = content  # (see `string_values`)
