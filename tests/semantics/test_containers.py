"""List and dict mutation inside converted control flow, as Python does it.

Each branch of a traced ``if`` must see the container as it was before the ``if``
(mutations are isolated per branch). When both paths leave the container with the same
structure the program works; when the structure differs (a key on one path only,
different lengths) under a traced condition, autoflow must refuse with a
``ConversionError`` naming the container, while concrete conditions still run as Python.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from .oracle import F, I, check, check_cases, check_error

CASES = [(F(2.0),), (F(-3.0),)]


# ---- same structure on both paths: works -----------------------------------------------

def list_append_per_branch(x):
    l = [x]  # noqa: E741
    if x > 0:
        l.append(x * 2.0)
    else:
        l.append(x - 1.0)
    return l


def test_list_append_per_branch():
    check_cases(list_append_per_branch, CASES, vmap=[(F(1.0),)])


def list_extend_per_branch(x):
    l = [x]  # noqa: E741
    if x > 0:
        l.extend([x, x + 1.0])
    else:
        l.extend([-x, 0.0 * x])
    return l


def test_list_extend_per_branch():
    check_cases(list_extend_per_branch, CASES)


def list_insert_per_branch(x):
    l = [1.0, 2.0]  # noqa: E741
    if x > 0:
        l.insert(0, x)
    else:
        l.insert(2, -x)
    return l


def test_list_insert_per_branch():
    check_cases(list_insert_per_branch, CASES)


def list_pop_per_branch(x):
    l = [x, x + 1.0, x + 2.0]  # noqa: E741
    if x > 0:
        v = l.pop()
    else:
        v = l.pop(0)
    return l, v


def test_list_pop_per_branch():
    check_cases(list_pop_per_branch, CASES)


def list_remove_per_branch(x):
    l = [1.0, 2.0, 3.0]  # noqa: E741
    if x > 0:
        l.remove(2.0)
        l.append(x)
    else:
        l.remove(3.0)
        l.append(-x)
    return l


def test_list_remove_per_branch():
    check_cases(list_remove_per_branch, CASES)


def list_clear_per_branch(x):
    l = [x, x]  # noqa: E741
    if x > 0:
        l.clear()
        l.append(x * 3.0)
    else:
        del l[1:]
    return l


def test_list_clear_per_branch():
    check_cases(list_clear_per_branch, CASES)


def list_mutated_in_one_branch_is_isolated(x):
    l = [x, 1.0]  # noqa: E741
    if x > 0:
        l[1] = 5.0
        y = l[1] + x
    else:
        y = l[1] - x
    return y, l


def test_list_mutated_in_one_branch_is_isolated():
    check_cases(list_mutated_in_one_branch_is_isolated, CASES)


def list_alias_sees_branch_mutation(x):
    a = [x]
    b = a
    if x > 0:
        a.append(1.0)
    else:
        a.append(2.0)
    return b


def test_list_alias_sees_branch_mutation():
    # `b` is `a`: Python sees the appended element through both names.
    check_cases(list_alias_sees_branch_mutation, CASES)


def list_iadd_and_del_per_branch(x):
    l = [x, 2.0 * x]  # noqa: E741
    if x > 0:
        l += [x]
        del l[0]
    else:
        del l[1]
        l += [-x]
    return l


def test_list_iadd_and_del_per_branch():
    check_cases(list_iadd_and_del_per_branch, CASES)


def dict_update_per_branch(x):
    d = {"a": x, "b": 1.0}
    if x > 0:
        d.update(a=x * 2.0)
    else:
        d.update({"b": x})
    return d


def test_dict_update_per_branch():
    check_cases(dict_update_per_branch, CASES, vmap=[(F(1.0),)])


def dict_setdefault_per_branch(x):
    d = {"a": x}
    if x > 0:
        v = d.setdefault("a", 5.0)
        w = d.setdefault("b", x)
    else:
        v = d.setdefault("a", 6.0)
        w = d.setdefault("b", 7.0)
    return d, v, w


def test_dict_setdefault_per_branch():
    check_cases(dict_setdefault_per_branch, CASES)


def dict_item_assign_and_del_per_branch(x):
    d = {"a": x, "b": 2.0, "c": 3.0}
    if x > 0:
        d["a"] = x + 1.0
        del d["b"]
    else:
        d["a"] = x - 1.0
        del d["b"]
        d["c"] = x
    return d


def test_dict_item_assign_and_del_per_branch():
    check_cases(dict_item_assign_and_del_per_branch, CASES)


def dict_clear_then_refill_per_branch(x):
    d = {"a": x, "z": 0.0}
    if x > 0:
        d.clear()
        d["a"] = 2.0 * x
    else:
        d.pop("z")
        d["a"] = 3.0 * x
    return d


def test_dict_clear_then_refill_per_branch():
    check_cases(dict_clear_then_refill_per_branch, CASES)


def nested_dict_assign_per_branch(x):
    cfg = {"a": {"b": 0.0}, "c": 1.0}
    if x > 0:
        cfg["a"]["b"] = x
    else:
        cfg["a"]["b"] = -x
    return cfg


def test_nested_dict_assign_per_branch():
    check_cases(nested_dict_assign_per_branch, CASES, vmap=[(F(1.0),)])


def nested_dict_alias_sees_branch_mutation(x):
    inner = {"b": 0.0}
    cfg = {"a": inner}
    if x > 0:
        cfg["a"]["b"] = x
    else:
        cfg["a"]["b"] = 2.0 * x
    return inner["b"]


def test_nested_dict_alias_sees_branch_mutation():
    check_cases(nested_dict_alias_sees_branch_mutation, CASES)


def dict_setdefault_list_append_per_branch(x):
    d = {}
    if x > 0:
        d.setdefault("xs", []).append(x)
    else:
        d.setdefault("xs", []).append(-x)
    return d


def test_dict_setdefault_list_append_per_branch():
    check_cases(dict_setdefault_list_append_per_branch, CASES)


def list_in_traced_while_same_structure(x):
    l = [x, 0.0]  # noqa: E741
    while l[0] < 5.0:
        l[0] = l[0] * 2.0
        l[1] = l[1] + 1.0
    return l


def test_list_in_traced_while_same_structure():
    check_cases(list_in_traced_while_same_structure, [(F(1.0),), (F(6.0),)])


# ---- module-level containers ------------------------------------------------------------------

REGISTRY = {"scale": 1.0}


def module_dict_assigned_per_branch(x):
    REGISTRY["scale"] = 1.0
    if x > 0:
        REGISTRY["scale"] = 2.0
    else:
        REGISTRY["scale"] = 3.0
    return x * REGISTRY["scale"]


@pytest.mark.parametrize("x", [2.0, -2.0])
def test_module_dict_assigned_per_branch(x):
    check(module_dict_assigned_per_branch, F(x), may_refuse=["REGISTRY"])
    assert not isinstance(REGISTRY["scale"], jax.core.Tracer), REGISTRY


LOG = []


def global_list_appended_in_static_loop(x):
    del LOG[:]
    for i in range(3):
        LOG.append(i)
        x = x + 1.0
    return x, len(LOG), LOG[-1]


@pytest.mark.parametrize("mode", ["concrete", "traced"])
def test_global_list_appended_in_static_loop(mode):
    check(global_list_appended_in_static_loop, F(0.5), concrete=mode == "concrete",
          traced=mode == "traced")
    assert LOG == [0, 1, 2] and all(type(v) is int for v in LOG), LOG


def global_list_appended_in_python_loop(x):
    del LOG[:]
    for name in ["a", "b", "c"]:
        LOG.append(name)
        x = x * 2.0
    return x, "".join(LOG)


def test_global_list_appended_in_python_loop():
    check(global_list_appended_in_python_loop, F(0.25))
    assert LOG == ["a", "b", "c"]


# ---- append over a static range, then jnp.stack -------------------------------------------------

def stack_appended_static_range(x):
    y = x
    ys = [y]
    for i in range(4):
        y = y * 0.5 + i
        ys.append(y)
    return jnp.stack(ys)


def test_stack_appended_static_range():
    check(stack_appended_static_range, F(1.0), vmap=[(F(-2.0),)])


def stacked_sum(x):
    ys = [x * 0.0]
    for i in range(3):
        ys.append(jnp.sin(x) * i + ys[-1])
    return jnp.stack(ys).sum()


def test_stacked_sum_grad():
    check(stacked_sum, F(0.5), grad=True)


def append_in_static_range_with_traced_if(x):
    ys = []
    for i in range(3):
        if x > i:
            ys.append(x - i)
        else:
            ys.append(x + i)
    return jnp.stack(ys)


def test_append_in_static_range_with_traced_if():
    check_cases(append_in_static_range_with_traced_if, [(F(1.5),), (F(-1.0),)])


# ---- a dict key first set inside a loop -----------------------------------------------------------

def dict_key_first_set_in_traced_while(x):
    d = {}
    while x < 5.0:
        d["last"] = x
        x = x + 1.0
    return d["last"]


def test_dict_key_first_set_in_traced_while():
    check(dict_key_first_set_in_traced_while, F(1.5), may_refuse=["d"])
    check(dict_key_first_set_in_traced_while, F(7.0), traced=False, expect_raise=KeyError)


def dict_key_first_set_in_static_for(x):
    d = {"x": x}
    for i in range(3):
        d["k"] = d["x"] * i
        d["x"] = d["x"] + 1.0
    return d


def test_dict_key_first_set_in_static_for():
    check(dict_key_first_set_in_static_for, F(1.5))


# ---- differing structure under a traced condition: refused, naming the container ----------------

def dict_key_on_one_path(x):
    d = {"a": x}
    if x > 0:
        d["b"] = x
    return len(d)


def test_dict_key_on_one_path():
    check_error(dict_key_on_one_path, F(2.0), names=["d"])
    check(dict_key_on_one_path, F(-2.0), traced=False)


def setdefault_on_one_path(x):
    d = {}
    if x > 0:
        d.setdefault("a", x)
    else:
        d.setdefault("b", x)
    return d


def test_setdefault_on_one_path():
    check_error(setdefault_on_one_path, F(2.0), names=["d"])


def list_lengths_differ(x):
    l = [x]  # noqa: E741
    if x > 0:
        l.append(x)
    return l


def test_list_lengths_differ():
    check_error(list_lengths_differ, F(2.0), names=["l"])
    check(list_lengths_differ, F(-2.0), traced=False)


def list_extend_lengths_differ(x):
    l = []  # noqa: E741
    if x > 0:
        l.extend([x, x])
    else:
        l.extend([x])
    return sum(l)


def test_list_extend_lengths_differ():
    check_error(list_extend_lengths_differ, F(-1.0), names=["l"])


def list_cleared_on_one_path(x):
    l = [x, x]  # noqa: E741
    if x > 0:
        l.clear()
    return l


def test_list_cleared_on_one_path():
    check_error(list_cleared_on_one_path, F(2.0), names=["l"])


def list_pop_in_traced_while(x):
    l = [1.0, 1.0, 1.0, 1.0]  # noqa: E741
    s = x
    while s < 3.0:
        s = s + l.pop()
    return s


def test_list_pop_in_traced_while():
    check_error(list_pop_in_traced_while, F(0.5), names=["l"])


def list_append_in_traced_while(x):
    l = []  # noqa: E741
    while x < 4.0:
        l.append(x)
        x = x + 1.0
    return x


def test_list_append_in_traced_while():
    check_error(list_append_in_traced_while, F(1.0), names=["l"])


def dict_key_on_one_path_concrete(x, flag):
    d = {"a": x}
    if flag:
        d["b"] = 2.0 * x
    return d


def test_dict_key_on_one_path_concrete_condition():
    check(dict_key_on_one_path_concrete, F(2.0), True, static_argnums=(1,))
    check(dict_key_on_one_path_concrete, F(2.0), False, static_argnums=(1,))


# ---- the same object afterwards: aliases and identity ----------------------------------------
# A variable's list or dict that a traced statement changes in place (item
# sets, appends) is the same object afterwards: an alias made before the
# statement sees the change, and `is` holds. A variable rebound to a new list
# leaves the old one (and its aliases) alone.

def alias_after_traced_while(x, n):
    lst = [0.0, 1.0]
    alias = lst
    i = 0
    while i < n:
        lst[0] = lst[0] + x
        i += 1
    lst.append(5.0)
    return alias[0], len(alias), alias is lst


def test_alias_after_traced_while():
    check_cases(alias_after_traced_while, [(F(1.0), I(3)), (F(-2.0), I(0))])


def alias_after_traced_if(x):
    d = {"a": x, "b": 0.0}
    keep = d
    if x > 0:
        d["b"] = x * 2.0
    else:
        d["a"] = -x
    return keep["a"], keep["b"], keep is d


def test_alias_after_traced_if():
    check_cases(alias_after_traced_if, CASES)


def rebound_in_both_branches_leaves_alias(x):
    pts = [x, x]
    old = pts
    if x > 0:
        pts = [x * 2.0, 1.0]
    else:
        pts = [x - 1.0, 2.0]
    return old, pts, old is pts


def test_rebound_in_both_branches_leaves_alias():
    check_cases(rebound_in_both_branches_leaves_alias, CASES)


def accumulated_list_is_the_same_list(xs):
    out = [jnp.zeros(())]
    first = out
    for v in xs:
        if v > 0:
            out.append(v * 2.0)
        else:
            out.append(-v)
    return jnp.stack(first), first is out


def test_accumulated_list_is_the_same_list():
    check_cases(accumulated_list_is_the_same_list,
                [(jnp.array([1.0, -2.0, 3.0]),), (jnp.array([-1.0, -2.0, 0.5]),)])


def nested_alias_after_traced_for(x, n):
    inner = [x]
    outer = {"inner": inner, "k": 0.0}
    for i in range(n):
        outer["inner"][0] = outer["inner"][0] * 0.5
        outer["k"] = outer["k"] + 1.0
    return inner[0], outer["k"], outer["inner"] is inner


def test_nested_alias_after_traced_for():
    check_cases(nested_alias_after_traced_for, [(F(4.0), I(2)), (F(1.0), I(0))])


def list_pop_append_in_traced_loop_with_early_return(xs):
    y0 = xs
    lst = [0.0, 0.0]
    for v in jnp.zeros(3):
        lst.append(0.25)
        f1 = lst.pop()
        if f1 > 0.0:
            return jnp.all(xs < y0.sum()), y0, lst
        y0 = y0 * 1.5
    return jnp.bool_(False), y0, lst


def test_list_pop_append_in_traced_loop_with_early_return():
    # Fuzzer seed 83 (state profile): the loop's list was also shared state, and a
    # retrace read it while it held the loop condition's tracers.
    check_cases(list_pop_append_in_traced_loop_with_early_return,
                [(jnp.array([0.75, 0.25, -0.75]),)])


def alias_read_in_traced_while(x, n):
    # `alias` is read in the body: it must see each iteration's item set.
    lst = [0.0]
    alias = lst
    total = 0.0
    i = 0
    while i < n:
        lst[0] = lst[0] + x
        total = total + alias[0]
        i += 1
    return total, alias


def test_alias_read_in_traced_while():
    check_cases(alias_read_in_traced_while, [(F(1.0), I(3)), (F(2.0), I(0))])


def alias_len_in_traced_for(x, n):
    lst = [x]
    alias = lst
    total = 0.0
    for i in range(n):
        lst.append(1.0)
        total = total + len(alias)
        lst.pop()
    return total, alias


def test_alias_len_in_traced_for():
    check_cases(alias_len_in_traced_for, [(F(1.0), I(3)), (F(2.0), I(1))])


def alias_grows_in_array_loop(xs):
    lst = []
    alias = lst
    s = 0.0
    for v in xs:
        if v > 0:
            lst.append(v)
        else:
            lst.append(-v)
        s = s + alias[-1]
    return s, jnp.stack(alias)


def test_alias_grows_in_array_loop():
    check_cases(alias_grows_in_array_loop, [(jnp.array([1.0, -2.0, 3.0]),)])


def list_set_in_loop_under_traced_if_in_loop(x):
    # Fuzzer seed 36 (state profile): the inner loop writes the list back in
    # place inside the `if`'s branch, so the `if` must restore it for the other
    # branch (it did not, and the other branch read the first one's tracers).
    k = 2
    w0 = 0
    lst = [x, 0.0]
    while w0 < 2 and x >= 0.5:
        w0 += 1
        if x > 3.0:
            break
        w1 = 0
        while w1 < 2 and k < 50:  # traced (k is carried by the outer loop)
            w1 += 1
            k += w0
            if x < -0.5:
                continue
            lst[1] = jnp.sin(lst[-1]) + k
    return lst


def test_list_set_in_loop_under_traced_if_in_loop():
    check_cases(list_set_in_loop_under_traced_if_in_loop, [(F(0.5),), (F(4.0),), (F(0.0),)])


def pop_then_append_under_traced_if(x, xs):
    # Fuzzer seed 7: `lst` is the `if`'s shared state; the branch pops from it in
    # place and appends, so the append must be in place too.
    lst = [0.0, 1.0]
    for v in xs:
        if x > 0:
            pass
        else:
            break
        lst.append(lst.pop(0) * 0.5 + jnp.sin(v))
    return lst


def test_pop_then_append_under_traced_if():
    check_cases(pop_then_append_under_traced_if,
                [(F(1.5), jnp.array([1.0, 2.0, 3.0])), (F(-1.5), jnp.array([1.0, 2.0, 3.0]))])


def index_of_largest(xs):
    return max(range(len(xs)), key=lambda i: xs[i])


def index_of_smallest_absolute(xs):
    return min((i for i in range(3)), key=lambda i: abs(xs[i]))


def test_max_of_a_range_keyed_by_traced_values():
    # (the items a range of Python ints, the keys traced: the index of the first largest)
    for xs in (jnp.array([3.0, 9.0, -12.0]), jnp.array([5.0, 5.0, 1.0])):
        check(index_of_largest, xs, vmap=[(jnp.array([1.0, -2.0, 7.0]),)])
        check(index_of_smallest_absolute, xs, vmap=[(jnp.array([1.0, -0.5, 7.0]),)])


def largest_with_ties_to_the_last(xs):
    return max(range(len(xs)), key=lambda i: (xs[i], i))


def smallest_pair(a, b, c):
    return min((a, 2), (b, 1), (c, 0))


def ranked_by_value_then_index(xs):
    return sorted(range(len(xs)), key=lambda i: (-xs[i], i))


def ranked_descending(xs):
    return sorted(range(len(xs)), key=lambda i: (xs[i], -i), reverse=True)


def test_tuple_keys_with_traced_items_compare_as_pythons_tuples():
    # (the first items decide; equal ones pass to the next, as Python compares tuples;
    # before, a tuple key with a traced item was an error inside NumPy)
    rows = [jnp.array([3.0, 9.0, 9.0, -1.0]), jnp.array([5.0, 5.0, 1.0, 5.0])]
    for xs in rows:
        others = [(r,) for r in rows if r is not xs]
        check(largest_with_ties_to_the_last, xs, vmap=others)
        check(ranked_by_value_then_index, xs, vmap=others)
        check(ranked_descending, xs, vmap=others)
    for args in [(F(1.0), F(1.0), F(1.0)), (F(0.0), F(1.0), F(0.0)), (F(2.0), F(1.0), F(3.0))]:
        check(smallest_pair, *args, vmap=[(F(1.0), F(0.5), F(0.5))])


LIMIT = jnp.float32(0.5)


def scaled_by_a_global_bound(x):
    return x * max(LIMIT, 0.25) + min(0.75, LIMIT, key=lambda v: -v)


def test_max_of_a_concrete_array_under_a_trace():
    # (a global JAX array: under `jit` JAX stages its comparison with 0.25 although
    # nothing is traced, and Python's `max` could not take its truth value)
    import autoflow

    check(scaled_by_a_global_bound, F(2.0), vmap=[(F(-1.0),)], grad=True)
    a = jnp.int32(2)
    got = jax.jit(lambda x: autoflow.convert(doubled_a_bounded_number_of_times)(a, x))(1.0)
    assert float(got) == doubled_a_bounded_number_of_times(a, 1.0) == 4.0


def doubled_a_bounded_number_of_times(a, x):
    s = x
    for j in range(min(max(a, 0), 3)):
        s = s * 2.0
    return s


ROW = jnp.array([3.0, 1.0, 2.0])


def extremes_of_a_global_row(x):
    return max(ROW) + min(ROW, key=lambda v: -v) + x


def index_of_the_largest_by_enumerate(a, b, c):
    return max(enumerate([a, b, c]), key=lambda t: t[1])[0]


def partner_of_the_largest_by_zip(a, b, c):
    return max(zip([a, b, c], [0, 1, 2]))[1]


def test_max_of_a_global_row_and_of_enumerate_and_zip():
    # (a concrete row of a global array under a trace; the tuples `enumerate`/`zip` make
    # of traced items: both were JAX's TracerBoolConversionError)
    check(extremes_of_a_global_row, F(1.0), vmap=[(F(-2.0),)], grad=True)
    for args in [(F(1.0), F(3.0), F(2.0)), (F(5.0), F(3.0), F(5.0))]:
        check(index_of_the_largest_by_enumerate, *args, vmap=[(F(0.0), F(-1.0), F(2.0))])
        check(partner_of_the_largest_by_zip, *args, vmap=[(F(0.0), F(-1.0), F(2.0))])


# ---- a list or dict the rewriter cannot see is one: made by a call, or a subclass ------

def _made_by_a_helper(x):
    return [x]


def _dict_made_by_a_helper(x):
    return {"a": x}


class Settings(dict):
    """A user's dict subclass (JAX does not flatten it: a leaf to JAX)."""


