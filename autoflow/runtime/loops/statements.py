"""``while`` and ``for`` over explicit carries (the iterables they take: ``iterables``).

Plain Python::

    def while_stmt(test, body, init):
        state = init
        while test(*state):
            state = body(*state)
        return state

    def for_stmt(iterable, body, init):
        state = init
        for item in iterable:
            state = body(item, *state)
        return state

Concrete conditions and iterables run exactly that. Once a condition, a trip
count or a carry is traced, the rest of the loop is staged by
``staging.stage_loop`` (a ``lax`` loop with explicit carries); state the
body changes in place is carried too (``_loop_with_state``). A loop that ran
one iteration as Python to learn that it must be staged is staged from the
state before it where nothing it wrote can be seen (``_rerunnable``).
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import sys

import jax
import jax.numpy as jnp
import numpy as np

from ...core.caches import Bounded
from ...core.origin import message
from ...errors import ConversionError
from ..common import events
from ..effects import later, path_condition, unset
from ..common.carries import caller_site, free_names, pack, unpack, with_state
from ..cond.statements import traced_if
from .body import CarryShapeError
from .flags import _ran_no_iteration
from . import packed
from .staging import stage_loop
from .ranges import TracedRange, range  # noqa: A004, F401 - (runtime.range)
from ..state.writes import ModuleStateError
from ..state.shared import Shared, settle
from ..state.snapshots import contents
from ..state.reach import entry_values, names_of, reachable
from ..state.journal import journal
from ..state.aliasing import kept, shared_places
from ..state.scopes import recording
from ..common.teach import reissuing, traced_shape_error
from ..common.values import (Tracer, UnboundVariableError, Undefined, as_pred, describe, flatten, is_array_like, is_traced,
                             staging as under_trace, concrete_truth)
from .iterables import LoopOptions, _as_seq, _scalar_iterable, enumerate


log = logging.getLogger("autoflow")


# Errors that mean "this body needs a concrete loop index" (it indexes a
# Python list, builds a shape or a slice from the index...).
_NEEDS_CONCRETE = (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError,
                   jax.errors.TracerArrayConversionError, IndexError, ConversionError,
                   traced_shape_error())


def _loop_state(init):
    """The initial carries of a loop.

    A variable first bound inside the loop (``Undefined`` before it) may be
    bound on one path of a traced ``if`` in the body: it is read later only
    where it was bound, so staged branches may fill it with zeros.
    """
    return tuple(Undefined(x.name, guarded=True, exit=x.exit, track=not x.guarded)
                 if isinstance(x, Undefined) else x for x in init)


@reissuing
def _loop_with_state(kind, state, names, shared, *, step, cond_fn=None, **kwargs):
    """``loops.staging.stage_loop``, with ``shared`` state (see ``runtime.state``) carried too.

    State that a call in the body changes (found while tracing it) is added
    to ``shared``, and the loop is traced again.
    """
    shared = shared if shared is not None else Shared()
    n = len(names)
    fns = [f for f in (step, cond_fn) if f is not None]
    # Containers the variables hold go in as copies (the originals may be
    # shared state the tracing overwrites), and come back in place when every
    # iteration keeps them (see `state.aliasing.kept`).
    keep = kept(pack(state, n))
    places = shared_places(pack(state, n))  # (one list held at two places: checked below)
    aliased = keep.aliased(fns)
    if aliased:
        shared.extend((), aliased, names_of(names, pack(state, n)))
    state = unpack(tuple(contents(v) for v in pack(state, n)))

    def originals(args, subs):
        k, s = args
        return k, unpack(tuple(subs[i] if i in subs and type(v) is type(subs[i]) else v
                                for i, v in enumerate(pack(s, n))))
    step = keep.wrap(step, lambda args: pack(args[1], n), lambda out: pack(out, n),
                     originals)
    frame = sys._getframe()  # (for the loop's site in errors)
    peeled = None  # (the CarryShapeError that made the loop peel an iteration)
    lists = packed.positions(pack(state, n))  # (long lists carried as arrays: `packed`)

    def staged(active, lists):
        entry = entry_values(fns, (state,))
        if active:
            shared.snapshot()

        def checked(k, s):
            before = flatten(pack(s, n))[0] if places else None  # (the body may write s)
            with recording(shared, names, fns, entry, frame) as rec, _unbound_reads():
                out = step(k, s)
            if places:
                _same_places(places, before, flatten(pack(out, n))[0], names, caller_site)
            # (Carries come fresh from `lax` each trace: what existed before the
            # loop is what the initial state and the functions' closures reach.)
            more = rec.missing(shared, rec.found and reachable(entry))
            if more is not None:  # a call changed state this loop does not carry
                raise more
            return out

        def inner(s):  # (the packed lists as the body sees them: lists)
            return packed.unpack(s, n, lists)

        def outer(s):
            return packed.pack(s, n, lists)

        if not active:
            out = stage_loop(kind, outer(state), names, caller_site,
                             step=lambda k, s: outer(checked(k, inner(s))),
                             cond_fn=None if cond_fn is None else lambda s: cond_fn(inner(s)),
                             **kwargs)
            return (lambda out: out), inner(out)
        all_names, _, split = with_state(names, shared, fns)
        init = pack(outer(state), n) + shared.values()

        def step2(k, s):
            shared.assign(s[n:])
            return pack(outer(checked(k, inner(unpack(s[:n])))), n) + shared.values()

        @shared.keeping  # (the test may run in the middle of the body: see `keeping`)
        def cond2(s):
            shared.assign(s[n:])
            return cond_fn(inner(unpack(s[:n])))

        out = stage_loop(kind, init, all_names, caller_site, step=step2,
                         cond_fn=None if cond_fn is None else cond2, **kwargs)
        return split, pack(inner(unpack(out[:n])), n) + tuple(out[n:])

    def peel(e):
        """Retry a loop whose carry changes shape (``e``) with its first iteration peeled."""
        nonlocal peeled, state, kwargs
        if not isinstance(e, CarryShapeError):
            return False
        if peeled:
            raise peeled from None  # (the shapes did not settle: the first change)
        if not _peelable(cond_fn, kwargs):
            return False
        # A carry's shape settles in the first iteration (`b = 0`, then
        # `b = b + x` of shape [1]): that iteration runs under a traced `if`,
        # the loop from the next one.
        peeled = e
        state = _peel(e, state, n, names, shared if shared else None, step, cond_fn, kwargs)
        kwargs = dict(kwargs, start=kwargs.get("start", 0) + 1, runs=True)
        if kwargs.get("length") is not None:
            kwargs["length"] = kwargs["length"] - 1
        return True

    split, out = settle(shared, packed.attempting(lists, staged, shared.reset),
                        lambda: names_of(names, pack(state, n)) | free_names(*fns),
                        "loop", caller_site, peel)
    out = split(out)
    return unpack(keep.write_back(pack(out, n))) if keep.same else out


def _same_places(places, before, after, names, site):
    """A list or dict the state holds at two places (``shared_places``; ``before``,
    ``after``: the leaves of the state an iteration starts from and gives): the body must
    leave both places alike, as Python's one object is (a staged loop carries each
    place apart: a change through one would not reach the other, and a loop whose
    test reads the other place would run on and on)."""
    if len(before) != len(after):
        return
    for i, j, path in places:
        changed = after[i] is not before[i], after[j] is not before[j]
        if changed == (False, False) or changed == (True, True) and after[i] is after[j]:
            continue
        key = path[0].idx if hasattr(path[0], "idx") else 0
        label = (names[key] if key < len(names) else "a variable") \
            + jax.tree_util.keystr(tuple(path[1:]))
        raise ConversionError(message(
            site(), f"`{label}` is a place of a list or dict that this loop's state holds "
            "twice (one object at two places, as `[row, row]` holds `row`), and this traced "
            "loop changes it through one place: a staged loop carries each place apart, so "
            "the other would not see the change, as Python's one object would",
            "Make the places separate lists where one object was not meant (`[[0.0] * k for "
            "_ in range(m)]` instead of `[[0.0] * k] * m`), read and write it through one "
            "place, or make the loop's bound static so the loop runs as Python."))


def _peelable(cond_fn, kwargs):
    """Can a loop whose carry changes shape run its first iteration under a traced
    ``if``? A loop with a traced test or trip count (a static one runs as Python)."""
    return kwargs.get("max_iterations") is None and (
        cond_fn is not None or not isinstance(kwargs.get("length"), int))


def _peel(e, state, n, names, shared, step, cond_fn, kwargs):
    """The state after the loop's first iteration, run under a traced ``if``
    (``e``: the ``CarryShapeError`` naming the carries whose shapes it settles).

    Where the loop runs no iteration, Python's variables keep their shapes from
    before it, which the compiled loop's results cannot have: that raises
    autoflow's error when the compiled code runs. (The branch not taken gives
    the carries broadcast to their new shapes, a value nobody reads.)"""
    start, length = kwargs.get("start", 0), kwargs.get("length")
    pred = True
    if length is not None:
        pred = jnp.asarray(length) > 0
    if cond_fn is not None:
        c = cond_fn(state)
        pred = c if pred is True else jnp.logical_and(pred, c)
    if not isinstance(pred, Tracer):
        raise e  # (a first test known as Python: the iteration runs as Python instead)
    new = {i: after for i, _, _, after in e.reshaped}

    def ran(*vals):
        return step(jnp.asarray(start, jnp.int32), unpack(vals))

    def skipped(*vals):
        full = tuple(vals) + tuple(shared.values() if shared is not None else ())
        leaves, tree = flatten(full)
        for i, after in new.items():
            shape, dtype = np.shape(after), jnp.result_type(after)
            x = jnp.asarray(leaves[i]).astype(dtype)
            try:
                leaves[i] = jnp.broadcast_to(x, shape)
            except ValueError:
                leaves[i] = jnp.zeros(shape, dtype)
        full = jax.tree_util.tree_unflatten(tree, leaves)
        if shared is not None:
            shared.assign(full[n:])
        return unpack(tuple(full[:n]))

    out = traced_if(pred, ran, skipped, pack(state, n), names, shared)
    what = ", ".join(f"`{label}` ({describe(before)} before it, {describe(after)} after an "
                     "iteration)" for _, label, before, after in e.reshaped)
    later.later(_ran_no_iteration, (e.site, what, "shape",
                                    "Give the variable the shape the loop gives it before the "
                                    "loop (e.g. `jnp.zeros(shape)`)"),
                site=e.site, when=jnp.logical_not(pred))
    return unpack(pack(out, n))


def while_stmt(test, body, init, names, *, max_iterations=None, state=None, checkpoints=None,
               lanes="auto", debug_loops=None):
    """Python's ``while`` over explicit carries.

    Plain Python::

        def while_stmt(test, body, init, names, *, max_iterations=None):
            state = init
            while test(*state):
                state = body(*state)
            return state

    As soon as ``test`` gives a traced value (at the first test or after
    some concrete iterations), the remaining iterations become one
    ``lax.while_loop`` starting from the current state. ``body`` and ``test``
    return/take the carries positionally; one carry is passed bare.
    ``max_iterations``, ``checkpoints``, ``lanes`` and ``debug_loops`` are
    options of ``autoflow.convert`` (``python.calls.Runtime`` passes them) that shape
    the staged loop (see ``loops.staging.stage_loop``).
    """
    n = len(names)
    shared, state = state, _loop_state(init)
    previous = None  # the state before the last iteration run as Python
    # (and `last`, under a trace: what that iteration wrote besides the carries)
    tracing = under_trace()
    watch = journal if tracing else contextlib.nullcontext
    while True:
        tested = later.count.staged
        with watch() as in_test:
            t = test(*state)
        c = concrete_truth(t, caller_site, what="loop condition")
        if c is None:
            break
        if not c:
            events.note("while", "python")
            return unpack(state)
        previous = state
        staged = later.count.staged
        gates = path_condition.raises_staged() if tracing else 0
        with watch() as last:
            state = pack(body(*state), n)
        if last is not None:
            last.effects = later.count.staged != staged
            if last.effects and path_condition.raises_staged() != gates:
                # The iteration staged a `raise` on a traced condition: whether the loop
                # goes on is known when the compiled code runs (Python would stop
                # there). Stage the rest of it (it stops where the `raise` fires), from
                # its test on the state that iteration left (Python's next step).
                tested = later.count.staged
                with watch() as in_test:
                    t = test(*state)
                if concrete_truth(t, caller_site, what="loop condition") is False:
                    events.note("while", "python")
                    return unpack(state)
                break
    events.note("while", "lax.while_loop" if max_iterations is None else "lax.scan (bounded)")
    kwargs = dict(step=lambda k, s: unpack(pack(body(*pack(s, n)), n)),
                  cond_fn=lambda s: test(*pack(s, n)), max_iterations=max_iterations,
                  checkpoints=checkpoints, memo=body, lanes=lanes,
                  debug_loops=debug_loops)
    if max_iterations is None and (later.count.staged != tested or in_test is not None
                                   and in_test.written):
        return _rotated(test, body, t, state, names, shared, kwargs)
    if previous is not None and under_trace() \
            and _rerunnable(previous, shared, last, (body, test)):
        # The last Python iteration made the carries traced: stage the loop from
        # the state before it, so the compiled program holds the body once (see
        # for_stmt). If that fails, stage from the state after it as before.
        try:
            # (its first test was true: what the body binds is bound after it)
            return _loop_with_state("while", unpack(previous), names, shared, runs=True,
                                    **kwargs)
        except _NEEDS_CONCRETE as e:
            log.debug("autoflow: loop at %s staged from its peeled state (%s)", caller_site(), e)
    return _loop_with_state("while", unpack(state), names, shared, **kwargs)


_TESTED = "(the loop's test)"  # (the label of the carry `_rotated` adds)


def _rotated(test, body, first, state, names, shared, kwargs):
    """The staged loop, where its test, traced just now (``first``, on ``state``), has an
    effect (a ``print``) or changed state (``self.count += 1``): a loop whose test is
    evaluated again from that state would print twice, and the changes a staged loop's
    test makes are not carried. Evaluated at the end of the body instead, as Python
    evaluates it after each iteration, its result carried to the loop's test."""
    n = len(names)

    def step(k, s):  # (`s`: the n + 1 carries, a tuple)
        new = pack(body(*s[:n]), n)
        return new + (as_pred(test(*new)),)

    kwargs = dict(kwargs, step=step, cond_fn=lambda s: s[n], memo=None)
    out = _loop_with_state("while", tuple(state) + (as_pred(first),),
                           tuple(names) + (_TESTED,), shared, **kwargs)
    return unpack(tuple(out)[:n])


