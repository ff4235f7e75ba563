"""Staging a loop: carry types, restarts, appends, bounded and scanned forms.

``stage_loop`` turns the rest of a Python loop into one ``lax`` loop over the
carried variables: a scan for a static trip count, ``while_primitive.while_loop``
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

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ...core.caches import Bounded
from ...core.origin import message
from ...errors import ConversionError
from .. import jax as jx
from ..effects import later, path_condition, raising, unset
from . import debug, while_primitive
from ..common.carries import (LOOP, Placeholders, Restart, cast_to, join_parts, keep_order, leaf_labels, log_fills,
                              logging_fills, parts_of, spec_of, zeros_of)
from ..cond.select_or_cond import loop_gate
from ..state.reach import EMPTY, closure_cells
from ..common.values import (Mixed, Undefined, as_pred, aval_of, flatten, is_array_like, unflatten)
from .while_primitive import DEFAULT_CHECKPOINTS
from .remembered import _DEFERRED, _DEFINED, _DEFINED_LIMIT, _defer_key, _entry_types
from .body import _Appended, _loop_body
from .flags import (_Bound, _Deferred, _carrying_bound, _carrying_keys, _deferring_checks, _emit_deferred,
                    _kept_dtypes, _stopped_by_raises, _unset_keys)


def _scan_without_effects(run_scan):
    """``run_scan()`` staged here, traced apart first: ``((None, None), None)`` if its
    body has effects (then nothing is staged)."""
    # (what came before, a raise guard, reaches the body as here; `carries_ok`: the
    # scan's body, all that is staged in it, hands its checks' results on as a carry)
    with path_condition.scope(carries_ok=True):
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
        from ...errors import LoopLimitError

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
    # (a check of autoflow's: on the path to the loop only, and under `vmap` only for the
    # lanes that reach it: a lane that does not take the branch the loop is in runs the
    # scan too, and may still be "running" after it)
    running = full_test(k, dyn)
    later.later(_check_finished, (max_iterations, site(), running), site=site(), when=running)
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
                    "LOAD_ATTR", "LOAD_METHOD") and ins.opname.startswith("LOAD_"):
                # (Python 3.13 loads two locals at once: `LOAD_FAST_LOAD_FAST ('ys', 'x')`)
                loaded = ins.argval[0] if isinstance(ins.argval, tuple) and ins.argval \
                    else ins.argval
                if isinstance(loaded, str):
                    names.add(loaded)
            prev = ins
        names = _APPENDS[code] = frozenset(names)
    return names


def _reverse_mode():
    """Is ``jax.grad``/``jax.vjp`` linearizing the code being traced now?"""
    return jx.is_linearizing()


def stage_loop(kind, state, names, site, *, step, cond_fn=None, start=0, length=None, unroll=1,
         max_iterations=None, checkpoints=None, memo=None, runs=False, scan=True,
         lanes="auto", debug_loops=None):
    """Stage a loop over the carried ``state`` (a tuple of the user's variables).

    ``step(k, state) -> state`` runs one iteration (``k`` is the iteration
    counter); ``cond_fn(state)`` is tested before each iteration. With an
    int ``length`` and no ``cond_fn`` the loop is ``lax.fori_loop`` with a
    static trip count (a scan: reverse-differentiable); otherwise it is a
    ``lax.while_loop`` (``length`` may then be traced), staged as
    ``while_primitive.while_loop``: a plain ``lax.while_loop`` unless reverse-mode
    differentiated, then checkpointed with ``checkpoints`` saved carries.
    With ``max_iterations`` it is a masked ``lax.scan`` of that many steps.
    ``memo`` (the user's loop body function) identifies the loop for ``_DEFINED``.
    ``runs``: the loop's first test is known to be true (a ``while`` restaged from
    before an iteration Python ran), so it binds what its body binds. ``scan=False``:
    a static trip count is a while form too (a body with effects under reverse mode:
    JAX's scan runs an effect of its body once, not once per iteration, there).
    ``lanes`` (``"auto"``, ``"lockstep"`` or ``"flat"``, see ``loops.lane_loop``) and ``debug_loops``
    (the iterations between two reports, or None, see ``loops.debug``): the options
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
    # while_primitive.while_loop takes them
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
    # Variables a staged statement before the loop may have left unbound (a loop or `if`
    # around it, `effects.unset.bound_if`): the loop carries where they are bound, from
    # where they were at its start, so that a read after it still checks (`unset.ld`).
    marked = {j: f for j, p in enumerate(parts_of(entry_state, names))
              if not isinstance(p, Undefined) and (f := unset.bound_flag(p)) is not None}
    bound_carried = bool(marked)  # the body binds a variable on some paths: the loop carries where
    defer_key = None
    if memo is not None:
        entry_parts = parts_of(entry_state, names)
        how = (kind, scan_form, max_iterations is None)
        entry_specs = {j: spec_of(entry_parts[j]) for j in marked}
        defer_key = _defer_key(memo, how, entry_state, names, entry_specs)
        if defer_key in _DEFERRED:
            deferred.specs, raises = list(_DEFERRED[defer_key]), True
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
                       if j in marked or isinstance(a, Undefined) and not a.exit
                       and not isinstance(current[j], Undefined)]
        bound = _Bound(len(first_bound) if bound_carried else 0,
                       [marked.get(j) for j in first_bound])
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
            """``while_primitive.while_loop``, with the carries the body adds: ``(out, extras)``.
            In a branch of a traced ``if``, the loop runs only where the branch is taken
            (``cond.select_or_cond.loop_gate``): a select of both branches runs no iteration of it
            for the branch it does not take."""
            gate = loop_gate()
            # after a traced `raise` (or failed check) before it, the loop runs only
            # where that did not happen (`path_condition.after_raise`): it cannot spin on values
            # Python never computed
            no_raise = path_condition.raise_gate()
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
            out = while_primitive.while_loop(cond, body, init, checkpoints=checkpoints, added=added,
                                        gated=gate is not None, added_inputs=inputs,
                                        lanes=lanes)
            return (out, ()) if added is None else out

        def body(k, dyn, running=None):
            debug.tick(k, site, debug_loops)
            if running is None:
                return full_body(k, dyn)[0]
            # A `raise` staged in the body fires only where the loop still runs
            # (under vmap a while loop runs its body for finished elements too).
            # The test is evaluated only if an effect needs it, in the middle of the
            # body: the cells it assigns (a converted test sets the variables closures
            # read, `nonlocal v; v = v_2`) are given back what the body had put there
            # (so are the attributes and containers a loop carries: `Shared.keeping`).
            # (`carries_ok`: all of the body is in the block of `_stopped_by_raises`)
            with path_condition.on_path(_keeping_cells(running, cond_fn) if callable(running)
                               else running, carries_ok=True, fresh=True):
                return full_body(k, dyn)[0]

        def test(dyn):
            # A check in the test (`while j >= 0 and xs[j] > key`: the index) is of the
            # test's own trace: what it adds to the path ends with the test, and where
            # it failed the loop ends (Python raised there).
            with path_condition.scope(carries_ok=True, fresh=True) as block:  # (ok(): the test's)
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
                        with later.each_iteration(c[0]):
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
                        # every iteration (while_primitive).
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
            if kind_of_change == "unbind":  # (see `_loop_body`: bound where the loop starts)
                marked.update((j, True) for j in changes)
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
                if getattr(r, "deferred", None):  # (see `_deferring_checks`)
                    deferred.specs, raises = r.deferred, True
                defined.update(changes)
                log_fills(names[j] for j in changes)  # (for the loops around this one)
                state = join_parts([zeros_of(changes[k]) if k in changes else p
                               for k, p in enumerate(parts_of(state, names))], names)
            else:
                dyn_index = [i for i, m in enumerate(mask) if m]
                for j, (dtype, weak) in changes.items():
                    i = dyn_index[j]
                    leaves[i] = cast_to(jnp.asarray(leaves[i]), dtype, weak)
                state = keep_order(unflatten(tree, leaves), state)
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
            path_condition.after_raise(raised)
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
            # iteration; a read of it after the loop checks that (`effects.unset.ld`).
            parts = parts_of(result, names)
            for j, before in enumerate(parts_of(entry_state, names)):
                if isinstance(before, Undefined) and not before.exit:
                    unset.bound_if(parts[j], names[j], ran_to > start)
            _kept_dtypes(entry_state, result, names, ran_to > start, site)
        if final_keys:  # set where an iteration set it (`_carrying_keys`)
            parts = parts_of(result, names)
            for (j, key, _), flag in zip(keyed, final_keys):
                unset.key_set_if(parts[j][key], key, flag)
        if final_bound:  # bound where an iteration bound it (`_carrying_bound`)
            parts = parts_of(result, names)
            sure = bound.sure if runs and bound.sure is not None else ()
            for i, (j, flag) in enumerate(zip(first_bound, final_bound)):
                # (a loop known to run an iteration, whose body binds it on every path,
                # binds it: no check where it is read, `unset.ld`)
                if not (i < len(sure) and sure[i]):
                    unset.bound_if(parts[j], names[j], flag)
        if memo is not None and deferred.specs:
            if len(_DEFERRED) >= _DEFINED_LIMIT:
                _DEFERRED.clear()
            # (also as a trace of an outer body that starts it with the variables it
            # defined, carried and marked, will look it up)
            maybe = dict(entry_specs)
            maybe.update((j, defined[j]) for j, p in enumerate(entry_parts)
                         if isinstance(p, Undefined) and j in defined)
            for k in (defer_key, _defer_key(memo, how, entry_state, names, maybe)):
                if k is not None:
                    _DEFERRED[k] = tuple(deferred.specs)
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
