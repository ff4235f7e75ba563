"""Building ``lax.cond`` and ``lax`` loops from Python branch and body functions.

The operators in ``operators.py`` call these once a condition or a trip count
turns out to be traced. Both builders:

* stage only the array-like leaves of the values flowing through; other
  leaves (``None``, strings, functions) must come out unchanged;
* reconcile dtypes the way NumPy promotion would (``0`` and ``2.5`` give a
  float), retracing with the promoted types when a branch or an iteration
  disagrees, so users never see JAX's "must have identical types";
* refuse, with a ConversionError in the user's terms, what cannot be staged:
  a variable bound on one path only, or whose shape or structure differs.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
import types

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from ._jax_compat import body_input_maker, current_trace, current_trace_kind

from ..core.origin import message
from ..errors import ConversionError
from . import checkpoint, loopdebug, lowering, raising
from .teach import value_advice
from .raising import Signal, StagedRaise
from .values import (Tracer, Undefined, as_pred, aval_of, describe, flatten, is_array_like, is_extended,
                     promote,
                     same_static, staged_block, structure, unflatten)


class _Restart(Signal):
    """Raised from inside a traced function to retrace with new carry types."""

    def __init__(self, changes):
        super().__init__("internal: retrace with new types")
        self.changes = changes


def leaf_labels(value, names):
    """For each leaf of ``value``, the user's variable it belongs to."""
    if names is None:
        return ["the return value"] * len(flatten(value)[0])
    if len(names) == 1:
        return [names[0]] * len(flatten(value)[0])
    if not isinstance(value, tuple) or len(value) != len(names):
        return ["?"] * len(flatten(value)[0])
    labels = []
    for name, part in zip(names, value):
        labels += [name] * len(flatten(part)[0])
    return labels


def _parts(value, names):
    """The per-variable parts of a branch or loop value (one for a bare value)."""
    if names is not None and len(names) > 1 and isinstance(value, tuple) \
            and len(value) == len(names):
        return list(value)
    return [value]


def _join(parts, names):
    return tuple(parts) if names is not None and len(names) > 1 else parts[0]


def _spec(value):
    """The shapes and dtypes of a pytree of arrays (``None`` if it holds anything else)."""
    leaves, tree = flatten(value)
    if isinstance(value, Undefined) or not leaves or not all(is_array_like(x) for x in leaves):
        return None
    return unflatten(tree, [jax.ShapeDtypeStruct(*aval_of(x)[:2]) for x in leaves])


def _zeros(spec):
    return jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), spec)


# The names of variables that a staged statement filled with zeros (a branch
# that leaves one unbound, a loop that starts one as zeros), logged for each
# loop body being traced: a variable first bound in a loop body and never
# filled there is bound on every path through it, so the body's value for it
# does not depend on the value it starts from (see `_loop_body`, `adds`).
_local = threading.local()
_LOOP = "<a loop>"  # logged by each loop staged (not a name a variable can have)


def _log_fills(names):
    names = tuple(names)  # (a generator would fill only the first log)
    for log in getattr(_local, "fill_logs", ()):
        log.update(names)


@contextlib.contextmanager
def _logging(log):
    """Log into the set ``log`` the fills made while a loop body is traced."""
    logs = _local.__dict__.setdefault("fill_logs", [])
    logs.append(log)
    try:
        yield log
    finally:
        del logs[next(i for i in range(len(logs) - 1, -1, -1) if logs[i] is log)]


_new_input = body_input_maker()


class _Placeholders:
    """Inputs of a loop body's jaxpr, made while it is traced, that stand for the
    value a variable first bound in the loop has when an iteration starts.

    A traced ``if`` in the body that binds such a variable on one path only
    gives the other path this input (``cond``), where it would give zeros: the
    loop then carries the variable, and that path passes the carry through.
    Without it the body is traced a second time, with the variable a carry from
    the start (``_Restart("define")``). ``owners`` maps the ``Undefined`` values
    of the loop's entry state to their variable's index; ``made`` is
    ``{index: (value, spec, input tracers)}`` for this trace of the body, in the
    order the inputs were made."""

    def __init__(self, owners):
        self.owners, self.trace, self.made = owners, None, {}

    def begin(self):
        self.trace, self.made = current_trace(), {}

    def order(self):
        """The inputs made, in the order the trace made them (its jaxpr's inputs)."""
        return [x for _, _, inputs in self.made.values() for x in inputs]

    def value(self, undefined, spec):
        """The placeholder for ``undefined`` of type ``spec``, or None (zeros then)."""
        j = self.owners.get(id(undefined))
        if j is None or self.trace is None:
            return None
        if j in self.made:
            value, known, _ = self.made[j]
            return value if _same_spec(known, spec) else None
        leaves, tree = flatten(spec)
        inputs = [_new_input(self.trace, x.shape, x.dtype) for x in leaves]
        if None in inputs:
            return None
        value = unflatten(tree, inputs)
        self.made[j] = (value, spec, inputs)
        return value


