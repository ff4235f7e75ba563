"""Variables and dict keys a staged loop may leave unset, checked when read.

A variable first bound in a loop's body (zeros if the loop runs no iteration) is
marked with whether it was bound (``bound_if``), and ``af.ld`` reads it: Python's
``UnboundLocalError`` when the compiled code runs and nothing bound it. A dict key
set in the body is marked likewise (``key_set_if``): ``read_key`` raises Python's
``KeyError`` where it is not set.
"""

from __future__ import annotations

import sys
import weakref

import jax
import jax.numpy as jnp

from ...core.origin import user_site
from ..common.values import Tracer, UnboundVariableError, Undefined
from .later import check, later
from .raising import StagedRaise, refuse_if_caught, user_frame


# ---------------------------------------------------------------------------
# Variables a staged loop may leave unbound
# ---------------------------------------------------------------------------

class _Marks:
    """Values a staged statement marked, each with what it stands for (``info``), found
    again by their first leaf (a tracer; kept by weak reference, at most about 512)."""

    def __init__(self):
        self._by_id = {}

    def __bool__(self):
        return bool(self._by_id)

    def mark(self, value, *info):
        for leaf in jax.tree_util.tree_leaves(value)[:1]:
            if isinstance(leaf, Tracer):
                if len(self._by_id) > 512:
                    for k in [k for k, v in self._by_id.items() if v[0]() is None]:
                        del self._by_id[k]
                self._by_id[id(leaf)] = (weakref.ref(leaf), info)

    def get(self, value):
        """What ``value`` was marked with, or None."""
        if not self._by_id:
            return None
        for leaf in jax.tree_util.tree_leaves(value)[:1]:
            entry = self._by_id.get(id(leaf))
            if entry is not None and entry[0]() is leaf:  # (a live value: its info is too)
                return entry[1]
        return None


# A value a staged loop gave a variable first bound in its body -> (the variable's name,
# whether the loop ran: a traced boolean). Read through `ld`, which checks at run time.
_loop_bound = _Marks()


def bound_if(value, name, ran):
    """``value`` is the variable ``name`` after a staged loop that binds it in
    its body, and is bound only where ``ran`` (the loop ran at least once)."""
    _loop_bound.mark(value, name, ran)


def bound_flag(value):
    """Where ``value`` (a variable's) is bound, a traced boolean, if a staged statement
    registered it (``bound_if``); else None."""
    info = _loop_bound.get(value)
    return None if info is None else info[1]


def _unbound(ran, name):
    if not ran:
        raise UnboundVariableError.pythons(name)


def ld(value):
    """A read of a variable that a converted statement may have left unbound.

    Plain Python: ``value`` itself, where Python would have read the variable;
    where Python would raise ``UnboundLocalError`` (the variable was never
    assigned on this path) so does ``ld``. After a staged loop that binds it
    in its body (zeros if it runs no iteration), that is checked when the
    compiled code runs, and raised at the user's line.
    """
    if type(value) is Undefined:
        raise UnboundVariableError.at(
            value.name, user_site(2), f"cannot access local variable `{value.name}` where it "
            "is not associated with a value", f"Assign `{value.name}` on every path that "
            "reaches this line.")
    info = _loop_bound.get(value)
    if info is not None:
        name, ran = info
        site = user_site(2)
        refuse_if_caught(UnboundVariableError.pythons(name), sys._getframe(1), site,
                         unbound_read(name), assign_it(name))
        later(_unbound, (ran, name), site=site, when=jnp.logical_not(ran))
    return value


def unbound_read(name):
    return (f"this read of `{name}` raises UnboundLocalError where a traced condition (or a "
            "loop's trip count) left it unbound")


def assign_it(name):
    return (f"Assign `{name}` on every path that reaches this line (a default before the "
            "`if` or loop) instead of catching the error.")


def staged_read(exc):
    """The ``StagedRaise`` for ``exc``, the ``UnboundVariableError`` of a read made while
    a staged branch or loop body was traced: Python's error where the compiled code takes
    that path (autoflow's error where an ``except`` of the user's would catch it)."""
    python = exc.python()
    frame = user_frame(exc)
    if frame is not None:
        refuse_if_caught(python, frame, exc.site, unbound_read(exc.name), assign_it(exc.name))
    return StagedRaise(lambda: python, exc.site)


# ---------------------------------------------------------------------------
# Dict keys a staged loop may not have set
# ---------------------------------------------------------------------------

# The value at a dict key that a staged loop sets in its body, the key absent before the
# loop -> (the key, where it is set: a traced boolean, False where the loop ran no
# iteration that set it). Read through `read_key` (`d[k]`), `key_flag` (`k in d`,
# `d.get(k)`, `len(d)`).
_key_set = _Marks()


def key_set_if(value, key, flag):
    """``value``, at the dict key ``key``, is there only where ``flag`` holds (a staged
    loop that sets it in its body ran an iteration)."""
    _key_set.mark(value, key, flag)


def key_flag(value):
    """Where the dict key holding ``value`` is set, a traced boolean, if a staged loop
    registered it (``key_set_if``); else None (it is)."""
    info = _key_set.get(value)
    return None if info is None else info[1]


def maybe_unset(d):
    """``{key: flag}`` of the keys of the dict ``d`` that a staged loop may not have set."""
    if not _key_set or type(d) is not dict:
        return {}
    out = {}
    for k, v in d.items():
        flag = key_flag(v)
        if flag is not None:
            out[k] = flag
    return out


def read_key(d, key, site=None):
    """``d[key]``: Python's ``KeyError`` when the compiled code runs where a staged loop
    that sets the key ran no iteration (the key holds zeros there)."""
    value = d[key]
    flag = key_flag(value)
    if flag is not None:
        check(jnp.logical_not(flag), KeyError, key, site or user_site(2))
    return value
