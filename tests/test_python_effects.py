"""What a function prints, warns and logs, against Python's own run of it.

The oracle is the plain function run eagerly on the same values. Each program
runs three ways, over two calls (the second call of a jitted function runs
the compiled code without tracing): plain Python, ``autoflow.convert`` on
concrete values, and ``autoflow.jit``. Everything observable must match:
the results, stdout and stderr, the warnings (category, message, file,
line), the log records (logger, level, message, file, line, function).
"""

from __future__ import annotations

import io
import logging
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow.runtime import jax as jx
from autoflow.runtime.jax import selfcheck

log = logging.getLogger("autoflow.tests.effects")


# ---- programs ----------------------------------------------------------------------------------

def branch_prints(x):
    if x > 1:
        print("big", x)
    elif x > 0:
        print("small")
    else:
        print("negative", x, sep=" | ", end="!\n")
    return x * 2


def loop_prints(n):
    i = 0
    total = 0.0
    while i < n:
        i += 1
        total += i
        print("loop", i, total)
    return total


def for_prints(x, n):
    acc = x
    for k in range(n):
        if acc > 10:
            print(f"k={k}: big {acc:.2f}")
        acc = acc * 2 + k
    print("done", acc)
    return acc


def formats(x, k):
    print("step %d" % k, "val %.3f" % x, "pair %s/%s" % (k, x), f"{x:8.2f}|{k:03d}")
    print("x=" + str(x) + ", k=" + repr(k), "{} and {:.1f}".format(k, x))
    print("%5.1f%%" % (x * 10))
    return x + k


def warns(x, k):
    for i in range(k):
        if x > i:
            warnings.warn("x above %d" % i)
        if x < 0:
            warnings.warn(f"negative {x}", RuntimeWarning)
    return x


def logs(x):
    log.info("start %s", x)
    if x > 0:
        log.warning("positive %.2f", x)
    else:
        log.error(f"not positive: {x}")
    log.debug("never shown %s", x)
    return x


def to_stderr(x):
    if x > 0:
        print("warn:", x, file=sys.stderr)
        sys.stderr.write("raw %s\n" % x)
    return x


def helper(v):
    print("helper sees", v)
    warnings.warn("from the helper")
    return v + 1


def calls_helper(x):
    if x > 0:
        x = helper(x)
    return x


def counter_repr(n):
    count = 0
    while count < n:
        count += 1
    print(count, "%d" % count, f"{count:>4}|{count + 0.5:.1f}")
    return count


def no_effects(x):
    y = x
    while y < 100:
        y = y * 2
    return y


def top_level_print(x):
    print("called")
    return x + 1


def deferred_methods(x):
    print(f"{x:.2f}".rjust(10), ("%d" % x).zfill(5))
    return x


def containers_print(x, n):
    # a dict in its own key order (keys of mixed types too); a JAX integer array shown as
    # the array it is, a Python counter as the int it is
    d = {"z": x, "a": x * 2, 3: n}
    count = 0
    while count < n:
        count += 1
    if x > 0:
        print(d, (n, count), f"{d}")
        print([{"y": count, "b": x}])
    return x


def vector_print(v):
    if v.sum() > 0:
        print("v =", v)
    return v


def policy_iteration(v, beta):
    # QuantEcon's loop: `error` is a JAX scalar, formatted without a spec
    i = 0
    error = 1.0
    while error > 1e-4 and i < 500:
        v_new = 1.0 + beta * v
        error = jnp.max(jnp.abs(v_new - v))
        v = v_new
        i += 1
        if i % 25 == 0:
            print(f"Error at iteration {i} is {error}.")
    if error > 1e-4:
        print("Failed to converge!")
    else:
        print(f"\nConverged in {i} iterations.")
    return v


def sinkhorn(a, b, m, reg, iterations=40, tol=1e-9):
    # POT's Sinkhorn: a warning in the `for` loop's `else`
    k = jnp.exp(-m / reg)
    u = jnp.ones_like(a) / a.shape[0]
    v = jnp.ones_like(b) / b.shape[0]
    for ii in range(iterations):
        v = b / (k.T @ u)
        u = a / (k @ v)
        if ii % 10 == 0:
            err = jnp.linalg.norm(jnp.sum(u[:, None] * k * v[None, :], axis=0) - b)
            if err < tol:
                break
    else:
        warnings.warn("Sinkhorn did not converge. You might want to increase the number "
                      "of iterations `iterations` or the regularization parameter `reg`.")
    return u[:, None] * k * v[None, :]


