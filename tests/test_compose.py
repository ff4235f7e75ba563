"""Every construct under every composition: each lane of ``vmap``, ``jit`` and ``grad`` is
the eager Python run of that lane; a traced ``raise`` stops what follows; nothing hangs;
the self-check judges JAX, not programs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow

# -- the programs -----------------------------------------------------------------


def elif_while(n):
    a = 0
    total = 0
    while a < n:
        if a % 3 == 0:
            total += a
        elif a % 5 == 0:
            total += 2 * a
        a += 1
    return total


def elif_for(n):
    total = 0
    for a in range(n):
        if a % 3 == 0:
            total += a
        elif a % 5 == 0:
            total += 2 * a
    return total


def elif_else_chain(n):
    total = 0
    for a in range(n):
        if a % 3 == 0:
            total += a
        elif a % 5 == 0:
            total += 2 * a
        elif a % 7 == 0:
            total -= 1
        else:
            total += 1
    return total


def nested_if_in_loop(n):
    a = 0
    total = 0
    while a < n:
        if a % 3 == 0:
            total += a
        else:
            if a % 5 == 0:
                total += 2 * a
        a += 1
    return total


def float_elif(x, n):
    y = x
    for i in range(n):
        if y > 2.0:
            y = y * 0.5
        elif y < -1.0:
            y = -y * 0.25
        y = y + jnp.sin(y) * 0.1
    return y


def float_elif_while(x, n):
    y = x
    i = 0
    while i < n:
        if y > 1.0:
            y = jnp.sqrt(y)
        elif y < 0.0:
            y = y * y
        i += 1
    return y


def one_path_in_loop(x, n):
    total = 0.0
    for i in range(n):
        if i == 0:
            p = x
        else:
            p = p * 0.5
        total = total + p
    return total


def loop_with_break_return(x, n):
    y = x
    for i in range(n):
        if y > 10.0:
            return y
        if y < -10.0:
            break
        y = y * 1.5 + 0.25
    return y - 1.0


INT_PROGRAMS = [elif_while, elif_for, elif_else_chain, nested_if_in_loop]
FLOAT_PROGRAMS = [float_elif, float_elif_while, one_path_in_loop, loop_with_break_return]
NS = jnp.array([4, 10, 16, 0], jnp.int32)
XS = jnp.array([3.5, -2.0, 0.75, 5.0], jnp.float32)


def _lanes(fn, *columns):
    return np.stack([np.asarray(fn(*(c[i] for c in columns))) for i in range(len(columns[0]))])


COMPOSE_INT = {
    "vmap": lambda f: jax.vmap(f),
    "jit_vmap": lambda f: jax.jit(jax.vmap(f)),
    "vmap_jit": lambda f: jax.vmap(jax.jit(f)),
}


@pytest.mark.parametrize("how", list(COMPOSE_INT))
@pytest.mark.parametrize("fn", INT_PROGRAMS, ids=lambda f: f.__name__)
def test_int_programs_lane_by_lane(fn, how):
    got = COMPOSE_INT[how](autoflow.convert(fn))(NS)
    want = [fn(int(n)) for n in NS]
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("fn", INT_PROGRAMS, ids=lambda f: f.__name__)
def test_int_programs_under_nested_vmap(fn):
    got = jax.vmap(jax.vmap(autoflow.convert(fn)))(NS.reshape(2, 2))
    np.testing.assert_array_equal(np.asarray(got).ravel(), [fn(int(n)) for n in NS])


@pytest.mark.parametrize("fn", FLOAT_PROGRAMS, ids=lambda f: f.__name__)
def test_float_programs_values_and_in_axes(fn):
    cf = autoflow.convert(fn)
    ns = jnp.array([3, 1, 4, 0], jnp.int32)
    want = _lanes(fn, XS, ns)
    np.testing.assert_allclose(jax.vmap(cf)(XS, ns), want, rtol=1e-5)
    np.testing.assert_allclose(jax.jit(jax.vmap(cf))(XS, ns), want, rtol=1e-5)
    np.testing.assert_allclose(jax.vmap(jax.jit(cf))(XS, ns), want, rtol=1e-5)
    # in_axes mixing batched and unbatched arguments (a Python int unbatched)
    np.testing.assert_allclose(jax.vmap(cf, in_axes=(0, None))(XS, 3),
                               _lanes(fn, XS, [3] * 4), rtol=1e-5)
    np.testing.assert_allclose(jax.jit(jax.vmap(cf, in_axes=(None, 0)))(jnp.float32(0.75), ns),
                               _lanes(fn, [0.75] * 4, ns), rtol=1e-5)


@pytest.mark.parametrize("fn", FLOAT_PROGRAMS, ids=lambda f: f.__name__)
def test_float_programs_gradients(fn):
    cf = autoflow.convert(fn)
    ns = jnp.array([3, 1, 4, 2], jnp.int32)
    want = np.array([jax.grad(fn)(XS[i], int(ns[i])) for i in range(4)])  # eager Python
    np.testing.assert_allclose([jax.jit(jax.grad(cf))(XS[i], ns[i]) for i in range(4)], want,
                               rtol=1e-5)
    np.testing.assert_allclose(jax.vmap(jax.grad(cf))(XS, ns), want, rtol=1e-5)
    np.testing.assert_allclose(jax.grad(lambda x: jnp.sum(jax.vmap(cf)(x, ns)))(XS), want,
                               rtol=1e-5)
    _, pull = jax.vjp(lambda x: jax.vmap(cf)(x, ns), XS)
    np.testing.assert_allclose(pull(jnp.ones(4))[0], want, rtol=1e-5)
    tangents = jax.jit(jax.vmap(lambda x, n: jax.jvp(lambda x: cf(x, n), (x,), (1.0,))[1]))(
        XS, ns)
    np.testing.assert_allclose(tangents, want, rtol=1e-5)


# -- a traced raise stops what follows -------------------------------------------------


def count_bits(number):
    if number < 0:
        raise ValueError(f"number must be non-negative, got {number}")
    count = 0
    while number:
        count += number & 1
        number >>= 1
    return count


def power(n, p):
    if n == 0:
        return 0
    if p < 0:
        raise ValueError("negative power")
    r = 1
    while p > 0:
        r = r * n
        p -= 1
    return r


def guard_in_branch(x, n):
    if x > 0:
        if n < 0:
            raise ValueError("n must be non-negative when x > 0")
        y = 1
    else:
        y = 2
    i = 0
    while n != 0:
        n -= 1
        i += 1
    return i + y


def guard_in_loop(x):
    steps = 0
    while x != 1:
        if x < 0:
            raise ValueError(f"negative x={x}")
        x = x // 2
        steps += 1
    return steps


def failed_assert_before_loop(n):
    assert n >= 0, "n must be non-negative"
    k = 0
    while n != 0:
        n = n - 1
        k += 1
    return k


def _subprocess(code, timeout=240):
    """Run ``code`` in a fresh process (a program that would hang is killed)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=root, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"did not finish within {timeout} s (a converted program hangs)")
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_raise_guards_stop_what_follows_in_a_fresh_process():
    # (in a fresh process, killed if a loop after a raise spins)
    out = _subprocess("""
        import jax, jax.numpy as jnp, autoflow
        from tests.test_compose import (count_bits, power, guard_in_branch, guard_in_loop,
                                        failed_assert_before_loop)

        def outcome(fn, *args):
            try:
                return repr(int(fn(*args)))
            except (ValueError, AssertionError) as e:
                return f"{type(e).__name__}: {e}"

        cases = [(count_bits, (13,)), (count_bits, (-1,)), (count_bits, (-6,)),
                 (power, (0, -1)), (power, (2, -1)), (power, (3, 4)),
                 (guard_in_branch, (1.0, 3)), (guard_in_branch, (1.0, -1)),
                 (guard_in_branch, (-1.0, 2)), (guard_in_loop, (8,)), (guard_in_loop, (-3,)),
                 (failed_assert_before_loop, (3,)), (failed_assert_before_loop, (-2,))]
        for fn, args in cases:
            eager = outcome(fn, *args)
            jitted = outcome(autoflow.jit(fn), *[jnp.asarray(a) for a in args])
            assert eager == jitted, (fn.__name__, args, eager, jitted)
        # per lane under vmap: a lane that returned early, or did not raise, returns
        got = jax.vmap(autoflow.convert(power))(jnp.array([0, 2, 3]), jnp.array([-1, 3, 2]))
        assert got.tolist() == [power(0, -1), power(2, 3), power(3, 2)], got
        got = jax.jit(jax.vmap(autoflow.convert(guard_in_loop)))(jnp.array([8, 16, 1]))
        assert got.tolist() == [3, 4, 0], got
        # a lane that raises: the call raises the user's error
        try:
            jax.vmap(autoflow.convert(count_bits))(jnp.array([5, -1, 0]))
        except ValueError as e:
            assert "got -1" in str(e), e
        else:
            raise AssertionError("vmap of a raising lane returned")
        print("ok")
    """)
    assert out.strip().endswith("ok")


