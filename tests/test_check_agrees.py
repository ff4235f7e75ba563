"""``autoflow check`` agrees with the run (issue 45).

For every program of ``tests/fixtures``, ``tests/error_cases``, ``examples/`` and the
site's error reference, what ``autoflow check`` says about it (a statement that cannot
convert or fails when traced, or a warning whose code says the program fails:
``check.FAILING_CODES``) predicts what ``autoflow.jit`` does at the first call with
traced arguments: it traces and lowers, or it raises. The first call is made as
``autoflow.jit(f, **jit_kwargs).lower(*args)``: tracing and lowering are what a first
call does before the compiled code runs (what the compiled code then does with the
values, a traced ``assert`` that fails on these inputs, is the program's own business,
which no reading of the source can know).

The test computes the agreement over all of them and lists every disagreement. Those
that are known and explained (``EXCEPTIONS``, the same list as in
``docs/cli.md#what-check-cannot-know``) are allowed; any other fails the test.
``python -m tests.test_check_agrees`` prints the whole table.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib.util
import re
import sys
import tempfile
import warnings
from pathlib import Path

import jax.numpy as jnp
import pytest

import autoflow
from autoflow import check, pitfalls

ROOT = Path(__file__).resolve().parent.parent
X3 = jnp.arange(3.0, dtype=jnp.float32)

# The programs of tests/error_cases and how the tests call them (tests/test_errors*.py):
# the arguments of the first call, and the keyword arguments of autoflow.jit.
ERROR_CASES = {
    "conditions": {
        "nonscalar_if": (X3,), "nonscalar_while": (X3,), "walrus_after_traced_operand": (1.0,),
        "global_write_under_traced_if": (1.0,), "filter_in_comprehension": (X3,),
    },
    "early_returns": {
        "return_in_loop": (1.0, 3), "return_in_while_shapes": (1.0, 3),
        "return_in_for_structures": (1.0, 3), "nested_return": (1.0,),
        "two_returns_in_loop": (1.0, 3), "return_none_in_loop": (1.0, 3),
        "return_tuple_in_loop": (1.0, 3), "return_in_static_loop": (1.0,),
        "two_returns_in_static_loop": (1.0,),
    },
    "loops": {"carry_shape": (1.0, 3), "carry_from_none": (1.0, 3), "list_grows": (1.0, 3)},
    "one_branch": {"one_branch": (1.0,), "one_branch_other_side": (1.0,),
                   "read_unassigned": (1.0, True), "label_on_one_branch": (1.0,),
                   "label_on_other_branch": (1.0,)},
    "returns": {"falls_off": (1.0,), "return_structures": (1.0,), "return_shapes": (X3,),
                "falls_off_else": (1.0,)},
    "shapes": {"branch_shapes": (X3,), "promoted": (1.0,)},
    "teach": {
        "zeros_of_traced_size": (X3, 3), "size_from_argument": (1.0, 2), "mask_index": (X3,),
        "sqrt_in_while_test": (16.0,), "numpy_in_body": (X3 + 2.0,), "item_in_body": (X3 + 2.0,),
        "float_in_body": (4.0,), "lambdas_in_traced_loop": (3,), "string_label": (1.0,),
        "string_label_expression": (1.0,),
        "none_on_one_path": (1.0,), "function_on_each_path": (1.0,), "string_in_loop": (3.0,),
        "object_made_again_in_loop": (1.0,), "collected_until_zero": (2,),
        "runaway": (3.0,), "checked": (X3 - 1.0,), "raises_at_run_time": (1.0,),
        "doubling": (1.5,), "counted_scale": (2.0, 3), "lambdas_in_traced_range": (X3, 3),
        "refined_until_large": (2.0,),
    },
    "user_errors": {"divides": (1.0, 2), "bad_add": (X3,)},
    "python_objects": {
        "iterator_in_while": (0.0,), "generator_in_if": (1.0,), "popped_in_while": (0.0,),
        "popped_in_test": (2.5,), "iterator_in_test": (3.5,),
        "recorded_in_module_list": (20.0,), "counted_in_module_dict": (1.0,),
        "keyed_by_a_counter": (20.0,),
        "appended_on_one_path": (jnp.array([1.0, -2.0, 3.0]),),
        "numpy_sine_in_branch": (1.0,), "first_best": (jnp.array([3.0, 7.0, 2.0]),),
        "distinct_positives": (jnp.array([1.0, 2.0, 1.0, -1.0]),), "labelled": (1.0,),
        "factorial": (5,), "pairs_of_flags": (1.0, 2.0), "lanes_of_signs": (1.0, -2.0),
    },
}

# Disagreements that are known, each with why no reading of the source can tell:
# program -> reason. docs/cli.md lists the same programs under "What check cannot know".
EXCEPTIONS: dict[str, str] = {
    "tests/error_cases/conditions.py:nonscalar_if":
        "`if x > 0` is fine for a scalar `x`; it is called with an array of shape (3,)",
    "tests/error_cases/conditions.py:nonscalar_while":
        "`while x < 10` is fine for a scalar `x`; it is called with an array of shape (3,)",
    "tests/error_cases/user_errors.py:bad_add":
        "`x + jnp.ones(4)` is fine for an `x` of 4 items (or 1); it is called with 3",
    # Not read by check yet (issue 43's strings and tables):
    "docs/error-reference.md:digits_of":
        "`len(str(x))` is computed for a traced integer; it is called with a float",
    "docs/error-reference.md:label":
        "a string made from traced values returned by the jitted function",
    "docs/error-reference.md:paths":
        "rows of `[[0] * k] * m` are one list; a write at a traced index would change all",
}


@dataclasses.dataclass
class Row:
    program: str          # where it comes from: file and function, or page and line
    predicted: bool       # check says it fails
    failed: bool          # the first call raised
    said: str = ""        # what check said (its first failing line)
    raised: str = ""      # what the first call raised

    @property
    def agrees(self):
        return self.predicted == self.failed


# ---------------------------------------------------------------------------
# what check says
# ---------------------------------------------------------------------------

def _calls(fn_node):
    return {n.func.id for n in ast.walk(fn_node)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


_seen: dict = {}


def _checked(source, filename, static):
    """What ``autoflow check`` says of a file: its findings and its warnings (once per
    file and static names: a file holds several programs)."""
    key = (source, filename, repr(sorted((k, sorted(v)) for k, v in (static or {}).items())))
    if key not in _seen:
        _seen[key] = (check.check_source(source, filename, static=static),
                      pitfalls.find(source, filename, static=static))
    return _seen[key]


def prediction(source, filename, entry, static=None):
    """``(fails, what check said)`` for the function ``entry`` of ``source`` and the
    functions of the same source it calls (by name, transitively). ``static``: function
    name -> parameters made static (``autoflow check --static``)."""
    tree = ast.parse(source)
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef,
                                                                ast.AsyncFunctionDef))}
    reached, todo = set(), [entry]
    while todo:
        name = todo.pop()
        if name in reached or name not in functions:
            continue
        reached.add(name)
        todo.extend(_calls(functions[name]))
    said = []
    findings, warnings_ = _checked(source, filename, static)
    for f in findings:
        if f.function.split(".")[0] in reached and not f.ok:
            said.append(f.format())
    spans = [(functions[n].lineno, functions[n].end_lineno) for n in reached]
    for p in warnings_:
        if p.code in check.FAILING_CODES and any(a <= p.line <= b for a, b in spans):
            said.append(p.format().splitlines()[0])
    return bool(said), (said[0] if said else "")


# ---------------------------------------------------------------------------
# what the first call does
# ---------------------------------------------------------------------------

def first_call(fn, args, kwargs=None, jit_kwargs=None):
    """``(raised, what)``: ``autoflow.jit(fn, **jit_kwargs).lower(*args, **kwargs)``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", autoflow.PerformanceWarning)
            autoflow.jit(fn, **(jit_kwargs or {})).lower(*args, **(kwargs or {}))
    except Exception as e:  # noqa: BLE001 - what it raised is the outcome
        return True, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return False, ""


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return module


