"""Calls from converted code: which callees are converted, and how.

Every callee here has a data-dependent ``if`` or ``while`` of its own, so a
call through ``autoflow.jit`` only works when the callee was converted too.
The eager result of the plain function is the oracle.

Known autoflow bugs are marked ``xfail(strict=True, raises=...)``: they
xfail only with the bug's own symptom, and turn into failures (XPASS) once
the bug is fixed, so the mark gets removed.
"""

import functools
import inspect
import os
import sys
import textwrap
import threading
import weakref
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
import autoflow._conversion as af_conversion
import autoflow.runtime as af_runtime
import autoflow.core.libraries as af_libraries

from .equivalence import assert_same

TRACER_ERRORS = (jax.errors.TracerBoolConversionError, jax.errors.ConcretizationTypeError)


def check(fn, *args, **jit_kwargs):
    """``autoflow.jit(fn)(*args)`` equals the eager ``fn(*args)``."""
    expected = fn(*args)
    actual = autoflow.jit(fn, **jit_kwargs)(*args)
    assert_same(actual, expected, getattr(fn, "__name__", repr(fn)))
    return actual


# ---- module-level functions ---------------------------------------------------------------

def absdouble(x):
    if x > 0:
        return x * 2.0
    return -x


def halve_until_small(x):
    while x > 1.0:
        x = x / 2.0
    return x


def calls_module_functions(x):
    return absdouble(x) + halve_until_small(x * 10.0)


@pytest.mark.parametrize("x", [3.0, -3.0, 0.05])
def test_module_level_function_callees(x):
    check(calls_module_functions, x)


def test_module_level_callee_is_routed_through_af_call():
    source = autoflow.to_source(calls_module_functions)
    assert "call(absdouble, x)" in source
    assert "call(halve_until_small, x * 10.0)" in source


# ---- nested defs and lambdas --------------------------------------------------------------

def with_nested_def(x, k):
    def inner(y):
        while y < k:
            y = y * 2.0 + 1.0
        return y

    def sign(y):
        if y >= 0:
            return 1.0
        return -1.0

    return inner(x) * sign(x - 2.0)


@pytest.mark.parametrize("x,k", [(0.5, 10.0), (3.0, 2.0), (-0.25, 40.0)])
def test_nested_def_callees(x, k):
    check(with_nested_def, x, k)


plain_lambda = lambda t: t * 3.0 + 1.0  # noqa: E731  (no control flow: called as it is)


def with_lambdas(x):
    inner = lambda t: t if t > 0 else -t  # noqa: E731  (converted with its parent)
    return inner(x) + plain_lambda(x)


@pytest.mark.parametrize("x", [2.0, -2.0])
def test_lambdas(x):
    check(with_lambdas, x)


def test_lambda_without_control_flow_is_called_as_is():
    assert autoflow.convert(plain_lambda) is plain_lambda
    rt = af_runtime.bound(())
    assert rt._target(plain_lambda) is plain_lambda

    def use(x):
        return plain_lambda(x) * 2.0

    check(use, 1.5)


# ---- methods, static and class methods, __call__ -----------------------------------------

class Model:
    def __init__(self, scale):
        self.scale = scale

    def step(self, x):
        if x > 0:
            return x * self.scale
        return x - self.scale

    @staticmethod
    def clamp(x):
        while x > 10.0:
            x = x - 7.0
        return x

    @classmethod
    def offset(cls, x):
        if x < 1.0:
            return x + cls.bias
        return x

    bias = 100.0

    def __call__(self, x):
        while x < self.scale:
            x = x + 1.5
        return x

    def run(self, x):
        return self.step(x) + self.clamp(x * 5.0) + self.offset(x) + self(x)

    @classmethod
    def run_cls(cls, x):
        return cls.clamp(x) + cls.offset(x)


@pytest.mark.parametrize("x", [3.0, -1.0, 0.5])
def test_methods_through_self_and_cls(x):
    m = Model(4.0)
    check(m.run, x)
    check(Model.run_cls, x * 20.0)


