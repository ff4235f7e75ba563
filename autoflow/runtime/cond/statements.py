"""``if``, ``if``/``elif`` chains and ``a if c else b``, and how a traced one is staged.

Plain Python::

    def if_stmt(cond, true_fn, false_fn, operands):
        return true_fn(*operands) if cond else false_fn(*operands)

A concrete condition runs exactly that. A traced one traces both branches
(``_stage_branches``): their outputs must agree in structure and shape
(dtypes are promoted as NumPy would, retracing once), and the staged form is
the ``if`` primitive (``cond.primitive``: a ``lax.cond`` or a select, by the cost
rule of ``cond.select_or_cond``). A branch that ends in ``raise`` does not fall through
(``_cond_raising``). State the branches change in place is carried too
(``traced_if``).
"""

from __future__ import annotations


import jax.numpy as jnp

from ...core.origin import Site, message, user_site
from ...errors import ConversionError
from ..common import events
from ..effects import path_condition, unset
from ..common.carries import (Restart, caller_site, fill, free_names, join_parts, keep_order, leaf_labels, log_fills, pack, parts_of, spec_of, unpack, with_state, cast_to)
from .select_or_cond import GPU_SELECT
from ..common.coupling import now
from .primitive import stage_if
from ..effects.later import Deferred
from ..loops import packed
from ..effects.raising import Signal, StagedRaise, on_its_path
from ..state.shared import Shared, settle
from ..state.reach import closure_cells, names_of
from ..state.aliasing import kept
from ..state.snapshots import undoer
from ..common.teach import reissuing
from .errors import branch_error, same_key_orders, static_fields_error
from . import chosen as strings
from ..common.values import (DICTS, UnboundVariableError, Undefined, dict_like, as_pred, aval_of, flatten, in_staged_block,
                             is_array_like, is_extended, promote_values, same_static, staged_block, concrete_truth, unflatten)


def if_stmt(cond, true_fn, false_fn, operands=(), names=None, state=None, guard=False,
            unread=(), rebound=()):
    """``if cond: true_fn(*operands) else: false_fn(*operands)``, returning its result.

    Plain Python::

        def if_stmt(cond, true_fn, false_fn, operands=(), names=None):
            return true_fn(*operands) if cond else false_fn(*operands)

    With a traced scalar ``cond`` this is ``lax.cond``: both branches are
    traced, their outputs must have the same structure and shapes (dtypes
    are promoted), and ``names`` (the output variables, or ``None`` for a
    function's return value) is used to name what does not match. ``state``
    (``af.state(...)``) names the attributes and containers the branches
    change in place: each staged branch starts from their values before the
    ``if``, and the chosen values are written back afterwards. ``guard``
    marks the ``if not broke:`` that a ``break`` (or a ``return``) in a loop
    body becomes: its false path is the iteration that leaves the loop, taken
    at most once per run of the loop, which the cost rule of
    ``runtime/cond/select_or_cond.py`` weighs; ``unread`` names the outputs that nothing
    reads once the loop is left (the loop's other carries), which a select
    takes from the true branch. ``rebound`` (an ``if`` whose value is returned) names
    closure variables that a function the branches call rebinds with ``nonlocal``
    and that nothing reads afterwards (the function returns, and the functions that
    see them are only called in it): a branch may rebind them, as Python does.
    """
    c = concrete_truth(cond, caller_site)
    if c is not None:
        events.note("if", "python")
        return true_fn(*operands) if c else false_fn(*operands)
    try:
        return traced_if(cond, true_fn, false_fn, operands, names, state, guard=guard,
                     unread=unread, rebound=rebound)
    finally:  # what the cost rule chose (runtime/cond/select_or_cond.py)
        events.note("if", _lowered_as())