def _static_names(fn, jit_kwargs):
    """The parameter names ``static_argnames``/``static_argnums`` of ``jit_kwargs`` make
    static (what ``autoflow check --static`` is told)."""
    import inspect

    names = jit_kwargs.get("static_argnames", ())
    names = [names] if isinstance(names, str) else list(names)
    nums = jit_kwargs.get("static_argnums", ())
    nums = [nums] if isinstance(nums, int) else list(nums)
    params = list(inspect.signature(fn).parameters)
    return set(names) | {params[i] for i in nums}


def fixture_rows():
    rows = []
    for path in sorted((ROOT / "tests" / "fixtures").glob("*.py")):
        if path.name.endswith(".after.py"):
            continue
        module = _load(path, f"agree_fixture_{path.stem}")
        source = path.read_text()
        seen = set()
        for name, args in getattr(module, "CASES", []):
            if name in seen:
                continue
            seen.add(name)
            kw = getattr(module, "JIT_KWARGS", {}).get(name, {})
            static = {name: _static_names(getattr(module, name), kw)}
            predicted, said = prediction(source, str(path), name, static)
            failed, raised = first_call(getattr(module, name), args, jit_kwargs=kw)
            rows.append(Row(f"tests/fixtures/{path.name}:{name}", predicted, failed, said, raised))
    return rows