def _has_traced(state):
    return builtins.any(isinstance(x, Tracer) and is_traced(x) for x in flatten(state)[0])


@contextlib.contextmanager
def _unbound_reads():
    """While a staged loop's body is traced: a read of a variable nothing bound yet
    (``m = m + 1``, ``m`` unbound before the loop) raises ``UnboundLocalError`` where
    the compiled code runs an iteration, as Python raises it: not while tracing, for
    a loop that may run none."""
    try:
        yield
    except UnboundVariableError as e:
        if e.name is None:
            raise
        raise unset.staged_read(e) from None


def _python_for(items, body, test, state, n, names, shared=None):
    """Iterate as Python; a traced ``test`` (after a ``break``) guards the body. The
    test is taken before the next item is: a loop that breaks leaves the rest of an
    iterator (or a generator's next step) to the code after it, as Python does."""
    t = True if test is None else test(*state)
    if test is not None and concrete_truth(t, caller_site, what="loop condition") is False:
        return unpack(state)
    for item in items:
        if test is not None and concrete_truth(t, caller_site, what="loop condition") is None:
            if n:
                # (the rest of the loop, skipped where a traced `break` left it: a guard)
                state = pack(traced_if(t, lambda *s: body(item, *s), lambda *s: unpack(s),
                                    state, names, shared, guard=True), n)
            else:
                traced_if(t, lambda: body(item), lambda: None, (), (), shared, guard=True)
        else:
            state = pack(body(item, *state), n)
        if test is not None:
            t = test(*state)
            if concrete_truth(t, caller_site, what="loop condition") is False:
                break
    return unpack(state)


