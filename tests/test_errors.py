"""The error contract: what users see when autoflow refuses their code.

Every exception autoflow raises is an ``autoflow.AutoflowError`` whose
message names the user's file and line, quotes the source line with a caret
under the construct, names the variable in backticks (with the types or
shapes involved) and ends with what to do, without any path of autoflow's or
JAX's internals. Exceptions raised by the user's own code keep their type and
point at the user's lines.

The user functions live in ``tests/error_cases/`` (real files, so that
``linecache`` and tracebacks can read them); ``# ERROR`` marks the line a
message or traceback must point at. Expected line numbers are found from the
marker, never written down.
"""

from __future__ import annotations

import inspect
import linecache
import os
import re
import traceback
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow import AutoflowError, ConversionError, ConversionWarning

from .error_cases import conditions, early_returns, loops, one_branch, returns, shapes, user_errors

MARKER = "# ERROR"
INTERNAL_PATHS = ("autoflow/runtime", "autoflow/transforms", "autoflow/core", "autoflow/analysis",
                  "autoflow/api.py", "site-packages/jax", "jax/_src")
AUTOFLOW_DIR = os.path.dirname(os.path.abspath(autoflow.__file__)) + os.sep
# Verbs a "what to do" sentence starts with.
SUGGESTION = re.compile(r"^(Add|Assign|Give|Initialize|Keep|Make|Move|Pass|Reduce|Remove|Return|Use)\b")

X3 = jnp.arange(3.0, dtype=jnp.float32)


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

def marked_line(fn) -> int:
    """The line number of the ``# ERROR`` marker inside ``fn``'s source."""
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, text in enumerate(lines) if MARKER in text]
    assert len(hits) == 1, f"{fn.__name__} must have exactly one {MARKER!r} line"
    return hits[0]


def source_file(fn) -> str:
    return os.path.abspath(inspect.getsourcefile(fn))


def raises_conversion_error(fn, *args, **jit_kwargs) -> ConversionError:
    with pytest.raises(ConversionError) as info:
        autoflow.jit(fn, **jit_kwargs)(*args)
    return info.value


def check_message(exc, fn, *, names=(), mentions=(), construct=None):
    """Assert the message of ``exc`` follows the error contract for ``fn``.

    ``names``: variables the message must name in backticks; ``mentions``:
    other text it must contain (types, shapes); ``construct``: what the caret
    must sit under (``if``, ``while``...).
    """
    assert isinstance(exc, autoflow.AutoflowError)
    assert isinstance(exc, AutoflowError)
    msg = str(exc)
    path, line = source_file(fn), marked_line(fn)
    source = linecache.getline(path, line).rstrip("\n")

    # file:line (optionally :col) at the start of the message, for the marked line.
    where = re.match(re.escape(path) + rf":{line}(?::(\d+))?(?!\d)", msg)
    assert where, f"message does not start with {os.path.basename(path)}:{line}:\n{msg}"
    assert f"{os.path.basename(path)}:{line}" in msg

    # The quoted source line, then a caret line under the construct.
    lines = msg.splitlines()
    quoted = "    " + source
    assert quoted in lines, f"message does not quote {source!r}:\n{msg}"
    i = lines.index(quoted)
    assert i + 1 < len(lines), f"no caret line after the quoted source:\n{msg}"
    caret = lines[i + 1]
    assert caret.strip() == "^", f"no caret line after the quoted source:\n{msg}"
    col = caret.index("^") - 4
    if where.group(1) is not None:
        assert col == int(where.group(1)) - 1, f"caret and column disagree:\n{msg}"
    if construct is not None:
        assert source[col:].startswith(construct), \
            f"caret is not under `{construct}`:\n{msg}"

    # It ends with what to do.
    todo = " ".join(lines[i + 2:]).strip()
    assert SUGGESTION.match(todo) and todo.endswith("."), f"no suggestion at the end:\n{msg}"

    for name in names:
        assert f"`{name}`" in msg, f"message does not name `{name}`:\n{msg}"
    for text in mentions:
        assert text in msg, f"message does not mention {text!r}:\n{msg}"
    for p in INTERNAL_PATHS:
        assert p not in msg, f"message shows the internal path {p!r}:\n{msg}"
    return msg


