"""Leaving a loop: a `break` first in the body becomes part of the loop's test, a
`return` value is carried without tracing the body twice, and the rest of a body
after a `break` may run as a select. Each against eager Python."""

from __future__ import annotations

import collections

import jax
import jax.numpy as jnp
import numpy as np

import autoflow

from autoflow.runtime import jax as jx
from autoflow.runtime.loops import staging

from .oracle import F, I, check, check_cases

COUNT = collections.Counter()


@autoflow.do_not_convert
def _tick(key):
    """Count the traces of a body (bookkeeping meant for tracing: a module global
    changed in a staged body is otherwise autoflow's error, as Python counts each
    iteration)."""
    COUNT[key] += 1

# What an older JAX cannot do (see runtime/jax/): add a carry to a loop
# being traced (without jax.experimental.hijax every loop body that binds a new
# variable is traced twice), and lower a traced `if` to a select (every one is a
# lax.cond). The programs are checked against Python all the same.
ADDS_CARRIES = jx.primitives()
# a loop body's trace can make inputs for the carries it adds (common.carries.Placeholders)
PLACES = ADDS_CARRIES and jx.new_input is not None
SELECTS = jx.primitives()


def _source(fn):
    return autoflow.to_source(fn)


# ---- `if c: break` first in the body -------------------------------------------------------

def while_top_break(x, tol):
    while x > 0.0:
        if x < tol:
            break
        x = x * 0.5 - 0.01
    return x


def for_top_break(x, n):
    for _ in range(n):
        if abs(x) < 1e-3:
            break
        x = x * 0.5
    return x


def for_top_break_and_another(x, n):
    total = 0.0
    for i in range(n):
        if abs(x) < 1e-3:
            break
        x = x * 0.5
        if x < -5.0:
            break
        total = total + x
    return x, total


def for_top_break_with_continue(x, n):
    total = 0.0
    for i in range(n):
        if total > 10.0:
            break
        if i % 2 == 0:
            continue
        total = total + x * i
    return total


def while_true_top_break(x):
    k = 0
    while True:
        if x * x > 50.0 or k >= 20:
            break
        x = x + 1.5
        k = k + 1
    return x, k


def test_a_break_first_in_the_body_moves_into_the_test():
    for fn in (while_top_break, for_top_break, for_top_break_and_another,
               while_true_top_break):
        text = _source(fn)
        first_body_line = text.split("def loop_body", 1)[1].splitlines()[1].strip()
        assert not first_body_line.startswith(("broke =", "if ")), (fn.__name__, text)
    # a loop with nothing else to leave it carries no flag at all
    assert "broke" not in _source(while_top_break) and "broke" not in _source(for_top_break)
    assert "af.and_(x > 0.0, lambda: af.not_(x < tol))" in _source(while_top_break)


def test_hoisted_breaks_match_python():
    check_cases(while_top_break, [(F(3.0), F(0.1)), (F(0.05), F(0.1)), (F(-1.0), F(0.1))],
                vmap=[(F(5.0), F(0.2)), (F(0.01), F(0.5))])
    check(for_top_break, F(3.0), 40, vmap=[(F(5.0), 40), (F(0.5), 40)], static_argnums=(1,))
    check_cases(for_top_break, [(F(0.0), 5), (F(3.0), 0)], static_argnums=(1,))
    check_cases(for_top_break, [(F(3.0), I(40)), (F(2e-4), I(3)), (F(1.0), I(0))])
    check_cases(for_top_break_and_another, [(F(3.0), I(30)), (F(-3.0), I(30)),
                                            (F(1e-4), I(4))])
    check_cases(for_top_break_with_continue, [(F(3.0), I(30)), (F(-1.0), I(7)),
                                              (F(0.0), I(5))])
    check_cases(while_true_top_break, [(F(0.0),), (F(9.0),), (F(-30.0),)],
                vmap=[(F(2.0),), (F(8.0),)])


def for_target_read_after(x, n):
    i = -1
    for i in range(n):
        if x > 10.0:
            break
        x = x * 2.0
    return x, i


def for_target_in_closure(x, n):
    fs = []
    for i in range(n):
        if x > 10.0:
            break
        fs.append(lambda: i)
        x = x * 2.0
    return x, [f() for f in fs]


