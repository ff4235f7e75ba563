"""``String``: a string made from traced values, not made while tracing.

It is made when the compiled code runs (for an effect, an exception), or becomes a
``Text`` (``text``) where code computes with it; ``Unknown`` and ``_cannot`` say
what cannot be known while tracing (see ``strings``).
"""

from __future__ import annotations

import builtins
import operator

import jax
import jax.numpy as jnp
import numpy as np

from ...core.origin import message, user_site
from ...errors import ConversionError
from ..effects.later import Deferred, sketch
from ..common.values import Tracer


# A String's characters as a ``Text`` (``text.Text``, a subclass of ``String``) and what
# computes them (``formatting.content``) build on this module: each registers itself
# here when it is imported (``python`` imports both), so this module imports neither.
Text = content = None

_I32 = jnp.int32


def _traced(x):
    # (a concrete tracer too, `jax.grad` without `jit`: its text is the tracer's, and JAX
    # refuses its format specs; its string is made when the value is known, as under `jit`)
    return isinstance(x, Tracer)


def _any_traced(tree):
    # (dicts walked here: JAX cannot sort keys of mixed types, `{"a": x, 3: 1}`)
    if type(tree) is dict:
        return builtins.any(_any_traced(v) for v in tree.values())
    if type(tree) in (list, tuple):
        return builtins.any(_any_traced(v) for v in tree)
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
    autoflow_kind = "a string made from traced values"  # (what `common.values.describe` says)

    def __repr__(self):
        return "<a string made from traced values, made when the compiled code runs>"

    def __str__(self):
        # (what a message raised while tracing shows: its traced values' types)
        try:
            return builtins.str(sketch(self))
        except Exception:  # noqa: BLE001 - a format the sketch cannot stand in for
            return repr(self)

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