def last_user_frame(exc) -> traceback.FrameSummary:
    """The innermost traceback frame outside autoflow and JAX."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not os.path.abspath(f.filename).startswith(AUTOFLOW_DIR)
              and "site-packages" not in f.filename]
    assert frames, "no user frame in the traceback"
    return frames[-1]


def internal_frames(exc) -> list[str]:
    """autoflow-internal frames anywhere in what Python would print for ``exc``."""
    out, seen = [], set()
    e = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        out += [f"{f.filename}:{f.lineno}" for f in traceback.extract_tb(e.__traceback__)
                if os.path.abspath(f.filename).startswith(AUTOFLOW_DIR)]
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    return out


# ---------------------------------------------------------------------------
# 1-4: traced `if`
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [one_branch.one_branch, one_branch.one_branch_other_side])
def test_an_array_assigned_in_one_branch_is_checked_when_read(fn):
    # Python reads it where it is bound and raises UnboundLocalError where it is not:
    # so does the compiled code, one compiled function for both (the check at run time).
    jitted = autoflow.jit(fn)
    for x in (1.0, -1.0):
        try:
            want = fn(x)
        except UnboundLocalError as e:
            with pytest.raises(UnboundLocalError) as info:
                jitted(jnp.float32(x))
            assert str(info.value) == str(e)
        else:
            assert float(jitted(jnp.float32(x))) == want


@pytest.mark.parametrize("fn, name, side", [
    (one_branch.label_on_one_branch, "label", "true"),
    (one_branch.label_on_other_branch, "label", "false"),
])
def test_a_value_that_is_no_array_assigned_in_one_branch(fn, name, side):
    exc = raises_conversion_error(fn, 1.0)
    msg = check_message(exc, fn, names=[name], construct="if")
    assert f"only when the condition is {side}" in msg


def test_branches_with_different_shapes():
    fn = shapes.branch_shapes
    exc = raises_conversion_error(fn, X3)
    check_message(exc, fn, names=["v"], mentions=["float32[3]", "float32[4]"], construct="if")


def test_non_scalar_if_condition():
    fn = conditions.nonscalar_if
    exc = raises_conversion_error(fn, X3)
    msg = check_message(exc, fn, mentions=["(3,)", "jnp.where", ".any()", ".all()"],
                        construct="if")
    assert "scalar" in msg


def test_walrus_in_a_later_operand_with_a_traced_first_operand():
    # `y := ...` must bind in the function, so the `and` stays Python; its
    # traced first operand is then reported at that operand.
    fn = conditions.walrus_after_traced_operand
    exc = raises_conversion_error(fn, 1.0)
    msg = check_message(exc, fn, names=["y"], mentions=[":="], construct="x > 0")
    assert "stays Python" in msg


def test_walrus_in_a_later_operand_with_a_concrete_first_operand_runs():
    fn = conditions.walrus_after_traced_operand
    for x in (2.0, 0.25, -1.0):
        assert autoflow.convert(fn)(x) == fn(x)


def test_traced_filter_in_a_comprehension():
    fn = conditions.filter_in_comprehension
    exc = raises_conversion_error(fn, X3)
    msg = check_message(exc, fn, mentions=["comprehension", "jnp.where", "`for` loop"],
                        construct="x > 0")
    assert "length" in msg


def test_concrete_filter_in_a_comprehension_runs():
    def f(x):
        return sum([x * k for k in range(5) if k % 2])
    assert autoflow.jit(f)(2.0) == f(2.0)


def test_global_written_under_a_traced_if():
    fn = conditions.global_write_under_traced_if
    exc = raises_conversion_error(fn, 1.0)
    check_message(exc, fn, names=["counter"], mentions=["global"], construct="x > 0")


@pytest.mark.parametrize("x, expected", [(1.0, 1.0), (-1.0, 2.5)])
def test_branch_dtypes_are_promoted_not_an_error(x, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = autoflow.jit(shapes.promoted)(x)
    assert jnp.issubdtype(out.dtype, jnp.floating)
    assert out.shape == ()
    np.testing.assert_allclose(np.asarray(out), expected)


# ---------------------------------------------------------------------------
# 5-6: return on traced paths
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [returns.falls_off, returns.falls_off_else,
                                early_returns.nested_return])
def test_function_falls_off_its_end_on_one_path(fn):
    exc = raises_conversion_error(fn, 1.0)
    msg = check_message(exc, fn, construct="if")
    assert "falls off" in msg and "None" in msg


def test_falls_off_its_end_after_a_traced_loop():
    fn = early_returns.return_in_loop
    exc = raises_conversion_error(fn, 1.0, 3)
    msg = check_message(exc, fn, construct="while")
    assert "falls off" in msg


def test_inconsistent_return_structures():
    fn = returns.return_structures
    exc = raises_conversion_error(fn, 1.0)
    check_message(exc, fn, mentions=["tuple", "float32[]"], construct="if")


def test_inconsistent_return_shapes():
    fn = returns.return_shapes
    exc = raises_conversion_error(fn, X3)
    check_message(exc, fn, mentions=["float32[3]", "float32[4]"], construct="if")


@pytest.mark.parametrize("fn, args, construct", [
    (early_returns.return_in_while_shapes, (1.0, 3), "while"),
    (early_returns.return_in_for_structures, (1.0, 3), "for"),
    (early_returns.return_in_static_loop, (1.0,), "for"),
])
def test_return_in_loop_names_the_loop(fn, args, construct):
    exc = raises_conversion_error(fn, *args)
    msg = check_message(exc, fn, construct=construct)
    assert "`if`" not in msg, msg


@pytest.mark.parametrize("fn, args", [
    (returns.falls_off, (1.0,)),
    (returns.falls_off_else, (1.0,)),
    (returns.return_structures, (1.0,)),
    (returns.return_shapes, (X3,)),
    (early_returns.nested_return, (1.0,)),
    (early_returns.return_in_loop, (1.0, 3)),
    (early_returns.return_in_while_shapes, (1.0, 3)),
    (early_returns.return_in_for_structures, (1.0, 3)),
    (early_returns.return_in_static_loop, (1.0,)),
    (early_returns.two_returns_in_loop, (1.0, 9)),
    (early_returns.return_none_in_loop, (1.0, 9)),
    (early_returns.return_tuple_in_loop, (1.0, 9)),
    (early_returns.two_returns_in_static_loop, (1.0,)),
])
def test_internal_return_variable_never_leaks(fn, args):
    exc = raises_conversion_error(fn, *args)
    msg = str(exc)
    assert not re.search(r"\bretval\b", msg), msg
    for internal in ("`returned`", "`broke`", "`continued`"):
        assert internal not in msg, msg


# ---------------------------------------------------------------------------
# 7-10: traced loops
# ---------------------------------------------------------------------------

def test_loop_carry_changes_shape():
    fn = loops.carry_shape
    exc = raises_conversion_error(fn, 1.0, 3)
    check_message(exc, fn, names=["acc"], mentions=["float32[1]", "float32[2]"],
                  construct="while")


def test_loop_carry_changes_shape_suggests_preallocation():
    exc = raises_conversion_error(loops.carry_shape, 1.0, 3)
    msg = str(exc)
    assert "changes shape" in msg, msg
    assert "acc.at[i].set" in msg, msg


def test_loop_carry_starts_as_none():
    fn = loops.carry_from_none
    exc = raises_conversion_error(fn, 1.0, 3)
    check_message(exc, fn, names=["best"], mentions=["None", "float32[]"], construct="while")


def test_list_grows_in_loop_with_traced_trip_count():
    fn = loops.list_grows
    exc = raises_conversion_error(fn, 1.0, 3)
    msg = check_message(exc, fn, names=["out"], mentions=["list"], construct="for")
    # both fixes that work, in one message: the static bound by name and how, and a
    # buffer of fixed size with a count (tests/test_advice.py runs each)
    assert 'autoflow.jit(list_grows, static_argnames=("n",))' in msg, msg
    assert "`n` is an argument of `list_grows`" in msg, msg
    assert "out = jnp.zeros((capacity,), jnp.float32)" in msg and "count = 0" in msg, msg
    assert "out = out.at[count].set(item)" in msg and "count = count + 1" in msg, msg


def test_non_scalar_while_condition():
    fn = conditions.nonscalar_while
    exc = raises_conversion_error(fn, X3)
    check_message(exc, fn, mentions=["(3,)", ".any()", ".all()"], construct="while")


# ---------------------------------------------------------------------------
# 11: source unavailable
# ---------------------------------------------------------------------------

def _made_by_exec(name="made"):
    ns = {}
    exec(f"def {name}(x):\n    return x * 2\n", ns)  # noqa: S102
    return ns[name]


def test_source_unavailable_warns_once_and_runs(monkeypatch):
    monkeypatch.delenv("AUTOFLOW_STRICT", raising=False)
    fn = _made_by_exec()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert float(autoflow.jit(fn)(3.0)) == 6.0
        assert float(autoflow.jit(fn)(4.0)) == 8.0
        assert autoflow.convert(fn)(5.0) == 10.0
    ours = [w for w in caught if issubclass(w.category, ConversionWarning)]
    assert len(ours) == 1, [str(w.message) for w in ours]
    msg = str(ours[0].message)
    assert "`made`" in msg
    assert "source" in msg  # why
    assert "autoflow.do_not_convert" in msg  # how to silence it
    for p in INTERNAL_PATHS:
        assert p not in msg


def test_source_unavailable_warning_points_at_the_caller_of_convert(monkeypatch):
    monkeypatch.delenv("AUTOFLOW_STRICT", raising=False)
    fn = _made_by_exec()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        autoflow.convert(fn)
    (w,) = [w for w in caught if issubclass(w.category, ConversionWarning)]
    assert os.path.abspath(w.filename) == os.path.abspath(__file__)


def test_source_unavailable_warning_points_at_the_caller_of_jit(monkeypatch):
    monkeypatch.delenv("AUTOFLOW_STRICT", raising=False)
    fn = _made_by_exec()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        autoflow.jit(fn)
    (w,) = [w for w in caught if issubclass(w.category, ConversionWarning)]
    assert os.path.abspath(w.filename) == os.path.abspath(__file__)


def test_do_not_convert_silences_the_warning(monkeypatch):
    monkeypatch.delenv("AUTOFLOW_STRICT", raising=False)
    fn = autoflow.do_not_convert(_made_by_exec())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(autoflow.jit(fn)(3.0)) == 6.0


def test_source_unavailable_strict_argument_raises(monkeypatch):
    monkeypatch.delenv("AUTOFLOW_STRICT", raising=False)
    fn = _made_by_exec()
    with pytest.raises(ConversionError, match=r"`made`.*source"):
        autoflow.jit(fn, strict=True)


def test_source_unavailable_strict_environment_raises(monkeypatch):
    monkeypatch.setenv("AUTOFLOW_STRICT", "1")
    fn = _made_by_exec()
    with pytest.raises(ConversionError, match=r"`made`.*source") as info:
        autoflow.convert(fn)
    assert isinstance(info.value, AutoflowError)


def test_source_unavailable_strict_message_says_what_to_do(monkeypatch):
    monkeypatch.setenv("AUTOFLOW_STRICT", "1")
    with pytest.raises(ConversionError) as info:
        autoflow.convert(_made_by_exec())
    assert "do_not_convert" in str(info.value), str(info.value)


# ---------------------------------------------------------------------------
# 12: the user's own exceptions keep their type and line
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("via", ["convert", "jit"])
def test_user_zero_division_keeps_type_and_line(via):
    fn = user_errors.divides
    f = autoflow.convert(fn) if via == "convert" else autoflow.jit(fn, static_argnames="k")
    with pytest.raises(ZeroDivisionError) as info:
        f(1.0, 0)
    frame = last_user_frame(info.value)
    assert os.path.abspath(frame.filename) == source_file(fn)
    assert frame.lineno == marked_line(fn)
    assert "1 / k" in frame.line


def test_user_jax_shape_error_keeps_type_and_line():
    fn = user_errors.bad_add
    with pytest.raises(TypeError) as info:
        autoflow.jit(fn)(X3)
    assert not isinstance(info.value, AutoflowError)
    assert "(3,)" in str(info.value) and "(4,)" in str(info.value)
    frame = last_user_frame(info.value)
    assert os.path.abspath(frame.filename) == source_file(fn)
    assert frame.lineno == marked_line(fn)
    assert "jnp.ones(4)" in frame.line


# ---------------------------------------------------------------------------
# 13: no autoflow frames in the traceback of a ConversionError
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("fn, args", [
    (one_branch.label_on_one_branch, (1.0,)),
    (shapes.branch_shapes, (X3,)),
    (conditions.nonscalar_if, (X3,)),
    (returns.falls_off, (1.0,)),
    (loops.carry_shape, (1.0, 3)),
    (loops.list_grows, (1.0, 3)),
    (conditions.nonscalar_while, (X3,)),
])
def test_conversion_error_traceback_has_no_internal_frames(fn, args):
    exc = raises_conversion_error(fn, *args)
    assert internal_frames(exc) == []
    printed = "".join(traceback.format_exception(exc))
    for p in ("autoflow/runtime", "autoflow/transforms", "autoflow/core", "autoflow/api.py"):
        assert p not in printed, printed
    # The innermost frame is the user's marked line.
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    assert os.path.abspath(frame.filename) == source_file(fn)
    assert frame.lineno == marked_line(fn)


def test_no_note_of_jax_about_frames_it_removed_after_autoflows_error():
    """JAX's traceback filtering notes "For simplicity, JAX has removed its internal
    frames from the traceback of the following exception" on what leaves `jax.jit`:
    after autoflow's message (which already ends with what to do) nothing followed it."""
    for fn, args in ((loops.list_grows, (1.0, 3)), (one_branch.label_on_one_branch, (1.0,))):
        exc = raises_conversion_error(fn, *args)
        printed = "".join(traceback.format_exception(exc))
        assert "removed its internal frames" not in printed, printed
        assert printed.rstrip().endswith(str(exc).splitlines()[-1]), printed
    with pytest.raises(jax.errors.TracerBoolConversionError) as info:
        autoflow.jit(user_errors_do_not_convert)(1.0)
    assert "removed its internal frames" not in "".join(traceback.format_exception(info.value))