def _same_spec(a, b):
    la, ta = flatten(a)
    lb, tb = flatten(b)
    return ta == tb and all((x.shape, x.dtype) == (y.shape, y.dtype) for x, y in zip(la, lb))


@contextlib.contextmanager
def _placing(scope):
    """Make ``scope`` the one that ``if``s fill from while a loop body is traced
    (the innermost loop's only: an inner loop's body has scopes of its own)."""
    scopes = _local.__dict__.setdefault("placeholders", [])
    scopes.append(scope)
    try:
        yield
    finally:
        scopes.pop()


def _fill(undefined, spec):
    """What a path that leaves ``undefined`` unbound gives for it: the innermost
    loop body's placeholder for it, or zeros. Returns ``(value, zeros?)``."""
    scopes = getattr(_local, "placeholders", None)
    if scopes and scopes[-1] is not None:
        value = scopes[-1].value(undefined, spec)
        if value is not None:
            return value, False
    return _zeros(spec), True


def _cast(x, dtype):
    if isinstance(x, jax.Array) and x.dtype == dtype and not getattr(x, "weak_type", False):
        return x
    return lax.convert_element_type(x, dtype)


# ---------------------------------------------------------------------------
# cond
# ---------------------------------------------------------------------------

_RETVAL = re.compile(r"^retval(_\d+)?$")  # the flag early_exits makes for `return` in loops


