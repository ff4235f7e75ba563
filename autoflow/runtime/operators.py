"""The runtime operators that converted code calls.

Each operator means exactly the Python it replaces when its condition or
iterable is concrete, and stages ``lax`` control flow when it is traced.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import operator

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..core.origin import Site, message, user_site
from ..errors import ConversionError
from . import events, lowering, staging
from .raising import StagedRaise
from ._jax_compat import is_symbolic_dim
from .state import (MoreState, Shared, contents, entry_values, journal, kept, names_of,
                    reachable, recording)
from .teach import reissuing, traced_shape_error
from .values import (Tracer, UnboundVariableError, Undefined, as_pred, flatten,
                     in_staged_block, is_traced, staging as under_trace, truth)

log = logging.getLogger("autoflow")

# Errors that mean "this body needs a concrete loop index" (it indexes a
# Python list, builds a shape or a slice from the index...).
_NEEDS_CONCRETE = (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError,
                   jax.errors.TracerArrayConversionError, IndexError, ConversionError,
                   traced_shape_error())


def _site():
    return user_site(3)


def _loop_state(init):
    """The initial carries of a loop.

    A variable first bound inside the loop (``Undefined`` before it) may be
    bound on one path of a traced ``if`` in the body: it is read later only
    where it was bound, so staged branches may fill it with zeros.
    """
    return tuple(Undefined(x.name, guarded=True, exit=x.exit) if isinstance(x, Undefined)
                 else x for x in init)


def _pack(value, n):
    """A function's carried return value as a tuple of ``n`` carries."""
    if n == 1:
        return (value,)
    if n == 0:
        return ()
    return tuple(value)


def _unpack(state):
    if len(state) == 1:
        return state[0]
    if len(state) == 0:
        return None
    return tuple(state)


def ld(value):
    """A read of a variable that a converted statement may have left unbound.

    Plain Python: ``value`` itself, where Python would have read the variable;
    where Python would raise ``UnboundLocalError`` (the variable was never
    assigned on this path) so does ``ld``.
    """
    if type(value) is Undefined:
        raise UnboundVariableError(message(
            user_site(2), f"cannot access local variable `{value.name}` where it is not "
            "associated with a value", f"Assign `{value.name}` on every path that reaches "
            "this line."))
    return value