def if_chain(tests, fns, operands=(), names=None, state=None, rebound=()):
    """An ``if``/``elif`` chain: the branch of the first true test, else the last.

    ``tests`` are thunks, ``fns`` one branch function per test and one for the
    final ``else``. Plain Python::

        def if_chain(tests, fns, operands=(), names=None):
            for test, fn in zip(tests, fns):
                if test():
                    return fn(*operands)
            return fns[-1](*operands)

    A test is evaluated only when every test before it was false, as in
    Python. From a traced test on, the rest is ``if_stmt`` nested in the
    false branch (``lax.cond``), the rest of the tests traced inside it: the
    same program as the chain of nested ``if``s it replaces.
    """
    for i, test in enumerate(tests):
        cond = test()
        site = _thunk_site(test)
        c = concrete_truth(cond, site)
        if c is None:
            rest_tests, rest = tests[i + 1:], fns[i + 1:]
            if rest_tests:
                inner = Shared(*state._args) if isinstance(state, Shared) else None

                def false_fn(*ops, rest_tests=rest_tests, rest=rest, inner=inner):
                    return if_chain(rest_tests, rest, ops, names, inner, rebound)
            else:
                false_fn = rest[0]
            try:
                return traced_if(cond, fns[i], false_fn, operands, names, state, site,
                                 rebound=rebound)
            finally:
                events.note("if", _lowered_as(), lambda: _line_of(test))
        events.note("if", "python", lambda: _line_of(test))
        if c:
            return fns[i](*operands)
    return fns[-1](*operands)


def _thunk_site(thunk):
    """The site of the test a thunk evaluates (its first line and column)."""
    code = getattr(thunk, "__code__", None)
    if code is None:
        return caller_site

    def site():
        # the first instructions stand at the generated lambda (an empty span)
        line, col = code.co_firstlineno, None
        for pos in code.co_positions():
            if None not in pos and (pos[1], pos[3]) > (pos[0], pos[2]):
                line, col = pos[0], pos[2]
                break
        return Site(code.co_filename, line, col)
    return site


def _line_of(thunk):
    """The line of the ``if``/``elif`` a test thunk stands for (the thunk is
    placed there), as ``explain`` matches it."""
    code = getattr(thunk, "__code__", None)
    return Site(code.co_filename, code.co_firstlineno) if code is not None else user_site(3)


def _lowered_as():
    return {"select": "select (lax.select)", None: "lax.cond",
            GPU_SELECT: GPU_SELECT}.get(now.choice, "lax.cond")


@reissuing
def traced_if(cond, true_fn, false_fn, operands, names, shared, site=caller_site, guard=False,
          unread=(), expression=False, rebound=()):
    """``cond._stage_branches``, with ``shared`` state (see ``runtime.state``) carried too."""
    shared = shared if shared is not None else Shared()
    n = len(names) if names is not None else None
    site_key = tuple(getattr(fn, "__code__", None) for fn in (true_fn, false_fn))
    keep = kept(operands if n == len(operands) else ())
    true_fn, false_fn = (keep.wrap(fn, lambda args: args, lambda out: pack(out, n))
                         for fn in (true_fn, false_fn))
    # long lists the branches give back as one array each (see `loops.packed`)
    lists = packed.positions(operands) if n is not None and n == len(operands) else {}

    def staged(active, lists):
        all_names, wrap, split = with_state(names, shared.snapshot() if active else shared,
                                            rebound=rebound)
        # The branches change the state's containers in place (each starts
        # from the snapshot): an append to one is an append, not a new list.
        keep.also = {id(o) for o in shared.objects} if active else set()

        def packing(fn):  # (the branch gives the packed lists back as arrays)
            return fn if not lists else lambda *args: packed.pack(fn(*args), n, lists)

        out = _stage_branches(cond, wrap(packing(true_fn)), wrap(packing(false_fn)), operands,
                              all_names, site, guard, unread, expression,
                              None if None in site_key else site_key + (all_names,))
        if lists and all_names is not names:  # (the statement's state after its variables)
            return split, pack(packed.unpack(unpack(out[:n]), n, lists), n) + tuple(out[n:])
        return split, packed.unpack(out, n, lists)

    try:
        split, result = settle(shared, packed.attempting(lists, staged, shared.reset),
                               lambda: names_of(names, operands) | free_names(true_fn, false_fn),
                               "`if`", site)
        result = split(result)
        return unpack(keep.write_back(pack(result, n))) if keep.same else result
    except StagedRaise as r:
        if in_staged_block():
            raise
        # Every traced path raises: so does tracing (as Python would, always).
        raise r.at_trace_time() from None