def _branch_error(site, label, returning, t_leaf, f_leaf, t_tree=None, f_tree=None):
    if label is not None and _RETVAL.match(label):
        returning = True  # a `return` inside a loop: speak of return values
    if returning:
        if t_leaf is None or f_leaf is None or t_tree != f_tree and None in (t_leaf, f_leaf):
            side = "false" if (f_leaf is None) else "true"
            return ConversionError(message(
                site, "this function returns a value on one path and falls off its end "
                f"(returning None) when this traced condition is {side}",
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
        return ConversionError(message(
            site, f"`{label}` has a different structure in the two branches of this traced `if`: "
            f"{structure(t_leaf)} when true, {structure(f_leaf)} when false",
            (f"A list appended to under a traced condition would have a data-dependent "
             f"length: preallocate an array and set `{label} = {label}.at[i].set(value)`, "
             "or keep the append unconditional." if isinstance(t_leaf, list)
             and isinstance(f_leaf, list) else
             f"Give `{label}` the same structure (tuple/list/dict layout) in both branches.")))
    fit = value_advice(label, t_leaf, f_leaf, "if")
    if fit is not None:
        return ConversionError(message(site, fit[0] + " (this `if` is traced)", fit[1]))
    return ConversionError(message(
        site, f"`{label}` is {describe(t_leaf)} when the condition is true and "
        f"{describe(f_leaf)} when it is false; a traced `if` needs the same shape "
        "on both paths",
        f"Make `{label}` the same shape in both branches (pad, or use `jnp.where` "
        "on arrays of one shape), or make the condition static."))


def cond(pred, true_fn, false_fn, operands, names, site, guard=False, unread=()):
    """``lax.cond`` of two Python branch functions taking ``operands``.

    ``names`` labels the outputs (a tuple of variable names), or is ``None``
    when the branches' results are the function's return value. ``guard``,
    ``unread``: see ``operators.if_stmt``.
    """
    records = {}
    targets = {}
    fills = {}  # variable index -> zeros spec, for guarded Undefined values
    zeroed = set()  # those filled with zeros (not a loop body's placeholder)
    returning = names is None

    def make(key, fn):
        def branch():
            with staged_block(), raising.on_path(pred if key == "t" else _negate(pred)):
                try:
                    out = fn(*operands)
                except StagedRaise:
                    raise _BranchRaised(key) from None
            other = records.get("f" if key == "t" else "t")
            if other is not None:
                # The second path traced fills its own one-sided bindings now (zeros
                # of the other path's type), instead of a restart that traces both
                # paths again; only the first path's need a restart (`_compare`).
                for k, (mine, theirs) in enumerate(zip(_parts(out, names), _parts(other[0], names))):
                    if k not in fills and isinstance(mine, Undefined) and mine.guarded \
                            and _spec(theirs) is not None:
                        fills[k] = _spec(theirs)
            if fills:
                parts = _parts(out, names)
                for k, p in enumerate(parts):
                    if k in fills and isinstance(p, Undefined):
                        parts[k], zeros = _fill(p, fills[k])
                        if zeros:
                            zeroed.add(k)
                out = _join(parts, names)
            leaves, tree = flatten(out)
            mask = [is_array_like(x) for x in leaves]
            records[key] = (out, leaves, tree, mask)
            if other is not None:
                _compare(records["t"], records["f"])
            dyn = [x for x, m in zip(leaves, mask) if m]
            return [_cast(x, targets[j]) if j in targets else x for j, x in enumerate(dyn)]
        return branch

    def _compare(t, f):
        (t_out, t_leaves, t_tree, t_mask), (f_out, f_leaves, f_tree, f_mask) = t, f
        # A variable first bound inside a loop may be bound on one path only:
        # fill the other path with zeros of the same type (see Undefined.guarded).
        new_fills = {}
        for k, (a, b) in enumerate(zip(_parts(t_out, names), _parts(f_out, names))):
            for u, v in ((a, b), (b, a)):
                if isinstance(u, Undefined) and u.guarded and _spec(v) is not None:
                    new_fills[k] = _spec(v)
        if new_fills:
            raise _Restart(("fill", new_fills))
        labels = leaf_labels(t_out, names)
        if t_tree != f_tree:
            # Find the first variable whose layout differs, for the message.
            if returning:
                raise _branch_error(site(), None, True, t_out, f[0], t_tree, f_tree)
            t_parts = t_out if len(names) > 1 else (t_out,)
            f_parts = f[0] if len(names) > 1 else (f[0],)
            for name, a, b in zip(names, t_parts, f_parts):
                ta, tb = flatten(a)[1], flatten(b)[1]
                if ta != tb:
                    la, lb = flatten(a)[0], flatten(b)[0]
                    if len(la) == 1 and len(lb) == 1:
                        raise _branch_error(site(), name, False, la[0], lb[0])
                    raise _branch_error(site(), name, False, a, b, ta, tb)
            raise _branch_error(site(), "?", False, t_out, f[0], t_tree, f_tree)
        changes = {}
        j = 0
        for i, (a, b, ma, mb) in enumerate(zip(t_leaves, f_leaves, t_mask, f_mask)):
            if not ma or not mb:
                if not (ma or mb) and same_static(a, b):
                    continue
                raise _branch_error(site(), labels[i], returning, a, b)
            av, bv = aval_of(a), aval_of(b)
            if av[0] != bv[0]:
                raise _branch_error(site(), labels[i], returning, a, b)
            if av[1] != bv[1]:
                if is_extended(av[1]) or is_extended(bv[1]):  # a key on one path only
                    raise _branch_error(site(), labels[i], returning, a, b)
                changes[j] = promote(av, bv)[0]
            j += 1
        if changes and not targets:
            raise _Restart(changes)

    for _ in range(4):
        records.clear()
        zeroed.clear()
        try:
            # lax.cond, or a select when the branches are cheap (see lowering.py)
            dyn = lowering.cond(as_pred(pred), make("t", true_fn), make("f", false_fn), guard,
                                lambda: _free(records["t"], names, unread))
        except _BranchRaised as b:
            lowering._set_choice(None)
            return _cond_raising(pred, true_fn, false_fn, operands, b.key, site)
        except _Restart as r:
            if isinstance(r.changes, tuple):
                fills.update(r.changes[1])
            else:
                targets.update(r.changes)
            continue
        break
    else:  # pragma: no cover - promotion converges in one step
        raise ConversionError(message(site(), "could not find common types for this `if`"))
    if zeroed and names is not None:
        _log_fills(names[k] for k in zeroed if k < len(names))
    _, leaves, tree, mask = records["t"]
    it = iter(dyn)
    return unflatten(tree, [next(it) if m else x for x, m in zip(leaves, mask)])


def _free(record, names, unread):
    """The staged outputs (indices among the array leaves) of the variables ``unread``."""
    if not unread:
        return ()
    out, leaves, _, mask = record
    labels = [label for label, m in zip(leaf_labels(out, names), mask) if m]
    return tuple(i for i, label in enumerate(labels) if label in unread)


class _BranchRaised(Signal):
    def __init__(self, key):
        super().__init__("internal: a staged branch raises")
        self.key = key


def _negate(pred):
    return lambda: jnp.logical_not(as_pred(pred))


def _cond_raising(pred, true_fn, false_fn, operands, raiser, site):
    """A staged ``if`` one of whose branches ends in ``raise`` (see ``raising``).

    That branch does not fall through: it is traced on its own path to stage
    its run-time checks, and the ``if``'s value is the other branch's. If the
    other branch raises too, the ``if`` never falls through either:
    ``StagedRaise`` goes on to the enclosing branch, or, at the top, the
    user's exception is raised while tracing.
    """
    fns = {"t": true_fn, "f": false_fn}
    paths = {"t": pred, "f": _negate(pred)}
    other = "f" if raiser == "t" else "t"
    with staged_block(), raising.on_path(paths[raiser]):
        try:
            fns[raiser](*operands)
        except StagedRaise as r:
            r.emit()
    with staged_block(), raising.on_path(paths[other]):
        try:
            return fns[other](*operands)
        except StagedRaise as r:
            r.emit()
            both = r
    raise StagedRaise(None, site, first=both)


# ---------------------------------------------------------------------------
# loops
# ---------------------------------------------------------------------------

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
        f"Keep `{label}` one shape across iterations (preallocate it and write with "
        f"`{label}.at[i].set(...)`), or make the loop bound static so the loop runs as Python."))


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
    added = {k: _spec(after[k]) for k in after if k not in before}
    return added if all(v is not None for v in added.values()) else None