def _immutable(value):
    """Nothing a Python iteration could change in place (arrays, numbers, None, tuples)."""
    if isinstance(value, tuple):
        return builtins.all(_immutable(v) for v in value)
    return value is None or isinstance(value, (Undefined, str)) or (
        is_array_like(value) and not isinstance(value, np.ndarray))


def _rerunnable(state, shared, ran, fns):
    """May a staged loop start again from ``state``, discarding the iteration run
    as Python from it? Only when it cannot have changed anything in place: no
    shared state named, immutable carries, and nothing written by the calls it
    made that the loop's functions ``fns`` reach (``ran``: the ``journal`` of
    that iteration; a converted method's ``self.a = ...`` there would otherwise
    happen once more), and no effect staged for run time (a ``print``: it would
    happen twice). What they do not reach (a module's own counter) is not
    carried by a staged loop: writing it is a trace-time effect either way."""
    if shared or not _immutable(state) or getattr(ran, "effects", False):
        return False
    if not ran.written:
        return True
    outside = reachable(entry_values(fns, state))  # (state: the carries, a tuple)
    return not any(id(o) in outside for o in ran.written)


def for_stmt(iterable, body, init, names, test=None, *, max_iterations=None, state=None,
             checkpoints=None, lanes="auto", debug_loops=None):
    """Python's ``for`` over explicit carries.

    Plain Python::

        def for_stmt(iterable, body, init, names, test=None, *, max_iterations=None):
            state = init
            for item in iterable:
                if test is not None and not test(*state):
                    break
                state = body(item, *state)
            return state

    Staged forms (under a JAX transformation):

    * a ``range`` with a traced bound -> ``lax.while_loop`` (any step sign,
      empty ranges run zero times);
    * a ``range`` with concrete bounds or an array (iterated over its leading
      axis), also inside ``enumerate``/``zip`` -> ``lax.fori_loop`` with a
      static trip count (a scan, reverse-differentiable) once a carry is
      traced; if the body needs a concrete index (it indexes a Python list,
      builds a shape or slice from it), or a carry changes shape, the loop
      runs as Python instead;
    * ``test`` (``not broke`` after a ``break``) makes it a ``lax.while_loop``.

    Lists, tuples, dicts and other Python iterables are iterated as Python.
    ``autoflow.unroll(it)`` forces Python iteration, ``autoflow.roll(it,
    unroll=k)`` forces a staged loop and passes ``unroll`` to ``lax``.
    """
    n = len(names)
    shared, state = state, _loop_state(init)
    mode, unroll = None, 1
    if isinstance(iterable, LoopOptions):
        mode, unroll, iterable = iterable.mode, iterable.unroll, iterable.iterable
    seq = _as_seq(iterable) if mode != "unroll" else None
    if mode == "unroll" and isinstance(iterable, TracedRange):
        raise ConversionError(message(
            caller_site(), "`autoflow.unroll` needs a range with concrete bounds; this one is traced",
            "Remove `autoflow.unroll`, or make the bound static."))
    if seq is None:
        if isinstance(iterable, Tracer) and np.ndim(iterable) == 0:
            _scalar_iterable(iterable, caller_site())
        events.note("for", "python")
        return _python_for(iterable, body, test, state, n, names, shared)

    site = caller_site
    step = (lambda k, s: unpack(pack(body(seq.item(k), *pack(s, n)), n)))  # noqa: E731
    cond_fn = None if test is None else (lambda s: test(*pack(s, n)))

    if not isinstance(seq.length, int):  # traced trip count
        events.note("for", "lax.while_loop")
        return _loop_with_state("for", unpack(state), names, shared, step=step, cond_fn=cond_fn,
                           length=seq.length, unroll=unroll, max_iterations=max_iterations,
                           checkpoints=checkpoints, memo=body, lanes=lanes,
                           debug_loops=debug_loops)
    if seq.python is None or (not under_trace() and mode != "roll"):
        events.note("for", "python")
        return _python_for(seq.python if seq.python is not None else iterable,
                           body, test, state, n, names, shared)

    # A concrete trip count under a trace: roll the loop once a carry is traced.
    start = 0
    before_peel = state
    peel = None  # (the journal of what the peeled iteration wrote besides the carries)
    if mode != "roll" and not _has_traced(state) and seq.length > 0:
        # Peel the first iteration as Python: loops doing Python bookkeeping
        # (counters, shapes, lists) stay Python; the rest roll from here.
        first = next(iter(seq.python))
        if test is not None:
            c = concrete_truth(test(*state), caller_site, what="loop condition")
            if c is False:
                return unpack(state)
        if test is None or c is True:
            staged = later.count.staged
            with journal() as peel:
                state = pack(body(first, *state), n)
            peel.effects = later.count.staged != staged
            start = 1
        if start and not _has_traced(state):
            events.note("for", "python")
            rest = iter(seq.python)
            next(rest)
            return _python_for(rest, body, test, state, n, names, shared)
    if start >= seq.length:
        events.note("for", "python")
        return unpack(state)
    # (the first test staged: the `break` and `return` flags the rewriter made, as Python)
    going = True if test is None else concrete_truth(test(*state), caller_site,
                                                     what="loop condition")
    if start and going is False:
        # the peeled iteration left the loop (a `break` or `return` taken as Python)
        events.note("for", "python")
        return unpack(state)
    if start == 1 and _rerunnable(before_peel, shared, peel,
                                  [f for f in (body, test) if f is not None]):
        # One copy of the body: the peeled iteration only told us that the loop
        # must be staged; stage all of it from the state before the peel (the
        # peeled values are unused, and jit drops them), so the compiled program
        # holds the body once. If that fails, stage from the peeled state as before.
        try:
            # (its first test was true: what the body binds is bound after it)
            out = _loop_with_state("for", unpack(before_peel), names, shared, step=step,
                              cond_fn=cond_fn, start=0, length=seq.length, unroll=unroll,
                              max_iterations=max_iterations, checkpoints=checkpoints, memo=body,
                              lanes=lanes, debug_loops=debug_loops, runs=True)
            events.note("for", "lax.fori_loop" if cond_fn is None else "lax.while_loop")
            return out
        except _NEEDS_CONCRETE as e:
            log.debug("autoflow: loop at %s staged from its peeled state (%s)", site(), e)
    try:
        # (a static trip count of at least one whose first test holds runs the body)
        out = _loop_with_state("for", unpack(state), names, shared, step=step, cond_fn=cond_fn,
                          start=start, length=seq.length - start, unroll=unroll,
                          max_iterations=max_iterations, checkpoints=checkpoints, memo=body,
                          lanes=lanes, debug_loops=debug_loops,
                          runs=seq.length > start and going is True)
        events.note("for", "lax.fori_loop" if cond_fn is None else "lax.while_loop")
        return out
    except _NEEDS_CONCRETE as e:
        if mode == "roll" or isinstance(e, ModuleStateError):
            raise
        log.debug("autoflow: loop at %s runs as Python (%s: %s)", site(), type(e).__name__, e)
        events.note("for", f"python (unrolled: {type(e).__name__})")
        rest = iter(seq.python)
        for _ in builtins.range(start):
            next(rest)
        out = _python_for(rest, body, test, state, n, names, shared)
        # (said once the unrolled loop has run: one that fails all the same raises its
        # own error, with no warning about speed before it)
        _warn_unrolled(site(), seq.length, e)
        return out
    rest = iter(seq.python)
    for _ in builtins.range(start):
        next(rest)
    return _python_for(rest, body, test, state, n, names, shared)