def if_exp(cond, true_thunk, false_thunk):
    """``true_thunk() if cond else false_thunk()``; a traced ``cond`` gives ``lax.cond``."""
    c = concrete_truth(cond, caller_site)
    if c is not None:
        events.note("ternary", "python")
        return true_thunk() if c else false_thunk()
    watched = _closure_containers(true_thunk, false_thunk)
    try:
        # (through `traced_if`: a branch that changes state, `log.append(...)` in a
        # function it calls, starts from the state before it, as an `if`'s branches do)
        shared = Shared()
        out = traced_if(cond, true_thunk, false_thunk, (), None, shared, caller_site,
                        expression=True)
    finally:
        events.note("ternary", _lowered_as())
    carried = {id(o) for o in shared.objects}  # (changed by calls: written back as chosen)
    for name, (obj, before) in watched.items():
        if id(obj) not in carried and _contents(obj) != before:
            raise ConversionError(message(
                caller_site(), f"an operand of this conditional expression (`a if c else b`) "
                f"changes `{name}` in place, and the condition is traced: both operands run "
                "when it is traced, so both changes would be made",
                f"Write it as an `if` statement (which carries `{name}` through both "
                "branches), or make the change outside the expression."))
    return out


def _closure_containers(*thunks):
    """``{name: (object, contents)}`` for the lists, dicts and sets the thunks of a
    conditional expression read from their closure (what an operand may change)."""
    out = {}
    for name, _, v in closure_cells(thunks, 0):
        if name is not None and type(v) in (list, dict, set) and name not in out:
            out[name] = (v, _contents(v))
    return out


def _detached(value):
    """``value`` with its lists and dicts copied (inside tuples too; leaves shared)."""
    if type(value) is tuple:
        return tuple(_detached(v) for v in value)
    if type(value) is list:
        return [_detached(v) for v in value]
    if type(value) in DICTS:
        return dict_like(value, {k: _detached(v) for k, v in value.items()})
    return value


def _contents(v):
    """What an in-place change of a list, dict or set changes (by identity)."""
    if type(v) in DICTS:
        return [(k, id(x)) for k, x in v.items()]
    return [id(x) for x in v] if type(v) is list else {id(x) for x in v}


_NONE = object()  # a fill of None: the other path's value is None (a bare `return`)