def test_a_raise_in_a_scan_stops_its_effects(capfd):
    def f(xs):
        t = 0
        for i in range(3):
            if xs[i] < 0:
                raise ValueError(f"negative at {i}")
            print("i", i)
            t += xs[i]
        return t

    capfd.readouterr()
    with pytest.raises(ValueError, match="negative at 1"):
        jax.block_until_ready(autoflow.jit(f)(jnp.array([1, -2, 3])))
        jax.effects_barrier()
    jax.effects_barrier()
    printed = capfd.readouterr().out
    with pytest.raises(ValueError):
        f([1, -2, 3])
    assert printed == capfd.readouterr().out == "i 0\n"


def test_effects_happen_once_per_lane_and_checks_call_the_host_once(capfd):
    calls = []

    def f(x, n):
        for i in range(n):
            print("step", i)  # no batched operand: still one line per lane, as Python
        assert x < 10.0, f"too big: {x}"
        return x

    cf = autoflow.convert(f)
    capfd.readouterr()
    jax.vmap(cf, in_axes=(0, None))(jnp.array([0.5, 2.5, 3.5]), 2)
    jax.effects_barrier()
    out = capfd.readouterr().out.splitlines()
    for x in (0.5, 2.5, 3.5):
        f(x, 2)
    assert sorted(out) == sorted(capfd.readouterr().out.splitlines())
    # a failing check under vmap: the user's exception, for the first failing lane, from
    # one call of the host
    from autoflow.runtime.effects import statements as effects
    original = effects._assertion_failed

    def counting(*args):
        calls.append(args)
        return original(*args)

    effects._assertion_failed = counting
    try:
        with pytest.raises(AssertionError, match="too big: 12.5"):
            jax.vmap(cf, in_axes=(0, None))(jnp.array([0.5, 12.5, 11.0]), 1)
        with pytest.raises(Exception, match="too big: 12.5"):
            jax.jit(jax.vmap(autoflow.convert(f), in_axes=(0, None)), static_argnums=1)(
                jnp.array([0.5, 12.5, 11.0]), 1)
            jax.effects_barrier()
    finally:
        effects._assertion_failed = original
    assert len(calls) == 2  # one per call, not one per failing lane


