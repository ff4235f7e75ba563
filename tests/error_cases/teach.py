"""Mistakes a new user makes under jit (issue 21's table), for test_errors_teach."""

import math

import jax.numpy as jnp
import numpy as np


def zeros_of_traced_size(x, n):
    if x.sum() > 0:
        y = jnp.zeros(n)  # ERROR
    else:
        y = jnp.ones(n)
    return y


def size_from_argument(x, k):
    m = k * 2
    return jnp.arange(m) + x  # ERROR


def mask_index(x):
    total = 0.0
    for i in range(2):
        total = total + x[x > i].sum()  # ERROR
    return total


def sqrt_in_while_test(x):
    while math.sqrt(x) > 1.0:  # (jnp.sqrt when x is traced)
        x = x / 2
    return x


def numpy_in_body(x):
    while x.sum() > 1.0:
        x = x / np.asarray(x).max()  # ERROR
    return x


def item_in_body(x):
    steps = 0
    while x.sum() > 1.0:
        x = x / x.max().item()  # ERROR
        steps += 1
    return x, steps


def float_in_body(x):
    while x > 1.0:
        x = x / float(x)  # ERROR
    return x


def lambdas_in_traced_loop(x):
    fs = []
    i = 0
    while i < x:  # ERROR
        fs.append(lambda t: t * 2)
        i += 1
    return i


def string_label(x):
    if x > 0:  # ERROR
        label = "positive"
    else:
        label = "negative"
    return x, label


def string_label_expression(x):
    label = "positive" if x > 0 else "negative"  # ERROR
    return x, label


def none_on_one_path(x):
    if x > 0:  # ERROR
        best = x
    else:
        best = None
    return best


def function_on_each_path(x):
    if x > 0:  # ERROR
        act = jnp.tanh
    else:
        act = jnp.sin
    return act(x)


def string_in_loop(x):
    state = "start"
    while x > 0:  # ERROR
        state = state + "."
        x = x - 1
    return x, state


class Walker:  # (a plain class: not a pytree)
    def __init__(self, pos):
        self.pos = pos


def object_made_again_in_loop(x):
    w = Walker(x)
    while w.pos < 4:  # ERROR
        w = Walker(w.pos + 1)
    return w.pos


def collected_until_zero(x):
    history = []
    for g in range(4):
        x = x - 1
        if x == 0:  # ERROR
            break
        history.append(x)
    return x, len(history)


def runaway(x):
    steps = 0
    while x > 0:  # ERROR
        x = x - 1
        steps = steps + 1
    return steps


def checked(x):
    if x.sum() > 0:
        assert x[0] > 100, "x[0] must exceed 100"  # ERROR
    return x * 2


def raises_at_run_time(x):
    if x > 0:
        raise ValueError("x must not be positive")  # ERROR
    return x


def doubling(x):
    while x < 10.0:  # ERROR
        x = x * 2
    return x


def counted_scale(x, n):
    k = 0
    while k < n:
        k = k + 1
    return x * k


def lambdas_in_traced_range(xs, n):
    fs = []
    total = 0.0
    for i in range(n):  # ERROR
        fs.append(lambda t: t * i)
        total = total + xs[i]
    return total


def refined_until_large(a):
    n = 1
    total = 0.0
    for level in range(4):
        n = n * 2
        total = total + jnp.sum(jnp.arange(1, n, 2) * a)  # ERROR
        if total > 5.0:
            break
    return total