class _Like:
    """A fill by a string's likeness: its text, zeros for the traced values in it."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _fill_spec(value):
    """What a path leaving a guarded variable unbound fills it with, given the other
    path's ``value``: zeros of its spec, or None where it is None (a `return` without
    a value: the value is read only on the path that returned, and is None there), or
    a string like it (an `elif` chain of strings, cut in chunks: the variable is read
    only where a branch bound it)."""
    if value is None:
        return _NONE
    if strings.is_string(value):
        return _Like(strings.zeros_like(strings.template(value)))
    return spec_of(value)


def _stage_branches(pred, true_fn, false_fn, operands, names, site, guard=False, unread=(),
                    expression=False, memo=None):
    """``lax.cond`` of two Python branch functions taking ``operands``.

    ``names`` labels the outputs (a tuple of variable names), or is ``None``
    when the branches' results are the function's return value. ``guard``,
    ``unread``: see ``cond.if_stmt``. ``memo``: what identifies this ``if`` (its
    branches' code), under which the strings it chose when last staged are kept.
    """
    records = {}
    raws = {}  # path -> its variables' values, before the chosen strings are paired
    targets = {}
    fills = {}  # variable index -> zeros spec, for guarded Undefined values
    zeroed = set()  # those filled with zeros (not a loop body's placeholder)
    # variable index -> templates of its strings on the two paths (`chosen`): to begin
    # with, what this `if` chose when last staged (checked in `_compare`), so that an
    # `elif` chain of strings is not traced again at each level (2^n times)
    chosen = dict(_CHOSEN.get(memo, ())) if memo is not None else {}
    strong = set()  # output indices weak on one path only: made strong after the `if`
    returning = "expression" if expression else names is None

    # A branch in which a `raise` was staged on some of its paths (a nested `if`)
    # gives one more output: where it did not raise (`path_condition.after_raise`), so that
    # the code after the `if` runs only there.
    raises = {"both": False}
    # The variables (output indices) bound on some paths of the `if` only: zeros where
    # they are not, and one more output each, a boolean "bound here", with which a
    # read of the variable after the `if` checks at run time that it is bound
    # (`effects.unset.ld`): Python's `UnboundLocalError` where it is not.
    tracked = set()

    def one_path(u, v):
        """May the unbound ``u`` on one path be filled, given the other path's ``v``?"""
        if u.guarded:
            return _fill_spec(v) is not None
        return names is not None and not expression and spec_of(v) is not None

    def make(key, fn):
        def branch():
            undo = undoer(operands)
            with staged_block(), path_condition.on_path(pred if key == "t" else _negate(pred),
                                               carries_ok=True, fresh=True) as path:
                try:
                    with _unbound_reads_raise():
                        out = fn(*operands)
                except StagedRaise:
                    # Every path of the branch raises: what it changed in place before
                    # (an iteration of a loop run as Python) is of a trace that ends here
                    undo()
                    raise _BranchRaised(key) from None
                except BaseException:  # (a retrace: the branch starts again from them)
                    undo()
                    raise
                # What the branch changed in place in its operands' containers is in its
                # results (written back after the `if`): the other branch starts from
                # them as they were
                out = _detached(out)
                undo()
                ok = path.ok()
            if ok is not None and not raises["both"]:
                raise Restart(("raises", None))
            other = records.get("f" if key == "t" else "t")
            if other is not None:
                # The second path traced fills its own one-sided bindings now (zeros
                # of the other path's type), instead of a restart that traces both
                # paths again; only the first path's need a restart (`_compare`).
                for k, (mine, theirs) in enumerate(zip(parts_of(out, names), parts_of(other[0], names))):
                    if k not in fills and isinstance(mine, Undefined) and one_path(mine, theirs):
                        fills[k] = _fill_spec(theirs)
            unbound = set()  # the one-path variables this path leaves unbound
            if fills:
                parts = parts_of(out, names)
                for k, p in enumerate(parts):
                    if k in fills and isinstance(p, Undefined):
                        if fills[k] is _NONE:
                            parts[k] = None
                            continue
                        if not p.guarded or p.track:
                            unbound.add(k)
                        if isinstance(fills[k], _Like):
                            parts[k], zeros = fills[k].value, True
                        else:
                            parts[k], zeros = fill(p, fills[k])
                        if zeros:
                            zeroed.add(k)
                out = join_parts(parts, names)
            raws[key] = parts_of(out, names)
            if chosen:  # (both paths' strings, each path giving zeros for the other's)
                parts = parts_of(out, names)
                for k, (t_tpl, f_tpl) in chosen.items():
                    parts[k] = (parts[k], strings.zeros_like(f_tpl)) if key == "t" else \
                        (strings.zeros_like(t_tpl), parts[k])
                out = join_parts(parts, names)
            bound = {}  # output index -> where it is bound (a traced bool), if not always
            if names is not None:
                for k, p in enumerate(parts_of(out, names)):
                    flag = False if k in unbound else unset.bound_flag(p)
                    if flag is not None:
                        bound[k] = flag
                if set(bound) - tracked:
                    if other is not None:  # the first path tracked none of these
                        raise Restart(("defined", set(bound)))
                    tracked.update(bound)
            leaves, tree = flatten(out)
            mask = [is_array_like(x) for x in leaves]
            records[key] = (out, leaves, tree, mask)
            if other is not None:
                _compare(records["t"], records["f"])
            dyn = [x for x, m in zip(leaves, mask) if m]
            dyn = [cast_to(x, *targets[j]) if j in targets else x for j, x in enumerate(dyn)]
            dyn += [as_pred(bound[k]) if k in bound else jnp.bool_(True) for k in sorted(tracked)]
            if raises["both"]:
                dyn.append(jnp.bool_(True) if ok is None else as_pred(ok))
            return dyn
        return branch

    def _compare(t, f):
        (t_out, t_leaves, t_tree, t_mask), (f_out, f_leaves, f_tree, f_mask) = t, f
        # A variable first bound inside a loop may be bound on one path only:
        # fill the other path with zeros of the same type (see Undefined.guarded).
        new_fills = {}
        for k, (a, b) in enumerate(zip(parts_of(t_out, names), parts_of(f_out, names))):
            for u, v in ((a, b), (b, a)):
                if isinstance(u, Undefined) and one_path(u, v):
                    new_fills[k] = _fill_spec(v)
        if new_fills:
            raise Restart(("fill", new_fills))
        if chosen:  # (remembered, or found by a restart: still what the paths give?)
            exact = strings.chosen_parts(raws["t"], raws["f"])
            if not strings.same_choice(exact, chosen):
                raise Restart(("choose", exact))
        choose = strings.chosen_parts(parts_of(t_out, names), parts_of(f_out, names))
        if choose:
            raise Restart(("choose", {**chosen, **choose}))
        labels = leaf_labels(t_out, names)
        if t_tree != f_tree:
            # Find the first variable whose layout differs, for the message.
            if names is None:
                raise branch_error(site(), None, returning, t_out, f[0], t_tree, f_tree, guard)
            t_parts = t_out if len(names) > 1 else (t_out,)
            f_parts = f[0] if len(names) > 1 else (f[0],)
            for name, a, b in zip(names, t_parts, f_parts):
                ta, tb = flatten(a)[1], flatten(b)[1]
                if ta != tb:
                    la, lb = flatten(a)[0], flatten(b)[0]
                    # (`returning` is False here but for a conditional expression
                    # carrying state, whose value is labelled `retval`)
                    if len(la) == len(lb) and type(a) is type(b) \
                            and type(a) not in (list, tuple, dict) and not returning:
                        raise static_fields_error(site(), name, a, ta, tb)
                    if len(la) == 1 and len(lb) == 1 and not isinstance(a, (dict, list, tuple)):
                        raise branch_error(site(), name, returning, la[0], lb[0], guard=guard)
                    if type(a) is tuple and type(b) is tuple and len(a) == len(b) == 1 \
                            and type(a[0]) is list and type(b[0]) is list:
                        a, b = a[0], b[0]  # (a list the branches change in place)
                    raise branch_error(site(), name, returning, a, b, ta, tb, guard)
            raise branch_error(site(), "?", False, t_out, f[0], t_tree, f_tree, guard)
        if names is not None:
            same_key_orders(site, names, t_out, f[0])
        changes = {}
        j = 0
        for i, (a, b, ma, mb) in enumerate(zip(t_leaves, f_leaves, t_mask, f_mask)):
            if not ma or not mb:
                if not (ma or mb) and same_static(a, b):
                    continue
                if names is not None:  # (a string made from traced values: name it, not
                    # its template, a part of it)
                    a, b = next(((u, v) for n, u, v in zip(names, parts_of(t_out, names),
                                                           parts_of(f[0], names))
                                 if n == labels[i] and (isinstance(u, Deferred)
                                                        or isinstance(v, Deferred))), (a, b))
                raise branch_error(site(), labels[i], returning, a, b, guard=guard)
            av, bv = aval_of(a), aval_of(b)
            if av[0] != bv[0]:
                raise branch_error(site(), labels[i], returning, a, b, guard=guard)
            if av[1] != bv[1]:
                if is_extended(av[1]) or is_extended(bv[1]):  # a key on one path only
                    raise branch_error(site(), labels[i], returning, a, b, guard=guard)
                changes[j] = promote_values(a, av, b, bv)
            elif av[2] != bv[2]:
                # weak on one path only (a Python number against an array of its dtype):
                # strong, as JAX promotes the two (and `lax.cond` gives): made so after the
                # `if` (a restart here would trace a chain of `elif`s 2^n times)
                strong.add(j)
            j += 1
        if changes and not targets:
            raise Restart(changes)

    for _ in range(5):
        records.clear()
        zeroed.clear()
        strong.clear()
        try:
            # lax.cond, or a select when the branches are cheap (see lowering.py)
            dyn = stage_if(as_pred(pred), make("t", true_fn), make("f", false_fn), guard,
                                lambda: _free(records["t"], names, unread))
        except _BranchRaised as b:
            now.choice = None
            return _cond_raising(pred, true_fn, false_fn, operands, b.key, site)
        except Restart as r:
            if isinstance(r.changes, tuple) and r.changes[0] == "raises":
                raises["both"] = True
            elif isinstance(r.changes, tuple) and r.changes[0] == "defined":
                tracked.update(r.changes[1])
            elif isinstance(r.changes, tuple) and r.changes[0] == "choose":
                chosen.clear()
                chosen.update(r.changes[1])
            elif isinstance(r.changes, tuple):
                fills.update(r.changes[1])
            else:
                targets.update(r.changes)
            continue
        break
    else:  # pragma: no cover - promotion converges in one step
        raise ConversionError(message(site(), "could not find common types for this `if`"))
    if memo is not None and (chosen or memo in _CHOSEN):
        _CHOSEN[memo] = dict(chosen)
    if zeroed and names is not None:
        log_fills(names[k] for k in zeroed if k < len(names))
    if raises["both"]:
        *dyn, ok = dyn
        path_condition.after_raise(ok)
    defined = ()
    if tracked:
        dyn, defined = dyn[:-len(tracked)], dyn[-len(tracked):]
    if strong:
        dyn = [cast_to(x, x.dtype) if j in strong else x for j, x in enumerate(dyn)]
    _, leaves, tree, mask = records["t"]
    it = iter(dyn)
    result = keep_order(unflatten(tree, [next(it) if m else x for x, m in zip(leaves, mask)]),
                        records["t"][0])
    if tracked:
        parts = parts_of(result, names)
        for k, flag in zip(sorted(tracked), defined):
            unset.bound_if(parts[k], names[k], flag)
    if chosen:  # the string of the path taken, made when the compiled code runs
        parts, where = parts_of(result, names), site()
        for k, (t_tpl, f_tpl) in chosen.items():
            label = names[k] if names is not None else None
            parts[k] = strings.choice(as_pred(pred), parts[k], lambda t=t_tpl, f=f_tpl, n=label:
                                      branch_error(where, n, returning, t, f, guard=guard))
        result = join_parts(parts, names)
    return result


# branch codes and variable names -> the `chosen` an `if` staged last (`_stage_branches`)
_CHOSEN: dict = {}


def _free(record, names, unread):
    """The staged outputs (indices among the array leaves) of the variables ``unread``."""
    if not unread:
        return ()
    out, leaves, _, mask = record
    labels = [label for label, m in zip(leaf_labels(out, names), mask) if m]
    return tuple(i for i, label in enumerate(labels) if label in unread)


class _unbound_reads_raise:
    """Context: a read of an unbound variable in a staged branch raises Python's
    ``UnboundLocalError`` when the compiled code runs and takes that branch (as
    a ``raise`` there would), not while tracing: Python raises it only on that
    path (``for i in ...: if i > 0: use(prev)`` then ``prev = ...``). So does any other
    error Python raises in the user's code there (``raising.on_its_path``)."""

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if isinstance(exc, UnboundVariableError) and exc.name is not None:
            # (A loop whose body reads it so is traced again with the variable
            # carried from the start: see `loops.body._loop_body`'s `fills`.)
            log_fills([exc.name])
            raise unset.staged_read(exc) from None
        staged = on_its_path(exc)
        if staged is not None:  # (Python's own error, raised only on this path)
            raise staged from None
        return False


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
    undo = undoer(operands)
    ok = None
    # (`carries_ok`: where its `raise` is a `effects.checks._Check`, the check's result is handed
    # on below; a check before it is in that check's condition)
    with staged_block(), path_condition.on_path(paths[raiser], carries_ok=True):
        try:
            with _unbound_reads_raise():
                fns[raiser](*operands)
        except StagedRaise as r:
            ok = r.emit()
        finally:
            undo()  # (what it changed in place before it raised: not the other branch's)
    # What follows the `if` (the other branch, then the rest of the block) runs only
    # where it did not raise: effects check it, loops test it (`path_condition.after_raise`).
    path_condition.after_raise(paths[other] if ok is None else ok)
    with staged_block():
        try:
            with _unbound_reads_raise():
                return fns[other](*operands)
        except StagedRaise as r:
            staged = r.emit()
            both = r
    raise StagedRaise(None, site, first=both, staged=staged)