_M = np.abs(np.arange(9.0, dtype=np.float32).reshape(3, 3) - 4.0)
_P = np.ones(3, np.float32) / 3


PROGRAMS = [
    (branch_prints, [(2.0,), (0.5,), (-1.0,)]),
    (loop_prints, [(3,), (1,), (0,)]),
    (for_prints, [(1.0, 6), (20.0, 3)]),
    (formats, [(1.5, 3), (-2.25, 12)]),
    (warns, [(2.5, 4), (-1.0, 2)]),
    (logs, [(1.0,), (-2.0,)]),
    (to_stderr, [(1.5,), (-1.0,)]),
    (calls_helper, [(1.0,), (-1.0,)]),
    (counter_repr, [(3,), (5,)]),
    (top_level_print, [(1.0,), (2.0,)]),
    (deferred_methods, [(3.0,), (41.0,)]),
    (containers_print, [(2.0, jnp.int32(3)), (-1.0, jnp.int32(1))]),
    (vector_print, [(np.array([1.0, 2.0], np.float32),), (np.array([-1.0, 0.5], np.float32),)]),
    (policy_iteration, [(jnp.zeros(3), 0.9), (jnp.zeros(3), 0.5)]),
    (sinkhorn, [(_P, _P, _M, 1.0), (_P, _P, _M, 0.05)]),
]


# ---- observing ---------------------------------------------------------------------------------

class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.seen = []

    def emit(self, record):
        self.seen.append((record.name, record.levelname, record.getMessage(),
                          record.filename, record.lineno, record.funcName))


def observe(fn, calls, capsys):
    """Run ``fn`` on each argument tuple of ``calls``; what it returned and did."""
    handler = _Records()
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    out = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            for args in calls:
                try:
                    out.append(np.asarray(fn(*args)).tolist())
                except Exception as e:  # noqa: BLE001 - compared with Python's
                    out.append((type(e).__name__, str(e).splitlines()[0]))
                jax.effects_barrier()
    finally:
        log.removeHandler(handler)
    text = capsys.readouterr()
    return dict(values=out, stdout=text.out, stderr=text.err,
                warnings=[(w.category.__name__, str(w.message), w.filename, w.lineno)
                          for w in caught if not str(w.message).startswith("autoflow:")],
                logs=handler.seen)


@pytest.mark.parametrize("fn, calls", PROGRAMS, ids=[p[0].__name__ for p in PROGRAMS])
def test_effects_match_python(fn, calls, capsys):
    capsys.readouterr()
    # Each way runs from a fresh warnings registry, so "once per line" restarts.
    sys.modules[__name__].__dict__.pop("__warningregistry__", None)
    eager = observe(fn, calls, capsys)
    sys.modules[__name__].__dict__.pop("__warningregistry__", None)
    concrete = observe(autoflow.convert(fn), calls, capsys)
    sys.modules[__name__].__dict__.pop("__warningregistry__", None)
    jitted = observe(autoflow.jit(fn), calls, capsys)
    assert concrete == eager
    for key in eager:
        assert jitted[key] == eager[key], key


@pytest.mark.parametrize("fn, calls", PROGRAMS[:4], ids=[p[0].__name__ for p in PROGRAMS[:4]])
def test_effects_repeat_at_every_call(fn, calls, capsys):
    """The second round of calls runs compiled code only, and does it all again."""
    capsys.readouterr()
    f = autoflow.jit(fn)
    first = observe(f, calls, capsys)
    second = observe(f, calls, capsys)
    assert first == second
    assert first["stdout"]


def _host_calls(fn, *args):
    """The host callbacks in ``fn``'s compiled program, and whether it has a conditional."""
    text = jax.jit(fn).lower(*args).as_text()
    calls = [ln for ln in text.splitlines() if "custom_call" in ln and "callback" in ln]
    return len(calls), "stablehlo.case" in text


def test_code_without_effects_stages_no_callback():
    assert _host_calls(autoflow.convert(no_effects), 1.0) == (0, False)
    assert _host_calls(autoflow.convert(top_level_print), 1.0)[0] == 1


