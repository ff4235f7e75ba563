"""Gradients through converted loops, in every composition with jit and vmap.

The oracle is ``jax.grad`` (or ``jax.jvp``) of the eager Python function: under
``jax.grad`` without ``jit`` its values are concrete, so Python's own
``if``/``while``/``break``/``return`` run. Where eager Python cannot be
differentiated (``jax.hessian`` traces through ``vmap``), finite differences
of the eager gradient are the oracle.
"""

import math

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np
import pytest

import autoflow
from autoflow.runtime import jax as jx

pytestmark = pytest.mark.skipif(
    not jx.primitives(), reason="this JAX has no jax.experimental.hijax: data-dependent "
    "loops are plain lax.while_loops, which jax.grad cannot reverse-differentiate")

# ---------------------------------------------------------------------------
# programs
# ---------------------------------------------------------------------------


def range_break(x):
    for i in range(10):
        x = x * 1.5
        if x > 5.0:
            break
    return x


def range_return(x):
    for i in range(20):
        x = x * 1.2 + 0.1 * jnp.sin(x)
        if x > 4.0:
            return x * 2.0
    return -x


def data_while(x):
    n = 0
    while x < 10.0:
        x = x * 1.1 + 0.1 * jnp.sin(x)
        n += 1
    return x * n


def data_while_params(x, w):
    y = x
    while y < 8.0:
        y = y + w * (1.0 + jnp.cos(y) ** 2)
    return y * w + x


def nested(x):
    total = 0.0
    for i in range(4):
        y = x + i
        while y < 6.0:
            y = y * 1.3
        total = total + y * x
    return total


def while_in_while(x):
    k = 0
    while x < 30.0:
        y = x
        while y < x + 3.0:
            y = y + 0.7 * jnp.cos(y) ** 2 + 0.1
        x = y * 1.05
        k += 1
    return x + k


def for_over_array(xs, t):
    acc = 0.0
    for x in xs:
        while x < t:
            x = x * 1.7 + 0.05
        acc = acc + x * x
    return acc


def vector_while(v):
    i = 0
    while jnp.sum(v * v) < 50.0:
        v = v * 1.2 + jnp.array([0.1, -0.2, 0.3])
        i += 1
    return jnp.sum(jnp.sin(v)) + i


SCALAR = [range_break, range_return, data_while, nested, while_in_while]
POINTS = [0.5, 1.3, 2.9]


def _close(a, b, tol=2e-4):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# ---------------------------------------------------------------------------
# reverse mode, every composition
# ---------------------------------------------------------------------------

COMPOSITIONS = {
    "grad(convert)": lambda f: jax.grad(autoflow.convert(f)),
    "grad(autoflow.jit)": lambda f: jax.grad(autoflow.jit(f)),
    "jit(grad(convert))": lambda f: jax.jit(jax.grad(autoflow.convert(f))),
    "grad(jax.jit(convert))": lambda f: jax.grad(jax.jit(autoflow.convert(f))),
    "autoflow.jit(grad(convert))": lambda f: autoflow.jit(jax.grad(autoflow.convert(f))),
    "vjp(autoflow.jit)": lambda f: (lambda x: jax.vjp(autoflow.jit(f), x)[1](1.0)[0]),
    "value_and_grad(autoflow.jit)":
        lambda f: (lambda x: jax.value_and_grad(autoflow.jit(f))(x)[1]),
}


@pytest.mark.parametrize("how", list(COMPOSITIONS))
@pytest.mark.parametrize("fn", SCALAR, ids=lambda f: f.__name__)
def test_reverse_mode_compositions(fn, how):
    g = COMPOSITIONS[how](fn)
    for x in POINTS:
        _close(g(jnp.float32(x)), jax.grad(fn)(x))