def _unroll_reason(e):
    if isinstance(e, ConversionError):
        text = str(e).splitlines()[0]
        return text.split(": ", 1)[-1] if ": " in text else text
    return ("its body needs the loop index as a Python number (it indexes a Python list or "
            "a NumPy table, or builds a shape or a slice from it)")


_WARNED_UNROLLED = Bounded(4096)  # loops already warned about (file, line, column)


def _warn_unrolled(site, trip_count, e):
    """A loop with traced carries runs as Python: say so, once per loop (PerformanceWarning)."""
    import warnings

    from ...errors import PerformanceWarning

    where = f"{site}: " if site is not None else ""
    text = (f"{where}this `for` loop has traced carries but runs as Python, unrolled into "
            f"{trip_count} copies of its body under jit, because {_unroll_reason(e)}. "
            "Write `for ... in autoflow.unroll(...)` if unrolling is intended (this silences "
            "the warning), or change the body so the index can stay traced.")
    key = None if site is None else (site.filename, site.lineno, site.col)
    if key in _WARNED_UNROLLED:
        return
    if key is not None:
        _WARNED_UNROLLED[key] = True
    if site is None:
        warnings.warn(text, PerformanceWarning, stacklevel=3)
    else:
        warnings.warn_explicit(text, PerformanceWarning, site.filename, site.lineno,
                               module=site.filename)