def error_case_rows():
    rows = []
    folder = ROOT / "tests" / "error_cases"
    for stem, table in ERROR_CASES.items():
        path = folder / f"{stem}.py"
        module = importlib.import_module(f"tests.error_cases.{stem}")
        source = path.read_text()
        for name, args in table.items():
            predicted, said = prediction(source, str(path), name)
            failed, raised = first_call(getattr(module, name), args)
            rows.append(Row(f"tests/error_cases/{stem}.py:{name}", predicted, failed, said, raised))
    return rows


class _Stop(Exception):
    pass


def example_rows():
    """Each example compiles its algorithm with autoflow.jit and times its first call
    with ``bench(jitted, *args)``: that call, lowered."""
    rows = []
    for path in sorted((ROOT / "examples").glob("*.py")):
        source = path.read_text()
        module = _load(path, f"agree_example_{path.stem}")
        calls = []

        def bench(fn, *args, **kwargs):
            calls.append((fn, args, kwargs))
            raise _Stop

        if not hasattr(module, "bench"):
            continue  # (distributed.py: workers in other processes; see test_examples)
        module.bench = bench
        with contextlib.suppress(_Stop):
            module.main()
        (fn, args, kwargs), = calls[:1] or [(None, (), {})]
        original = getattr(fn, "__wrapped__", fn)
        name = getattr(original, "__name__", "?")
        predicted, said = prediction(source, str(path), name)
        try:
            fn.lower(*args, **kwargs)
            failed, raised = False, ""
        except Exception as e:  # noqa: BLE001
            failed, raised = True, f"{type(e).__name__}: {e}"
        rows.append(Row(f"examples/{path.name}:{name}", predicted, failed, said, raised))
    return rows


FENCE = re.compile(r"^```python\s*$")


def reference_rows():
    """The python blocks of the error reference that call a function made with
    ``autoflow.jit``: each block's source is checked alone, and run after the page's
    blocks before it (as tests/test_docs.py runs them) with ``autoflow.jit`` recording
    the first call of each function it makes."""
    from .test_docs import ALL, DOCS

    page = DOCS / "error-reference.md"
    blocks = [b for b in ALL if b.page == "docs/error-reference.md" and b.lang == "python"
              and b.skip is None and b.source_of is None]
    namespace: dict = {"__name__": "agree_reference"}
    rows: list = []
    with tempfile.TemporaryDirectory(prefix="agree-reference-") as where:
        _reference_rows(Path(where), page, blocks, namespace, rows)
    return rows


