"""Python objects that a staged statement changes in place, for
test_python_objects_in_staging and test_check_agrees: an iterator advanced with
``next()``, a set of traced values, a list taken from, a list appended to on one path.
"""

import jax.numpy as jnp
import numpy as np


def iterator_in_while(x):
    it = iter([1.0, 2.0, 3.0, 4.0, 5.0])
    while x < 7:  # ERROR
        x = x + next(it)
    return x


def generator_in_if(x):
    def steps():
        yield 1.0
        yield 2.0

    gen = steps()
    if x > 0:  # ERROR
        x = x + next(gen)
    return x + next(gen)


def distinct_positives(xs):
    seen = set()
    for x in xs:
        if x > 0:  # ERROR
            seen.add(x)
    return len(seen)


def popped_in_while(x):
    stack = [1.0, 2.0, 3.0]
    while x < 5:  # ERROR
        x = x + stack.pop()
    return x


def popped_in_test(x):
    stack = [1.0, 2.0, 3.0, 4.0]
    n = 0
    while len(stack) > 0 and stack.pop() > x:  # ERROR
        n += 1
    return n


def iterator_in_test(x):
    it = iter([1.0, 2.0, 3.0, 4.0, 5.0])
    n = 0
    while next(it) < x:  # ERROR
        n += 1
    return n


HISTORY: list = []
CONFIG = {"calls": 0}


def keyed_by_a_counter(x):
    d = {}
    i = 0
    while x > 1:
        x = x / 2
        d[i] = x  # ERROR
        i += 1
    return x


def recorded_in_module_list(x):
    while x > 1:  # ERROR
        x = x / 2
        HISTORY.append(x)
    return x


def counted_in_module_dict(x):
    if x > 0:  # ERROR
        CONFIG["calls"] += 1
    return x


def appended_on_one_path(xs):
    out = []
    for i in range(xs.shape[0]):
        if xs[i] > 0:  # ERROR
            out.append(xs[i])
    return out


def numpy_sine_in_branch(x):
    if x > 0:
        y = np.sin(x)  # ERROR
    else:
        y = jnp.cos(x)
    return y


def first_best(xs):
    best = None
    best_i = -1
    for i in range(xs.shape[0]):
        if best is None or xs[i] > best:
            best = xs[i]
            best_i = i
    return best_i


def labelled(x):
    if x > 0:  # (two strings made from traced values: the path's, made at run time)
        msg = f"positive: {x}"
    else:
        msg = f"non-positive: {x}"
    print(msg)
    return x


def factorial(n):
    if n <= 1:  # ERROR (a recursion ended by a traced condition)
        return 1
    return n * factorial(n - 1)


def pairs_of_flags(x, y):
    match x:
        case (a, b):  # ERROR (a sequence pattern on a traced array)
            return a + b
    return x + y


def lanes_of_signs(x, y):
    match (x > 0, y > 0):
        case (True, False):
            return x - y
        case _:
            return x + y
