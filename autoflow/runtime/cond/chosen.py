"""A string a traced ``if`` chooses: made when the compiled code runs, from the branch taken.

``status = "converged"`` on one path and ``"stopped"`` on the other (or two strings made
from traced values, ``msg + " big"`` and ``msg``) cannot be one value of ``lax.cond``:
a string is no array. Each path's string is kept instead, both carried out of the
``if`` (the path not taken gives zeros for the traced values of the other's), and the
variable becomes a ``String`` that picks, when it is made at run time, the text of the
path the condition took (``cond.statements._stage_branches``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..common.values import flatten, is_array_like


def is_string(x) -> bool:
    """Is ``x`` a string: Python's, or one made from traced values (``String``)?"""
    from ..python.string_values import String

    return isinstance(x, (str, String))


def differ(a, b) -> bool:
    """Are ``a`` and ``b`` strings (Python's, or made from traced values) that one value of
    both paths cannot hold (other text, not just other traced values in one template)?"""
    if not (is_string(a) and is_string(b)):
        return False
    if isinstance(a, str) and isinstance(b, str):
        return a != b
    (la, ta), (lb, tb) = flatten(a), flatten(b)
    if ta != tb or len(la) != len(lb):
        return True
    return any(not (is_array_like(x) and is_array_like(y)) and not (x is y or (
        type(x) is type(y) and x == y)) for x, y in zip(la, lb))


def chosen_parts(t_parts, f_parts):
    """``{variable index: (template of the true path's string, of the false path's)}`` for
    the variables whose strings differ between the paths."""
    return {k: (template(a), template(b)) for k, (a, b) in enumerate(zip(t_parts, f_parts))
            if differ(a, b)}


def same_choice(a, b) -> bool:
    """Are two ``chosen_parts`` the same: the same variables, strings of the same
    templates?"""
    if a.keys() != b.keys():
        return False
    for k in a:
        (la, ta), (lb, tb) = flatten(a[k]), flatten(b[k])
        if ta != tb or len(la) != len(lb) or not all(
                x is y or (type(x) is type(y) and x == y) for x, y in zip(la, lb)):
            return False
    return True


def template(value):
    """``value`` with each array replaced by its shape and dtype (its other leaves kept)."""
    return jax.tree_util.tree_map(
        lambda x: jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x))
        if is_array_like(x) else x, value)


def zeros_like(tpl):
    """A value of ``template``'s structure, zeros where it had arrays (what the path not
    taken gives for the other path's string: never read)."""
    return jax.tree_util.tree_map(
        lambda x: jnp.zeros(x.shape, x.dtype) if isinstance(x, jax.ShapeDtypeStruct) else x,
        tpl)


class _Pick:
    """What makes a chosen string: the text of the path taken. ``refusal()`` is the error
    for a use that needs the string while tracing (a jitted function returning it)."""

    __slots__ = ("refusal",)

    def __init__(self, refusal):
        self.refusal = refusal

    # (every pick makes its string the same way: two traces of one `if` give strings of
    # one structure, which an `if` around it can choose between in turn)
    def __eq__(self, other):
        return isinstance(other, _Pick)

    def __hash__(self):
        return hash(_Pick)

    def __call__(self, taken, if_true, if_false):
        from ..effects.later import _Sketched

        if isinstance(taken, _Sketched):  # (shown while tracing: either, not one)
            return f"<{if_true!r} or {if_false!r}>"
        return if_true if taken else if_false


def choice(pred, pair, refusal):
    """The string the ``if`` on ``pred`` gives: ``pair`` is (the true path's, the false
    path's), as carried out of it; ``refusal``: see ``_Pick``."""
    from ..python.string_values import String

    return String(_Pick(refusal), (pred,) + tuple(pair))


def refusal(strings):
    """The ``_Pick.refusal`` of the first chosen string in ``strings`` (strings made from
    traced values, searched through what they are made of), or None."""
    from ..effects.later import Deferred

    todo = list(strings)
    while todo:
        s = todo.pop(0)
        if isinstance(s.fn, _Pick):
            return s.fn.refusal
        todo += [a for a in list(s.args) + list(s.kwargs.values()) if isinstance(a, Deferred)]
    return None