def _appended(before, after):
    """``after`` is ``before`` with one item appended (``ys.append(v)``)."""
    return (isinstance(before, list) and isinstance(after, list)
            and len(after) == len(before) + 1 and all(a is b for a, b in zip(before, after))
            and _spec(after[-1]) is not None)  # arrays can be stacked; functions cannot


def _loop_body(kind, state, names, site, step, leaves, tree, labels, mask, avals, accum,
               can_accumulate, hinted=None, adds=None, fills=(), placeholders=None):
    """The staged body of ``loop`` for one choice of carry types, and ``merge``.

    ``body(k, dyn)`` returns ``(new carries, appended values)``; ``accum``
    holds the indices of the variables that are lists getting one ``append``
    per iteration (their values become the scan's stacked outputs).

    A variable unbound when the loop starts that the body binds needs a carry
    of its own (zeros before the first iteration). When the body's value for
    it does not depend on the value it starts from (the body binds it on every
    path: its name is not in ``fills``, the log of what was filled with zeros
    while tracing), ``adds`` (a list, where the loop can take them) receives
    ``(index, treedef, leaves)`` and the trace goes on: the carry is added to
    this trace's loop (``checkpoint.while_loop``'s ``added``). So does an
    exit value (read only after an iteration that binds it) when the body
    holds a loop of its own (``_LOOP`` in ``fills``): a second trace would
    trace that loop again. Otherwise the loop is traced again with the carry
    (``_Restart("define")``): where a path leaves it unbound, the second
    trace passes it through instead of filling it with zeros, and a
    ``lax.cond`` that passes a carry through is cheaper in a loop than one
    that writes a constant (``first_above_return``: 1.09x of hand-written
    ``lax`` with the constant, 1.00x without).

    With ``placeholders`` (a ``_Placeholders``), the paths that leave such a
    variable unbound give it an input of the body's jaxpr instead of zeros, and
    the carry is added with that input (``adds`` entries then hold the input
    tracers), so the body is traced once: the same program as the second trace.
    """

    def merge(dyn):
        it = iter(dyn)
        return unflatten(tree, [next(it) if m else x for x, m in zip(leaves, mask)])

    def body(k, dyn):
        merged = merge(dyn)
        if placeholders is not None:
            placeholders.begin()
        with staged_block(), _placing(placeholders):
            new = step(k, merged)
        outs = []
        if accum or can_accumulate:
            parts = _parts(new, names)
            grown = {}
            for j, (a, b) in enumerate(zip(_parts(merged, names), parts)):
                if j in accum:
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
                raise _Restart(("accumulate", grown))
            new = _join(parts, names)
        defines, keys = {}, {}
        for j, (a, b) in enumerate(zip(_parts(state, names), _parts(new, names))):
            added = _added_keys(a, b)
            if added:
                keys[j] = added
        if keys:
            raise _Restart(("keys", keys))
        before = _parts(state, names)
        for j, (a, b) in enumerate(zip(before, _parts(new, names))):
            if isinstance(a, Undefined) and _spec(b) is not None:
                defines[j] = _spec(b)
        placed = placeholders.made if placeholders is not None else {}
        if any(j not in defines or not _same_spec(placed[j][1], defines[j]) for j in placed):
            # an input made for a variable the body leaves unbound, or of another
            # type than it binds: trace the loop again without placeholders
            raise _Restart(("unplace", None))
        if defines and adds is not None and all(
                not ({before[j].name, names[j]} & fills) or before[j].exit and _LOOP in fills
                for j in defines):
            parts = _parts(new, names)
            for j in sorted(defines):
                bl, bt = flatten(parts[j])
                adds.append((j, bt, [_cast(jnp.asarray(x), aval_of(x)[1]) for x in bl],
                             placed[j][2] if j in placed else None))
                parts[j] = before[j]  # unbound in the carries traced here
            new = _join(parts, names)
        elif defines:
            raise _Restart(("define", defines))
        if hinted:
            # Variables started from a remembered definition (see `_DEFINED`):
            # the body must give exactly that type, or the loop starts again
            # without the hint (which was then learned under other circumstances).
            parts = _parts(new, names)
            if any(_spec(parts[j]) != spec for j, spec in hinted.items()):
                raise _Restart(("unhint", None))
        new_leaves, new_tree = flatten(new)
        if new_tree != tree:
            for name, a, b in zip(names, _parts(state, names), _parts(new, names)):
                if flatten(a)[1] != flatten(b)[1]:
                    la, lb = flatten(a)[0], flatten(b)[0]
                    if len(la) == 1 and len(lb) == 1:
                        raise _loop_error(site(), kind, name, la[0], lb[0])
                    fit = value_advice(name, a, b, "loop")
                    if fit is not None and isinstance(b, list) and b:
                        raise ConversionError(message(
                            site(), f"{fit[0]} (this loop is traced)", fit[1]))
                    hint = (f" (for a list built with `append`, preallocate an array and set "
                            f"`{name} = {name}.at[i].set(value)`)" if isinstance(a, list) else "")
                    raise ConversionError(message(
                        site(), f"`{name}` changes structure in this traced loop: "
                        f"{structure(a)} before an iteration, {structure(b)} after it",
                        f"Keep `{name}` one structure across iterations{hint}, or make the "
                        "loop bound static so the loop runs as Python."))
        out, changes = [], {}
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
                raise _loop_error(site(), kind, labels[i],
                                  jax.ShapeDtypeStruct(avals[j][0], avals[j][1]), x)
            if dtype != avals[j][1] and (is_extended(dtype) or is_extended(avals[j][1])):
                raise _loop_error(site(), kind, labels[i],
                                  jax.ShapeDtypeStruct(avals[j][0], avals[j][1]), x)
            target, _ = promote(avals[j], (shape, dtype, weak))
            if target != avals[j][1]:
                changes[j] = target
            out.append(_cast(x, avals[j][1]) if target == avals[j][1] else x)
            j += 1
        if changes:
            raise _Restart(("promote", changes))
        return tuple(out), tuple(outs)

    return body, merge


