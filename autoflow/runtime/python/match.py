"""``match`` on traced values: ``case True:``/``case False:``, the structure of
sequence, mapping and class patterns, and a subject left as Python.

A sequence, mapping or class pattern tests Python's structure (a sequence of
this length, these keys, an instance with these attributes) on the Python
containers and objects that hold traced values; their leaves' value patterns
stage like any ``if``. A traced array is none of these: a subject that is one
is reported at its case, as a subject left as Python is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import jax.numpy as jnp

from ...core.origin import Site, message, user_site
from ...errors import ConversionError
from ..common.values import is_traced

_NOT_SEQUENCES = (str, bytes, bytearray)
# The builtins whose one positional sub-pattern matches the subject itself.
_SELF_MATCHING = (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple)
_MISSING = object()


def match_is(subject, value):
    """``subject is value`` for ``case True:``/``case False:``; a traced boolean
    subject (what a Python bool becomes under ``jit``) compares its value."""
    if is_traced(subject):
        if jnp.asarray(subject).dtype == jnp.bool_ and np.size(subject) == 1:
            pred = jnp.asarray(subject).reshape(())
            return pred if value else ~pred
        return False
    return subject is value


def match_subject(subject, line, col):
    """The subject of a ``match`` that autoflow left as Python (a pattern it does
    not know): it must be concrete."""
    _concrete(subject, line, col, "this case's pattern cannot be staged")
    return subject


def _concrete(subject, line, col, what=None, depth=3):
    if is_traced(subject):
        here = user_site(depth)
        site = Site(here.filename, line, col) if here is not None else None
        raise ConversionError(message(
            site, f"this `match` has a traced subject, but {what or _STRUCTURE}",
            "Use value patterns (`case 0 | 1:`, `case Mode.FAST:`) and guards on a traced "
            "value, and put traced values in a tuple or dict (`match (x, y):`) for "
            "sequence and mapping patterns; or make the subject static."))


_STRUCTURE = ("this case's class, mapping or sequence pattern tests its structure (an "
              "instance, a mapping, a sequence of some length) in Python, and a traced array "
              "has none: it cannot be staged")


def match_sequence(subject, length, star, line, col):
    """Does ``subject`` match a sequence pattern of ``length`` items (at least
    that many with a starred name)?"""
    _concrete(subject, line, col)
    if not isinstance(subject, Sequence) or isinstance(subject, _NOT_SEQUENCES):
        return False
    n = len(subject)
    return n >= length if star else n == length


def match_rest(subject, start, after):
    """What ``*rest`` captures: the items from ``start`` to ``after`` from the end."""
    return list(subject[start:len(subject) - after])


def match_mapping(subject, keys, line, col):
    """Does ``subject`` match a mapping pattern with ``keys``?"""
    _concrete(subject, line, col)
    if not isinstance(subject, Mapping):
        return False
    key = _repeated(keys)
    if key is not _MISSING:
        raise ValueError(f"mapping pattern checks duplicate key ({key!r})")
    get = subject.get
    return all(get(k, _MISSING) is not _MISSING for k in keys)


def _repeated(items):
    """The first item of ``items`` that comes again, or ``_MISSING``."""
    seen = set()
    return next((k for k in items if k in seen or seen.add(k)), _MISSING)


def match_mapping_rest(subject, keys):
    """What ``**rest`` captures: the items whose keys the pattern did not name."""
    return {k: v for k, v in subject.items() if k not in keys}


def _positional(cls, count):
    """The attribute names of ``count`` positional sub-patterns of ``cls(...)``
    (``None``: the subject itself)."""
    if count == 0:
        return ()
    args = getattr(cls, "__match_args__", _MISSING)
    if args is _MISSING:
        if issubclass(cls, _SELF_MATCHING):
            args = (None,)
        else:
            args = ()
    elif not isinstance(args, tuple):
        raise TypeError(f"{cls.__name__}.__match_args__ must be a tuple "
                        f"(got {type(args).__name__})")
    if count > len(args):
        s = "" if len(args) == 1 else "s"
        raise TypeError(f"{cls.__name__}() accepts {len(args)} positional sub-pattern{s} "
                        f"({count} given)")
    return args[:count]


def match_class(subject, cls, count, keywords, line, col):
    """Does ``subject`` match ``cls(<count positional>, <keywords>=...)``'s
    structure (an instance with those attributes)?"""
    _concrete(subject, line, col)
    if not isinstance(cls, type):
        raise TypeError("called match pattern must be a class")
    if not isinstance(subject, cls):
        return False
    names = [n for n in _positional(cls, count) if n is not None] + list(keywords)
    name = _repeated(names)
    if name is not _MISSING:
        raise TypeError(f"{cls.__name__}() got multiple sub-patterns for attribute {name!r}")
    return all(hasattr(subject, n) for n in names)


def match_attribute(subject, cls, index):
    """The value the ``index``-th positional sub-pattern of ``cls(...)`` matches."""
    name = _positional(cls, index + 1)[index]
    return subject if name is None else getattr(subject, name)