@autoflow.do_not_convert
def _magnitude(x):
    if x > 0:
        return x
    return -x


def user_errors_do_not_convert(x):
    return _magnitude(x)


def test_conversion_error_through_vmap_has_no_internal_frames():
    with pytest.raises(ConversionError) as info:
        jax.vmap(autoflow.convert(one_branch.label_on_one_branch))(X3)
    exc = info.value
    check_message(exc, one_branch.label_on_one_branch, names=["label"], construct="if")
    assert internal_frames(exc) == []


@pytest.mark.xfail(strict=True, reason=(
    "reading a variable unassigned on a concrete path (no JAX transformation, so no JAX "
    "traceback filtering) raises a ConversionError whose traceback ends in "
    "autoflow/runtime/common/values.py (Undefined._fail)"))
def test_unassigned_read_on_concrete_path_has_no_internal_frames():
    with pytest.raises(AutoflowError) as info:
        autoflow.convert(one_branch.read_unassigned)(1.0, False)
    assert internal_frames(info.value) == []


def test_unassigned_read_on_concrete_path_message():
    # Python raises UnboundLocalError here; so does autoflow (an AutoflowError
    # too, with the usual message), and a user's `except UnboundLocalError` catches it.
    fn = one_branch.read_unassigned
    with pytest.raises(UnboundLocalError) as info:
        autoflow.convert(fn)(1.0, False)
    assert isinstance(info.value, autoflow.AutoflowError)
    check_message(info.value, fn, names=["y"])


def test_branch_errors_name_what_differs():
    def keys_differ(x):
        d = {}
        if x > 0:
            d["pos"] = x
        else:
            d["neg"] = x
        return d

    def kinds_differ(x, key):
        if x > 0:
            r = key
        else:
            r = x
        return r

    with pytest.raises(ConversionError, match=r"different structure.*\['pos'\].*\['neg'\]"):
        autoflow.jit(keys_differ)(1.0)
    with pytest.raises(ConversionError, match="values of one kind"):
        autoflow.jit(kinds_differ)(1.0, jax.random.key(0))