def _check_finished(limit, site, running):
    if bool(np.asarray(running)):
        from ..errors import LoopLimitError

        raise raising.fail(LoopLimitError(message(
            site, f"this loop did not finish within max_loop_iterations={limit}",
            "Raise the bound (`max_loop_iterations=`), or check that the loop ends; "
            "`AUTOFLOW_DEBUG_LOOPS=1` reports its iterations while it runs.")), site)


def _bounded(body, test, init, start, stop, max_iterations, site):
    """A while loop as a scan of ``max_iterations`` masked steps (reverse-differentiable)."""

    def full_test(k, dyn):
        more = test(dyn)
        return more if stop is None else jnp.logical_and(k < stop, more)

    def scan_body(c, _):
        k, dyn = c
        go = full_test(k, dyn)
        new = lax.cond(go, lambda: body(k, dyn, go), lambda: dyn)
        return (k + go.astype(k.dtype), new), None

    (k, dyn), _ = lax.scan(scan_body, (jnp.asarray(start, jnp.int32), init), None,
                           length=max_iterations)
    jax.debug.callback(functools.partial(_check_finished, max_iterations, site()),
                       full_test(k, dyn))
    return dyn


def _reverse_mode():
    """Is ``jax.grad``/``jax.vjp`` linearizing the code being traced now?"""
    return current_trace_kind() == "LinearizeTrace"