VMAPPED = {
    "vmap(grad(autoflow.jit))": lambda f: jax.vmap(jax.grad(autoflow.jit(f))),
    "jit(vmap(grad(convert)))": lambda f: jax.jit(jax.vmap(jax.grad(autoflow.convert(f)))),
    "grad(sum(vmap(autoflow.jit)))":
        lambda f: jax.grad(lambda xs: jnp.sum(jax.vmap(autoflow.jit(f))(xs))),
    "grad(sum(jit(vmap(convert))))":
        lambda f: jax.grad(lambda xs: jnp.sum(jax.jit(jax.vmap(autoflow.convert(f)))(xs))),
    "vmap(autoflow.jit(grad(convert)))":
        lambda f: jax.vmap(autoflow.jit(jax.grad(autoflow.convert(f)))),
}


@pytest.mark.parametrize("how", list(VMAPPED))
@pytest.mark.parametrize("fn", SCALAR, ids=lambda f: f.__name__)
def test_reverse_mode_under_vmap(fn, how):
    xs = jnp.array(POINTS, jnp.float32)
    expected = [jax.grad(fn)(x) for x in POINTS]
    _close(VMAPPED[how](fn)(xs), np.stack(expected))


def test_gradient_with_respect_to_values_the_body_closes_over():
    for how in ("convert", "jit"):
        wrap = autoflow.convert if how == "convert" else autoflow.jit
        for x, w in [(0.5, 0.3), (2.0, 0.7)]:
            got = jax.grad(wrap(data_while_params), (0, 1))(x, w)
            want = jax.grad(data_while_params, (0, 1))(x, w)
            _close(got[0], want[0])
            _close(got[1], want[1])


def test_for_over_an_array_with_a_while_inside():
    xs = jnp.array([0.3, 1.0, 2.5, 4.0])
    for wrap in (autoflow.convert, autoflow.jit):
        got = jax.grad(wrap(for_over_array))(xs, 5.0)
        _close(got, jax.grad(for_over_array)(xs, 5.0))
    got = jax.vmap(jax.grad(autoflow.jit(for_over_array)), (0, None))(jnp.stack([xs, xs * 1.1]), 5.0)
    _close(got, np.stack([jax.grad(for_over_array)(xs, 5.0),
                          jax.grad(for_over_array)(xs * 1.1, 5.0)]))


def test_vector_carry():
    v = jnp.array([0.5, 1.0, -0.3])
    _close(jax.grad(autoflow.jit(vector_while))(v), jax.grad(vector_while)(v))
    _close(jax.jacrev(autoflow.jit(lambda v: vector_while(v) * v))(v),
           jax.jacrev(lambda v: vector_while(v) * v)(v))


@pytest.mark.parametrize("k", [4, 6, 16, 1000])
def test_any_checkpoint_budget_gives_the_same_gradient(k):
    def long_loop(x):
        n = 0
        while n < 300:
            x = x + 0.01 * jnp.sin(x * n)
            n += 1
        return x

    for x in (0.3, 1.7):
        got = jax.grad(autoflow.jit(long_loop, checkpoints=k))(x)
        _close(got, jax.grad(long_loop)(x), tol=1e-3)


def test_zero_iterations_and_one_iteration():
    for x in (11.0, 9.95):
        _close(jax.grad(autoflow.jit(data_while))(x), jax.grad(data_while)(x))


def test_traced_trip_count():
    def f(x, n):
        for i in range(n):
            x = x * 1.1 + jnp.sin(x) * 0.2
        return x

    g = jax.grad(autoflow.jit(f))
    for n in (0, 1, 7):
        _close(g(0.4, n), jax.grad(f)(0.4, n))


# ---------------------------------------------------------------------------
# forward mode stays a plain while loop JVP; mixed modes
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("fn", SCALAR, ids=lambda f: f.__name__)
def test_forward_mode(fn):
    for x in POINTS:
        want = jax.jvp(fn, (x,), (1.0,))
        for g in (autoflow.jit(fn), autoflow.convert(fn), jax.jit(autoflow.convert(fn))):
            got = jax.jvp(g, (jnp.float32(x),), (jnp.float32(1.0),))
            _close(got[0], want[0])
            _close(got[1], want[1])
        _close(jax.jacfwd(autoflow.jit(fn))(x), want[1])
        y, lin = jax.linearize(autoflow.jit(fn), jnp.float32(x))
        _close(lin(jnp.float32(1.0)), want[1])



