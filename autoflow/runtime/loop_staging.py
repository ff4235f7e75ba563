"""Staging a loop: carry types, restarts, appends, bounded and scanned forms.

``stage_loop`` turns the rest of a Python loop into one ``lax`` loop over the
carried variables: a scan for a static trip count, ``while_prim.while_loop``
(a ``lax.while_loop`` that ``jax.grad`` can differentiate) otherwise, a masked
scan with ``max_loop_iterations``. Tracing the body tells what the carries
must be; when it disagrees with the entry state the loop is traced again
(``Restart``) with:

* ``promote``: a carry's dtype promoted as NumPy would (``0`` then ``0.5``);
* ``define``: a variable first bound in the body, carried from the start;
* ``keys``: a dict key first set in the body;
* ``accumulate``: a list appended to once per iteration (the scan's outputs);
* ``unplace``/``unhint``: the body did not fit an input made for it, or a
  remembered definition (``_DEFINED``).

Variables the body binds on every path are added as carries while it is
traced, with no second trace (``Placeholders``, ``while_loop(added=...)``).
"""

from __future__ import annotations

import dis
import functools
import types

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..core.caches import Bounded
from ..core.origin import message
from ..errors import ConversionError
from . import jax_internals as jx
from . import later, loopdebug, raising, while_prim
from .carries import (LOOP, Placeholders, Restart, cast_to, join_parts, leaf_labels, log_fills,
                      logging_fills, parts_of, placing, same_spec, spec_of, zeros_of)
from .cond_cost import loop_gate
from .state import EMPTY, closure_cells
from .teach import growing_list, static_bound, value_advice
from .values import (Mixed, Tracer, Undefined, as_pred, aval_of, describe, flatten, is_array_like,
                     is_extended, promote, same_static, staged_block, structure, unflatten)
from .while_prim import DEFAULT_CHECKPOINTS


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
        + _lower_first(static_bound(site))))


def _lower_first(text):
    return text[:1].lower() + text[1:]


