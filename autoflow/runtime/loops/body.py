"""The staged body of a loop for one choice of carry types, and its errors.

``_loop_body`` traces one iteration over the flattened carries (promoting dtypes,
defining new variables, adding dict keys, accumulating appends, filling unbound
variables) and raises ``Restart`` where the carries must change;
``CarryShapeError`` and ``_loop_error`` say what cannot be carried.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ...core.origin import message
from ...errors import ConversionError
from ..effects import unset
from ..common.carries import (LOOP, Restart, cast_to, join_parts, keep_order, key_orders, parts_of, placing,
                              same_spec, spec_of)
from ..common.advice import growing_list, shrinking_list, sorted_hint, static_bound, value_advice
from ..common.values import (Undefined, aval_of, describe, flatten, is_array_like, is_extended, promote_values, same_static,
                             staged_block, structure, unflatten)


def _loop_error(site, kind, label, before, after):
    what = {"while": "`while` loop", "for": "`for` loop"}.get(kind, "loop")
    if isinstance(before, Undefined):
        return ConversionError(message(
            site, f"`{label}` is read in this traced {what} before it is assigned",
            f"Assign `{label}` before the loop."))
    if not (is_array_like(before) or isinstance(before, jax.ShapeDtypeStruct)) \
            or not is_array_like(after):
        fit = value_advice(label, before, after, "loop")
        if fit is not None and not isinstance(before, jax.ShapeDtypeStruct) \
                and not (before is None and is_array_like(after)):
            return ConversionError(message(site, f"{fit[0]} (this {what} is traced)", fit[1]))
        return ConversionError(message(
            site, f"`{label}` is {describe(before)} before this traced {what} and "
            f"{describe(after)} after an iteration; a staged loop can only carry arrays "
            "whose type stays the same",
            f"Initialize `{label}` before the loop with a value of the type the loop gives it "
            f"(e.g. `jnp.zeros(shape, dtype)`)."))
    return ConversionError(message(
        site, f"`{label}` changes shape in this traced {what}: {describe(before)} before an "
        f"iteration, {describe(after)} after it",
        f"Keep `{label}` one shape across iterations: make it at its largest size before the "
        f"loop and write into it, `{label} = {label}.at[i].set(...)`. Or "
        + _lower_first(static_bound(site, "so that the loop runs as Python, unrolled (write it "
                                          "`for ... in autoflow.unroll(...)` to say so: no "
                                          "PerformanceWarning then)"))))


def _lower_first(text):
    return text[:1].lower() + text[1:]


class CarryShapeError(ConversionError):
    """Carries that change shape in an iteration of a traced loop (the error
    ``_loop_error`` words for the first). ``reshaped``: ``(leaf index in the
    loop's flattened state, label, before, after)`` per carry, where the state
    is what ``stage_loop`` was given. ``loops.statements._loop_with_state`` peels one
    iteration under a traced ``if`` when the shapes settle after it."""

    def __init__(self, site, kind, reshaped):
        _, label, before, after = reshaped[0]
        super().__init__(*_loop_error(site, kind, label, before, after).args)
        self.site, self.kind, self.reshaped = site, kind, reshaped


CarryShapeError.__module__ = "autoflow.errors"  # (as a traceback names it: errors.__getattr__)


class _Appended(list):
    """The list a staged loop appends to, as its body sees it: appending is all
    it can do (the appended values become the scan's stacked outputs, after the
    items the list held before the loop). Reading it would see none of them,
    so a read is an error that makes a static loop run as Python instead."""

    def _read(self, *args, **kwargs):
        raise ConversionError("internal: a list appended to in a staged loop is read")

    __getitem__ = __len__ = __iter__ = __contains__ = __reversed__ = _read
    index = count = copy = __eq__ = __ne__ = __bool__ = _read
    __hash__ = None

    def __add__(self, other):
        return list(other)


def _added_keys(before, after):
    """Keys a loop body adds to a dict carry (holding arrays), as ``{key: spec}``."""
    if not (type(before) is dict and type(after) is dict) or not set(before) < set(after):
        return None
    if flatten({k: after[k] for k in before})[1] != flatten(before)[1]:
        return None
    added = {k: spec_of(after[k]) for k in after if k not in before}
    return added if all(v is not None for v in added.values()) else None


def _appended(before, after):
    """``after`` is ``before`` with one item appended (``ys.append(v)``)."""
    return (isinstance(before, list) and isinstance(after, list)
            and len(after) == len(before) + 1 and all(a is b for a, b in zip(before, after))
            and spec_of(after[-1]) is not None)  # arrays can be stacked; functions cannot


def _loop_body(kind, state, names, site, step, leaves, tree, labels, mask, avals, accum,
               can_accumulate, hinted=None, adds=None, fills=(), placeholders=None,
               first_bound=(), start=0, guessed=(), bound=None, strengthened=None):
    """The staged body of ``loop`` for one choice of carry types, and ``merge``.

    ``strengthened`` (a set) collects the carries that start weakly typed (a Python
    scalar) and that the body makes strongly typed, of the same dtype: they stay weak
    inside the loop (no second trace) and are made strong after it (`stage_loop`).

    ``body(k, dyn)`` returns ``(new carries, appended values)``; ``accum``
    holds the indices of the variables that are lists getting one ``append``
    per iteration (their values become the scan's stacked outputs).

    A variable unbound when the loop starts that the body binds needs a carry
    of its own (zeros before the first iteration). When the body's value for
    it does not depend on the value it starts from (the body binds it on every
    path: its name is not in ``fills``, the log of what was filled with zeros
    while tracing), ``adds`` (a list, where the loop can take them) receives
    ``(index, treedef, leaves)`` and the trace goes on: the carry is added to
    this trace's loop (``while_primitive.while_loop``'s ``added``). So does an
    exit value (read only after an iteration that binds it) when the body
    holds a loop of its own (``LOOP`` in ``fills``): a second trace would
    trace that loop again. Otherwise the loop is traced again with the carry
    (``Restart("define")``): where a path leaves it unbound, the second
    trace passes it through instead of filling it with zeros, and a
    ``lax.cond`` that passes a carry through is cheaper in a loop than one
    that writes a constant (``first_above_return``: 1.09x of hand-written
    ``lax`` with the constant, 1.00x without).

    With ``placeholders`` (a ``Placeholders``), the paths that leave such a
    variable unbound give it an input of the body's jaxpr instead of zeros, and
    the carry is added with that input (``adds`` entries then hold the input
    tracers), so the body is traced once: the same program as the second trace.

    ``guessed``: the indices in ``accum`` that ``stage_loop`` guessed from the
    body's code (``_appends``) rather than learned from a trace; one the body
    does not append to exactly once restarts the loop without the guesses.
    """

    def merge(dyn):
        it = iter(dyn)
        return keep_order(unflatten(tree, [next(it) if m else x for x, m in zip(leaves, mask)]),
                          state)

    def body(k, dyn):
        merged = merge(dyn)
        if first_bound:
            # Variables unbound when the loop started, carried from zeros: bound
            # once an iteration has run (or where the flags `bound` carries say so,
            # where the body binds them on some paths only); a read where one is
            # not bound raises Python's error when the compiled code runs (`effects.unset.ld`).
            parts = parts_of(merged, names)
            flags = bound.inputs if bound is not None and bound.inputs is not None \
                else [k > start] * len(first_bound)
            for j, flag in zip(first_bound, flags):
                unset.bound_if(parts[j], names[j], flag)
        if placeholders is not None:
            placeholders.begin()
        with staged_block(), placing(placeholders):
            new = step(k, merged)
        if first_bound and bound is not None:
            parts = parts_of(new, names)
            bound.outputs = [unset.bound_flag(parts[j]) for j in first_bound]
            bound.started = flags
        if bound is not None:
            # a variable bound before the loop that the body may leave unbound (a `del`
            # on some paths): carried with its flag "bound yet" too (True at the start)
            unbinds = [j for j, (a, b) in enumerate(zip(parts_of(state, names),
                                                         parts_of(new, names)))
                       if j not in first_bound and not isinstance(a, Undefined)
                       and unset.bound_flag(b) is not None]
            if unbinds:
                raise Restart(("unbind", unbinds))
        outs = []
        if accum or can_accumulate:
            parts = parts_of(new, names)
            grown = {}
            for j, (a, b) in enumerate(zip(parts_of(merged, names), parts)):
                if j in accum:
                    if j in guessed and not (type(b) is list and len(b) == 1
                                             and spec_of(b[0]) is not None):
                        # (not one array appended, as `_appended` requires: a function
                        # appended cannot be stacked)
                        raise Restart(("unguess", None))
                    if not (isinstance(b, list) and len(b) == 1 and type(b) is list):
                        raise ConversionError(message(
                            site(), f"`{names[j]}` gets values appended in this loop, but not "
                            "exactly one per iteration (or it is also used in other ways)",
                            f"Append to `{names[j]}` once per iteration, unconditionally, or "
                            "make the loop run as Python with `autoflow.unroll`."))
                    outs.append(b[0])
                    parts[j] = a  # the same placeholder, every iteration
                elif can_accumulate and _appended(a, b):
                    grown[j] = True
            if grown:
                raise Restart(("accumulate", grown))
            new = join_parts(parts, names)
        defines, keys = {}, {}
        for j, (a, b) in enumerate(zip(parts_of(state, names), parts_of(new, names))):
            added = _added_keys(a, b)
            if added:
                keys[j] = added
        if keys:
            raise Restart(("keys", keys))
        before = parts_of(state, names)
        # A `return` without a value in the loop: the return value is None where it is
        # set, and read only where it is (after a `return`): carry None from the start.
        nones = [j for j, (a, b) in enumerate(zip(before, parts_of(new, names)))
                 if isinstance(a, Undefined) and a.exit and b is None]
        if nones:
            raise Restart(("none", nones))
        for j, (a, b) in enumerate(zip(before, parts_of(new, names))):
            if isinstance(a, Undefined) and spec_of(b) is not None:
                defines[j] = spec_of(b)
        placed = placeholders.made if placeholders is not None else {}
        if any(j not in defines or not same_spec(placed[j][1], defines[j]) for j in placed):
            # an input made for a variable the body leaves unbound, or of another
            # type than it binds: trace the loop again without placeholders
            raise Restart(("unplace", None))
        # (a variable the body binds on some paths only needs a flag "bound yet" carried:
        # the loop is traced again with it, `_carrying_bound`, not added as a carry)
        new_parts = parts_of(new, names)
        some_paths = bound is not None and any(
            unset.bound_flag(new_parts[j]) is not None for j in defines)
        if some_paths:
            bound.wanted = True
        if defines and adds is not None and not some_paths and all(
                not ({before[j].name, names[j]} & fills) or before[j].exit and LOOP in fills
                for j in defines):
            parts = parts_of(new, names)
            for j in sorted(defines):
                bl, bt = flatten(parts[j])
                adds.append((j, bt, [cast_to(jnp.asarray(x), *aval_of(x)[1:]) for x in bl],
                             placed[j][2] if j in placed else None))
                parts[j] = before[j]  # unbound in the carries traced here
            new = join_parts(parts, names)
        elif defines:
            raise Restart(("define", defines))
        if hinted:
            # Variables started from a remembered definition (see `_DEFINED`):
            # the body must give exactly that type, or the loop starts again
            # without the hint (which was then learned under other circumstances).
            parts = parts_of(new, names)
            if any(spec_of(parts[j]) != spec for j, spec in hinted.items()):
                raise Restart(("unhint", None))
        new_leaves, new_tree = flatten(new)
        if new_tree != tree:
            for name, a, b in zip(names, parts_of(state, names), parts_of(new, names)):
                if flatten(a)[1] != flatten(b)[1]:
                    la, lb = flatten(a)[0], flatten(b)[0]
                    if len(la) == 1 and len(lb) == 1:
                        raise _loop_error(site(), kind, name, la[0], lb[0])
                    fit = value_advice(name, a, b, "loop")
                    if fit is not None and isinstance(b, list) and b:
                        raise ConversionError(message(
                            site(), f"{fit[0]} (this loop is traced)", fit[1]))
                    if type(a) is list and type(b) is list and len(b) > len(a):
                        raise ConversionError(message(site(), *growing_list(name, a, b, site())))
                    if type(a) is list and type(b) is list and len(b) < len(a):
                        raise ConversionError(message(site(), *shrinking_list(name, a, b)))
                    hint = (f" (for a list built with `append`, preallocate an array and set "
                            f"`{name} = {name}.at[i].set(value)`)" if isinstance(a, list) else "")
                    raise ConversionError(message(
                        site(), f"`{name}` changes structure in this traced loop: "
                        f"{structure(a)} before an iteration, {structure(b)} after it",
                        f"Keep `{name}` one structure across iterations{hint}, or make the "
                        "loop bound static so the loop runs as Python."))
        for name, a, b in zip(names, parts_of(state, names), parts_of(new, names)):
            if key_orders(a) != key_orders(b):
                ka, kb = next((x, y) for x, y in zip(key_orders(a), key_orders(b)) if x != y)
                raise ConversionError(message(
                    site(), f"`{name}` has its keys in another order after an iteration of "
                    f"this traced loop ({list(ka)} before it, {list(kb)} after): the order of "
                    "a dict's keys, which iterating it sees, cannot change in a staged loop",
                    f"Keep the order of `{name}`'s keys across iterations (assign to its keys "
                    "instead of deleting them and adding them again)." + sorted_hint(ka, kb)))
        out, changes, reshaped = [], {}, []
        forwarded = {}  # carry index -> the carry whose input the body gives it as it is
        ins = {id(v): k for k, v in enumerate(dyn)}
        j = 0
        for i, (x, m) in enumerate(zip(new_leaves, mask)):
            if not m:
                if same_static(leaves[i], x):
                    continue
                raise _loop_error(site(), kind, labels[i], leaves[i], x)
            if not is_array_like(x):
                raise _loop_error(site(), kind, labels[i], leaves[i], x)
            shape, dtype, weak = aval_of(x)
            if shape != avals[j][0]:
                # (the loop may be peeled once under a traced `if`: `CarryShapeError`)
                if not (is_extended(dtype) or is_extended(avals[j][1])):
                    reshaped.append((i, labels[i], jax.ShapeDtypeStruct(avals[j][0], avals[j][1]),
                                     x))
                    out.append(x)
                    j += 1
                    continue
                raise _loop_error(site(), kind, labels[i],
                                  jax.ShapeDtypeStruct(avals[j][0], avals[j][1]), x)
            if dtype != avals[j][1] and (is_extended(dtype) or is_extended(avals[j][1])):
                raise _loop_error(site(), kind, labels[i],
                                  jax.ShapeDtypeStruct(avals[j][0], avals[j][1]), x)
            # (a carry that started as a Python scalar stays weakly typed while the
            # body keeps it so: `s = 0.5; ... s = s * 1.01` times a float16 array is
            # float16, as in Python)
            target, still_weak = promote_values(leaves[i], avals[j], x, (shape, dtype, weak))
            if target == avals[j][1] and avals[j][2] and not still_weak \
                    and strengthened is not None:
                strengthened.add(j)
            elif (target, still_weak) != tuple(avals[j][1:]):
                changes[j] = (target, still_weak)
            k = ins.get(id(x))
            if k is not None and k != j:
                forwarded[j] = k
            out.append(cast_to(x, avals[j][1], avals[j][2]) if j not in changes else x)
            j += 1
        if strengthened is not None:
            # A carry that takes another's value (`a, b = b, (a + b) % m`) is, from the
            # second iteration on, what that one was: strong where the body makes it so
            grew = True
            while grew:
                more = {j for j, k in forwarded.items() if k in strengthened
                        and j not in strengthened and avals[j][2] and avals[j][1] == avals[k][1]}
                strengthened.update(more)
                grew = bool(more)
        if reshaped:
            raise CarryShapeError(site(), kind, reshaped)
        if changes:
            raise Restart(("promote", changes))
        return tuple(out), tuple(outs)

    return body, merge