@pytest.mark.parametrize("fn", [data_while, range_break, nested], ids=lambda f: f.__name__)
def test_second_order(fn):
    """Forward over reverse (jax.hessian) and reverse over forward, against finite
    differences of the eager gradient."""
    eps = 1e-3
    for x in (1.3, 2.9):
        fd = (jax.grad(fn)(x + eps) - jax.grad(fn)(x - eps)) / (2 * eps)
        _close(jax.hessian(autoflow.jit(fn))(x), fd, tol=2e-2)
        _close(jax.jacfwd(jax.grad(autoflow.jit(fn)))(x), fd, tol=2e-2)


# ---------------------------------------------------------------------------
# the checkpointed form costs nothing when not differentiated
# ---------------------------------------------------------------------------

def test_undifferentiated_loop_compiles_to_one_while_loop():
    hlo = autoflow.jit(data_while).lower(1.0).as_text()
    assert hlo.count("stablehlo.while") == 1
    np.testing.assert_allclose(autoflow.jit(data_while)(1.0), data_while(1.0), rtol=1e-5)


def test_jit_interface_is_kept():
    f = autoflow.jit(data_while)
    assert f.trace(1.0).jaxpr is not None
    assert f.lower(1.0).compile()(1.0) == f(1.0)


def test_max_loop_iterations_is_still_a_masked_scan():
    f = autoflow.jit(data_while, max_loop_iterations=100)
    assert "scan" in str(f.trace(1.0).jaxpr)
    _close(jax.grad(f)(1.0), jax.grad(data_while)(1.0))


def test_reverse_over_reverse():
    eps = 1e-2
    for x in (1.0, 3.0):
        fd = (jax.grad(data_while)(x + eps) - jax.grad(data_while)(x - eps)) / (2 * eps)
        _close(jax.grad(jax.grad(autoflow.jit(data_while)))(x), fd, tol=2e-2)


# ---------------------------------------------------------------------------
# what the body does besides computing: printed once, raised as itself
# ---------------------------------------------------------------------------

def printing(x):
    while x < 3.0:
        x = x * 1.5
        print("x is", x)
    return x


def raising(x):
    while x < 10.0:
        if x < 0:
            raise ValueError("negative")
        x = x * 1.5
    return x


def test_the_backward_pass_does_not_print_again(capfd):
    jax.grad(printing)(1.0)
    want = capfd.readouterr().out.count("x is")
    jax.block_until_ready(jax.grad(autoflow.jit(printing))(1.0))
    jax.effects_barrier()
    assert capfd.readouterr().out.count("x is") == want == 3


def test_a_raise_in_a_differentiated_loop():
    _close(jax.grad(autoflow.jit(raising))(1.0), jax.grad(raising)(1.0))
    with pytest.raises(ValueError, match="negative"):
        jax.grad(raising)(-1.0)
    with pytest.raises(ValueError, match="negative"):
        jax.block_until_ready(jax.grad(autoflow.jit(raising))(-1.0))


def test_reverse_over_forward():
    eps = 1e-2
    f = autoflow.jit(data_while)
    for x in (1.0, 3.0):
        fd = (jax.grad(data_while)(x + eps) - jax.grad(data_while)(x - eps)) / (2 * eps)
        _close(jax.grad(lambda x: jax.jvp(f, (x,), (1.0,))[1])(x), fd, tol=2e-2)
        _close(jax.jacrev(jax.jacfwd(f))(x), fd, tol=2e-2)