class CarryShapeError(ConversionError):
    """Carries that change shape in an iteration of a traced loop (the error
    ``_loop_error`` words for the first). ``reshaped``: ``(leaf index in the
    loop's flattened state, label, before, after)`` per carry, where the state
    is what ``stage_loop`` was given. ``loops._loop_with_state`` peels one
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
    this trace's loop (``while_prim.while_loop``'s ``added``). So does an
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
        return unflatten(tree, [next(it) if m else x for x, m in zip(leaves, mask)])

    def body(k, dyn):
        merged = merge(dyn)
        if first_bound:
            # Variables unbound when the loop started, carried from zeros: bound
            # once an iteration has run (or where the flags `bound` carries say so,
            # where the body binds them on some paths only); a read where one is
            # not bound raises Python's error when the compiled code runs (`later.ld`).
            parts = parts_of(merged, names)
            flags = bound.inputs if bound is not None and bound.inputs is not None \
                else [k > start] * len(first_bound)
            for j, flag in zip(first_bound, flags):
                later.bound_if(parts[j], names[j], flag)
        if placeholders is not None:
            placeholders.begin()
        with staged_block(), placing(placeholders):
            new = step(k, merged)
        if first_bound and bound is not None:
            parts = parts_of(new, names)
            bound.outputs = [later.bound_flag(parts[j]) for j in first_bound]
            bound.started = flags
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
            later.bound_flag(new_parts[j]) is not None for j in defines)
        if some_paths:
            bound.wanted = True
        if defines and adds is not None and not some_paths and all(
                not ({before[j].name, names[j]} & fills) or before[j].exit and LOOP in fills
                for j in defines):
            parts = parts_of(new, names)
            for j in sorted(defines):
                bl, bt = flatten(parts[j])
                adds.append((j, bt, [cast_to(jnp.asarray(x), aval_of(x)[1]) for x in bl],
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
                    hint = (f" (for a list built with `append`, preallocate an array and set "
                            f"`{name} = {name}.at[i].set(value)`)" if isinstance(a, list) else "")
                    raise ConversionError(message(
                        site(), f"`{name}` changes structure in this traced loop: "
                        f"{structure(a)} before an iteration, {structure(b)} after it",
                        f"Keep `{name}` one structure across iterations{hint}, or make the "
                        "loop bound static so the loop runs as Python."))
        out, changes, reshaped = [], {}, []
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
            target, still_weak = promote(avals[j], (shape, dtype, weak))
            if target == avals[j][1] and avals[j][2] and not still_weak \
                    and strengthened is not None:
                strengthened.add(j)
            elif (target, still_weak) != tuple(avals[j][1:]):
                changes[j] = (target, still_weak)
            out.append(cast_to(x, avals[j][1], avals[j][2]) if j not in changes else x)
            j += 1
        if reshaped:
            raise CarryShapeError(site(), kind, reshaped)
        if changes:
            raise Restart(("promote", changes))
        return tuple(out), tuple(outs)

    return body, merge


class _Bound:
    """The flags "bound yet" of the variables a loop's body binds first (on some
    paths only): ``n`` carried (0: not carried), their values at the start of the
    iteration being traced (``inputs``), and what the body leaves them
    (``outputs``: ``later.bound_flag`` of each variable, None where it is bound)."""

    def __init__(self, n):
        self.n, self.inputs, self.outputs, self.started = n, None, None, None
        self.wanted = False  # (the body binds a new variable on some paths only)


def _carrying_bound(body, merge, init, bound):
    """``(body, merge, init)`` of a loop whose carries end with ``bound.n`` flags "bound
    yet" (False at the start); with none carried, a body that binds one of its new
    variables on some paths only restarts the loop with them (``Restart("bound")``)."""
    if not bound.n:
        def run(k, dyn):
            bound.inputs = None
            new, outs = body(k, dyn)
            started = bound.started or ()
            if any(f is not None and f is not s for f, s in zip(bound.outputs or (), started)):
                raise Restart(("bound", None))
            return new, outs
        return run, merge, init
    n = bound.n

    def carried(k, dyn):
        bound.inputs = list(dyn[len(dyn) - n:])
        new, outs = body(k, dyn[:len(dyn) - n])
        flags = tuple(jnp.bool_(True) if f is None else as_pred(f) for f in bound.outputs)
        return tuple(new) + flags, outs
    return (carried, (lambda dyn: merge(dyn[:len(dyn) - n])),
            tuple(init) + (jnp.bool_(False),) * n)


def _unset_keys(entry_state, state, names):
    """``[(j, key, where set at the start)]``: the dict keys of the loop's carries that may
    be unset: absent before the loop and carried from zeros (``Restart("keys")``: set
    nowhere at the start), or left so by a staged loop before (``later.key_set_if``)."""
    out = []
    for j, (a, b) in enumerate(zip(parts_of(entry_state, names), parts_of(state, names))):
        if type(a) is not dict or type(b) is not dict:
            continue
        for key, value in b.items():
            if key not in a:
                out.append((j, key, jnp.bool_(False)))
            else:
                flag = later.key_flag(value)
                if flag is not None:
                    out.append((j, key, as_pred(flag)))
    return out


def _carrying_keys(body, merge, init, keyed, names):
    """``(body, merge, init)`` of a loop whose carries end with a flag "set yet" for each
    dict key of ``keyed`` (``_unset_keys``): Python's dict has the key only once an
    iteration set it. The body reads it through ``later.read_key`` (``KeyError`` where
    it is not set yet: a read above the first write), and a write sets it."""
    if not keyed:
        return body, merge, init
    n = len(keyed)

    def carried(k, dyn):
        flags, dyn = dyn[len(dyn) - n:], dyn[:len(dyn) - n]
        parts = parts_of(merge(dyn), names)
        for (j, key, _), flag in zip(keyed, flags):
            later.key_set_if(parts[j][key], key, flag)
        new, outs = body(k, dyn)
        parts = parts_of(merge(new), names)
        after = []
        for j, key, _ in keyed:
            flag = later.key_flag(parts[j][key]) if key in parts[j] else None
            after.append(jnp.bool_(True) if flag is None else as_pred(flag))
        return tuple(new) + tuple(after), outs

    return (carried, (lambda dyn: merge(dyn[:len(dyn) - n])),
            tuple(init) + tuple(flag for _, _, flag in keyed))


class _Deferred:
    """The checks a loop's body stages, carried out of the loop (``later.Deferring``):
    ``specs`` None until a trace found them (then a list of their operands' avals; empty:
    not carried, each staged in the body), and the ``calls`` of the last trace."""

    def __init__(self):
        self.specs, self.calls = None, ()

    def size(self):
        return sum(1 + len(avals) for avals in self.specs or ())


def _deferring_checks(body, merge, init, deferred):
    """``(body, merge, init)`` of a loop whose carries end with, for each check its body
    stages (``deferred.specs``), "failed yet" and the operands it failed with; the first
    trace finds the checks (``Restart("defer")``)."""
    if deferred.specs is None:
        def learn(k, dyn):
            with later.deferring(None) as found:
                out = body(k, dyn)
            if found.found:
                raise Restart(("defer", found.found))
            return out
        return learn, merge, init
    if not deferred.specs:
        return body, merge, init
    n = deferred.size()

    def carried(k, dyn):
        extra, dyn = list(dyn[len(dyn) - n:]), dyn[:len(dyn) - n]
        inputs = []
        for avals in deferred.specs:
            failed, ops = extra[0], extra[1:1 + len(avals)]
            del extra[:1 + len(avals)]
            inputs.append((failed, ops, avals))
        with later.deferring(inputs) as d:
            new, outs = body(k, dyn)
        if d.mismatch or len(d.records) != len(inputs):
            raise Restart(("undefer", None))  # (the body staged other checks this time)
        deferred.calls = [call for call, _, _ in d.records]
        out = []
        for (failed, ops, _), (_, pred, now) in zip(inputs, d.records):
            first = jnp.logical_and(pred, jnp.logical_not(failed))
            out.append(jnp.logical_or(failed, pred))
            out += [jnp.where(first, lax.stop_gradient(x), o) for x, o in zip(now, ops)]
        return tuple(new) + tuple(out), outs

    zeros = []
    for avals in deferred.specs:
        zeros.append(jnp.bool_(False))
        zeros += [jnp.zeros(a.shape, a.dtype) for a in avals]
    return carried, (lambda dyn: merge(dyn[:len(dyn) - n])), tuple(init) + tuple(zeros)


def _emit_deferred(deferred, values):
    """After the loop: one check for each check of its body, with the carried "failed
    yet" and operands ``values`` (``_deferring_checks``)."""
    values = list(values)
    for avals, call in zip(deferred.specs, deferred.calls):
        failed, ops = values[0], values[1:1 + len(avals)]
        del values[:1 + len(avals)]
        later.stage(call, ops, when=failed, check=True)