def _reference_rows(folder, page, blocks, namespace, rows):
    real_jit = autoflow.jit
    for block in blocks:
        made = []

        def recording_jit(fn=None, **kw):
            if fn is None:
                return lambda f: recording_jit(f, **kw)
            jitted = real_jit(fn, **kw)
            made.append((fn, kw))

            def first(*args, **kwargs):
                made.append(("call", fn, kw, args, kwargs))
                return jitted(*args, **kwargs)
            first.__wrapped__ = fn
            first.lower = jitted.lower
            return first

        autoflow.jit = recording_jit
        try:
            path = folder / f"{page.stem.replace('-', '_')}_{block.line}.py"
            path.write_text(block.code)  # (autoflow reads the source of what it converts)
            namespace["__file__"] = str(path)
            code = compile(block.code, str(path), "exec")
            with contextlib.suppress(Exception):
                exec(code, namespace)  # noqa: S102 - the page's own code
        finally:
            autoflow.jit = real_jit
        for call in [m for m in made if m[0] == "call"][:1]:
            _, fn, kw, args, kwargs = call
            name = getattr(fn, "__name__", "?")
            try:
                predicted, said = prediction(block.code, str(path), name,
                                             {name: _static_names(fn, kw)})
            except SyntaxError:
                continue
            failed, raised = first_call(fn, args, kwargs, kw)
            rows.append(Row(f"{block.where}:{name}", predicted, failed, said, raised))


def agreement():
    return fixture_rows() + error_case_rows() + example_rows() + reference_rows()


def _known(program):
    """``program`` as ``EXCEPTIONS`` names it (a page without the block's line)."""
    return re.sub(r"\.md:\d+:", ".md:", program)


def test_check_agrees_with_the_first_call():
    rows = agreement()
    assert len(rows) >= 150
    wrong = [r for r in rows if not r.agrees and _known(r.program) not in EXCEPTIONS]
    agree = sum(r.agrees for r in rows)
    report = "\n".join(
        f"{r.program}: check says {'fails' if r.predicted else 'converts'}"
        f"{' (' + r.said + ')' if r.said else ''}; the first call "
        f"{'raised ' + r.raised if r.failed else 'traced and lowered'}" for r in wrong)
    assert not wrong, f"check agrees on {agree} of {len(rows)} programs; disagreements:\n{report}"
    stale = set(EXCEPTIONS) - {_known(r.program) for r in rows if not r.agrees}
    assert not stale, f"EXCEPTIONS that now agree (remove them): {sorted(stale)}"


def test_the_error_case_table_lists_every_function():
    for stem, table in ERROR_CASES.items():
        tree = ast.parse((ROOT / "tests" / "error_cases" / f"{stem}.py").read_text())
        names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert names == set(table), (stem, names ^ set(table))


def test_the_exceptions_are_explained_in_the_docs():
    text = (ROOT / "docs" / "cli.md").read_text()
    for program, reason in EXCEPTIONS.items():
        assert program.rsplit(":", 1)[1] in text, program


if __name__ == "__main__":
    rows = agreement()
    for r in rows:
        mark = "ok " if r.agrees else "XX "
        print(f"{mark}{r.program}: check {'fails' if r.predicted else 'converts'}; run "
              f"{'raised ' + r.raised[:100] if r.failed else 'ok'}"
              + (f"\n      check: {r.said[:160]}" if r.said else ""))
    print(f"{sum(r.agrees for r in rows)} of {len(rows)} agree")


PYTREE_OR_NOT = '''
import dataclasses
from typing import NamedTuple

import jax


class Plain:
    def __init__(self, pos):
        self.pos = pos


class Named(NamedTuple):
    pos: object


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Registered:
    pos: object


def walk(cls, x):
    w = cls(x)
    while w.pos < 4:
        w = cls(w.pos + 1)
    return w.pos
'''


@pytest.mark.parametrize("cls", ["Plain", "Named", "Registered"])
def test_an_object_made_again_in_a_traced_loop_fails_only_for_a_plain_class(cls, tmp_path):
    # `autoflow check` says what the first call does: only a class that is no pytree fails
    source = PYTREE_OR_NOT + f"\n\ndef run(x):\n    return walk_{cls}(x)\n"
    source = source.replace("def walk(cls, x):\n    w = cls(x)", f"def walk_{cls}(x):\n    w = {cls}(x)")
    source = source.replace("        w = cls(w.pos + 1)", f"        w = {cls}(w.pos + 1)")
    path = tmp_path / "walkers.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("walkers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fails = any(not f.ok for f in check.check_source(source, str(path)))
    try:
        autoflow.jit(getattr(module, f"walk_{cls}"))(jnp.float32(1.0))
        raised = False
    except autoflow.ConversionError:
        raised = True
    assert fails == raised == (cls == "Plain")