# Variables first bound inside a loop, remembered per loop and entry types:
# (how it is staged, the entry's types, the body's code and closure's types)
# -> {index: spec}.
# A loop nested in another is traced again each time the outer body is (its
# restarts, its probe iteration): without this, each of those traces would
# start the inner loop without the variable and restart it once more, so the
# traces of a loop body doubled with each level of nesting (a line search
# inside an optimiser's loop, with `return`s in both). A remembered spec is
# only used when the entry state and everything the body closes over have the
# same types as when it was learned (so the body traces the same), and it is
# checked: the body must give exactly that type (`_loop_body`). Only loops that
# cannot add such a variable as their body is traced (a scan, a bounded loop, a
# JAX without `_new_input`) look one up: see `loop`.
_DEFINED = {}
_DEFINED_LIMIT = 4096


def _types(x, depth):
    """What tracing code that reads ``x`` can depend on, hashable (``None``: unknown)."""
    if isinstance(x, Undefined):
        return ("undefined", x.guarded)
    if is_array_like(x):
        if isinstance(x, Tracer):
            return aval_of(x) + (True,)
        if np.size(x) > 64:  # a concrete table: its values could steer the trace
            return None
        return aval_of(x) + (np.asarray(x).tobytes(),)
    if x is None or isinstance(x, (bool, int, float, complex, str)):
        return (type(x), x)
    if isinstance(x, (tuple, list)):
        parts = tuple(_types(v, depth) for v in x)
        return None if None in parts else (type(x), parts)
    if isinstance(x, types.FunctionType):
        return _function_types(x, depth)
    if isinstance(x, (types.ModuleType, types.BuiltinFunctionType, type)):
        return ("object", id(x))
    return None


def _function_types(fn, depth):
    """A function and what its closure holds (functions it closes over, recursively)."""
    if depth <= 0:
        return None
    cells = []
    for cell in fn.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell: a name not bound yet
            cells.append(("empty",))
            continue
        t = _types(value, depth - 1)
        if t is None:
            return None
        cells.append(t)
    defaults = _types(fn.__defaults__ or (), depth - 1)
    if defaults is None:
        return None
    return ("function", fn.__code__, tuple(cells), defaults)


def _entry_types(state, body):
    """What a loop's restarts depend on: its entry state and its body's closure
    (module globals are not looked at: rebinding one to a value of another type
    between two traces of the same function is left to the check in the body)."""
    if not isinstance(body, types.FunctionType):
        return None
    out = (_types(state, 4), _function_types(body, 4))
    if None in out:
        return None
    try:
        hash(out)
    except TypeError:
        return None
    return out