def test_a_print_in_a_branch_holding_a_loop_under_vmap_ends():
    # The branch prints, so it is a cond; a lane that finished the outer loop must not run
    # the loop in it (`j != n - i - 1` never holds for it): every composition ends.
    out = _subprocess("""
        import contextlib, io, jax, jax.numpy as jnp, autoflow

        def f(n):
            i = 0
            total = 0
            while i < n:
                if i % 3 == 0:
                    total += i
                else:
                    if i % 2 == 0:
                        j = 0
                        while j != n - i - 1:
                            j += 1
                        total += j
                        print("j", j)
                i += 1
            return total

        ns = jnp.array([4, 10, 16, 7])
        want = [f(int(n)) for n in ns]
        for how in (jax.vmap, lambda g: jax.jit(jax.vmap(g)), lambda g: jax.vmap(jax.jit(g))):
            with contextlib.redirect_stdout(io.StringIO()):
                got = how(autoflow.convert(f))(ns)
                jax.effects_barrier()
            assert got.tolist() == want, (got, want)
        with contextlib.redirect_stdout(io.StringIO()):
            got = jax.vmap(jax.vmap(autoflow.convert(f)))(ns.reshape(2, 2))
            jax.effects_barrier()
        assert got.ravel().tolist() == want
        print("ok")
    """)
    assert out.strip().endswith("ok")


def test_a_jitted_helper_in_a_batched_branch_runs_only_for_its_lanes():
    # `collatz_steps(0)` never ends: the lane with n == 0 must not run it.
    out = _subprocess("""
        import jax, jax.numpy as jnp, autoflow

        @autoflow.jit
        def collatz_steps(n):
            steps = 0
            while n != 1:
                n = n // 2 if n % 2 == 0 else 3 * n + 1
                steps += 1
            return steps

        def f(n):
            if n > 0:
                s = collatz_steps(n)
            else:
                s = -1
            return s

        def g(ns):
            total = 0
            for n in ns:
                if n > 0:
                    total += collatz_steps(n)
            return total

        want = [5, -1, 111]
        for how in (jax.vmap, lambda h: jax.jit(jax.vmap(h)), lambda h: jax.vmap(jax.jit(h))):
            assert how(autoflow.convert(f))(jnp.array([5, 0, 27])).tolist() == want
        got = jax.jit(jax.vmap(autoflow.convert(g)))(jnp.array([[5, 0], [0, 27]]))
        assert got.tolist() == [5, 111], got
        print("ok")
    """)
    assert out.strip().endswith("ok")


