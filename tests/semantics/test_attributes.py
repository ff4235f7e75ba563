"""Attribute assignment inside converted ``if``/``while``/``for``, as Python does it.

``state.x = ...``, ``state.n += 1``, ``self.count = self.count + 1`` and
``obj.a.b = v`` on plain objects, mutable dataclasses and ``types.SimpleNamespace``
must leave the objects as Python leaves them; a frozen dataclass keeps Python's
``FrozenInstanceError``.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import pytest

from .oracle import F, I, check, check_cases, check_error


class Box:
    def __init__(self, x=0.0):
        self.x = x


@dataclasses.dataclass
class State:
    x: float
    n: int = 0


@dataclasses.dataclass(frozen=True)
class Frozen:
    x: float


# ---- plain objects, dataclasses, SimpleNamespace under traced control flow ------------

def attr_set_in_traced_if(x):
    s = Box()
    s.x = 0.0
    if x > 0:
        s.x = x * 2.0
    else:
        s.x = -x
    return s.x


def test_attr_set_in_traced_if():
    check_cases(attr_set_in_traced_if, [(F(2.0),), (F(-3.0),)], vmap=[(F(0.5),)], grad=True)


def namespace_augassign_in_traced_while(x):
    s = SimpleNamespace(n=0, v=x)
    while s.v < 10.0:
        s.v = s.v * 2.0
        s.n += 1
    return s.v, s.n


def test_namespace_augassign_in_traced_while():
    check_cases(namespace_augassign_in_traced_while, [(F(1.0),), (F(12.0),)], vmap=[(F(3.0),)])


def dataclass_fields_in_static_for(x):
    st = State(x=x)
    for i in range(3):
        st.x = st.x + i
        st.n += 1
    return st.x, st.n


def test_dataclass_fields_in_static_for():
    check(dataclass_fields_in_static_for, F(0.5), vmap=[(F(1.0),)])


def dataclass_in_traced_range(x, n):
    st = State(x=x)
    for i in range(n):
        st.x = st.x * 2.0
        st.n = st.n + 1
    return st.x, st.n


def test_dataclass_in_traced_range():
    check_cases(dataclass_in_traced_range, [(F(1.5), I(3)), (F(1.5), I(0))])


def returns_the_mutated_dataclass(x):
    st = State(x=1.0)
    if x > 0:
        st.x = x
        st.n = 1
    else:
        st.x = -x
        st.n = 2
    return st


def test_returns_the_mutated_dataclass():
    # Concrete only: an object returned out of `jax.jit` would hold tracers whatever
    # autoflow did (its fields are compared under jit in the other tests).
    check_cases(returns_the_mutated_dataclass, [(F(2.0),), (F(-2.0),)], traced=False)


def attr_in_for_over_array(xs):
    s = SimpleNamespace(total=0.0, count=0)
    for v in xs:
        if v > 1.0:
            s.total = s.total + v
            s.count += 1
    return s.total, s.count


def test_attr_in_for_over_array():
    check(attr_in_for_over_array, jnp.arange(4.0, dtype=jnp.float32))


def namespace_attr_in_while_with_break(x):
    s = SimpleNamespace(n=0, v=x)
    while s.v < 100.0:
        s.v = s.v * 3.0
        s.n += 1
        if s.v > 20.0:
            break
    return s.v, s.n


def test_namespace_attr_in_while_with_break():
    check_cases(namespace_attr_in_while_with_break, [(F(1.0),), (F(200.0),)])


# ---- methods: self.count = self.count + 1 --------------------------------------------

class Counter:
    def __init__(self):
        self.count = 0
        self.total = 0.0

    def step(self, v):
        if v > 0:
            self.count = self.count + 1
            self.total = self.total + v
        else:
            self.count = self.count + 0
            self.total = self.total - 1.0
        return self.total

    def run(self, limit):
        while self.total < limit:
            self.total = self.total + 1.5
            self.count += 1
        return self.count


def method_sets_self_in_traced_if(x):
    c = Counter()
    c.step(x)
    c.step(x - 1.0)
    return c.count, c.total


def test_method_sets_self_in_traced_if():
    check_cases(method_sets_self_in_traced_if, [(F(2.0),), (F(0.5),), (F(-1.0),)])


def method_sets_self_in_traced_while(x):
    c = Counter()
    n = c.run(x)
    return n, c.count, c.total


def test_method_sets_self_in_traced_while():
    check_cases(method_sets_self_in_traced_while, [(F(4.0),), (F(-1.0),)])


class ClassLevelCount:
    count = 0

    def bump(self, x):
        if x > 0:
            self.count += 1
        else:
            self.count += 2
        return x


def method_augassign_shadows_class_attr(x):
    c = ClassLevelCount()
    c.bump(x)
    return c.count, ClassLevelCount.count, "count" in vars(c)


def test_method_augassign_shadows_class_attr():
    check_cases(method_augassign_shadows_class_attr, [(F(1.0),), (F(-1.0),)])


def method_on_passed_object(st, x):
    if x > 0:
        st.x = st.x * x
    else:
        st.x = st.x - x
    return st.x


def test_attr_on_passed_object():
    check_cases(method_on_passed_object, [(Box(3.0), F(2.0)), (Box(3.0), F(-1.0))])


# ---- nested attributes: obj.a.b = v ----------------------------------------------------

def nested_attr_in_traced_if(x):
    outer = SimpleNamespace(a=SimpleNamespace(b=0.0), c=1.0)
    if x > 0:
        outer.a.b = x
    else:
        outer.a.b = 2.0 * x
    return outer.a.b, outer.c


def test_nested_attr_in_traced_if():
    check_cases(nested_attr_in_traced_if, [(F(2.0),), (F(-2.0),)], vmap=[(F(1.0),)])


def nested_attr_in_static_for(x):
    outer = SimpleNamespace(a=State(x=0.0))
    for i in range(3):
        outer.a.x = outer.a.x + x * i
        outer.a.n += 1
    return outer.a.x, outer.a.n


def test_nested_attr_in_static_for():
    check(nested_attr_in_static_for, F(1.5))


def nested_attr_alias_in_traced_while(x):
    inner = SimpleNamespace(b=x)
    outer = SimpleNamespace(a=inner)
    while outer.a.b < 5.0:
        outer.a.b = outer.a.b + 2.0
    return inner.b


def test_nested_attr_alias_in_traced_while():
    # `inner` and `outer.a` are the same object: Python sees the update through both.
    check_cases(nested_attr_alias_in_traced_while, [(F(0.5),), (F(9.0),)])


# ---- attribute set on one branch only ----------------------------------------------------

def attr_set_on_one_branch_keeps_old_value(x):
    s = Box(1.0)
    if x > 0:
        s.x = x * 4.0
    return s.x


def test_attr_set_on_one_branch_keeps_old_value():
    # Python: the value from before the `if` where the branch did not run. autoflow may
    # also refuse clearly, naming the object.
    check_cases(attr_set_on_one_branch_keeps_old_value, [(F(2.0),), (F(-2.0),)],
                may_refuse=["s"])


def new_attr_on_one_branch(x):
    s = SimpleNamespace()
    if x > 0:
        s.y = x
    return s.y


def test_new_attr_on_one_branch_concrete():
    check(new_attr_on_one_branch, F(2.0), traced=False)
    check(new_attr_on_one_branch, F(-2.0), traced=False, expect_raise=AttributeError)


def test_new_attr_on_one_branch_traced_is_refused():
    check_error(new_attr_on_one_branch, F(2.0), names=["s"])


# ---- frozen dataclasses keep Python's error ------------------------------------------------

def frozen_assign_in_traced_if(x):
    p = Frozen(x=1.0)
    if x > 0:
        p.x = x
    else:
        p.x = -x
    return p.x


def test_frozen_assign_in_traced_if():
    check(frozen_assign_in_traced_if, F(2.0), expect_raise=dataclasses.FrozenInstanceError)
    check(frozen_assign_in_traced_if, F(-2.0), expect_raise=dataclasses.FrozenInstanceError)


def frozen_assign_in_loop(x):
    p = Frozen(x=0.0)
    for i in range(2):
        p.x = p.x + x
    return p.x


def test_frozen_assign_in_loop():
    check(frozen_assign_in_loop, F(2.0), expect_raise=dataclasses.FrozenInstanceError)


def frozen_assign_under_concrete_branch(x, flag):
    p = Frozen(x=x)
    if flag:
        object.__setattr__(p, "x", x * 2.0)
    else:
        p.x = 3.0
    return p.x


def test_frozen_assign_under_concrete_branch():
    check(frozen_assign_under_concrete_branch, F(2.0), True, static_argnums=(1,))
    check(frozen_assign_under_concrete_branch, F(2.0), False, static_argnums=(1,),
          expect_raise=dataclasses.FrozenInstanceError)


# ---- global objects --------------------------------------------------------------------------

STATS = SimpleNamespace(calls=0)


def global_attr_counted_in_static_loop(x):
    STATS.calls = 0
    for i in range(3):
        STATS.calls += 1
        x = x * 2.0
    return x, STATS.calls


@pytest.mark.parametrize("mode", ["concrete", "traced"])
def test_global_attr_counted_in_static_loop(mode):
    check(global_attr_counted_in_static_loop, F(1.5), concrete=mode == "concrete",
          traced=mode == "traced", may_refuse=["STATS"])
    # Whatever happened, the global object holds no tracer afterwards.
    assert not isinstance(STATS.calls, jax.core.Tracer), STATS.calls


def setattr_builtin_in_traced_if(x):
    s = Box(0.0)
    if x > 0:
        setattr(s, "x", x + 1.0)
    else:
        setattr(s, "x", x - 1.0)
    return getattr(s, "x")


def test_setattr_builtin_in_traced_if():
    check_cases(setattr_builtin_in_traced_if, [(F(1.0),), (F(-1.0),)], may_refuse=["s"])