def test_vmap_keeps_unbatched_carries_unbatched():
    # jax.jacfwd needs the primal output of a loop under vmap of tangents unbatched
    _close(jax.vmap(jax.jacfwd(autoflow.jit(data_while)))(jnp.array(POINTS)),
           np.stack([jax.grad(data_while)(x) for x in POINTS]))


# ---------------------------------------------------------------------------
# jax.checkpoint (remat) around a converted loop
# ---------------------------------------------------------------------------

POLICIES = jax.checkpoint_policies
REMAT = {
    "grad(checkpoint(convert))": lambda f: jax.grad(jax.checkpoint(autoflow.convert(f))),
    "grad(checkpoint(autoflow.jit))": lambda f: jax.grad(jax.checkpoint(autoflow.jit(f))),
    "jit(grad(remat(convert)))": lambda f: jax.jit(jax.grad(jax.remat(autoflow.convert(f)))),
    "grad(checkpoint(policy=dots_saveable))":
        lambda f: jax.grad(jax.checkpoint(autoflow.convert(f), policy=POLICIES.dots_saveable)),
    "grad(checkpoint(policy=everything_saveable))":
        lambda f: jax.grad(jax.checkpoint(autoflow.jit(f),
                                          policy=POLICIES.everything_saveable)),
    "grad(checkpoint(policy=nothing_saveable, prevent_cse=False))":
        lambda f: jax.grad(jax.checkpoint(autoflow.convert(f), prevent_cse=False,
                                          policy=POLICIES.nothing_saveable)),
    "vjp(checkpoint(autoflow.jit))":
        lambda f: (lambda x: jax.vjp(jax.checkpoint(autoflow.jit(f)), x)[1](1.0)[0]),
}


@pytest.mark.parametrize("how", list(REMAT))
@pytest.mark.parametrize("fn", [data_while, nested, range_return], ids=lambda f: f.__name__)
def test_checkpoint_around_a_loop(fn, how):
    g = REMAT[how](fn)
    for x in POINTS:
        _close(g(jnp.float32(x)), jax.grad(fn)(x))


REMAT_VMAPPED = {
    "vmap(grad(checkpoint(convert)))": lambda f: jax.vmap(jax.grad(jax.checkpoint(
        autoflow.convert(f)))),
    "grad(sum(vmap(checkpoint(convert))))": lambda f: jax.grad(
        lambda xs: jnp.sum(jax.vmap(jax.checkpoint(autoflow.convert(f)))(xs))),
    "grad(sum(checkpoint(vmap(autoflow.jit))))": lambda f: jax.grad(
        lambda xs: jnp.sum(jax.checkpoint(jax.vmap(autoflow.jit(f)))(xs))),
}


@pytest.mark.parametrize("how", list(REMAT_VMAPPED))
@pytest.mark.parametrize("fn", [data_while, nested], ids=lambda f: f.__name__)
def test_checkpoint_around_a_loop_under_vmap(fn, how):
    xs = jnp.array(POINTS, jnp.float32)
    _close(REMAT_VMAPPED[how](fn)(xs), np.stack([jax.grad(fn)(x) for x in POINTS]))


def test_checkpoint_with_values_the_body_closes_over_and_vector_carries():
    for x, w in [(0.5, 0.3), (2.0, 0.7)]:
        got = jax.grad(jax.checkpoint(autoflow.jit(data_while_params)), (0, 1))(x, w)
        want = jax.grad(data_while_params, (0, 1))(x, w)
        _close(got[0], want[0])
        _close(got[1], want[1])
    v = jnp.array([0.5, 1.0, -0.3])
    _close(jax.grad(jax.checkpoint(autoflow.convert(vector_while)))(v),
           jax.grad(vector_while)(v))
    _close(jax.grad(jax.checkpoint(autoflow.jit(while_in_while)))(1.3),
           jax.grad(while_in_while)(1.3))