def for_test_reads_target(x, n):
    for i in range(n):
        if i * x > 10.0:
            break
        x = x + 1.0
    return x


def for_break_with_else(x, n):
    for _ in range(n):
        if x > 10.0:
            break
        x = x * 2.0
    else:
        x = -x
    return x


def counted_test(x):
    _tick("test")
    return x > 10.0


def for_break_calls_user_code(x, n):
    for _ in range(n):
        if counted_test(x):
            break
        x = x * 2.0
    return x


def test_breaks_python_tells_apart_stay_in_the_body():
    # The loop variable is read after the loop (Python binds it on the item it
    # breaks at), the test reads it, the loop has an `else`, the test calls user
    # code: the `break` stays where it is.
    for fn in (for_target_read_after, for_target_in_closure, for_test_reads_target,
               for_break_with_else, for_break_calls_user_code):
        assert "broke = " in _source(fn), fn.__name__
    check_cases(for_target_read_after, [(F(1.0), I(10)), (F(20.0), I(10)), (F(1.0), I(0))])
    check_cases(for_target_in_closure, [(F(1.0), 6), (F(20.0), 6)], static_argnums=(1,),
                traced=False)
    check_cases(for_test_reads_target, [(F(1.0), I(10)), (F(20.0), I(10))])
    check_cases(for_break_with_else, [(F(1.0), I(10)), (F(1.0), I(2)), (F(30.0), I(3))])
    check_cases(for_break_calls_user_code, [(F(1.0), I(10)), (F(20.0), I(10))])


# ---- `return` inside a loop: the return value's carry -------------------------------------

def first_over(x, limit):
    for i in range(30):
        _tick("body")
        x = x * 1.5 + 0.25
        if x > limit:
            return x, i
    return -x, -1


def first_over_value(x, limit):
    return first_over(x, limit)[0]


def bound_every_iteration(x, n):
    for _ in range(n):
        _tick("body")
        y = x * 2.0  # first bound in the loop, on every path
        x = y - 1.0
    return x, y


def bound_on_one_path(x, n):
    last = 0.0 * x
    found = x * 0.0
    for i in range(n):
        _tick("body")
        if x > 1.0:
            seen = x  # first bound in the loop, on one path: its last value is read
            found = found + 1.0
        x = x * 0.7
    if found > 0:
        last = seen  # noqa: F821 - bound where found > 0, as in Python
    return x, last


def _traces(fn, *args):
    COUNT.clear()
    jax.make_jaxpr(autoflow.convert(fn))(*args)
    return COUNT["body"]


def first_over_with_inner_loop(x, limit):
    for i in range(30):
        _tick("body")
        k = 0
        while x < limit * 0.5 and k < 3:  # a loop of its own in the body
            x = x * 1.2
            k = k + 1
        x = x * 1.5 + 0.25
        if x > limit:
            return x, i
    return -x, -1


def test_a_return_value_is_carried_without_tracing_the_body_again():
    # With a loop in the body, the return value is a carry the first trace adds;
    # in a body without one, the paths that do not return pass the carry through:
    # an input the body's trace makes for it (or, where JAX cannot make one, the
    # body is traced a second time with the carry).

    staging._DEFINED.clear()
    assert _traces(first_over_with_inner_loop, F(1.0), F(50.0)) == (1 if ADDS_CARRIES else 2)
    assert _traces(first_over, F(1.0), F(5.0)) == (1 if PLACES else 2)
    check_cases(first_over_with_inner_loop, [(F(1.0), F(50.0)), (F(1.0), F(1e9)), (F(-3.0), F(0.0))],
                vmap=[(F(2.0), F(30.0)), (F(0.0), F(1e9))])
    check_cases(first_over, [(F(1.0), F(5.0)), (F(1.0), F(1e9)), (F(-3.0), F(0.0))],
                vmap=[(F(2.0), F(3.0)), (F(0.0), F(1e9))])
    check_cases(first_over_value, [(F(1.0), F(5.0)), (F(1.0), F(1e9))], grad=True)


def test_a_variable_bound_on_every_path_is_carried_without_tracing_again():

    staging._DEFINED.clear()
    assert _traces(bound_every_iteration, F(1.5), I(4)) == (1 if ADDS_CARRIES else 2)
    check_cases(bound_every_iteration, [(F(1.5), I(4)), (F(-2.0), I(1))])


