"""Long ``if``/``elif`` chains are cut into short chains run under a flag
(``transforms/chains.py``): converted == eager Python. Here the cut is made every 2
branches (``CHUNK = 2``), so that small programs exercise it: which tests run and in
what order, returns, walrus, break/continue, unbound names, traced chains."""

from __future__ import annotations

import pytest

import autoflow
from autoflow import _conversion as af_conversion
from autoflow.transforms import chains
import jax.numpy as jnp

from .oracle import F, I, check


@pytest.fixture(autouse=True)
def short_chunks(monkeypatch):
    monkeypatch.setattr(chains, "CHUNK", 2)
    af_conversion._by_code.clear()
    yield
    af_conversion._by_code.clear()


def classify(x):
    if x < -2.0:
        y = x * 2.0
    elif x < -1.0:
        y = x + 10.0
    elif x < 0.0:
        y = x - 3.0
    elif x < 1.0:
        y = x * x
    elif x < 2.0:
        y = 7.0 * x
    else:
        y = -x
    return y + 1.0


def test_chain_is_cut():
    src = autoflow.to_source(classify)
    # 6 branches in chunks of 2: three chunks, the last two under `if chain:`
    assert src.count("chain = True") == 2 and src.count("chain = False") == 3


@pytest.mark.parametrize("x", [-3.0, -1.5, -0.5, 0.5, 1.5, 2.5, -2.0, 1.0])
def test_chain_values(x):
    check(classify, F(x), vmap=[(F(-x),), (F(x + 1.0),)])


def order_of_tests(x, log):
    def t(i, c):
        log.append(i)
        return c
    if t(0, x < 0):
        y = 0
    elif t(1, x < 1):
        y = 1
    elif t(2, x < 2):
        y = 2
    elif t(3, x < 3):
        y = 3
    elif t(4, x < 4):
        y = 4
    else:
        y = 5
    return y, log


@pytest.mark.parametrize("x", [-1, 0, 1, 2, 3, 4, 9])
def test_tests_evaluated_as_python_does(x):
    check(order_of_tests, x, [], traced=False)


def chain_returns(x):
    y = x
    if x < 0.0:
        return -1.0
    elif x < 1.0:
        y = y + 1.0
    elif x < 2.0:
        return y * 3.0
    elif x < 3.0:
        y = y * 2.0
    elif x < 4.0:
        return 4.0
    else:
        y = y - 1.0
    return y + 0.5


@pytest.mark.parametrize("x", [-1.0, 0.5, 1.5, 2.5, 3.5, 4.5])
def test_chain_with_returns(x):
    check(chain_returns, F(x), vmap=[(F(0.5),), (F(3.5),)])


def chain_walrus(x):
    if (a := x * 2.0) < 0.0:
        y = a
    elif (b := a + 1.0) < 2.0:
        y = b
    elif (c := b * 3.0) < 12.0:
        y = c
    else:
        y = a + b + c
    return y


@pytest.mark.parametrize("x", [-1.0, 0.2, 1.0, 5.0])
def test_chain_with_walrus(x):
    # A name a test binds with a walrus and a later chunk reads is an output of the
    # earlier chunk bound on one path only: traced, autoflow may refuse (naming it).
    check(chain_walrus, F(x), may_refuse=["b"])


def chain_in_loop(n):
    total = 0
    for i in range(n):
        if i == 1:
            continue
        elif i == 2:
            total += 10
        elif i == 3:
            total += 100
        elif i == 5:
            break
        else:
            total += 1
    return total


@pytest.mark.parametrize("n", [0, 2, 4, 8])
def test_chain_in_loop(n):
    check(chain_in_loop, I(n))


def chain_unbound(x):
    if x < 0:
        y = 1
    elif x < 1:
        pass
    elif x < 2:
        y = 2
    else:
        y = 3
    return y


@pytest.mark.parametrize("x", [-1, 1, 3])
def test_chain_bound_on_taken_paths(x):
    check(chain_unbound, x, traced=False)


def test_chain_unbound_on_the_path_taken():
    check(chain_unbound, 0, traced=False, expect_raise=UnboundLocalError)