def _stopped_by_raises(body, merge, init, raises):
    """``(body, merge, init)`` of a loop, where a ``raise`` (or a failed check) staged in
    its body stops it, as Python stops there: with ``raises``, the carries end with
    a flag "nothing raised yet", which the loop's test reads and which gates what
    each iteration does (``later.after_raise``); without, a body that stages one
    restarts the loop with it (``Restart("raises")``)."""
    def run(k, dyn):
        with later.scope(carries_ok=True) as block:  # (its ok() is the last carry)
            if raises:
                later.after_raise(dyn[-1])
                dyn = dyn[:-1]
            try:
                new, outs = body(k, dyn)
            except raising.StagedRaise as r:
                # Every path through the body raises: an iteration that runs raises
                # (its check, staged here), and none follows it.
                if not raises:
                    raise Restart(("raises", None)) from None
                # (a `later._Check`'s result, false where the iteration ran, keeps the
                # check: what this block staged before is in its condition)
                ok = r.emit()
                return tuple(dyn) + (jnp.bool_(False) if ok is None else block.ok(),), ()
            ok = block.ok()
        if not raises:
            if ok is not None:
                raise Restart(("raises", None))
            return new, outs
        return tuple(new) + (ok,), outs

    if not raises:
        return run, merge, init
    return run, (lambda dyn: merge(dyn[:-1])), tuple(init) + (jnp.bool_(True),)


