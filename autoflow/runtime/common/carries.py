"""What a staged ``if`` or loop carries, and the bookkeeping both share.

A staged statement passes the user's variables (and the state it changes in
place, ``runtime.state``) in and out as explicit carries, like a hand-written
``lax.cond``/``lax.while_loop``. Plain Python has nothing to carry: a branch or
an iteration just rebinds its variables. Here:

* ``pack``/``unpack``, ``parts_of``/``join_parts``: one value per variable;
* ``spec_of``/``zeros_of``/``cast_to``: the array types of the carries;
* ``with_state``: the state a statement changes, as extra carries;
* ``Restart``: retrace a statement with new carry types (a trace-time signal,
  never seen by a user's ``except``);
* fills and ``Placeholders``: the value a path that leaves a variable unbound
  gives it (zeros, or an input of the loop body's jaxpr).
"""

from __future__ import annotations

import contextlib
import sys

import jax
import jax.numpy as jnp
from jax import lax

from ...core.origin import user_site
from .. import jax as jx
from ..jax import current_trace
from .coupling import now
from ..effects.raising import Signal
from ..state.reach import EMPTY, closure_cells, entry_values, reachable
from ..state.scopes import recording
from .values import DICTS, Undefined, aval_of, dict_like, flatten, is_array_like, is_weak, unflatten


def caller_site():
    return user_site(3)


def key_orders(value):
    """The key orders of the dicts in ``value`` (through lists, tuples and dicts), in
    order: JAX flattens a dict in sorted key order and rebuilds it so, while Python
    keeps the order the keys were added in (``keep_order`` puts it back)."""
    out = []
    todo = [value]
    while todo:
        v = todo.pop()
        if type(v) in DICTS:
            out.append(tuple(v))
            todo.extend(reversed(list(v.values())))
        elif type(v) in (list, tuple):
            todo.extend(reversed(v))
    return out


def keep_order(value, like):
    """``value`` (rebuilt from leaves: its dicts in sorted key order) with each dict's
    keys in the order of the dict at its place in ``like``, which Python's statement
    would have left (keys ``like`` lacks last, as they come)."""
    if type(value) in DICTS and type(like) in DICTS:
        keys = [k for k in like if k in value] + [k for k in value if k not in like]
        return dict_like(value, {k: keep_order(value[k], like[k]) if k in like else value[k]
                                 for k in keys})
    if type(value) in (list, tuple) and type(like) is type(value) and len(like) == len(value):
        return type(value)(keep_order(v, u) for v, u in zip(value, like))
    return value


def pack(value, n):
    """A function's carried return value as a tuple of ``n`` carries."""
    if n == 1:
        return (value,)
    if n == 0:
        return ()
    return tuple(value)


def unpack(state):
    if len(state) == 1:
        return state[0]
    if len(state) == 0:
        return None
    return tuple(state)


def free_names(*fns):
    """``{id(value): name}`` for the closure variables of ``fns`` (and of the
    functions they close over, three closures down)."""
    out = {}
    for name, _, value in closure_cells(fns, 3):
        if value is not EMPTY:
            out.setdefault(id(value), name)
    return out


def with_state(names, shared, fns=(), rebound=()):
    """``(names, wrap, split)`` for a staged statement that also changes ``shared`` state.

    The state's values travel as extra outputs after the variables: ``wrap``
    makes a branch or body function reset the state, run, and return the
    variables plus the state's values; ``split`` takes the result apart and
    writes the state back in place. ``rebound``: closure variables a function the
    statement calls may rebind (``nonlocal``) that nothing reads after it (see
    ``cond.if_stmt``): allowed as if carried.
    """
    watched = tuple(names or ()) + tuple(rebound)  # (what a rebinding may name)
    if not shared:  # no state named: only watch for state a call changes
        def watch(fn):
            entry = entry_values([fn], ())
            frame = sys._getframe(1)  # (the statement's operator: its site, for errors)

            def run(*args):
                with recording(shared, watched, [fn], entry + list(args), frame) as rec:
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

    fns = list(fns)

    def wrap(fn):
        entry = entry_values([fn], ())
        frame = sys._getframe(1)
        fns.append(fn)

        def run(*args):
            shared.reset()
            with recording(shared, watched, [fn], entry + list(args), frame) as rec:
                out = fn(*args)
            more = rec.missing(shared, rec.found and reachable(entry + list(args)))
            if more is not None:  # a call changed state this statement does not carry
                raise more
            return tuple(parts(out)) + shared.values()
        return run

    def split(result):
        shared.reset()
        shared.check_escapes(result[nb:], caller_site, fns, sys._getframe())
        shared.assign(result[nb:])
        shared.record_writes()
        return join(list(result[:nb]))

    return base + tuple(shared.names()), wrap, split


class Restart(Signal):
    """Raised from inside a traced function to retrace with new carry types."""

    def __init__(self, changes):
        super().__init__("internal: retrace with new types")
        self.changes = changes


