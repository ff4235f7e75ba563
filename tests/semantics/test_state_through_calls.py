"""State changed through aliases and through calls inside staged statements."""

from __future__ import annotations

import dataclasses
import types

import jax.numpy as jnp

from .oracle import F, check


def alias_list(x):
    a = [x, x]
    b = a
    if x > 0:
        b[0] = x * 2
    else:
        b[0] = x * 3
    return a[0] + b[0]


def test_write_through_an_alias_under_a_traced_if():
    check(alias_list, F(2.0))
    check(alias_list, F(-2.0))


class Counter:
    def __init__(self):
        self.n = 0

    def step(self, x):
        if x > 0:
            self.n += 1
            return x - 1
        return x


def method_changes_attribute_in_loop(x):
    c = Counter()
    for i in range(4):
        x = c.step(x)
    return x, c.n


def test_attribute_changed_by_a_method_called_in_a_staged_loop():
    check(method_changes_attribute_in_loop, F(2.5))
    check(method_changes_attribute_in_loop, F(-1.0))


def method_changes_attribute_in_while(x):
    c = Counter()
    while x > 0.5:
        x = c.step(x) * 0.9
    return x, c.n


def test_attribute_changed_by_a_method_called_in_a_traced_while():
    check(method_changes_attribute_in_while, F(3.0))


def method_in_traced_if(x):
    c = Counter()
    if x < 10:
        x = c.step(x)
    return x, c.n


def test_attribute_changed_by_a_method_called_in_a_traced_if():
    check(method_in_traced_if, F(3.0))
    check(method_in_traced_if, F(-3.0))


@dataclasses.dataclass
class Acc:
    total: float = 0.0


def closure_changes_attribute(x):
    acc = Acc()

    def add(v):
        acc.total = acc.total + v

    i = 0
    while i < 3:
        add(x)
        i += 1
    return acc.total


def test_closure_changes_attribute_in_loop():
    check(closure_changes_attribute, F(2.0))


def nested_dict_in_attribute(x):
    s = types.SimpleNamespace(d={"k": x})
    for i in range(3):
        if s.d["k"] > 1:
            s.d["k"] = s.d["k"] / 2
    return s.d["k"]


def test_nested_dict_in_attribute():
    check(nested_dict_in_attribute, F(9.0))


def pop_then_append(x):
    q = [x, x + 1]
    for i in range(4):
        v = q.pop(0)
        q.append(v * 2)
    return q[0] + q[1]


def test_queue_keeps_its_length():
    check(pop_then_append, F(1.0))


def tuple_assign_attributes(x):
    p = types.SimpleNamespace(a=x, b=x)
    if x > 0:
        p.a, p.b = p.b * 2, p.a + 1
    return p.a + p.b


def test_tuple_assignment_to_attributes():
    check(tuple_assign_attributes, F(1.0))
    check(tuple_assign_attributes, F(-1.0))


@dataclasses.dataclass
class Nudged:
    a: float = 0.0
    k: int = 0

    def nudge(self, v):
        self.a = self.a * 0.5 + v     # a plain write, no `if` of its own
        self.k += 1


def plain_method_writes_in_traced_while(x):
    st = Nudged(a=0.0, k=1)
    w = 0
    while w < 4 and x > 1:
        w += 1
        st.nudge(0.25)
        x = x / 2
    return st.a, st.k, x


def test_plain_writes_by_a_method_in_a_traced_while():
    # Python runs the loop 0, 1 or 4 times: the object must show exactly that.
    check(plain_method_writes_in_traced_while, F(0.5))
    check(plain_method_writes_in_traced_while, F(3.0))
    check(plain_method_writes_in_traced_while, F(100.0))


def plain_container_write_in_static_loop(xs):
    hist = {"n": 0}

    def bump(d):
        d["n"] = d["n"] + 1

    acc = xs[0] * 0
    for v in xs:
        if v > 0:
            bump(hist)
        acc = acc + v
    return acc, hist["n"]


def test_container_changed_by_a_call_under_a_traced_if():
    check(plain_container_write_in_static_loop, jnp.array([1.0, -2.0, 3.0], jnp.float32))