class History(list):
    """A user's list subclass."""


def append_to_a_list_a_helper_made(x):
    h = _made_by_a_helper(x)
    if x > 0:
        h.append(x * 2)
    else:
        h.append(x - 1)
    return h[-1], len(h)


def update_a_dict_a_helper_made(x):
    d = _dict_made_by_a_helper(x)
    if x > 0:
        d.update(b=x * 2)
    else:
        d.setdefault("b", -x)
    return d.pop("a") + d["b"], len(d)


def append_to_a_list_subclass(x):
    h = History([x])
    for i in range(3):
        if x > i:
            h.append(x * i)
        else:
            h.append(-x)
    return h[-1] + h[1], isinstance(h, History), len(h)


def a_dict_subclass_through_a_loop(x):
    d = Settings(a=jnp.abs(x) + 0.5, n=0)
    while d["a"] < 10:
        d["a"] = d["a"] * 2
        d["n"] += 1
    if x > 0:
        d["a"] = -d["a"]
    return d["a"], d["n"], type(d) is Settings


def test_lists_and_dicts_the_rewriter_cannot_see_are_carried():
    # (their in-place changes inside a traced `if` were not carried: the paths' appends
    # both stayed, a silent wrong answer; a dict subclass changed in a staged path was
    # JAX's UnexpectedTracerError)
    for fn in (append_to_a_list_a_helper_made, update_a_dict_a_helper_made,
               append_to_a_list_subclass, a_dict_subclass_through_a_loop):
        check_cases(fn, [(F(2.5),), (F(-1.5),), (F(0.5),)], vmap=[(F(-1.0),), (F(3.0),)])