# -- the self-check judges JAX, not programs --------------------------------------------


def test_a_program_that_fails_to_lower_is_autoflows_error_not_a_jax_version_warning():
    out = _subprocess("""
        import warnings, jax, jax.numpy as jnp, autoflow
        from autoflow.runtime import jax as jx
        from autoflow.runtime.cond import primitive as cond_primitive

        original = cond_primitive._Cond.low_form

        def broken(self, platforms=()):  # a program autoflow lowers wrongly
            form = original(self, platforms)
            marked = any(getattr(v, "val", None) == 12345.0
                         for e in self.t.jaxpr.eqns for v in e.invars)
            return ("select", None, None, 0, frozenset()) if form and marked else form

        cond_primitive._Cond.low_form = broken

        def bad(x):
            if x > 0:
                x = x * 12345.0
            return x

        def good(x):
            if x > 0:
                x = x * 2.0
            return x

        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                autoflow.jit(bad)(1.0)
            except autoflow.InternalError as e:
                text = str(e)
            else:
                raise AssertionError("no error")
            assert "test_compose" in text or "<string>" in text or ":" in text, text
            assert "bug in autoflow" in text, text
            assert float(autoflow.jit(good)(1.5)) == 3.0
        assert not [w for w in seen if "lacks private APIs" in str(w.message)], seen
        assert jx.DIRECT and "direct lowering" not in jx.lost, jx.lost
        print("ok")
    """)
    assert out.strip().endswith("ok")


def test_where_the_probe_fails_too_the_path_goes_with_one_warning():
    # JAX's private lowering API changed (every direct lowering fails, the probe's too):
    # then, and only then, direct lowering is turned off, with the version warning, and
    # the program compiles through the public path.
    out = _subprocess("""
        import warnings, jax, jax.numpy as jnp, autoflow
        from autoflow.runtime import jax as jx

        def changed(ctx, args, form):
            raise TypeError("a private lowering API changed")

        jx.hijax._direct = changed

        def good(x):
            if x > 0:
                x = x * 2.0
            return x

        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            assert float(autoflow.jit(good)(1.5)) == 3.0
        assert [w for w in seen if "lacks private APIs" in str(w.message)], seen
        assert not jx.DIRECT and "direct lowering" in jx.lost
        print("ok")
    """)
    assert out.strip().endswith("ok")


def test_internal_error_is_an_autoflow_error():
    assert issubclass(autoflow.InternalError, autoflow.AutoflowError)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(autoflow.jit(elif_while)(jnp.int32(10))) == elif_while(10)


def guarded_square(x, c):
    if c > 5:
        raise ValueError(f"bad value: {c}")
    if x > 0:
        print("positive", c)
    return x * x


def test_vmap_of_grad_runs_effects_and_checks_only_on_their_lanes_paths(capfd):
    # (the effect in a `cond` that JAX's own rule batches: the host checks the gate)
    xs, cs = jnp.array([1.5, -2.0, 3.0]), jnp.array([1, 2, 3])
    capfd.readouterr()
    got = jax.vmap(jax.grad(autoflow.convert(guarded_square)))(xs, cs)
    jax.effects_barrier()
    printed = sorted(capfd.readouterr().out.splitlines())
    want = [jax.grad(guarded_square)(xs[i], cs[i]) for i in range(3)]
    assert sorted(capfd.readouterr().out.splitlines()) == printed == ["positive 1", "positive 3"]
    np.testing.assert_allclose(got, want)
    with pytest.raises(ValueError, match="bad value: 7"):
        jax.vmap(jax.grad(autoflow.convert(guarded_square)))(xs, jnp.array([1, 7, 3]))


def prints_an_invariant_in_a_static_loop(x, xs):
    total = 0.0
    for row in -xs:
        print("at", xs[1])  # depends on no carry: JAX's scan hoists it under grad
        total = total + jnp.tanh(x) * row
    return total + x


@pytest.mark.parametrize("how", ["grad", "grad_jit", "grad_vmap", "jit_grad"])
def test_a_print_in_a_static_loop_runs_each_iteration_under_grad(capfd, how):
    # JAX's scan runs an effect that depends on no carry once under jax.grad (also
    # outside a jit, where autoflow cannot see the grad): every iteration prints, as in
    # Python, and the gradient is eager's.
    cf = autoflow.convert(prints_an_invariant_in_a_static_loop)
    xs = jnp.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    x = jnp.array([0.5, 1.5])
    if how == "grad_vmap":
        got = jax.grad(lambda x: jax.vmap(cf)(x, xs).sum())(x)
    else:
        g = {"grad": jax.grad(cf), "grad_jit": jax.grad(jax.jit(cf)),
             "jit_grad": jax.jit(jax.grad(cf))}[how]
        got = jnp.stack([g(x[k], xs[k]) for k in range(2)])
    jax.effects_barrier()
    out = capfd.readouterr().out.splitlines()
    want = [jax.grad(prints_an_invariant_in_a_static_loop)(x[k], xs[k]) for k in range(2)]
    assert sorted(out) == sorted(capfd.readouterr().out.splitlines())
    assert len(out) == 6
    assert np.allclose(got, jnp.stack(want), rtol=1e-6)