@pytest.mark.parametrize("x", [3.0, -1.0])
def test_bound_static_class_methods_called_by_name(x):
    m = Model(4.0)
    step, clamp, offset = m.step, Model.clamp, Model.offset

    def use(x):
        return step(x) + clamp(x * 5.0) + offset(x) + m(x)

    check(use, x)


@pytest.mark.parametrize("x", [3.0, -1.0])
def test_methods_converted_directly(x):
    m = Model(4.0)
    for fn in (m.step, Model.clamp, Model.offset, m):
        check(fn, x * 5.0)
    converted = autoflow.convert(m.step)
    assert inspect.ismethod(converted) and converted.__self__ is m


GLOBAL_MODEL = Model(2.0)


def uses_objects(x, model):
    local = Model(3.0)  # a local object of a user class
    return local.step(x) + model.step(x) + GLOBAL_MODEL.step(x) + Model.clamp(x * 9.0)


@pytest.mark.parametrize("x", [3.0, -1.0])
def test_methods_of_local_parameter_and_global_objects(x):
    m = Model(4.0)

    def top(x):
        return uses_objects(x, m)

    check(top, x)


def library_attribute_calls(x):
    rng = np.random.default_rng(0)
    noise = rng.normal(size=3)
    y = jnp.sin(x) + x.sum() + jnp.asarray(noise).mean()
    return y


def test_library_and_value_methods_are_not_wrapped():
    source = autoflow.to_source(library_attribute_calls)
    for text in ("rng.normal(size=3)", "np.random.default_rng(0)", "jnp.sin(x)", "x.sum()",
                 "jnp.asarray(noise).mean()"):
        assert text in source, source
    assert ".call(" not in source, source
    source = autoflow.to_source(uses_objects)
    for text in ("local.step, x", "model.step, x", "GLOBAL_MODEL.step, x", "Model.clamp, x"):
        assert text in source, source