def test_a_variable_bound_on_one_path_keeps_its_last_value():
    # Its value must pass through the iterations that do not bind it: the path that
    # does not bind it passes the carry through (an input the body's trace makes, or
    # a second trace with it carried).

    staging._DEFINED.clear()
    # (a variable first bound on one path carries a flag "bound yet", for the read after
    # the loop: the body is traced once more with it)
    assert _traces(bound_on_one_path, F(3.0), I(6)) == 2
    check_cases(bound_on_one_path, [(F(3.0), I(6)), (F(3.0), I(1)), (F(0.5), I(6))],
                vmap=[(F(5.0), I(9)), (F(1.2), I(3))])


def nested_return_in_inner(x, n):
    for i in range(n):
        for j in range(n):
            x = x * 1.2 + 0.1
            if x > 7.0:
                return x, i, j
        x = x - 0.5
    return x, -1, -1


def test_a_return_from_an_inner_loop_matches_python():
    check_cases(nested_return_in_inner, [(F(1.0), I(4)), (F(1.0), I(2)), (F(-9.0), I(3))],
                vmap=[(F(3.0), I(4)), (F(0.0), I(4))])


def first_root(xs, t):
    for i in range(xs.shape[0]):
        v = xs[i] - t
        if v > 0:
            return jnp.sqrt(v) * 2.0  # nan where v < 0: computed, never read
    return xs[0] * 0.0


def two_exits(x, lim):
    i = 0
    while i < 20:
        x = x * 1.3 + 0.1
        if x > lim:
            return x, i
        y = x * x
        if y > lim * 3.0:  # a second `return` in the same iteration, after the first
            return y - 1.0, -i
        i += 1
    return x * 0.0, 100


def exit_in_nested_ifs(x, n):
    acc = x * 0.0
    for k in range(n):
        acc = acc + x
        if acc > 2.0:
            if x > 0.5:
                return {"acc": acc, "k": k}  # bound on one path of two nested ifs
            acc = acc - 1.0
        else:
            x = x + 0.25
    return {"acc": -acc, "k": -1}


def test_return_values_in_loops_match_python():
    # What the iterations that do not return compute for the value is never read,
    # not even as a gradient (first_root's sqrt of negatives); two `return`s in one
    # iteration; a return value bound on one path of two nested ifs.

    xs = jnp.asarray([-2.0, -1.0, 0.5, 3.0, -4.0], jnp.float32)
    staging._DEFINED.clear()
    check_cases(first_root, [(xs, F(0.0)), (xs, F(1.0)), (xs, F(9.0))],
                vmap=[(xs * 2.0, F(0.2)), (xs - 1.0, F(-5.0))], grad=True)
    check_cases(two_exits, [(F(1.0), F(5.0)), (F(0.5), F(1.2)), (F(-0.2), F(1e9)),
                            (F(2.0), F(2.5))],
                vmap=[(F(1.5), F(4.0)), (F(0.1), F(1e9))])
    check_cases(exit_in_nested_ifs, [(F(1.0), I(5)), (F(0.3), I(6)), (F(0.1), I(2))],
                vmap=[(F(0.6), I(4)), (F(2.0), I(1))])


# ---- the rest of a body after a `break`: a select ---------------------------------------

def cg_like(A, b, n):
    x = jnp.zeros_like(b)
    r = b - A @ x
    p = r
    rr = r @ r
    for _ in range(n):
        Ap = A @ p
        alpha = rr / (p @ Ap)
        x = x + alpha * p
        r = r - alpha * Ap
        rr_new = r @ r
        if rr_new < 1e-10:
            break
        p = r + (rr_new / rr) * p  # 0/0 where it broke: never read
        rr = rr_new
    return x


def cg_like_energy(A, b, n):
    return jnp.sum(cg_like(A, b, n) ** 2)


def _spd(n, seed):
    m = np.random.default_rng(seed).normal(size=(n, n)) / np.sqrt(n)
    return jnp.asarray(m @ m.T + np.eye(n), jnp.float32)


