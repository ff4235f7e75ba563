"""The errors of a traced ``if`` whose two paths give a variable values that one compiled
``cond`` cannot choose between, in the user's terms (``cond.statements._stage_branches``
raises them): another structure or shape, ``None``, a string, a static field, a dict's
key order, a value on one path only.
"""

from __future__ import annotations

import re

import numpy as np

from ...core.origin import message
from ...errors import ConversionError
from ..common.advice import appended_in_branch, sorted_hint, value_advice
from ..common.carries import RETURN_LABEL, key_orders, parts_of
from ..common.values import Undefined, describe, structure


_RETVAL = re.compile(r"^retval(_\d+)?$")  # the flag early_exits makes for `return` in loops


def expression_error(site, t_value, f_value):
    """A conditional expression ``a if c else b`` whose two values cannot be one array."""
    from ..common.advice import _show

    what = "this conditional expression (`a if c else b`)"
    fit = value_advice("a if c else b", t_value, f_value, "if")
    advice = fit[1].replace("`a if c else b` the same value on both paths",
                            "both operands the same value").replace(
        "`a if c else b`", "both operands") if fit is not None else (
        "Give both values the same structure, shape and kind (pad, or use `jnp.where` on "
        "arrays of one shape), or make the condition static.")
    return ConversionError(message(
        site, f"{what} gives {_show(t_value)} when the condition is true and "
        f"{_show(f_value)} when it is false, and which one is chosen depends on a traced "
        "condition, known only at run time", advice))


def branch_error(site, label, returning, t_leaf, f_leaf, t_tree=None, f_tree=None, guard=False):
    if returning == "expression":
        if label is None or label in ("retval", "?", RETURN_LABEL):  # the expression's own value
            return expression_error(site, t_leaf, f_leaf)
        returning = False  # state a branch changed (`log` of `log.append(...)`)
    if label is not None and _RETVAL.match(label):
        returning = True  # a `return` inside a loop: speak of return values
    if returning:
        if t_leaf is None or f_leaf is None:
            side = "false" if (f_leaf is None) else "true"
            return ConversionError(message(
                site, "this function returns a value on one path and None (`return None`, "
                f"a bare `return`, or it falls off its end) when this traced condition is "
                f"{side}",
                "Add a `return` with a value of the same shape to every path, "
                "or make the condition static."))
        if isinstance(t_leaf, Undefined) or isinstance(f_leaf, Undefined):
            return ConversionError(message(
                site, "this function returns a value on some paths and not on others "
                "that depend on a traced value",
                "Return a value of the same structure and shape on every path."))
        return ConversionError(message(
            site, "this function returns values that differ between paths that depend on a "
            f"traced value: {structure(t_leaf)} on one, {structure(f_leaf)} on the other",
            "Return values of the same structure and shape on every path."))
    if isinstance(t_leaf, Undefined) or isinstance(f_leaf, Undefined):
        side = "true" if isinstance(f_leaf, Undefined) else "false"
        return ConversionError(message(
            site, f"`{label}` is assigned only when the condition is {side}, "
            "but it is used after this traced `if`",
            f"Assign `{label}` before the `if`, or in both branches."))
    if t_tree is not None and t_tree != f_tree:
        # (`guard`: the `if` autoflow made around what follows a `break`, `continue` or
        # `return` under a traced condition, true where that code runs)
        sides = ("where the code after the `break`/`continue`/`return` runs",
                 "where it stopped before") if guard else ("when true", "when false")
        where = ("on the two paths a traced `break`, `continue` or `return` makes here"
                 if guard else "in the two branches of this traced `if`")
        return ConversionError(message(
            site, f"`{label}` has a different structure {where}: "
            f"{structure(t_leaf)} {sides[0]}, {structure(f_leaf)} {sides[1]}",
            (appended_in_branch(label, last_item(t_leaf, f_leaf), guard)
             if isinstance(t_leaf, list)
             and isinstance(f_leaf, list) else
             f"Give `{label}` the same structure (tuple/list/dict layout) in both branches.")))
    fit = value_advice(label, t_leaf, f_leaf, "if")
    if fit is not None:
        return ConversionError(message(site, fit[0] + " (this `if` is traced)", fit[1]))
    if np.shape(t_leaf) == np.shape(f_leaf):  # (a typed PRNG key against a float: the kind)
        return ConversionError(message(
            site, f"`{label}` is {describe(t_leaf)} when the condition is true and "
            f"{describe(f_leaf)} when it is false; a traced `if` needs values of one kind "
            "on both paths (no dtype holds both)",
            f"Give `{label}` values of one kind in both branches, or make the condition "
            "static."))
    return ConversionError(message(
        site, f"`{label}` is {describe(t_leaf)} when the condition is true and "
        f"{describe(f_leaf)} when it is false; a traced `if` needs the same shape "
        "on both paths",
        f"Make `{label}` the same shape in both branches (pad, or use `jnp.where` "
        "on arrays of one shape), or make the condition static."))


def last_item(a, b):
    """The last item of the longer of lists ``a`` and ``b`` (what a branch appended)."""
    longer = a if len(a) >= len(b) else b
    return longer[-1] if longer else None


def static_fields_error(site, name, value, ta, tb):
    """One pytree class on both paths, with as many arrays, but another static part
    (a field marked ``pytree_node=False``, a module's metadata): a traced condition
    cannot choose between two static values."""
    cls = type(value).__name__
    return ConversionError(message(
        site, f"`{name}` is a `{cls}` on both paths of this traced `if`, but its static "
        f"fields (those that are not arrays: `pytree_node=False`, metadata) differ: {ta} when "
        f"true, {tb} when false; which one is chosen would depend on the traced condition",
        f"Give `{name}` the same static fields on both paths, or make the field that differs "
        "an array (a pytree node), which a traced condition can choose."))


def same_key_orders(site, names, t_out, f_out):
    """A dict given its keys in another order on each path: Python's order (what
    iterating it sees) would depend on the traced condition."""
    for name, a, b in zip(names, parts_of(t_out, names), parts_of(f_out, names)):
        ka, kb = key_orders(a), key_orders(b)
        if ka != kb:
            ta, tb = next((x, y) for x, y in zip(ka, kb) if x != y)
            raise ConversionError(message(
                site(), f"`{name}` gets its keys in another order on each path of this traced "
                f"`if` ({list(ta)} when true, {list(tb)} when false): the order of a dict's "
                "keys, which iterating it sees, cannot depend on a traced condition",
                f"Give `{name}` its keys in one order on both paths (assign them in the same "
                "order, or make the dict with every key before the `if`)." + sorted_hint(ta, tb)))

