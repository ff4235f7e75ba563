"""Code other people write (issue 35), against Python's own run of it.

The oracle is the plain function run eagerly; where Python's value cannot be
an array, autoflow's own error at the user's line.
"""

from __future__ import annotations

import numpy as np
import pytest

import autoflow
from autoflow import ConversionError


# ---- `and`/`or` with an operand that is no array -------------------------------------------

def and_name(x, name):
    if x > 0 and name:
        return x
    return -x


def or_none(x):
    if x or None:
        return x + 1
    return x


def while_and_list(x, opts):
    while x < 10 and opts:
        x = x * 2
    return x


def none_check_first(x, y=None):
    if y is not None and x > 0:
        return x + y
    return x * 2


@pytest.mark.parametrize("fn, args, static", [
    (and_name, (1.0, "a"), (1,)), (and_name, (1.0, None), (1,)), (and_name, (1.0, ""), (1,)),
    (and_name, (-1.0, "a"), (1,)),
    (or_none, (0.0,), ()), (or_none, (2.0,), ()),
    (while_and_list, (1.0, [1]), ()), (while_and_list, (1.0, []), ()),
    (none_check_first, (1.0,), ()), (none_check_first, (1.0, 2.0), ()),
])
def test_and_or_with_non_array_operands_as_conditions(fn, args, static):
    want = fn(*args)
    if static:
        got = autoflow.jit(fn, static_argnums=static)(*args)
    else:  # (a list cannot be a static argument: closed over instead)
        got = autoflow.jit(lambda x: fn(x, *args[1:]))(args[0])
    assert np.allclose(np.asarray(got), np.asarray(want))


def or_none_value(x):
    return x or None


def test_and_or_value_that_no_array_can_hold_is_autoflows_error():
    assert or_none_value(1.0) == 1.0
    with pytest.raises(ConversionError) as info:
        autoflow.jit(or_none_value)(1.0)
    text = str(info.value)
    assert "return x or None" in text and "`or`" in text and "None" in text
    assert "test_long_tail.py" in text