# Each chunk of a long chain is one flat `af.if_chain` (its tests thunks, its branches
# functions side by side), not nested `if_stmt`s: the same values, state and errors.

def test_chunks_are_flat():
    src = autoflow.to_source(classify)
    # five tests in chunks of 2: two flat chunks and a last one of one `if`
    assert src.count("af.if_chain(") == 2 and src.count("af.if_stmt(x < 2.0") == 1
    # at most one level of generated functions inside the chain's own
    assert "            def " not in src


class Box:
    pass


def chain_state(x, box, table):
    if x < -1.0:
        box.v = x * 2.0
        table["k"] = x
    elif x < 0.0:
        box.v = x + 1.0
    elif x < 1.0:
        table["k"] = x * 3.0
    elif x < 2.0:
        box.w = x
    else:
        box.v = -x
    return box.v, table["k"], box.w


def _box():
    b = Box()
    b.v, b.w = 0.5, 0.25
    return b


@pytest.mark.parametrize("x", [-2.0, -0.5, 0.5, 1.5, 2.5])
def test_chain_changes_attributes_and_containers(x):
    check(chain_state, F(x), _box(), {"k": 7.0})


def chain_tests_log(x, log):
    def t(i, c):
        log.append(i)
        return c
    if t(0, x < 0.0):
        y = 0.0
    elif t(1, x < 1.0):
        y = 1.0
    elif t(2, x < 2.0):
        y = 2.0
    else:
        y = 3.0
    return y, len(log)


@pytest.mark.parametrize("x", [-1.0, 0.5, 1.5, 2.5])
def test_tests_with_effects_traced(x):
    # a later test runs only where the earlier ones were false: traced, its effect
    # is the staged one (or autoflow refuses, naming the list)
    check(chain_tests_log, F(x), [], may_refuse=["log"])


def chain_array_test(x, v):
    if x < 0.0:
        y = 1.0
    elif v > 0.0:
        y = 2.0
    elif x < 5.0:
        y = 3.0
    else:
        y = 4.0
    return y


def test_traced_array_test_names_its_own_line():
    # Python raises too (an array has no truth value); autoflow says where, at the
    # line of that test, not at the chunk's first `if`
    with pytest.raises(autoflow.ConversionError) as info:
        autoflow.jit(chain_array_test)(F(1.0), jnp.ones(3))
    line = chain_array_test.__code__.co_firstlineno + 3
    assert f":{line}:10:" in str(info.value) and "elif v > 0.0" in str(info.value), str(info.value)


def chain_closure(x):
    scale = 1.0
    read = lambda: scale  # noqa: E731 - a cell the branches rebind
    if x < 0.0:
        scale = 2.0
    elif x < 1.0:
        scale = 3.0
    elif x < 2.0:
        pass
    else:
        scale = 5.0
    return read() * x


@pytest.mark.parametrize("x", [-1.0, 0.5, 1.5, 2.5])
def test_chain_rebinds_a_cell(x):
    check(chain_closure, F(x))


def test_check_and_explain_report_every_test_of_a_flat_chunk():
    import inspect
    import textwrap

    from autoflow import check as af_check

    src = textwrap.dedent(inspect.getsource(classify))
    found = [f for f in af_check.check_source(src, "classify.py") if f.kind == "if"]
    # one finding per `if`/`elif` the user wrote, each converted, at its own line
    assert [f.line for f in found] == [2, 4, 6, 8, 10]
    assert all(f.status == af_check.CONVERTS and "y" in f.carries for f in found)
    text = str(autoflow.explain(classify, "f32"))
    first = classify.__code__.co_firstlineno
    for k in range(5):
        assert f":{first + 1 + 2 * k}:" in text.split("jaxpr")[0], text


def chain_first_walrus(x):
    if (a := x * 2.0) < 0.0:  # a chunk's first test binds `a`: the chunk stays nested
        y = a
    elif x < 1.0:
        y = a + 1.0
    elif x < 2.0:
        y = a * 3.0
    elif x < 3.0:
        y = -a
    else:
        y = a - 1.0
    return y + a


@pytest.mark.parametrize("x", [-1.0, 0.5, 1.5, 2.5, 5.0])
def test_a_walrus_in_a_chunks_first_test(x):
    check(chain_first_walrus, F(x))