def _free_names(*fns):
    """``{id(value): name}`` for the closure variables of ``fns`` (and of the
    functions they close over, one level down)."""
    out = {}
    for fn in fns:
        code = getattr(fn, "__code__", None)
        for name, cell in zip(code.co_freevars if code else (), fn.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            out.setdefault(id(value), name)
            if callable(value) and getattr(value, "__closure__", None):
                for k, v in _free_names(value).items():
                    out.setdefault(k, v)
    return out


def _with_state(names, shared):
    """``(names, wrap, split)`` for a staged statement that also changes ``shared`` state.

    The state's values travel as extra outputs after the variables: ``wrap``
    makes a branch or body function reset the state, run, and return the
    variables plus the state's values; ``split`` takes the result apart and
    writes the state back in place.
    """
    if not shared:  # no state named: only watch for state a call changes
        def watch(fn):
            entry = entry_values([fn], ())

            def run(*args):
                with recording() as rec:
                    out = fn(*args)
                more = rec.missing(shared, rec.found and reachable(entry + list(args)))
                if more is not None:
                    raise more
                return out
            return run
        return names, watch, lambda result: result
    base = ("retval",) if names is None else tuple(names)
    nb = len(base)

    def parts(out):
        return [out] if nb == 1 else (list(out) if nb else [])

    def join(ps):
        return ps[0] if nb == 1 else (tuple(ps) if nb else None)

    def wrap(fn):
        entry = entry_values([fn], ())

        def run(*args):
            shared.reset()
            with recording() as rec:
                out = fn(*args)
            more = rec.missing(shared, rec.found and reachable(entry + list(args)))
            if more is not None:  # a call changed state this statement does not carry
                raise more
            return tuple(parts(out)) + shared.values()
        return run

    def split(result):
        shared.reset()
        shared.check_escapes(result[nb:], _site)
        shared.assign(result[nb:])
        shared.record_writes()
        return join(list(result[:nb]))

    return base + tuple(shared.names()), wrap, split


# ---------------------------------------------------------------------------
# if and conditional expressions
# ---------------------------------------------------------------------------

def if_stmt(cond, true_fn, false_fn, operands=(), names=None, state=None, guard=False,
            unread=()):
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
    ``runtime/lowering.py`` weighs; ``unread`` names the outputs that nothing
    reads once the loop is left (the loop's other carries), which a select
    takes from the true branch.
    """
    c = truth(cond, _site)
    if c is not None:
        events.note("if", "python")
        return true_fn(*operands) if c else false_fn(*operands)
    try:
        return _cond(cond, true_fn, false_fn, operands, names, state, guard=guard,
                     unread=unread)
    finally:  # what the cost rule chose (runtime/lowering.py)
        events.note("if", _lowered_as())


def if_chain(tests, fns, operands=(), names=None, state=None):
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
        c = truth(cond, site)
        if c is None:
            rest_tests, rest = tests[i + 1:], fns[i + 1:]
            if rest_tests:
                inner = Shared(*state._args) if isinstance(state, Shared) else None

                def false_fn(*ops, rest_tests=rest_tests, rest=rest, inner=inner):
                    return if_chain(rest_tests, rest, ops, names, inner)
            else:
                false_fn = rest[0]
            try:
                return _cond(cond, fns[i], false_fn, operands, names, state, site)
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
        return _site

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
            lowering.GPU_SELECT: lowering.GPU_SELECT}.get(lowering.last_choice(), "lax.cond")


@reissuing
def _cond(cond, true_fn, false_fn, operands, names, shared, site=_site, guard=False,
          unread=()):
    """``staging.cond``, with ``shared`` state (see ``runtime.state``) carried too."""
    shared = shared if shared is not None else Shared()
    n = len(names) if names is not None else None
    keep = kept(operands if n == len(operands) else ())
    true_fn, false_fn = (keep.wrap(fn, lambda args: args, lambda out: _pack(out, n))
                         for fn in (true_fn, false_fn))
    try:
        for _ in range(8):
            active = bool(shared)
            all_names, wrap, split = _with_state(names, shared.snapshot() if active else shared)
            # The branches change the state's containers in place (each starts
            # from the snapshot): an append to one is an append, not a new list.
            keep.also = {id(o) for o in shared.objects} if active else set()
            try:
                result = staging.cond(cond, wrap(true_fn), wrap(false_fn), operands,
                                      all_names, site, guard, unread)
            except MoreState as m:
                m.undo()
                if active:
                    shared.reset()
                shared.extend(m.attrs, m.objects, names_of(names, operands) | _free_names(
                    true_fn, false_fn))
                continue
            except BaseException:
                if active:
                    shared.reset()
                raise
            result = split(result)
            return _unpack(keep.write_back(_pack(result, n))) if keep.same else result
        raise ConversionError(message(site(), "the state this `if` changes never settles"))
    except StagedRaise as r:
        if in_staged_block():
            raise
        # Every traced path raises: so does tracing (as Python would, always).
        raise r.at_trace_time() from None


def if_exp(cond, true_thunk, false_thunk):
    """``true_thunk() if cond else false_thunk()``; a traced ``cond`` gives ``lax.cond``."""
    c = truth(cond, _site)
    if c is not None:
        events.note("ternary", "python")
        return true_thunk() if c else false_thunk()
    try:
        return staging.cond(cond, true_thunk, false_thunk, (), None, _site)
    finally:
        events.note("ternary", _lowered_as())


def _logical(kind, a, thunks):
    for thunk in thunks:
        c = truth(a, _site, what=f"operand of `{kind}`")
        if c is not None:
            if (kind == "and") != c:  # `and` stops at a falsy value, `or` at a truthy one
                return a
            a = thunk()
            continue
        b = thunk()
        if np.shape(b) != () and np.size(b) != 1:
            raise ConversionError(message(
                user_site(3), f"the right operand of `{kind}` is an array of shape "
                f"{tuple(np.shape(b))} while the left one is traced",
                f"Use `jnp.logical_{kind}` for elementwise logic."))
        a_arr, b_arr = jnp.asarray(a), jnp.asarray(b)
        a_arr, b_arr = (v.reshape(()) if v.ndim and v.size == 1 else v for v in (a_arr, b_arr))
        if a_arr.dtype == jnp.bool_ and b_arr.dtype == jnp.bool_:
            a = jnp.logical_and(a_arr, b_arr) if kind == "and" else jnp.logical_or(a_arr, b_arr)
        elif kind == "and":
            a = jnp.where(as_pred(a_arr), b_arr, a_arr)
        else:
            a = jnp.where(as_pred(a_arr), a_arr, b_arr)
        if not (isinstance(b, Tracer) and is_traced(b)) and (kind == "and") != bool(b):
            # A concrete operand that ends the chain (falsy for `and`, truthy for
            # `or`): on every path Python stops here, so the rest is never evaluated.
            return a
    return a


def and_(a, *thunks):
    """``a and b and ...`` (later operands as thunks, evaluated as Python would).

    A traced operand makes the result ``jnp.logical_and`` of the booleans
    (``jnp.where`` for other values), with every operand evaluated.
    """
    return _logical("and", a, thunks)


def or_(a, *thunks):
    """``a or b or ...``; see ``and_``."""
    return _logical("or", a, thunks)


_COMPARISONS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
                "==": operator.eq, "!=": operator.ne, "is": operator.is_,
                "is not": operator.is_not, "in": lambda a, b: a in b,
                "not in": lambda a, b: a not in b}


def compare(left, *rest):
    """A chained comparison ``left op1 b op2 c ...`` (``rest``: op, thunk, op, thunk...).

    As in Python each operand is evaluated at most once, left to right, and
    only while the comparisons so far hold; the parts are combined with
    ``and_`` (so traced parts give ``jnp.logical_and``).
    """
    ops, thunks = rest[0::2], rest[1::2]
    values = [left]

    def part(i):
        if len(values) == i + 1:
            values.append(thunks[i]())
        return _COMPARISONS[ops[i]](values[i], values[i + 1])

    return _logical("and", part(0), [lambda i=i: part(i) for i in builtins.range(1, len(ops))])


def not_(a):
    """``not a``; ``jnp.logical_not`` of a traced scalar."""
    c = truth(a, _site, what="operand of `not`")
    if c is not None:
        return not c
    return jnp.logical_not(as_pred(a))


_GLOBAL_ADVICE = ("Make the condition static, or move the assignment out of the statement "
                  "(return the value instead of assigning a global/nonlocal).")


def python_condition(cond, reason, advice=_GLOBAL_ADVICE):
    """A test autoflow left as Python (an ``if``/``while``, a comprehension's ``if``):
    it must be concrete."""
    c = truth(cond, _site)
    if c is None:
        raise ConversionError(message(user_site(2), f"this condition is traced, but {reason}",
                                      advice))
    return c


def python_operand(value, reason):
    """An operand of an ``and``/``or``/``if-else`` autoflow left as Python: it must be concrete."""
    if truth(value, _site, what="operand") is None:
        raise ConversionError(message(
            user_site(2), f"this operand is traced, but {reason}",
            "Move the `:=` out of the expression: assign the name in a statement of its own "
            "before this line, then use the name here."))
    return value


# ---------------------------------------------------------------------------
# while
# ---------------------------------------------------------------------------

@reissuing
def _stage_loop(kind, state, names, shared, *, step, cond_fn=None, **kwargs):
    """``staging.loop``, with ``shared`` state (see ``runtime.state``) carried too.

    State that a call in the body changes (found while tracing it) is added
    to ``shared``, and the loop is traced again.
    """
    shared = shared if shared is not None else Shared()
    n = len(names)
    fns = [f for f in (step, cond_fn) if f is not None]
    # Containers the variables hold go in as copies (the originals may be
    # shared state the tracing overwrites), and come back in place when every
    # iteration keeps them (see `state.kept`).
    keep = kept(_pack(state, n))
    aliased = keep.aliased(fns)
    if aliased:
        shared.extend((), aliased, names_of(names, _pack(state, n)))
    state = _unpack(tuple(contents(v) for v in _pack(state, n)))

    def originals(args, subs):
        k, s = args
        return k, _unpack(tuple(subs[i] if i in subs and type(v) is type(subs[i]) else v
                                for i, v in enumerate(_pack(s, n))))
    step = keep.wrap(step, lambda args: _pack(args[1], n), lambda out: _pack(out, n),
                     originals)
    for _ in range(8):
        entry = entry_values(fns, (state,))
        active = bool(shared)
        if active:
            shared.snapshot()

        def checked(k, s):
            with recording() as rec:
                out = step(k, s)
            # (Carries come fresh from `lax` each trace: what existed before the
            # loop is what the initial state and the functions' closures reach.)
            more = rec.missing(shared, rec.found and reachable(entry))
            if more is not None:  # a call changed state this loop does not carry
                raise more
            return out

        try:
            if not active:
                out = staging.loop(kind, state, names, _site, step=checked, cond_fn=cond_fn,
                                   **kwargs)
                return _unpack(keep.write_back(_pack(out, n))) if keep.same else out
            all_names, _, split = _with_state(names, shared)
            init = _pack(state, n) + shared.values()

            def step2(k, s):
                shared.assign(s[n:])
                return _pack(checked(k, _unpack(s[:n])), n) + shared.values()

            def cond2(s):
                shared.assign(s[n:])
                return cond_fn(_unpack(s[:n]))

            out = staging.loop(kind, init, all_names, _site, step=step2,
                               cond_fn=None if cond_fn is None else cond2, **kwargs)
        except MoreState as m:
            m.undo()
            if active:
                shared.reset()
            shared.extend(m.attrs, m.objects,
                          names_of(names, _pack(state, n)) | _free_names(*fns))
            continue
        except BaseException:
            if active:
                shared.reset()
            raise
        out = split(out)
        return _unpack(keep.write_back(_pack(out, n))) if keep.same else out
    raise ConversionError(message(_site(), "the state this loop changes never settles"))


def while_stmt(test, body, init, names, *, max_iterations=None, state=None, checkpoints=None):
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
    """
    n = len(names)
    shared, state = state, _loop_state(init)
    previous = None  # the state before the last iteration run as Python
    # (and `last`, under a trace: what that iteration wrote besides the carries)
    watch = journal if under_trace() else contextlib.nullcontext
    while True:
        c = truth(test(*state), _site, what="loop condition")
        if c is None:
            break
        if not c:
            events.note("while", "python")
            return _unpack(state)
        previous = state
        with watch() as last:
            state = _pack(body(*state), n)
    events.note("while", "lax.while_loop" if max_iterations is None else "lax.scan (bounded)")
    kwargs = dict(step=lambda k, s: _unpack(_pack(body(*_pack(s, n)), n)),
                  cond_fn=lambda s: test(*_pack(s, n)), max_iterations=max_iterations,
                  checkpoints=checkpoints, memo=body)
    if previous is not None and under_trace() \
            and _rerunnable(previous, shared, last, (body, test)):
        # The last Python iteration made the carries traced: stage the loop from
        # the state before it, so the compiled program holds the body once (see
        # for_stmt). If that fails, stage from the state after it as before.
        try:
            return _stage_loop("while", _unpack(previous), names, shared, **kwargs)
        except _NEEDS_CONCRETE as e:
            log.debug("autoflow: loop at %s staged from its peeled state (%s)", _site(), e)
    return _stage_loop("while", _unpack(state), names, shared, **kwargs)


# ---------------------------------------------------------------------------
# for and its iterables
# ---------------------------------------------------------------------------

class LoopOptions:
    """An iterable with per-loop options: see ``autoflow.unroll``/``autoflow.roll``."""

    def __init__(self, iterable, mode, unroll=1):
        self.iterable, self.mode, self.unroll = iterable, mode, unroll

    def __iter__(self):
        return iter(self.iterable)


class TracedRange:
    """``range(start, stop, step)`` where a bound is traced."""

    def __init__(self, start, stop, step):
        self.start, self.stop, self.step = start, stop, step

    def __iter__(self):
        raise ConversionError(message(
            user_site(2), "this `range` has a traced bound and cannot be iterated as Python",
            "Use it directly as a `for` loop's iterable in converted code."))

    def parts(self):
        """``(start, step, length)`` as arrays of one integer dtype."""
        start, stop, step = (jnp.asarray(v) for v in (self.start, self.stop, self.step))
        dtype = jnp.result_type(start, stop, step)
        start, stop, step = (v.astype(dtype) for v in (start, stop, step))
        return start, step, jnp.maximum(0, (stop - start + step - jnp.sign(step)) // step)


def range(*args):  # noqa: A001 - mirrors the builtin
    """``range`` that also accepts traced bounds (for staged ``for`` loops),
    and symbolic ones (``range(x.shape[0])`` under ``jax.export`` with a
    symbolic dimension: a loop with a symbolic trip count)."""
    if not any(isinstance(a, Tracer) and is_traced(a) for a in args):
        if not any(is_symbolic_dim(a) for a in args):
            return builtins.range(*args)
        args = tuple(jnp.asarray(a) if is_symbolic_dim(a) else a for a in args)
    if len(args) == 1:
        start, stop, step = 0, args[0], 1
    elif len(args) == 2:
        (start, stop), step = args, 1
    else:
        start, stop, step = args
    for a in (start, stop, step):
        if np.shape(a) != () or not jnp.issubdtype(jnp.result_type(a), jnp.integer):
            raise TypeError(f"range() bounds must be integer scalars, got {a!r}")
    return TracedRange(start, stop, step)


class Enumerate:
    def __init__(self, iterable, start=0):
        self.iterable, self.start = iterable, start

    def __iter__(self):
        return builtins.enumerate(self.iterable, self.start)


class Zip:
    def __init__(self, iterables, strict=False):
        self.iterables, self.strict = iterables, strict

    def __iter__(self):
        return builtins.zip(*self.iterables, strict=self.strict)


def enumerate(iterable, start=0):  # noqa: A001
    """``enumerate`` that a staged ``for`` loop can scan."""
    return Enumerate(iterable, start)


def zip(*iterables, strict=False):  # noqa: A001
    """``zip`` that a staged ``for`` loop can scan."""
    return Zip(iterables, strict)


def reversed(seq):  # noqa: A001 - mirrors the builtin
    """``reversed`` that keeps ranges (traced bounds too) and arrays stageable."""
    if isinstance(seq, builtins.range):
        return seq[::-1]
    if isinstance(seq, TracedRange):
        start, step, length = seq.parts()
        return TracedRange(start + (length - 1) * step, start - step, -step)
    if isinstance(seq, (jax.Array, np.ndarray)) and np.ndim(seq) >= 1:
        return seq[::-1]
    return builtins.reversed(seq)


class _Seq:
    """An iterable with a length and an indexable item, so it can be staged."""

    def __init__(self, length, item, python, traced_items):
        self.length = length          # int, or a traced scalar
        self.item = item              # k (traced int) -> the k-th item
        self.python = python          # a Python iterable over the same items
        self.traced_items = traced_items


def _as_seq(it):
    if isinstance(it, builtins.range):
        r = it
        return _Seq(len(r), lambda k: r.start + k * r.step, r, False)
    if isinstance(it, TracedRange):
        start, step, length = it.parts()
        return _Seq(length, lambda k: start + k.astype(start.dtype) * step, None, True)
    if isinstance(it, (jax.Array, np.ndarray)) and np.ndim(it) >= 1:
        arr = it
        return _Seq(np.shape(arr)[0], lambda k: lax.dynamic_index_in_dim(
            jnp.asarray(arr), k, keepdims=False), arr, isinstance(arr, Tracer))
    if isinstance(it, Enumerate):
        inner = _as_seq(it.iterable)
        if inner is None:
            return None
        s = it.start
        return _Seq(inner.length, lambda k: (s + k, inner.item(k)),
                    None if inner.python is None else builtins.enumerate(inner.python, s),
                    inner.traced_items)
    if isinstance(it, Zip):
        inners = [_as_seq(x) for x in it.iterables]
        if not inners or any(x is None for x in inners):
            return None
        lengths = [x.length for x in inners]
        if builtins.all(isinstance(n, int) for n in lengths):
            if it.strict and len(set(lengths)) > 1:
                return None  # let Python raise its ValueError
            length = builtins.min(lengths)
        else:
            length = jnp.min(jnp.stack([jnp.asarray(n) for n in lengths]))
        pythons = [x.python for x in inners]
        return _Seq(length, lambda k: tuple(x.item(k) for x in inners),
                    None if None in pythons else builtins.zip(*pythons),
                    builtins.any(x.traced_items for x in inners))
    return None


def _has_traced(state):
    return builtins.any(isinstance(x, Tracer) and is_traced(x) for x in flatten(state)[0])


def _python_for(items, body, test, state, n, names, shared=None):
    """Iterate as Python; a traced ``test`` (after a ``break``) guards the body."""
    for item in items:
        if test is not None:
            c = truth(test(*state), _site, what="loop condition")
            if c is False:
                break
            if c is None:
                t = test(*state)
                if n:
                    state = _pack(_cond(t, lambda *s: body(item, *s), lambda *s: _unpack(s),
                                        state, names, shared), n)
                else:
                    _cond(t, lambda: body(item), lambda: None, (), (), shared)
                continue
        state = _pack(body(item, *state), n)
    return _unpack(state)


def _immutable(value):
    """Nothing a Python iteration could change in place (arrays, numbers, None, tuples)."""
    if isinstance(value, tuple):
        return builtins.all(_immutable(v) for v in value)
    return value is None or isinstance(value, (Undefined, str)) or (
        staging.is_array_like(value) and not isinstance(value, np.ndarray))


def _rerunnable(state, shared, ran, fns):
    """May a staged loop start again from ``state``, discarding the iteration run
    as Python from it? Only when it cannot have changed anything in place: no
    shared state named, immutable carries, and nothing written by the calls it
    made that the loop's functions ``fns`` reach (``ran``: the ``journal`` of
    that iteration; a converted method's ``self.a = ...`` there would otherwise
    happen once more). What they do not reach (a module's own counter) is not
    carried by a staged loop: writing it is a trace-time effect either way."""
    if shared or not _immutable(state):
        return False
    if not ran.written:
        return True
    outside = reachable(entry_values(fns, state))  # (state: the carries, a tuple)
    return not any(id(o) in outside for o in ran.written)


def for_stmt(iterable, body, init, names, test=None, *, max_iterations=None, state=None,
             checkpoints=None):
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
            _site(), "`autoflow.unroll` needs a range with concrete bounds; this one is traced",
            "Remove `autoflow.unroll`, or make the bound static."))
    if seq is None:
        events.note("for", "python")
        return _python_for(iterable, body, test, state, n, names, shared)

    site = _site
    step = (lambda k, s: _unpack(_pack(body(seq.item(k), *_pack(s, n)), n)))  # noqa: E731
    cond_fn = None if test is None else (lambda s: test(*_pack(s, n)))

    if not isinstance(seq.length, int):  # traced trip count
        events.note("for", "lax.while_loop")
        return _stage_loop("for", _unpack(state), names, shared, step=step, cond_fn=cond_fn,
                           length=seq.length, unroll=unroll, max_iterations=max_iterations,
                           checkpoints=checkpoints, memo=body)
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
            c = truth(test(*state), _site, what="loop condition")
            if c is False:
                return _unpack(state)
        if test is None or c is True:
            with journal() as peel:
                state = _pack(body(first, *state), n)
            start = 1
        if start and not _has_traced(state):
            events.note("for", "python")
            rest = iter(seq.python)
            next(rest)
            return _python_for(rest, body, test, state, n, names, shared)
    if start >= seq.length:
        events.note("for", "python")
        return _unpack(state)
    if start == 1 and _rerunnable(before_peel, shared, peel,
                                  [f for f in (body, test) if f is not None]):
        # One copy of the body: the peeled iteration only told us that the loop
        # must be staged; stage all of it from the state before the peel (the
        # peeled values are unused, and jit drops them), so the compiled program
        # holds the body once. If that fails, stage from the peeled state as before.
        try:
            out = _stage_loop("for", _unpack(before_peel), names, shared, step=step,
                              cond_fn=cond_fn, start=0, length=seq.length, unroll=unroll,
                              max_iterations=max_iterations, checkpoints=checkpoints, memo=body)
            events.note("for", "lax.fori_loop" if cond_fn is None else "lax.while_loop")
            return out
        except _NEEDS_CONCRETE as e:
            log.debug("autoflow: loop at %s staged from its peeled state (%s)", site(), e)
    try:
        out = _stage_loop("for", _unpack(state), names, shared, step=step, cond_fn=cond_fn,
                          start=start, length=seq.length - start, unroll=unroll,
                          max_iterations=max_iterations, checkpoints=checkpoints, memo=body)
        events.note("for", "lax.fori_loop" if cond_fn is None else "lax.while_loop")
        return out
    except _NEEDS_CONCRETE as e:
        if mode == "roll":
            raise
        log.debug("autoflow: loop at %s runs as Python (%s: %s)", site(), type(e).__name__, e)
        events.note("for", f"python (unrolled: {type(e).__name__})")
        _warn_unrolled(site(), seq.length, e)
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


_WARNED_UNROLLED = set()  # loops already warned about (file, line, column)


def _warn_unrolled(site, trip_count, e):
    """A loop with traced carries runs as Python: say so, once per loop (PerformanceWarning)."""
    import warnings

    from ..errors import PerformanceWarning

    where = f"{site}: " if site is not None else ""
    text = (f"{where}this `for` loop has traced carries but runs as Python, unrolled into "
            f"{trip_count} copies of its body under jit, because {_unroll_reason(e)}. "
            "Write `for ... in autoflow.unroll(...)` if unrolling is intended (this silences "
            "the warning), or change the body so the index can stay traced.")
    key = None if site is None else (site.filename, site.lineno, site.col)
    if key in _WARNED_UNROLLED:
        return
    if key is not None:
        _WARNED_UNROLLED.add(key)
    if site is None:
        warnings.warn(text, PerformanceWarning, stacklevel=3)
    else:
        warnings.warn_explicit(text, PerformanceWarning, site.filename, site.lineno,
                               module=site.filename)


def unroll(iterable):
    """Mark a ``for`` loop's iterable to run as Python (unrolled under ``jit``)."""
    return LoopOptions(iterable, "unroll")


def roll(iterable, unroll=1):  # noqa: A002
    """Mark a ``for`` loop's iterable to always stage as a ``lax`` loop.

    ``unroll`` is passed to ``lax.fori_loop``/``lax.scan``.
    """
    return LoopOptions(iterable, "roll", unroll)