def test_peeled_iteration_prints_once(capsys):
    # The first iteration runs as Python before the loop is staged (the carry
    # `total` becomes traced in it); its print must not come back in the loop.
    def f(x):
        total = 0
        for k in range(4):
            print("iteration", k)
            total = total + x * k
        return total

    capsys.readouterr()
    g = autoflow.jit(f)
    for _ in range(2):
        g(1.0)
        jax.effects_barrier()
    out = capsys.readouterr().out
    f(1.0), f(1.0)
    assert out == capsys.readouterr().out
    assert out.count("iteration 0") == 2


def test_vmap_prints_where_each_element_goes(capsys):
    """Under vmap each element prints on its own path (the order is per
    statement, element after element, as JAX batches a callback)."""
    xs = jnp.array([2.0, 0.5, -1.0, 3.0])
    capsys.readouterr()
    jax.block_until_ready(jax.jit(jax.vmap(autoflow.convert(branch_prints)))(xs))
    jax.effects_barrier()
    staged = capsys.readouterr().out
    for x in xs:
        branch_prints(x)
    eager = capsys.readouterr().out
    assert sorted(staged.splitlines()) == sorted(eager.splitlines())


def test_grad_without_jit_prints_as_python(capsys):
    def f(x):
        if x > 0:
            print("positive")
        return x * x

    capsys.readouterr()
    g = jax.grad(autoflow.convert(f))(3.0)
    jax.effects_barrier()
    assert g == 6.0
    assert capsys.readouterr().out == "positive\n"


def test_warnings_as_errors_raise_the_users_warning():
    def f(x):
        if x > 0:
            warnings.warn("careful", RuntimeWarning)
        return x

    g = autoflow.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning, match="careful"):
            f(1.0)
        with pytest.raises(RuntimeWarning, match="careful"):
            jax.block_until_ready(g(1.0))
            jax.effects_barrier()
        assert g(-1.0) == -1.0


def test_print_to_a_stream_argument():
    def f(x, stream):
        if x > 0:
            print("x is", x, file=stream)
        return x

    eager, staged = io.StringIO(), io.StringIO()
    for x in (1.0, -1.0, 2.0):
        f(x, eager)
        autoflow.jit(f, static_argnums=1)(x, staged)
        jax.effects_barrier()
    assert staged.getvalue() == eager.getvalue()


def test_trace_print_prints_while_tracing(capsys):
    def f(x):
        autoflow.trace_print("tracing with", x.shape)
        return x + 1

    capsys.readouterr()
    g = autoflow.jit(f)
    g(jnp.ones(3))
    g(jnp.ones(3))
    jax.effects_barrier()
    assert capsys.readouterr().out == "tracing with (3,)\n"


def halving_prints(x):
    err = 1.0
    k = 0
    while err > 1e-3:  # concrete at first: the first iteration runs as Python
        k += 1
        print("loop", k)
        err = err * 0.5 + 0.0 * x  # traced from the first iteration on
    return k


def test_while_first_iteration_as_python_prints_once(capsys):
    capsys.readouterr()
    g = autoflow.jit(halving_prints)
    assert int(g(1.0)) == halving_prints(1.0)
    jax.effects_barrier()
    out = capsys.readouterr().out.splitlines()
    assert out == [f"loop {k}" for k in range(1, 11)] * 2  # (the eager run printed too)
    g(1.0)
    jax.effects_barrier()
    assert capsys.readouterr().out.splitlines() == [f"loop {k}" for k in range(1, 11)]


@pytest.mark.skipif(not (jx.primitives() and selfcheck.effects_ok()),
                    reason="this JAX cannot differentiate a data-dependent loop that prints in "
                    "reverse mode (autoflow's primitives need hijax and effects inside them)")
def test_grad_under_jit_prints_each_iteration_once(capsys):
    def f(x, n):
        i = 0
        while i < n:
            print("i =", i)
            x = x * 1.5
            i += 1
        return x

    capsys.readouterr()
    g = jax.jit(jax.grad(autoflow.convert(f)))(1.0, 3)
    jax.effects_barrier()
    assert abs(float(g) - 1.5 ** 3) < 1e-5
    assert capsys.readouterr().out.splitlines() == ["i = 0", "i = 1", "i = 2"]


# ---- a variable only a loop binds -------------------------------------------------------------

def zero_trip_while(x, n):
    i = 0
    while i < n:
        y = x * i
        i += 1
    return y + 1


def zero_trip_for(x, n):
    for i in range(n):
        last = x * i
    return last, i