def test_functions_of_a_user_module_are_converted(tmp_path, monkeypatch):
    (tmp_path / "user_helpers_mod.py").write_text(textwrap.dedent("""
        def absdiff(x, y):
            if x > y:
                return x - y
            return y - x
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    import user_helpers_mod

    def f(x):
        return user_helpers_mod.absdiff(x, 1.0) + np.float32(0.0)

    assert "call(user_helpers_mod.absdiff" in autoflow.to_source(f)
    check(f, 3.0)
    check(f, -2.0)


# ---- functools.partial --------------------------------------------------------------------

def pick(x, y, *, z=1.0):
    if x > y:
        return x * z
    return y * z


scaled_pick = functools.partial(pick, z=3.0)


def calls_partial(x):
    first = functools.partial(pick, 0.5)
    return scaled_pick(x, 1.0) + first(x)


@pytest.mark.parametrize("x", [2.0, -2.0])
def test_partial_callees(x):
    check(calls_partial, x)
    check(scaled_pick, x, 1.0)


def test_convert_of_partial_keeps_bound_arguments():
    converted = autoflow.convert(scaled_pick)
    assert isinstance(converted, functools.partial)
    assert converted.args == () and converted.keywords == {"z": 3.0}
    assert converted.func is autoflow.convert(pick)


# ---- functools.wraps decorators -----------------------------------------------------------

def scaled_by(k):
    def decorator(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            out = fn(*args, **kwargs)
            if out > 100.0:
                out = out - 100.0
            return out * k
        return wrapper
    return decorator


@scaled_by(3.0)
def decorated(x):
    """Add or subtract one."""
    if x > 0:
        return x + 1.0
    return x - 1.0


def calls_decorated(x):
    return decorated(x) + 1.0




@pytest.mark.parametrize("x", [2.0, -2.0, 200.0])
def test_wraps_decorated_callee(x):
    # The wrapper (traced `if` on its result) and the wrapped (traced `if`) are
    # both converted; the wrapper's scaling by 3 is kept.
    check(calls_decorated, x)
    check(decorated, x)
    assert autoflow.convert(decorated).__name__ == "decorated"


def test_wraps_decorator_metadata_and_behaviour_in_plain_python():
    assert decorated.__name__ == "decorated"
    assert decorated.__doc__ == "Add or subtract one."
    assert decorated.__wrapped__.__code__.co_name == "decorated"
    assert [decorated(x) for x in (2.0, -2.0, 200.0)] == [9.0, -9.0, 303.0]


def _same_named_decorator(fn):
    @functools.wraps(fn)
    def wrapper(x):
        return fn(x) * 10.0
    return wrapper


@_same_named_decorator
def wrapper(x):  # same name as the decorator's inner function
    if x > 0:
        return x
    return -x


def test_wraps_decorator_whose_wrapper_has_the_wrapped_name():
    assert wrapper(2.0) == 20.0
    assert autoflow.convert(wrapper)(2.0) == 20.0
    check(wrapper, -2.0)


# ---- recursion through two helpers --------------------------------------------------------

def ping(n, x):
    if x > 0:  # traced
        x = x - 1.0
    else:
        x = x + 2.0
    if n == 0:  # static
        return x
    return pong(n - 1, x)


def pong(n, x):
    while x < 3.0:  # traced
        x = x + 1.5
    return ping(n, x * 0.5)


@pytest.mark.parametrize("n,x", [(0, 0.7), (3, 0.7), (4, -5.0)])
def test_recursion_through_two_helpers(n, x):
    check(ping, n, x, static_argnums=0)


# ---- recursive=False and do_not_convert ---------------------------------------------------

def calls_absdouble(x):
    return absdouble(x) - 1.0


def test_recursive_false_leaves_callees_unconverted():
    check(calls_absdouble, 2.0)  # converted callee: works
    assert "call(" not in autoflow.to_source(calls_absdouble, recursive=False)
    with pytest.raises(TRACER_ERRORS):
        autoflow.jit(calls_absdouble, recursive=False)(2.0)
    # Concrete values still run as Python.
    assert autoflow.convert(calls_absdouble, recursive=False)(2.0) == calls_absdouble(2.0)


@autoflow.do_not_convert
def python_only(x):
    if x > 0:
        return x
    return -x


def calls_python_only(x):
    return python_only(x) + 1.0


def test_do_not_convert_callee_runs_unconverted():
    assert autoflow.convert(python_only) is python_only
    with pytest.raises(TRACER_ERRORS):
        autoflow.jit(calls_python_only)(2.0)
    assert autoflow.convert(calls_python_only)(-2.0) == calls_python_only(-2.0)


def test_do_not_convert_on_a_method():
    class C:
        @autoflow.do_not_convert
        def m(self, x):
            if x > 0:
                return x
            return -x

        def run(self, x):
            return self.m(x)

    with pytest.raises(TRACER_ERRORS):
        autoflow.jit(C().run)(2.0)


# ---- signatures: defaults, *args, **kwargs, keyword-only, annotations ----------------------

def many_params(x, y=2.0, *args, scale, bias=0.5, **kw):
    """Multiply, add extras, fold back above `scale`."""
    total = x * y
    for a in args:
        total = total + a
    while total > scale:
        total = total - scale
    for key in sorted(kw):
        total = total + kw[key]
    return total + bias


def calls_many_params(x):
    return (many_params(x, 3.0, 1.0, 2.0, scale=4.0, q=x, r=1.0)
            + many_params(x, scale=0.75)
            + many_params(x, bias=x, scale=1.5, y=x))


@pytest.mark.parametrize("x", [1.0, 0.1, 7.3])
def test_defaults_varargs_kwargs_keyword_only(x):
    check(calls_many_params, x)
    check(functools.partial(many_params, scale=2.0), x)


def annotated(x: jax.Array, n: int = 3, *, flag: bool = True, **rest: float) -> jax.Array:
    """Count up to `n`."""
    while x < n:
        x = x + 1.0
    return x if flag else -x


@pytest.mark.parametrize("fn", [annotated, many_params, Model.step, Model.clamp],
                         ids=lambda f: f.__qualname__)
def test_converted_function_metadata(fn):
    c = autoflow.convert(fn)
    assert c is not fn
    assert c.__name__ == fn.__name__
    assert c.__qualname__ == fn.__qualname__
    assert c.__doc__ == fn.__doc__
    # (a module-level function names a module made on import, which `pickle` finds it
    # in: autoflow._converted.<options>.<its module>; a method keeps its own)
    assert c.__module__ == fn.__module__ or (
        "." not in fn.__qualname__ and c.__module__.startswith("autoflow._converted.")
        and c.__module__.endswith("." + fn.__module__))
    assert c.__annotations__ == fn.__annotations__
    assert c.__defaults__ == fn.__defaults__
    assert c.__kwdefaults__ == fn.__kwdefaults__
    assert inspect.signature(c) == inspect.signature(fn)
    assert c.__wrapped__ is fn


def test_annotated_function_runs():
    check(annotated, 0.5)
    check(functools.partial(annotated, n=5, flag=False), 0.5)


# ---- globals and closures ----------------------------------------------------------------

threshold = 1.0


def over_threshold(x):
    if x > threshold:
        return x - threshold
    return x


def helper_a(x):
    if x > 0:
        return x + 1.0
    return x


def helper_b(x):
    while x < 50.0:
        x = x * 3.0 + 1.0
    return x


current_helper = helper_a


def calls_current_helper(x):
    return current_helper(x)


def test_global_updated_after_conversion_is_seen(monkeypatch):
    module = sys.modules[__name__]
    converted = autoflow.convert(over_threshold)
    assert converted(3.0) == 2.0
    monkeypatch.setattr(module, "threshold", 2.5)
    assert converted(3.0) == over_threshold(3.0) == 0.5
    np.testing.assert_allclose(jax.jit(converted)(3.0), 0.5)


def test_global_callee_rebound_after_conversion(monkeypatch):
    module = sys.modules[__name__]
    converted = autoflow.convert(calls_current_helper)
    assert converted(2.0) == 3.0
    monkeypatch.setattr(module, "current_helper", helper_b)
    assert converted(2.0) == calls_current_helper(2.0) == helper_b(2.0)
    np.testing.assert_allclose(jax.jit(converted)(2.0), helper_b(2.0))


def _make_limited():
    limit = 1.0

    def fold(x):
        while x > limit:
            x = x - limit
        return x

    def set_limit(v):
        nonlocal limit
        limit = v

    return fold, set_limit


def test_closure_cells_are_shared():
    fold, set_limit = _make_limited()
    converted = autoflow.convert(fold)
    assert converted.__closure__[converted.__code__.co_freevars.index("limit")] \
        is fold.__closure__[fold.__code__.co_freevars.index("limit")]
    assert converted(4.0) == fold(4.0) == 1.0
    set_limit(2.5)  # the original's cell changes: the converted function sees it
    assert converted(4.0) == fold(4.0) == 1.5
    np.testing.assert_allclose(jax.jit(converted)(4.0), 1.5)


def _make_counter():
    total = 0.0

    def add(x):
        nonlocal total
        total = total + x * 2.0
        while x > 1.0:
            x = x / 2.0
        return x

    def read():
        return total

    return add, read


def test_nonlocal_write_reaches_the_original_cell():
    add, read = _make_counter()
    converted = autoflow.convert(add)
    assert converted(8.0) == 1.0
    assert read() == 16.0
    add(1.0)
    assert read() == 18.0
    converted(2.0)
    assert read() == 22.0


def _make_counter_branchy():
    total = 0.0

    def add(x):
        nonlocal total
        if x > 0:
            total = total + x
        else:
            total = total - 1.0
        return total

    def read():
        return total

    return add, read


def test_nonlocal_assigned_inside_if():
    add, read = _make_counter_branchy()
    converted = autoflow.convert(add)
    assert converted(2.0) == 2.0
    assert read() == 2.0
    assert converted(-5.0) == 1.0
    assert read() == 1.0


# ---- library code -------------------------------------------------------------------------

def uses_jnp(x):
    y = jnp.where(x > 0, x, -x)
    if jnp.sum(y) > 3.0:
        y = jnp.sin(y) + jnp.clip(y, 0.0, 1.0)
    return y


def test_jnp_functions_are_not_wrapped():
    source = autoflow.to_source(uses_jnp)
    assert "jnp.where(x > 0, x, -x)" in source
    assert "jnp.sin(y) + jnp.clip(y, 0.0, 1.0)" in source
    assert "call(jnp" not in source
    check(uses_jnp, jnp.array([1.0, -2.0, 3.0]))
    check(uses_jnp, jnp.array([0.1, -0.2]))


@pytest.fixture
def fresh_caches(monkeypatch):
    """Empty conversion caches, and a record of the code objects converted."""
    monkeypatch.setattr(af_conversion, "_by_code", {})
    monkeypatch.setattr(af_conversion, "_by_function", weakref.WeakKeyDictionary())
    converted = Counter()
    lock = threading.Lock()
    original = af_conversion._transform_uncached

    def counting(fn, options, kinds):
        with lock:
            converted[fn.__code__] += 1
        return original(fn, options, kinds)

    monkeypatch.setattr(af_conversion, "_transform_uncached", counting)
    return converted


def test_library_functions_called_by_name_are_not_converted(fresh_caches):
    from jax.numpy import clip, where
    from textwrap import dedent

    def f(x):
        text = dedent("  a")
        y = where(x > 0, x, -x)
        if x > 1.0:
            y = clip(y, 0.0, 2.0)
        return y + len(text)

    assert "call(where" in autoflow.to_source(f)  # routed through af.call ...
    check(f, 3.0)
    check(f, -0.5)
    # ... but only the user's own function was converted.
    assert set(fresh_caches) == {f.__code__}
    rt = af_runtime.bound(())
    for lib in (where, clip, dedent, jnp.sum, np.sum, functools.reduce):
        assert rt._target(lib) is lib


FAKEPKG_OPS = textwrap.dedent('''
    """A tiny 'installed' package: its functions have traced `if`s."""


    def clip_positive(x):
        if x > 0:
            return x
        return 0.0 * x


    def count_halvings(x):
        n = 0
        while x > 1.0:
            x = x / 2.0
            n = n + 1
        return n
''')


@pytest.fixture
def fakepkg(tmp_path, monkeypatch):
    """``fakepkg.ops`` imported from a temporary directory (not yet a library one)."""
    site = tmp_path / "site-packages"
    (site / "fakepkg").mkdir(parents=True)
    (site / "fakepkg" / "__init__.py").write_text("from . import ops\n")
    (site / "fakepkg" / "ops.py").write_text(FAKEPKG_OPS)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(af_libraries, "_file_verdicts", {})
    for name in [m for m in sys.modules if m == "fakepkg" or m.startswith("fakepkg.")]:
        monkeypatch.delitem(sys.modules, name)
    import fakepkg.ops as ops

    yield site, ops
    for name in [m for m in sys.modules if m == "fakepkg" or m.startswith("fakepkg.")]:
        del sys.modules[name]


def _installed(monkeypatch, site):
    monkeypatch.setattr(af_libraries, "_LIBRARY_DIRS",
                        af_libraries._LIBRARY_DIRS + (str(site.resolve()) + os.sep,))
    monkeypatch.setattr(af_libraries, "_file_verdicts", {})


def _calls_fakepkg(ops):
    clip_positive, count_halvings = ops.clip_positive, ops.count_halvings

    def f(x):
        return clip_positive(x) + count_halvings(x)

    return f


def test_fake_package_outside_library_dirs_is_converted(fakepkg):
    site, ops = fakepkg
    assert not af_libraries.is_library_file(ops.clip_positive.__code__.co_filename)
    f = _calls_fakepkg(ops)
    check(f, 5.0)
    check(f, -3.0)


def test_installed_package_is_not_converted(fakepkg, monkeypatch):
    site, ops = fakepkg
    _installed(monkeypatch, site)
    assert af_libraries.is_library_file(ops.clip_positive.__code__.co_filename)
    assert ops.__name__ == "fakepkg.ops" and ops.__file__.startswith(str(site))
    f = _calls_fakepkg(ops)
    assert autoflow.convert(f)(5.0) == f(5.0)  # concrete: Python runs it
    with pytest.raises(TRACER_ERRORS):
        autoflow.jit(f)(5.0)
    with pytest.raises(TRACER_ERRORS):
        autoflow.jit(f, include=["fake"])(5.0)  # a prefix, not a module name


@pytest.mark.parametrize("include", [["fakepkg"], ["fakepkg.ops"], ("numpy", "fakepkg")])
def test_include_converts_an_installed_package(fakepkg, monkeypatch, include):
    site, ops = fakepkg
    _installed(monkeypatch, site)
    f = _calls_fakepkg(ops)
    for x in (5.0, -3.0, 0.5):
        expected = f(x)
        assert_same(autoflow.jit(f, include=include)(x), expected, f"include={include}")


# ---- generators, caching, threads ---------------------------------------------------------

def gen(x):
    while x > 0:
        yield x
        x = x - 1


def test_generator_function_is_returned_unchanged():
    assert autoflow.convert(gen) is gen
    assert list(autoflow.convert(gen)(3)) == [3, 2, 1]

    async def coro(x):
        return x

    assert autoflow.convert(coro) is coro


def test_conversion_is_cached():
    assert autoflow.convert(absdouble) is autoflow.convert(absdouble)
    assert autoflow.convert(absdouble, asserts=False) is autoflow.convert(absdouble, asserts=False)
    assert autoflow.convert(autoflow.convert(absdouble)) is autoflow.convert(absdouble)
    assert autoflow.convert(absdouble) is not absdouble


def test_conversion_cache_is_per_closure():
    def make(k):
        def f(x):
            if x > k:
                return x
            return k
        return f

    f1, f2 = make(1.0), make(5.0)
    c1, c2 = autoflow.convert(f1), autoflow.convert(f2)
    assert c1 is not c2
    assert_same(jax.jit(c1)(3.0), f1(3.0))
    assert_same(jax.jit(c2)(3.0), f2(3.0))


def test_threads_convert_each_function_once(fresh_caches):
    def shared(x):
        if x > 0:
            return x * 2.0
        return x - 1.0

    def other(x):
        while x < 10.0:
            x = x + 2.5
        return x

    def top_a(x):
        return shared(x) + 1.0

    def top_b(x):
        return shared(x) * other(x)

    def top_c(x):
        return other(x) - 3.0

    tops = [top_a, top_b, top_c, top_a, top_b, top_c, top_a, top_b]
    inputs = [float(i) - 3.5 for i in range(len(tops))]
    barrier = threading.Barrier(len(tops))
    results = [None] * len(tops)
    errors = []

    def work(i):
        try:
            barrier.wait()
            results[i] = autoflow.jit(tops[i])(inputs[i])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(tops))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    for fn, x, r in zip(tops, inputs, results):
        assert_same(r, fn(x), f"{fn.__name__}({x})")
    codes = {fn.__code__ for fn in (shared, other, top_a, top_b, top_c)}
    assert set(fresh_caches) == codes
    assert all(n == 1 for n in fresh_caches.values()), fresh_caches
    assert len(af_conversion._by_code) == len(codes)


def test_equal_code_in_two_modules_converts_each_with_its_own_globals(tmp_path, monkeypatch):
    # Code objects compare equal across files; the conversion cache must not
    # hand one module's conversion (with af.range) to a module that rebinds range.
    body = "def f(n):\n    s = 0\n    for i in range(n):\n        s += i\n    return s\n"
    (tmp_path / "same_code_a.py").write_text(body)
    (tmp_path / "same_code_b.py").write_text(body + "def range(n):\n    return [100, 200]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import same_code_a
    import same_code_b
    assert autoflow.convert(same_code_a.f)(3) == same_code_a.f(3) == 3
    assert autoflow.convert(same_code_b.f)(3) == same_code_b.f(3) == 300