def appends_and_prints_in_a_static_loop(x, c):
    ys = []
    for i in range(3):
        ys.append(x * i)  # a stacked output: the loop stays a scan
        print("at", 0)  # depends on nothing the loop carries
        if c > 0:
            print("positive", c)
        m = c
        while m > 0:
            print("m", m)
            m = m // 2
    return jnp.stack(ys).sum() * x


@pytest.mark.parametrize("how", ["grad", "jit_grad", "vmap_grad", "grad_vmap"])
def test_prints_in_a_scan_with_stacked_outputs_run_each_iteration_under_grad(capfd, how):
    # A loop that appends once per iteration is a scan (the appends are its stacked
    # outputs), which JAX partially evaluates under grad: an effect reading no carry
    # (here a print of constants, in the body, in an `if` on an argument and in a loop
    # inside) would run once. Each effect reads the scan's counter (later.each_iteration).
    cf = autoflow.convert(appends_and_prints_in_a_static_loop)
    x, c = jnp.array([0.5, 1.5]), jnp.array([3, 0])
    if how == "vmap_grad":
        got = jax.vmap(jax.grad(cf))(x, c)
    elif how == "grad_vmap":
        got = jax.grad(lambda x: jax.vmap(cf)(x, c).sum())(x)
    else:
        g = jax.grad(cf) if how == "grad" else jax.jit(jax.grad(cf))
        got = jnp.stack([g(x[k], c[k]) for k in range(2)])
    jax.effects_barrier()
    out = capfd.readouterr().out.splitlines()
    want = [jax.grad(appends_and_prints_in_a_static_loop)(x[k], c[k]) for k in range(2)]
    assert sorted(out) == sorted(capfd.readouterr().out.splitlines())
    assert len(out) == 3 * (1 + 1 + 2) + 3 * 1  # lane c=3: at, positive, m 3, m 1; c=0: at
    np.testing.assert_allclose(got, jnp.stack(want), rtol=1e-6)


def counts_up_while_behind(n, xs, x):
    w = 0
    while w < 4 and n < jnp.argmax(xs) + w:  # `w` is the same in every running lane
        w += 1
        print("at", w, n)
        if w > 2 and n > 0:
            raise ValueError(f"lane {n} went past 2")
    return x * w


@pytest.mark.parametrize("how", ["vmap", "jit_vmap", "vmap_grad", "grad_vmap"])
def test_a_lane_that_finished_a_loop_prints_and_raises_no_more(capfd, how):
    # Under vmap a loop's counter is one value shared by the lanes still running; a
    # finished lane keeps running the body with the others (its results dropped), and
    # its test would come true again as the counter goes on: it printed (fuzz seed
    # 71079) and could raise for iterations Python never ran.
    cf = autoflow.convert(counts_up_while_behind)
    ns = jnp.array([0, 1, 2, 3])
    xs = jnp.array([[0., 1., 2.], [2., 1., 0.], [0., 0., 3.], [1., 5., 0.]])
    x = jnp.array([0.5, 1.0, 1.5, 2.0])
    capfd.readouterr()
    if how == "vmap":
        got = jax.vmap(cf)(ns, xs, x)
    elif how == "jit_vmap":
        got = jax.jit(jax.vmap(cf))(ns, xs, x)
    elif how == "vmap_grad":
        got = jax.vmap(jax.grad(cf, argnums=2))(ns, xs, x)
    else:
        got = jax.grad(lambda x: jax.vmap(cf)(ns, xs, x).sum())(x)
    jax.effects_barrier()
    out = sorted(capfd.readouterr().out.splitlines())
    lanes = [(int(ns[k]), xs[k], float(x[k])) for k in range(4)]
    if how in ("vmap", "jit_vmap"):
        want = [counts_up_while_behind(*a) for a in lanes]
    else:
        want = [jax.grad(counts_up_while_behind, argnums=2)(*a) for a in lanes]
    assert out == sorted(capfd.readouterr().out.splitlines()) == [f"at {w} 0" for w in (1, 2, 3, 4)]
    np.testing.assert_allclose(got, jnp.stack(want))