def zero_trip_branch(x, n):
    for i in range(n):
        last = x * i
    if x > 0:
        return last
    return -x


@pytest.mark.parametrize("fn", [zero_trip_while, zero_trip_for, zero_trip_branch])
def test_zero_trip_loop_raises_pythons_unboundlocalerror(fn):
    g = autoflow.jit(fn)
    for n in (3, 0, 2, 0):  # the same compiled code: the check is at run time
        try:
            want = fn(2.0, n)
        except UnboundLocalError as e:
            with pytest.raises(UnboundLocalError) as info:
                jax.block_until_ready(g(2.0, n))
                jax.effects_barrier()
            assert str(info.value) == str(e)
        else:
            got = g(2.0, n)
            assert np.allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float))


def test_zero_trip_check_is_not_called_when_the_loop_runs():
    # The check sits in a `cond` of its own: a loop that runs never calls the host.
    assert _host_calls(autoflow.convert(zero_trip_while), 2.0, 3) == (1, True)
    assert _host_calls(autoflow.convert(no_effects), 2.0) == (0, False)


def until_positive(key, c):
    while True:
        key, sub = jax.random.split(key)
        x = jax.random.normal(sub)
        v = 1 + x * c
        if v > 0:
            break
    return v


def test_a_loop_whose_first_test_python_ran_stages_no_zero_trip_check():
    # `while True:` runs its first test as Python: the loop runs at least once, so
    # what it binds is bound after it, and no check (a host callback, which costs
    # about 0.2 ms a call on a CPU) is staged.
    key = jax.random.key(3)
    jaxpr = str(jax.make_jaxpr(autoflow.convert(until_positive))(key, 2.0))
    assert "callback" not in jaxpr
    assert np.allclose(autoflow.jit(until_positive)(key, 2.0), until_positive(key, 2.0))
    batched = jax.vmap(autoflow.convert(until_positive))(jax.random.split(key, 5), jnp.ones(5))
    assert np.allclose(batched, [until_positive(k, 1.0) for k in jax.random.split(key, 5)])


def test_logging_location_and_levels_at_run_time():
    handler = _Records()
    log.addHandler(handler)
    try:
        g = autoflow.jit(logs)
        log.setLevel(logging.INFO)
        g(1.0)
        jax.effects_barrier()
        log.setLevel(logging.ERROR)  # checked when the compiled code runs, as in Python
        g(1.0)
        g(-1.0)
        jax.effects_barrier()
    finally:
        log.removeHandler(handler)
        log.setLevel(logging.NOTSET)
    assert [r[1:3] for r in handler.seen] == [("INFO", "start 1.0"), ("WARNING", "positive 1.00"),
                                               ("ERROR", "not positive: -1.0")]
    assert {r[3:] for r in handler.seen} >= {("test_python_effects.py", logs.__code__.co_firstlineno + 1,
                                             "logs")}


# Files and in-memory streams a function makes itself, written in a traced `if`: the
# write can happen only when the compiled code runs, after the function returned (its
# `with` closed the file: JAX's runtime error "I/O operation on closed file"; a
# `StringIO` was read back without it, or written on both paths while tracing).


def _writes_file_in_branch(path):
    def f(x):
        with open(path, "w") as fh:
            if x > 0:
                fh.write("positive\n")
                x = x * 2
        return x
    return f


def writes_buffer_in_branch(x):
    s = io.StringIO()
    if x > 0:
        s.write("pos")
    return x + len(s.getvalue())


def writes_buffer_straight(x):
    s = io.StringIO()
    s.write("abc")
    return x + len(s.getvalue())


def test_a_stream_of_the_function_written_in_a_traced_if_is_refused(tmp_path):
    for fn, name in ((_writes_file_in_branch(tmp_path / "log.txt"), "fh"),
                     (writes_buffer_in_branch, "s")):
        with pytest.raises(autoflow.ConversionError) as info:
            autoflow.jit(fn)(jnp.float32(1.0))
        first = str(info.value).splitlines()[0]
        assert f"`{name}.write`" in first and "test_python_effects.py" in first, first
        assert "Return the values" in str(info.value)
    # written where the function's other Python code runs: as before
    assert float(autoflow.jit(writes_buffer_straight)(jnp.float32(1.0))) == 4.0
    assert float(autoflow.convert(writes_buffer_in_branch)(1.0)) == 4.0