def test_checkpointed_scan_body_calling_a_converted_loop():
    def step(f):
        return lambda c, _: (c + 0.01 * f(c), None)

    def eager(x):
        for _ in range(3):
            x = x + 0.01 * data_while(x)
        return x

    for wrap, policy in [(autoflow.convert, None), (autoflow.jit, POLICIES.dots_saveable)]:
        body = jax.checkpoint(step(wrap(data_while)), policy=policy)
        g = jax.grad(lambda x: lax.scan(body, x, None, length=3)[0])
        for x in POINTS:
            _close(g(jnp.float32(x)), jax.grad(eager)(x))


def test_higher_order_through_checkpoint():
    eps = 1e-2
    f = jax.checkpoint(autoflow.jit(data_while))
    for x in (1.3, 2.9):
        fd = (jax.grad(data_while)(x + eps) - jax.grad(data_while)(x - eps)) / (2 * eps)
        _close(jax.grad(jax.grad(f))(x), fd, tol=2e-2)
        _close(jax.hessian(f)(x), fd, tol=2e-2)
        _close(jax.grad(jax.checkpoint(jax.grad(autoflow.convert(data_while))))(x), fd,
               tol=2e-2)
        # forward mode through checkpoint stays the while loop JVP
        _close(jax.jvp(f, (x,), (1.0,))[1], jax.grad(data_while)(x))


def test_checkpoint_prints_in_the_forward_pass_only(capfd):
    jax.block_until_ready(jax.grad(jax.checkpoint(autoflow.jit(printing)))(1.0))
    jax.effects_barrier()
    assert capfd.readouterr().out.count("x is") == 3


def test_equinox_filter_checkpoint():
    eqx = pytest.importorskip("equinox")
    for x in POINTS:
        _close(eqx.filter_grad(eqx.filter_checkpoint(autoflow.convert(data_while)))(
            jnp.float32(x)), jax.grad(data_while)(x))
        _close(jax.grad(eqx.filter_checkpoint(autoflow.jit(nested)))(jnp.float32(x)),
               jax.grad(nested)(x))


def _shrink(x, c):
    while x > c:  # the test keeps the body's sqrt off negative numbers
        x = jnp.sqrt(x - c)
    return x


@pytest.mark.parametrize("lanes", ["auto", "lockstep", "flat"])
def test_grad_of_vmap_where_a_finished_lane_would_leave_the_body_s_domain(lanes):
    # a lane that finished (or never ran) computes the step it drops: on its own values
    # the body's derivative is NaN there, and 0 * NaN reached the gradient
    f = autoflow.convert(_shrink, lanes=lanes)
    xs, cs = jnp.array([5.0, 0.5, 2.5]), jnp.array([1.0, 1.0, 2.0])
    want_x = [float(jax.grad(_shrink)(float(x), float(c))) for x, c in zip(xs, cs)]
    want_c = [float(jax.grad(_shrink, argnums=1)(float(x), float(c))) for x, c in zip(xs, cs)]
    gx, gc = jax.grad(lambda a, b: jnp.sum(jax.vmap(f)(a, b)), argnums=(0, 1))(xs, cs)
    np.testing.assert_allclose(gx, want_x, rtol=1e-5)
    np.testing.assert_allclose(gc, want_c, rtol=1e-5)
    # (the batched loop traced inside a jit, differentiated after it; and forward mode)
    gj = jax.grad(lambda a: jnp.sum(jax.jit(jax.vmap(f))(a, cs)))(xs)
    np.testing.assert_allclose(gj, want_x, rtol=1e-5)
    np.testing.assert_allclose(jnp.diagonal(jax.jacfwd(jax.vmap(f))(xs, cs)), want_x, rtol=1e-5)
    shared = jax.jit(jax.grad(lambda c: jnp.sum(jax.vmap(f, (0, None))(xs, c))))(1.0)
    want = sum(float(jax.grad(_shrink, argnums=1)(float(x), 1.0)) for x in xs)
    np.testing.assert_allclose(shared, want, rtol=1e-5)


