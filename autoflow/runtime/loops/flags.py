"""What a staged loop carries besides the user's variables.

Flags "bound yet" of variables its body binds on some paths only (``_carrying_bound``),
"set yet" of dict keys (``_carrying_keys``), the checks of its body carried out of
the loop (``_deferring_checks``), and "nothing raised yet" (``_stopped_by_raises``);
and the check that a loop which ran no iteration gives what Python gives
(``_kept_dtypes``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ...core.origin import message
from ...errors import ConversionError
from ..effects import later, path_condition, raising, unset
from ..common.carries import Restart, parts_of
from ..common.values import as_pred, describe, is_array_like, is_extended, is_weak


class _Bound:
    """The flags "bound yet" of the variables a loop's body binds first (on some
    paths only): ``n`` carried (0: not carried), their values at the start of the
    iteration being traced (``inputs``), and what the body leaves them
    (``outputs``: ``effects.unset.bound_flag`` of each variable, None where it is bound),
    and where each was bound when the loop started (``entry``: None for unbound)."""

    def __init__(self, n, entry=()):
        self.n, self.inputs, self.outputs, self.started = n, None, None, None
        self.entry = entry
        self.wanted = False  # (the body binds a new variable on some paths only)
        # (per flag: every trace of the body binds it on all its paths, so a loop known
        # to run an iteration binds it: `stage_loop`'s `runs`)
        self.sure = None


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
        sure = tuple(f is None for f in bound.outputs)
        bound.sure = sure if bound.sure is None else tuple(
            a and b for a, b in zip(bound.sure, sure))
        flags = tuple(jnp.bool_(True) if f is None else as_pred(f) for f in bound.outputs)
        return tuple(new) + flags, outs
    return (carried, (lambda dyn: merge(dyn[:len(dyn) - n])),
            tuple(init) + tuple(jnp.bool_(False) if e is None else as_pred(e)
                                for e in bound.entry))


def _unset_keys(entry_state, state, names):
    """``[(j, key, where set at the start)]``: the dict keys of the loop's carries that may
    be unset: absent before the loop and carried from zeros (``Restart("keys")``: set
    nowhere at the start), or left so by a staged loop before (``unset.key_set_if``)."""
    out = []
    for j, (a, b) in enumerate(zip(parts_of(entry_state, names), parts_of(state, names))):
        if type(a) is not dict or type(b) is not dict:
            continue
        for key, value in b.items():
            if key not in a:
                out.append((j, key, jnp.bool_(False)))
            else:
                flag = unset.key_flag(value)
                if flag is not None:
                    out.append((j, key, as_pred(flag)))
    return out


def _carrying_keys(body, merge, init, keyed, names):
    """``(body, merge, init)`` of a loop whose carries end with a flag "set yet" for each
    dict key of ``keyed`` (``_unset_keys``): Python's dict has the key only once an
    iteration set it. The body reads it through ``effects.unset.read_key`` (``KeyError`` where
    it is not set yet: a read above the first write), and a write sets it."""
    if not keyed:
        return body, merge, init
    n = len(keyed)

    def carried(k, dyn):
        flags, dyn = dyn[len(dyn) - n:], dyn[:len(dyn) - n]
        parts = parts_of(merge(dyn), names)
        for (j, key, _), flag in zip(keyed, flags):
            unset.key_set_if(parts[j][key], key, flag)
        new, outs = body(k, dyn)
        parts = parts_of(merge(new), names)
        after = []
        for j, key, _ in keyed:
            flag = unset.key_flag(parts[j][key]) if key in parts[j] else None
            after.append(jnp.bool_(True) if flag is None else as_pred(flag))
        return tuple(new) + tuple(after), outs

    return (carried, (lambda dyn: merge(dyn[:len(dyn) - n])),
            tuple(init) + tuple(flag for _, _, flag in keyed))


class _Deferred:
    """The checks a loop's body stages, carried out of the loop (``effects.later.Deferring``):
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
                try:
                    out = body(k, dyn)
                except Restart as r:
                    # (a trace that defines new carries found the checks too: the next
                    # trace carries them, as a `defer` restart would, and checks they
                    # are the same)
                    if found.found and r.changes[0] == "define":
                        r.deferred = found.found
                    raise
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
    each iteration does (``path_condition.after_raise``); without, a body that stages one
    restarts the loop with it (``Restart("raises")``)."""
    def run(k, dyn):
        with path_condition.scope(carries_ok=True, fresh=True) as block:  # (ok(): last carry)
            if raises:
                path_condition.after_raise(dyn[-1])
                dyn = dyn[:-1]
            try:
                new, outs = body(k, dyn)
            except raising.StagedRaise as r:
                # Every path through the body raises: an iteration that runs raises
                # (its check, staged here), and none follows it.
                if not raises:
                    raise Restart(("raises", None)) from None
                # (a `effects.checks._Check`'s result, false where the iteration ran, keeps the
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


def _kept_dtypes(entry_state, result, names, ran, site):
    """Where the loop may run no iteration (``ran``: traced, whether it ran one): a
    carry that was an array of one dtype before it and is carried in another (``x = x /
    2`` of an int32 ``x``, carried as the body's float32) would be Python's array only
    where the loop runs. Where it runs none, Python's variable keeps the array it had,
    which the compiled loop cannot give (it gives that value in the other dtype: an
    int32 above 2**24 changes): autoflow's error when the compiled code runs, as for
    a carry whose shape the first iteration changes. (A Python number before the
    loop takes the loop's dtype, as it would in JAX arithmetic.)"""
    changed, first = [], None
    for name, a, b in zip(names, parts_of(entry_state, names), parts_of(result, names)):
        before, tree = jax.tree_util.tree_flatten(a)
        after, tree_after = jax.tree_util.tree_flatten(b)
        if tree != tree_after:
            continue
        for x, y in zip(before, after):
            if isinstance(x, (jax.Array, np.ndarray)) and not is_weak(x) and is_array_like(y) \
                    and not is_extended(x.dtype) \
                    and jax.dtypes.canonicalize_dtype(x.dtype) != jnp.result_type(y):
                changed.append(f"`{name}` ({describe(x)} before it, {describe(y)} after an "
                               "iteration)")
                first = first or (name if len(before) == 1 else None, jnp.result_type(y))
                break
    if changed:
        name, dtype = first
        cast = f"`{name} = {name}.astype(jnp.{np.dtype(dtype).name})`" if name else \
            f"`.astype(jnp.{np.dtype(dtype).name})`"
        where = site()
        later.later(_ran_no_iteration, (where, ", ".join(changed), "dtype",
                                        f"Give it the loop's dtype before the loop ({cast})"),
                    site=where, when=jnp.logical_not(ran))


def _ran_no_iteration(site, what, kept, fix):
    """A traced loop that ran no iteration, whose carries ``what`` would keep the
    ``kept`` ("shape", "dtype") they had before it: autoflow's error (``fix``: what to
    write instead), when the compiled code runs."""
    raise ConversionError(message(
        site, f"this traced loop ran no iteration, so {what} would keep the {kept} it had "
        "before the loop, which the compiled loop cannot give",
        f"{fix}, or make sure the loop runs."))