def test_the_rest_after_a_break_is_a_select():
    A, b = _spd(6, 0), jnp.asarray(np.arange(6.0), jnp.float32)
    shown = str(autoflow.explain(cg_like, "f32[6,6]", "f32[6]", "i32"))
    assert not SELECTS or "select_n" in shown and "cond[" not in shown, shown
    text = str(jax.make_jaxpr(autoflow.convert(cg_like))(A, b, I(20)))
    assert not SELECTS or "kind=select" in text and "kind=cond" not in text, text
    check(cg_like, A, b, I(20))
    check(cg_like_energy, A, b, I(20), argnums=1, grad=True)


def ratio_walk(x, n):
    y = x
    for _ in range(n):
        y = y - 1.0
        if y <= 0.0:
            break
        x = x * (y / y) + 0.5 * y  # 0/0 in the iteration that leaves: never taken
    return x


def test_what_the_leaving_iteration_skips_never_reaches_values_or_gradients():
    assert not SELECTS or "kind=select" in str(
        jax.make_jaxpr(autoflow.convert(ratio_walk))(F(3.0), I(9)))
    check_cases(ratio_walk, [(F(3.0), I(9)), (F(2.5), I(9)), (F(3.0), I(1))], grad=True,
                vmap=[(F(4.0), I(9)), (F(1.0), I(9))])


def positive(v):
    if v < 0:
        raise ValueError("negative")
    return v < 100.0


def leave_before_negative(y):
    k = 0
    while positive(y):
        k = k + 1
        if k >= 3:
            break
        y = y - 10.0  # what the leaving iteration skips would make `y` negative
    return k


def test_what_a_loop_test_that_calls_user_code_reads_stays_exact():
    # A staged test is evaluated once more after the iteration that leaves: when
    # it calls user code (which may raise, print), the values it reads are the
    # ones Python leaves, not what the skipped block would compute.
    assert "unread" not in autoflow.to_source(leave_before_negative)
    check_cases(leave_before_negative, [(F(25.0),), (F(35.0),), (F(500.0),)])


def _early_sightings(x, n):
    y = x * 0.0
    for j in range(n):
        if x * (3 - j) > 2.0:  # true for the first items only
            seen = x * j  # bound on one path: its last value is read after the loop
            y = y + 1.0
        x = x * 0.9
    if y > 0:
        return x, seen  # noqa: F821 - bound where y > 0, as in Python
    return x, x * 0.0


def one_path_in_inner_loop(x, n):
    total = x * 0.0
    for i in range(n):
        x, s = _early_sightings(x, n)  # a loop with its own variable, in another loop
        total = total + s
        x = x + 1.0
    return x, total


def test_a_one_path_binding_in_an_inner_loop_keeps_its_last_value():
    check_cases(one_path_in_inner_loop, [(F(3.0), I(5)), (F(0.5), I(3)), (F(3.0), I(1))],
                vmap=[(F(5.0), I(5)), (F(1.0), I(5))])


# ---- a variable first bound in a loop, on some paths: one trace of the body --------------
# The paths that leave it unbound pass an input of the body's jaxpr through (the value
# the carry has when the iteration starts): common.carries.Placeholders.

def two_bound_late_first(x, n):
    lates = earlies = 0.0 * x
    for i in range(n):
        _tick("body")
        if x > 2.0:
            late = x * 3.0  # its input is made first...
            lates = lates + 1.0
        if x > 1.0:
            early = x * 2.0  # ...and this one's second, whatever the carries' order
            earlies = earlies + 1.0
        x = x * 0.8
    if lates > 0 and earlies > 0:
        return x, early + late  # noqa: F821 - both bound here, as in Python
    return x, lates + earlies


def bound_in_nested_if(x, n):
    count = 0.0 * x
    for i in range(n):
        _tick("body")
        if x > 1.0:
            x = x * 0.5
        else:
            if x > 0.3:
                found = x + 10.0  # two `if`s deep
                count = count + 1.0
            x = x * 1.7
    if count > 0:
        return x, found  # noqa: F821
    return x, count


def nested_if_total(x, n):
    a, b = bound_in_nested_if(x, n)
    return a + b