def _shows_its_value(x):
    print(f"x={x:.2f}", x, (x,), f"{x}")
    assert x > 0, f"x must be positive, got {x}"
    return x * 2 + math.floor(x) + float(x) + math.sqrt(x)


def test_grad_without_jit_formats_and_converts_as_jit_does(capsys):
    # JAX refuses a format spec, `float()` and `math.sqrt` of the value `jax.grad`
    # differentiates without `jit` (it knows the value: a concrete tracer); autoflow gives
    # what it gives under `jit(grad)`: the value printed, a traced cast
    x = jnp.float32(2.5)
    capsys.readouterr()
    _shows_its_value(x)
    eager = capsys.readouterr().out
    f = autoflow.convert(_shows_its_value)
    staged = jax.jit(jax.grad(f))(x)
    jax.effects_barrier()
    assert capsys.readouterr().out == eager
    got = jax.grad(f)(x)
    jax.effects_barrier()
    assert capsys.readouterr().out == eager
    np.testing.assert_allclose(got, staged, rtol=1e-6)
    _, tangent = jax.jvp(f, (x,), (jnp.float32(1.0),))
    jax.effects_barrier()
    assert capsys.readouterr().out == eager
    np.testing.assert_allclose(tangent, staged, rtol=1e-6)
    with pytest.raises(AssertionError, match="x must be positive, got -1.0"):
        jax.grad(f)(jnp.float32(-1.0))


# A value only the loop's test reads, whose derivative is infinite where the loop ends:
# Python never differentiates it; a backward pass that passed it a zero cotangent
# multiplied that by the infinite derivative (NaN).


def newton_norm(a):
    x = a
    err = jnp.float32(1.0)
    while err > 1e-6:
        x_new = 0.5 * (x + a / x)
        err = jnp.linalg.norm(x_new - x)  # exactly 0 at the last step
        x = x_new
    return x


def newton_sqrt_select(a):
    x, best = a, a
    err = jnp.float32(1.0)
    while err > 1e-6:
        x_new = 0.5 * (x + a / x)
        err = jnp.sqrt((x_new - x) ** 2)
        if err < 1e-3:  # (err reaches x's value through the select's predicate only)
            best = x_new
        x = x_new
    return x + best


def newton_past_the_stored_steps(a):
    x = a
    err, k = jnp.float32(1.0), 0
    while err > 1e-6 or k < 150:  # (more steps than the stored ones: checkpointed)
        x_new = 0.5 * (x + a / x)
        err = jnp.linalg.norm(x_new - x)
        x = x_new
        k += 1
    return x


def newton_returns_err(a):  # (here Python differentiates err too: NaN both ways)
    x = a
    err = jnp.float32(1.0)
    while err > 1e-6:
        x_new = 0.5 * (x + a / x)
        err = jnp.linalg.norm(x_new - x)
        x = x_new
    return x + err


@pytest.mark.parametrize("fn", [newton_norm, newton_sqrt_select, newton_past_the_stored_steps,
                                newton_returns_err], ids=lambda f: f.__name__)
def test_a_value_only_the_test_reads_is_not_differentiated(fn):
    a = jnp.float32(2.0)
    want = jax.grad(fn)(a)
    g = autoflow.convert(fn)
    for how, got in (("jit(grad)", jax.jit(jax.grad(g))(a)),
                     ("grad(autoflow.jit)", jax.grad(autoflow.jit(fn))(a))):
        np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=how)
    lanes = jnp.asarray([2.0, 3.0, 0.5], jnp.float32)
    want = np.stack([jax.grad(fn)(v) for v in lanes])
    for how, f in (("jit(vmap(grad))", jax.jit(jax.vmap(jax.grad(g)))),
                   ("grad(sum(vmap))", jax.jit(jax.grad(lambda v: jax.vmap(g)(v).sum())))):
        np.testing.assert_allclose(f(lanes), want, rtol=1e-5, err_msg=how)