def _scan_without_effects(run_scan):
    """``run_scan()`` staged here, traced apart first: ``((None, None), None)`` if its
    body has effects (then nothing is staged)."""
    # (what came before, a raise guard, reaches the body as here; `carries_ok`: the
    # scan's body, all that is staged in it, hands its checks' results on as a carry)
    with later.scope(carries_ok=True):
        out_tree = []

        def flat():
            leaves, tree = jax.tree_util.tree_flatten(run_scan())
            out_tree.append(tree)
            return leaves
        closed = jx.trace_thunk(flat)
    if jx.has_effects(closed.effects):
        return (None, None), None
    return jax.tree_util.tree_unflatten(out_tree[0], jx.eval_jaxpr(closed, ()))


def _keeping_cells(thunk, fn):
    """``thunk``, run so that the closure cells of ``fn`` keep their contents."""
    def run():
        # (the cells of `fn` and of the functions its closure holds)
        saved = [(cell, value) for _, cell, value in closure_cells([fn], 3, partials=True)]
        try:
            return thunk()
        finally:
            for cell, value in saved:
                if value is EMPTY:
                    try:
                        del cell.cell_contents
                    except ValueError:
                        pass
                else:
                    cell.cell_contents = value
    return run


def _check_finished(limit, site, running):
    if bool(np.asarray(running)):
        from ..errors import LoopLimitError

        raise raising.fail(LoopLimitError(message(
            site, f"this loop did not finish within max_loop_iterations={limit}",
            "Raise the bound (`max_loop_iterations=`), or check that the loop ends; "
            "`debug_loops=True` (or `AUTOFLOW_DEBUG_LOOPS=1`) reports its iterations while it "
            "runs.")), site)


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


_APPENDS = Bounded(4096)  # code object -> the names it passes to the runtime's `append` first