def rebound_to_another_type(x, n):
    tag = jnp.int32(0)
    total = 0.0 * x
    for i in range(n):
        _tick("body")
        if x > 1.0:
            kind = x * 2.0  # float32 on one path...
        if x > 1.0:
            total = total + kind  # noqa: F821 - bound on this path above
        kind = jnp.int32(i) * 2  # ...then int32 on every path: the input made for it does not fit
        x = x * 0.9
        tag = tag + kind
    return x, tag, total


class _Forgetful(dict):
    """A ``staging._DEFINED`` that learns nothing: every trace of a loop starts with
    its variables unbound, so the checks below run the placeholders' path, not
    the path of a loop that remembers what its body binds."""

    def __setitem__(self, key, value):
        pass


def test_variables_bound_on_some_paths_are_carried_from_one_trace(monkeypatch):

    monkeypatch.setattr(staging, "_DEFINED", _Forgetful())
    for fn, cases, batch in (
            (two_bound_late_first, [(F(3.0), I(6)), (F(2.5), I(2)), (F(1.5), I(4))],
             [(F(4.0), I(7)), (F(2.1), I(3))]),
            (bound_in_nested_if, [(F(3.0), I(8)), (F(0.5), I(3)), (F(0.1), I(4))],
             [(F(0.6), I(5)), (F(5.0), I(9))])):
        # (with its flag "bound yet": see test_a_variable_bound_on_one_path_keeps_its_last_value)
        assert _traces(fn, *cases[0]) == 2, fn.__name__
        check_cases(fn, cases, vmap=batch)
    check_cases(nested_if_total, [(F(0.5), I(3)), (F(3.0), I(8))], grad=True)


def test_an_input_made_for_a_variable_the_body_binds_otherwise_is_given_up(monkeypatch):

    monkeypatch.setattr(staging, "_DEFINED", _Forgetful())
    assert _traces(rebound_to_another_type, F(3.0), I(5)) >= 2  # traced again without it
    check_cases(rebound_to_another_type, [(F(3.0), I(5)), (F(0.5), I(3))],
                vmap=[(F(2.0), I(5)), (F(1.5), I(5))])


# ---- a `break` in a nested loop's `else` leaves the enclosing loop ----------------------
# The `else` of a loop runs at the enclosing loop's level, so a `break` there is that
# loop's own: the code after it must still run when no `return` happened (found by the
# composing scan, seed 87634: `return 3.0` below was dropped, the function returned 0.0).

def break_in_inner_else_then_return_after(a, n):
    for _ in range(n):
        while a < 0:
            return 1.0
        else:
            break
    else:
        return 2.0
    return 3.0


def break_in_inner_else_of_while_true(a, n):
    total = 0.0
    while True:
        for i in range(n):
            if a + i > 5:
                return total - 1.0
            total = total + a
        else:
            break
    return total * 2.0


def test_a_break_in_a_nested_loops_else_leaves_the_loop_it_stands_in():
    for a, n in ((4, 1), (-1, 2), (4, 0), (0, 3)):
        check(break_in_inner_else_then_return_after, I(a), I(n),
              vmap=[(I(-1), I(2)), (I(4), I(0))])
    for a, n in ((1.0, 3), (5.0, 2), (0.5, 0)):
        check(break_in_inner_else_of_while_true, F(a), I(n), vmap=[(F(5.0), I(2)), (F(0.5), I(0))],
              grad=True)


# A loop over an iterator that it leaves early: Python takes no item after the one the
# loop broke (or returned) on, so the code after it reads the rest, and a generator does
# not run its next step.

def rest_after_break(xs):
    it = iter(xs)
    for v in it:
        if v == 2:
            break
    return list(it)


def generator_steps(x):
    log = []

    def numbers():
        for i in range(5):
            log.append(i)
            yield i * x

    for v in numbers():
        if v >= 2 * x:
            return log, v
    return log, x


def next_after_break(x):
    it = iter([1.0, 2.0, 3.0, 4.0])
    total = x
    for v in it:
        total = total + v
        if v == 2.0:
            break
    return total * next(it, -1.0)


def test_a_loop_that_breaks_leaves_the_rest_of_its_iterator():
    check(rest_after_break, [1, 2, 3, 4], traced=False)
    check(generator_steps, 1.0, traced=False)
    check(next_after_break, 0.5, vmap=[(1.5,)], grad=True)