RETURN_LABEL = "the return value"  # a leaf's label where no variable holds it


def leaf_labels(value, names):
    """For each leaf of ``value``, the user's variable it belongs to (``RETURN_LABEL``
    for a returned value, or a conditional expression's own)."""
    if names is None:
        return [RETURN_LABEL] * len(flatten(value)[0])
    if len(names) == 1:
        return [names[0]] * len(flatten(value)[0])
    if not isinstance(value, tuple) or len(value) != len(names):
        return ["?"] * len(flatten(value)[0])
    labels = []
    for name, part in zip(names, value):
        labels += [name] * len(flatten(part)[0])
    return labels


def parts_of(value, names):
    """The per-variable parts of a branch or loop value (one for a bare value)."""
    if names is not None and len(names) > 1 and isinstance(value, tuple) \
            and len(value) == len(names):
        return list(value)
    return [value]


def join_parts(parts, names):
    return tuple(parts) if names is not None and len(names) > 1 else parts[0]


def spec_of(value):
    """The shapes and dtypes of a pytree of arrays (``None`` if it holds anything else)."""
    leaves, tree = flatten(value)
    if isinstance(value, Undefined) or not leaves or not all(is_array_like(x) for x in leaves):
        return None
    return keep_order(unflatten(tree, [jax.ShapeDtypeStruct(*aval_of(x)[:2], weak_type=aval_of(x)[2])
                                       for x in leaves]), value)


def zeros_of(spec):
    """Zeros of ``spec``'s shapes, its dicts' keys in its order (a path that leaves a
    variable unbound fills it so: the other path's order, which Python keeps)."""
    return keep_order(jax.tree_util.tree_map(
        lambda s: cast_to(jnp.zeros(s.shape, s.dtype), s.dtype, s.weak_type), spec), spec)


def cast_to(x, dtype, weak=False):
    """``x`` as ``dtype``, weakly typed if ``weak`` (a carry that started as a Python
    scalar), else strongly."""
    if isinstance(x, jax.Array) and x.dtype == dtype and is_weak(x) == weak:
        return x
    if weak:
        return jx.convert_weak(x, dtype)
    return lax.convert_element_type(x, dtype)


def same_spec(a, b):
    la, ta = flatten(a)
    lb, tb = flatten(b)
    return ta == tb and all((x.shape, x.dtype) == (y.shape, y.dtype) for x, y in zip(la, lb))


# The names of variables that a staged statement filled with zeros (a branch
# that leaves one unbound, a loop that starts one as zeros), logged for each
# loop body being traced: a variable first bound in a loop body and never
# filled there is bound on every path through it, so the body's value for it
# does not depend on the value it starts from (see `_loop_body`, `adds`): the
# logs are `common.coupling.now.fill_logs`.


LOOP = "<a loop>"  # logged by each loop staged (not a name a variable can have)


def log_fills(names):
    names = tuple(names)  # (a generator would fill only the first log)
    for log in now.fill_logs:
        log.update(names)


@contextlib.contextmanager
def logging_fills(log):
    """Log into the set ``log`` the fills made while a loop body is traced."""
    logs = now.fill_logs
    logs.append(log)
    try:
        yield log
    finally:
        del logs[next(i for i in range(len(logs) - 1, -1, -1) if logs[i] is log)]




class Placeholders:
    """Inputs of a loop body's jaxpr, made while it is traced, that stand for the
    value a variable first bound in the loop has when an iteration starts.

    A traced ``if`` in the body that binds such a variable on one path only
    gives the other path this input (``cond``), where it would give zeros: the
    loop then carries the variable, and that path passes the carry through.
    Without it the body is traced a second time, with the variable a carry from
    the start (``Restart("define")``). ``owners`` maps the ``Undefined`` values
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
            return value if same_spec(known, spec) else None
        leaves, tree = flatten(spec)
        inputs = [jx.new_input(self.trace, x.shape, x.dtype, x.weak_type) for x in leaves]
        if any(x is None for x in inputs):
            return None
        value = unflatten(tree, inputs)
        self.made[j] = (value, spec, inputs)
        return value


@contextlib.contextmanager
def placing(scope):
    """Make ``scope`` the one that ``if``s fill from while a loop body is traced
    (the innermost loop's only: an inner loop's body has scopes of its own)."""
    scopes = now.placeholders  # (read by `fill`)
    scopes.append(scope)
    try:
        yield
    finally:
        scopes.pop()


def fill(undefined, spec):
    """What a path that leaves ``undefined`` unbound gives for it: the innermost
    loop body's placeholder for it, or zeros. Returns ``(value, zeros?)``."""
    scopes = now.placeholders
    if scopes and scopes[-1] is not None:
        value = scopes[-1].value(undefined, spec)
        if value is not None:
            return keep_order(value, spec), False
    return zeros_of(spec), True