def _appends(fn):
    """The variables the converted loop body ``fn`` appends to (``af.append(xs, v)``
    in its own code, not in functions it defines): read from its bytecode, a load of
    an attribute ``append`` followed by a load of the variable."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return frozenset()
    names = _APPENDS.get(code)
    if names is None:
        names = set()
        prev = None
        for ins in dis.get_instructions(code):
            if prev is not None and prev.argval == "append" and prev.opname in (
                    "LOAD_ATTR", "LOAD_METHOD") and ins.opname.startswith("LOAD_") \
                    and isinstance(ins.argval, str):
                names.add(ins.argval)
            prev = ins
        names = _APPENDS[code] = frozenset(names)
    return names


def _reverse_mode():
    """Is ``jax.grad``/``jax.vjp`` linearizing the code being traced now?"""
    return jx.is_linearizing()


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
# JAX without `new_input`) look one up: see `loop`.
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


def stage_loop(kind, state, names, site, *, step, cond_fn=None, start=0, length=None, unroll=1,
         max_iterations=None, checkpoints=None, memo=None, runs=False, scan=True,
         lanes="nested", debug_loops=None):
    """Stage a loop over the carried ``state`` (a tuple of the user's variables).

    ``step(k, state) -> state`` runs one iteration (``k`` is the iteration
    counter); ``cond_fn(state)`` is tested before each iteration. With an
    int ``length`` and no ``cond_fn`` the loop is ``lax.fori_loop`` with a
    static trip count (a scan: reverse-differentiable); otherwise it is a
    ``lax.while_loop`` (``length`` may then be traced), staged as
    ``while_prim.while_loop``: a plain ``lax.while_loop`` unless reverse-mode
    differentiated, then checkpointed with ``checkpoints`` saved carries.
    With ``max_iterations`` it is a masked ``lax.scan`` of that many steps.
    ``memo`` (the user's loop body function) identifies the loop for ``_DEFINED``.
    ``runs``: the loop's first test is known to be true (a ``while`` restaged from
    before an iteration Python ran), so it binds what its body binds. ``scan=False``:
    a static trip count is a while form too (a body with effects under reverse mode:
    JAX's scan runs an effect of its body once, not once per iteration, there).
    ``lanes`` (``"nested"`` or ``"flat"``, see ``lane_machine``) and ``debug_loops``
    (the iterations between two reports, or None, see ``loopdebug``): the options
    of ``autoflow.convert`` of that name.
    """
    if checkpoints is None:
        checkpoints = DEFAULT_CHECKPOINTS
    accum = {}  # variable index -> the list before the loop (see _loop_body)
    scan_form = cond_fn is None and isinstance(length, int) and scan
    key = hinted = None
    use_inputs = jx.new_input is not None
    bounded = max_iterations is not None or (not jx.primitives() and _reverse_mode()
                                             and isinstance(length, int))
    # carries the body adds as it is traced (see `_loop_body`): only a
    # while_prim.while_loop takes them
    adds_carries = not (scan_form or bounded) and jx.primitives()
    # A while form adds the variables its body binds as it is traced once (see
    # `Placeholders`), after its other carries; started from a remembered
    # definition it would carry them in their own places instead, a program
    # whose operations XLA orders differently (on a CPU, the batched BFGS of
    # benchmarks/real_algorithms.py took 1.2-1.3x the time of the one traced
    # fresh, after its unbatched version had been traced). So it does not look
    # one up: the same loop gives the same program whatever was traced before.
    if memo is not None and not (use_inputs and adds_carries):
        entry = _entry_types(state, memo)
        if entry is not None:
            key = (kind, scan_form, max_iterations is None, entry)
            hinted = _DEFINED.get(key)
    entry_state, defined = state, {}
    # A list the body appends to once per iteration becomes the scan's stacked
    # outputs. The first trace would find that out and the loop be traced again
    # (`Restart("accumulate")`, the body's whole trace twice, and each loop in it):
    # where the body's code appends to a variable holding a list, that is guessed
    # before the first trace. A guess that does not hold (the list is read, or
    # not appended to exactly once) traces the loop again without any guess: the
    # path it would have taken without guessing.
    guessed = ()
    if scan_form and not hinted and memo is not None:
        appends = _appends(memo)
        if appends:
            guessed = frozenset(j for j, (name, p) in enumerate(
                zip(names, parts_of(state, names))) if name in appends and type(p) is list)
            accum.update({j: parts_of(state, names)[j] for j in guessed})
    if hinted:
        state = join_parts([zeros_of(hinted[k]) if k in hinted else p
                       for k, p in enumerate(parts_of(state, names))], names)
        log_fills(names[k] for k in hinted)
    raises = False  # a `raise` is staged in the body: the loop carries where none raised
    deferred = _Deferred()  # the checks the body stages, carried out of the loop
    bound_carried = False  # the body binds a variable on some paths: the loop carries where
    for _ in range(16):
        if accum:
            state = join_parts([_Appended() if j in accum else p
                           for j, p in enumerate(parts_of(state, names))], names)
        leaves, tree = flatten(state)
        labels = leaf_labels(state, names)
        mask = [is_array_like(x) for x in leaves]
        avals = [aval_of(x) for x, m in zip(leaves, mask) if m]
        init = tuple(cast_to(jnp.asarray(x), a[1], a[2]) for x, a in
                     zip([x for x, m in zip(leaves, mask) if m], avals))
        grown = [] if adds_carries else None
        fills = set()
        owners = {id(u): j for j, u in enumerate(parts_of(state, names))
                  if isinstance(u, Undefined) and u.guarded}
        placeholders = (Placeholders(owners) if grown is not None and use_inputs and owners
                        else None)
        current = parts_of(state, names)
        first_bound = [j for j, a in enumerate(parts_of(entry_state, names))
                       if isinstance(a, Undefined) and not a.exit
                       and not isinstance(current[j], Undefined)]
        bound = _Bound(len(first_bound) if bound_carried else 0)
        strengthened = set()
        full_body, merge = _loop_body(kind, state, names, site, step, leaves, tree, labels,
                                      mask, avals, accum, scan_form, hinted, grown, fills,
                                      placeholders, first_bound, start, guessed, bound,
                                      strengthened)
        keyed = _unset_keys(entry_state, state, names)
        full_body, merge, init = _carrying_keys(full_body, merge, init, keyed, names)
        full_body, merge, init = _carrying_bound(full_body, merge, init, bound)
        full_body, merge, init = _deferring_checks(full_body, merge, init, deferred)
        full_body, merge, init = _stopped_by_raises(full_body, merge, init, raises)

        def while_loop(cond, body, init):
            """``while_prim.while_loop``, with the carries the body adds: ``(out, extras)``.
            In a branch of a traced ``if``, the loop runs only where the branch is taken
            (``cond_cost.loop_gate``): a select of both branches runs no iteration of it
            for the branch it does not take."""
            gate = loop_gate()
            # after a traced `raise` (or failed check) before it, the loop runs only
            # where that did not happen (`later.after_raise`): it cannot spin on values
            # Python never computed
            no_raise = later.raise_gate()
            stop = gate if no_raise is None else no_raise if gate is None else \
                jnp.logical_and(gate, no_raise)
            if stop is not None:
                ungated = cond

                def cond(c):
                    return jnp.logical_and(ungated(c), stop)
            added = inputs = None
            if grown is not None:
                def added():
                    return [x for _, _, xs, _ in grown for x in xs]

                def inputs():  # the placeholder of each added carry (or None), all made
                    return ([None if ins is None else ins[i]
                             for _, _, xs, ins in grown for i in range(len(xs))],
                            placeholders.order() if placeholders is not None else [])
            out = while_prim.while_loop(cond, body, init, checkpoints=checkpoints, added=added,
                                        gated=gate is not None, added_inputs=inputs,
                                        lanes=lanes)
            return (out, ()) if added is None else out

        def body(k, dyn, running=None):
            loopdebug.tick(k, site, debug_loops)
            if running is None:
                return full_body(k, dyn)[0]
            # A `raise` staged in the body fires only where the loop still runs
            # (under vmap a while loop runs its body for finished elements too).
            # The test is evaluated only if an effect needs it, in the middle of the
            # body: the cells it assigns (a converted test sets the variables closures
            # read, `nonlocal v; v = v_2`) are given back what the body had put there.
            # (`carries_ok`: all of the body is in the block of `_stopped_by_raises`)
            with later.on_path(_keeping_cells(running, cond_fn) if callable(running)
                               else running, carries_ok=True):
                return full_body(k, dyn)[0]

        def test(dyn):
            # A check in the test (`while j >= 0 and xs[j] > key`: the index) is of the
            # test's own trace: what it adds to the path ends with the test, and where
            # it failed the loop ends (Python raised there).
            with later.scope(carries_ok=True) as block:  # (its ok() is in the test)
                c = cond_fn(merge(dyn))
                ok = block.ok()
            if c.__class__ is not Mixed and np.shape(c) != () and np.size(c) != 1:
                raise ConversionError(message(
                    site(), f"the loop condition is an array of shape {tuple(np.shape(c))}, "
                    "not a scalar", "Reduce it with `.any()` or `.all()`."))
            pred = as_pred(c) if ok is None else jnp.logical_and(as_pred(c), ok)
            return pred if not raises else jnp.logical_and(pred, dyn[-1])

        uses_while = False
        extras = ()
        ran_to = None  # a while form's iteration counter after the loop
        try:
            with logging_fills(fills):
                if scan_form:
                    # lax.fori_loop with a static trip count, written as the scan it is,
                    # so that appended values can be its stacked outputs.
                    def scan_fn(c, _):
                        new, outs = full_body(c[0], c[1])
                        return (c[0] + 1, new), outs
                    def run_scan():
                        return lax.scan(scan_fn, (jnp.asarray(start, jnp.int32), init),
                                        None, length=length, unroll=unroll)
                    if not accum and jx.primitives():
                        # Under jax.grad, JAX's scan runs the effects of its body (prints,
                        # checks) that do not depend on the carry once, not at every
                        # iteration (its partial evaluation hoists them), and a grad
                        # outside a jit or vmap cannot be seen from here: traced apart
                        # first (the scan is then one equation, evaluated as traced), a
                        # body with effects is a while form instead, which runs them at
                        # every iteration (while_prim).
                        (_, dyn), stacked = _scan_without_effects(run_scan)
                        if dyn is None:
                            return stage_loop(kind, entry_state, names, site, step=step,
                                              cond_fn=cond_fn, start=start, length=length,
                                              unroll=unroll, max_iterations=max_iterations,
                                              checkpoints=checkpoints, memo=memo, runs=runs,
                                              scan=False, lanes=lanes, debug_loops=debug_loops)
                    else:
                        (_, dyn), stacked = run_scan()
                elif bounded:
                    # max_loop_iterations: a masked scan of that many steps. (On a JAX
                    # without checkpointed loops, also a static range with `break`
                    # under jax.grad: a scan is reverse-differentiable.)
                    steps = max_iterations if max_iterations is not None else length
                    if isinstance(length, int):
                        steps = min(steps, length)
                    dyn = _bounded(body, test if cond_fn is not None else (
                        (lambda d: d[-1]) if raises else (lambda d: True)), init,
                                   start, None if length is None else start + length, steps, site)
                elif length is None:
                    uses_while = True
                    (ran_to, dyn), extras = while_loop(
                        lambda c: test(c[1]),
                        lambda c: (c[0] + 1, body(c[0], c[1], lambda: test(c[1]))),
                        (jnp.int32(start), init))
                else:
                    stop = start + length
                    uses_while = True

                    def full_test(c):
                        more = c[0] < stop
                        if cond_fn is None:
                            return jnp.logical_and(more, c[1][-1]) if raises else more
                        return jnp.logical_and(more, test(c[1]))
                    (ran_to, dyn), extras = while_loop(
                        full_test, lambda c: (c[0] + 1, body(c[0], c[1], lambda: full_test(c))),
                        (jnp.asarray(start, jnp.int32), init))
        except (ConversionError, Restart) as r:
            error = isinstance(r, ConversionError)
            if guessed and (error or r.changes[0] == "unguess"):
                # Start again without the guessed appends (see above).
                state, accum, defined, guessed = entry_state, {}, {}, ()
                continue
            if error and not hinted:
                raise
            if not error and r.changes[0] == "unplace":
                use_inputs = False
                continue
            if error or r.changes[0] == "unhint":
                # Start again as if nothing were remembered: the hint did not fit, or
                # an error under it must be shown to be the program's own.
                state, hinted, accum, defined = entry_state, None, {}, {}
                _DEFINED.pop(key, None)
                continue
            kind_of_change, changes = r.changes
            if kind_of_change == "raises":  # (see `_stopped_by_raises`)
                raises = True
                continue
            if kind_of_change == "defer":  # (see `_deferring_checks`)
                deferred.specs, raises = changes, True
                continue
            if kind_of_change == "undefer":
                deferred.specs = []
                continue
            if kind_of_change == "bound":  # (see `_carrying_bound`)
                bound_carried = True
                continue
            if kind_of_change == "accumulate":
                accum.update({j: parts_of(state, names)[j] for j in changes})
            elif kind_of_change == "keys":
                # A dict key first set inside the loop is carried from the start,
                # zeros before its first assignment (like a variable first bound
                # in a loop).
                parts = parts_of(state, names)
                log_fills(names[j] for j in changes)
                for j, added in changes.items():
                    parts[j] = dict(parts[j], **{k: zeros_of(v) for k, v in added.items()}) \
                        if all(isinstance(k, str) for k in added) else {
                            **parts[j], **{k: zeros_of(v) for k, v in added.items()}}
                state = join_parts(parts, names)
            elif kind_of_change == "none":
                state = join_parts([None if k in changes else p
                                    for k, p in enumerate(parts_of(state, names))], names)
            elif kind_of_change == "define":
                if bound.wanted:  # its flags "bound yet" too, in the same new trace
                    bound_carried = True
                defined.update(changes)
                log_fills(names[j] for j in changes)  # (for the loops around this one)
                state = join_parts([zeros_of(changes[k]) if k in changes else p
                               for k, p in enumerate(parts_of(state, names))], names)
            else:
                dyn_index = [i for i, m in enumerate(mask) if m]
                for j, (dtype, weak) in changes.items():
                    i = dyn_index[j]
                    leaves[i] = cast_to(jnp.asarray(leaves[i]), dtype, weak)
                state = unflatten(tree, leaves)
            continue
        if uses_while and not jx.primitives() and _reverse_mode() and any(
                jx.is_linearize_tracer(x) for x in dyn):
            raise ConversionError(message(
                site(), f"this traced `{kind}` loop has a data-dependent trip count, and "
                "`jax.grad` cannot differentiate a `lax.while_loop` in reverse mode",
                "Pass `max_loop_iterations=N` to `autoflow.jit`/`autoflow.convert` (the loop "
                "becomes a masked `lax.scan` of N steps), use `jax.jacfwd`, or make the trip "
                "count static."))
        tail = dyn
        if raises:
            raised, tail = tail[-1], tail[:-1]
        if deferred.specs:  # the checks of the body, here (`_deferring_checks`)
            _emit_deferred(deferred, tail[len(tail) - deferred.size():])
            tail = tail[:len(tail) - deferred.size()]
        if raises:  # what follows the loop runs only where its body did not raise
            later.after_raise(raised)
        final_bound = tail[len(tail) - bound.n:] if bound.n else ()
        tail = tail[:len(tail) - bound.n]
        final_keys = tail[len(tail) - len(keyed):] if keyed else ()
        if strengthened:  # (the body made these carries strongly typed, as Python would)
            dyn = tuple(cast_to(x, avals[j][1]) if j in strengthened else x
                        for j, x in enumerate(dyn))
        result = merge(dyn)
        if grown:
            # the carries the body added, zeros before the first iteration
            parts, extras = parts_of(result, names), iter(extras)
            for j, treedef, xs, _ in grown:
                parts[j] = unflatten(treedef, [next(extras) for _ in xs])
                defined[j] = spec_of(parts[j])
            result = join_parts(parts, names)
            log_fills(names[j] for j, _, _, _ in grown)
        log_fills([LOOP])  # (for the loops around this one)
        if ran_to is not None and not runs:
            # A variable first bound in the body holds zeros if the loop ran no
            # iteration; a read of it after the loop checks that (`later.ld`).
            parts = parts_of(result, names)
            for j, before in enumerate(parts_of(entry_state, names)):
                if isinstance(before, Undefined) and not before.exit:
                    later.bound_if(parts[j], names[j], ran_to > start)
        if final_keys:  # set where an iteration set it (`_carrying_keys`)
            parts = parts_of(result, names)
            for (j, key, _), flag in zip(keyed, final_keys):
                later.key_set_if(parts[j][key], key, flag)
        if final_bound:  # bound where an iteration bound it (`_carrying_bound`)
            parts = parts_of(result, names)
            for j, flag in zip(first_bound, final_bound):
                later.bound_if(parts[j], names[j], flag)
        if key is not None and defined:
            if len(_DEFINED) >= _DEFINED_LIMIT:
                _DEFINED.clear()
            _DEFINED[key] = {**(hinted or {}), **defined}
        if accum:
            parts = parts_of(result, names)
            for i, j in enumerate(sorted(accum)):
                rows = [jax.tree_util.tree_map(lambda o, t=t: o[t], stacked[i])
                        for t in range(length)]
                parts[j] = list(accum[j]) + rows
            result = join_parts(parts, names)
        return result
    raise ConversionError(message(  # pragma: no cover - types settle in a few rounds
        site(), "the carried variables of this loop never settle on fixed types"))