def loop(kind, state, names, site, *, step, cond_fn=None, start=0, length=None, unroll=1,
         max_iterations=None, checkpoints=None, memo=None):
    """Stage a loop over the carried ``state`` (a tuple of the user's variables).

    ``step(k, state) -> state`` runs one iteration (``k`` is the iteration
    counter); ``cond_fn(state)`` is tested before each iteration. With an
    int ``length`` and no ``cond_fn`` the loop is ``lax.fori_loop`` with a
    static trip count (a scan: reverse-differentiable); otherwise it is a
    ``lax.while_loop`` (``length`` may then be traced), staged as
    ``checkpoint.while_loop``: a plain ``lax.while_loop`` unless reverse-mode
    differentiated, then checkpointed with ``checkpoints`` saved carries.
    With ``max_iterations`` it is a masked ``lax.scan`` of that many steps.
    ``memo`` (the user's loop body function) identifies the loop for ``_DEFINED``.
    """
    if checkpoints is None:
        checkpoints = checkpoint.DEFAULT_CHECKPOINTS
    accum = {}  # variable index -> the list before the loop (see _loop_body)
    scan_form = cond_fn is None and isinstance(length, int)
    key = hinted = None
    placing = _new_input is not None
    bounded = max_iterations is not None or (not checkpoint.AVAILABLE and _reverse_mode()
                                             and isinstance(length, int))
    # carries the body adds as it is traced (see `_loop_body`): only a
    # checkpoint.while_loop takes them
    adds_carries = not (scan_form or bounded) and checkpoint.AVAILABLE
    # A while form adds the variables its body binds as it is traced once (see
    # `_Placeholders`), after its other carries; started from a remembered
    # definition it would carry them in their own places instead, a program
    # whose operations XLA orders differently (on a CPU, the batched BFGS of
    # benchmarks/real_algorithms.py took 1.2-1.3x the time of the one traced
    # fresh, after its unbatched version had been traced). So it does not look
    # one up: the same loop gives the same program whatever was traced before.
    if memo is not None and not (placing and adds_carries):
        entry = _entry_types(state, memo)
        if entry is not None:
            key = (kind, scan_form, max_iterations is None, entry)
            hinted = _DEFINED.get(key)
    entry_state, defined = state, {}
    if hinted:
        state = _join([_zeros(hinted[k]) if k in hinted else p
                       for k, p in enumerate(_parts(state, names))], names)
        _log_fills(names[k] for k in hinted)
    for _ in range(16):
        if accum:
            state = _join([_Appended() if j in accum else p
                           for j, p in enumerate(_parts(state, names))], names)
        leaves, tree = flatten(state)
        labels = leaf_labels(state, names)
        mask = [is_array_like(x) for x in leaves]
        avals = [aval_of(x) for x, m in zip(leaves, mask) if m]
        init = tuple(_cast(jnp.asarray(x), a[1]) for x, a in
                     zip([x for x, m in zip(leaves, mask) if m], avals))
        grown = [] if adds_carries else None
        fills = set()
        owners = {id(u): j for j, u in enumerate(_parts(state, names))
                  if isinstance(u, Undefined) and u.guarded}
        placeholders = (_Placeholders(owners) if grown is not None and placing and owners
                        else None)
        full_body, merge = _loop_body(kind, state, names, site, step, leaves, tree, labels,
                                      mask, avals, accum, scan_form, hinted, grown, fills,
                                      placeholders)

        def while_loop(cond, body, init):
            """``checkpoint.while_loop``, with the carries the body adds: ``(out, extras)``.
            In a branch of a traced ``if``, the loop runs only where the branch is taken
            (``lowering.loop_gate``): a select of both branches runs no iteration of it
            for the branch it does not take."""
            gate = lowering.loop_gate()
            if gate is not None:
                ungated = cond

                def cond(c):
                    return jnp.logical_and(ungated(c), gate)
            added = inputs = None
            if grown is not None:
                def added():
                    return [x for _, _, xs, _ in grown for x in xs]

                def inputs():  # the placeholder of each added carry (or None), all made
                    return ([None if ins is None else ins[i]
                             for _, _, xs, ins in grown for i in range(len(xs))],
                            placeholders.order() if placeholders is not None else [])
            out = checkpoint.while_loop(cond, body, init, checkpoints=checkpoints, added=added,
                                        gated=gate is not None, added_inputs=inputs)
            return (out, ()) if added is None else out

        def body(k, dyn, running=None):
            loopdebug.tick(k, site)
            if running is None:
                return full_body(k, dyn)[0]
            # A `raise` staged in the body fires only where the loop still runs
            # (under vmap a while loop runs its body for finished elements too).
            with raising.on_path(running):
                return full_body(k, dyn)[0]

        def test(dyn):
            c = cond_fn(merge(dyn))
            if np.shape(c) != () and np.size(c) != 1:
                raise ConversionError(message(
                    site(), f"the loop condition is an array of shape {tuple(np.shape(c))}, "
                    "not a scalar", "Reduce it with `.any()` or `.all()`."))
            return as_pred(c)

        uses_while = False
        extras = ()
        try:
            with _logging(fills):
                if scan_form:
                    # lax.fori_loop with a static trip count, written as the scan it is,
                    # so that appended values can be its stacked outputs.
                    def scan_fn(c, _):
                        new, outs = full_body(c[0], c[1])
                        return (c[0] + 1, new), outs
                    (_, dyn), stacked = lax.scan(scan_fn, (jnp.asarray(start, jnp.int32), init),
                                                 None, length=length, unroll=unroll)
                elif bounded:
                    # max_loop_iterations: a masked scan of that many steps. (On a JAX
                    # without checkpointed loops, also a static range with `break`
                    # under jax.grad: a scan is reverse-differentiable.)
                    steps = max_iterations if max_iterations is not None else length
                    if isinstance(length, int):
                        steps = min(steps, length)
                    dyn = _bounded(body, test if cond_fn is not None else (lambda d: True), init,
                                   start, None if length is None else start + length, steps, site)
                elif length is None:
                    uses_while = True
                    (_, dyn), extras = while_loop(
                        lambda c: test(c[1]),
                        lambda c: (c[0] + 1, body(c[0], c[1], lambda: test(c[1]))),
                        (jnp.int32(start), init))
                else:
                    stop = start + length
                    uses_while = True

                    def full_test(c):
                        more = c[0] < stop
                        return more if cond_fn is None else jnp.logical_and(more, test(c[1]))
                    (_, dyn), extras = while_loop(
                        full_test, lambda c: (c[0] + 1, body(c[0], c[1], lambda: full_test(c))),
                        (jnp.asarray(start, jnp.int32), init))
        except (ConversionError, _Restart) as r:
            error = isinstance(r, ConversionError)
            if error and not hinted:
                raise
            if not error and r.changes[0] == "unplace":
                placing = False
                continue
            if error or r.changes[0] == "unhint":
                # Start again as if nothing were remembered: the hint did not fit, or
                # an error under it must be shown to be the program's own.
                state, hinted, accum, defined = entry_state, None, {}, {}
                _DEFINED.pop(key, None)
                continue
            kind_of_change, changes = r.changes
            if kind_of_change == "accumulate":
                accum.update({j: _parts(state, names)[j] for j in changes})
            elif kind_of_change == "keys":
                # A dict key first set inside the loop is carried from the start,
                # zeros before its first assignment (like a variable first bound
                # in a loop).
                parts = _parts(state, names)
                _log_fills(names[j] for j in changes)
                for j, added in changes.items():
                    parts[j] = dict(parts[j], **{k: _zeros(v) for k, v in added.items()}) \
                        if all(isinstance(k, str) for k in added) else {
                            **parts[j], **{k: _zeros(v) for k, v in added.items()}}
                state = _join(parts, names)
            elif kind_of_change == "define":
                defined.update(changes)
                _log_fills(names[j] for j in changes)  # (for the loops around this one)
                state = _join([_zeros(changes[k]) if k in changes else p
                               for k, p in enumerate(_parts(state, names))], names)
            else:
                dyn_index = [i for i, m in enumerate(mask) if m]
                for j, dtype in changes.items():
                    i = dyn_index[j]
                    leaves[i] = _cast(jnp.asarray(leaves[i]), dtype)
                state = unflatten(tree, leaves)
            continue
        if uses_while and not checkpoint.AVAILABLE and _reverse_mode() and any(isinstance(x, Tracer) and
                                   type(x).__name__ == "LinearizeTracer" for x in dyn):
            raise ConversionError(message(
                site(), f"this traced `{kind}` loop has a data-dependent trip count, and "
                "`jax.grad` cannot differentiate a `lax.while_loop` in reverse mode",
                "Pass `max_loop_iterations=N` to `autoflow.jit`/`autoflow.convert` (the loop "
                "becomes a masked `lax.scan` of N steps), use `jax.jacfwd`, or make the trip "
                "count static."))
        result = merge(dyn)
        if grown:
            # the carries the body added, zeros before the first iteration
            parts, extras = _parts(result, names), iter(extras)
            for j, treedef, xs, _ in grown:
                parts[j] = unflatten(treedef, [next(extras) for _ in xs])
                defined[j] = _spec(parts[j])
            result = _join(parts, names)
            _log_fills(names[j] for j, _, _, _ in grown)
        _log_fills([_LOOP])  # (for the loops around this one)
        if key is not None and defined:
            if len(_DEFINED) >= _DEFINED_LIMIT:
                _DEFINED.clear()
            _DEFINED[key] = {**(hinted or {}), **defined}
        if accum:
            parts = _parts(result, names)
            for i, j in enumerate(sorted(accum)):
                rows = [jax.tree_util.tree_map(lambda o, t=t: o[t], stacked[i])
                        for t in range(length)]
                parts[j] = list(accum[j]) + rows
            result = _join(parts, names)
        return result
    raise ConversionError(message(  # pragma: no cover - types settle in a few rounds
        site(), "the carried variables of this loop never settle on fixed types"))
