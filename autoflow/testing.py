"""Golden before/after checks of conversions, for users' tests and ours.

With pytest, use the ``autoflow_golden`` fixture of autoflow's plugin
(installed with autoflow; paths are relative to the test file):

```python
def test_step(autoflow_golden):
    autoflow_golden.check_conversion("golden/step.py")          # step.after.py
    autoflow_golden.check_conversion("golden/step.py", function="step")
                                                         # step.step.after.py
    autoflow_golden.check_behaviour("golden/step.py", {"step": [(1.0,), (-2.0,)]})
```

``pytest --autoflow-update`` rewrites the expected files instead of comparing;
review their diff. The same functions are importable from
``autoflow.testing`` for other test runners (``AUTOFLOW_REGENERATE=1`` or
``regenerate=True`` rewrite the files there).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from .transforms.module import convert_module

# Set by the pytest plugin's ``--autoflow-update`` flag.
UPDATE = False


def expected_path(before, function=None) -> Path:
    """``NAME.after.py`` beside ``NAME.py``; ``NAME.FUNCTION.after.py`` for one function."""
    before = Path(before)
    middle = f".{function}" if function else ""
    return before.with_name(f"{before.stem}{middle}.after.py")


def _regenerating(regenerate) -> bool:
    if regenerate is not None:
        return regenerate
    return UPDATE or os.environ.get("AUTOFLOW_REGENERATE", "") not in ("", "0")


def function_source(source: str, name: str, where: str = "<converted>") -> str:
    """The text of the top-level function or class ``name`` in ``source``
    (decorators and the comment lines just above it included), as written."""
    import ast

    lines = source.splitlines(True)
    for node in ast.parse(source).body:
        if getattr(node, "name", None) == name and hasattr(node, "body"):
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            while first > 1 and lines[first - 2].lstrip().startswith("#"):
                first -= 1
            return "".join(lines[first - 1:node.end_lineno])
    raise AssertionError(f"{where} has no top-level function or class `{name}`")


def _read(path):
    """The source of the golden ``path``, read as Python (and the CLI) read it: its
    coding declaration, a byte order mark; an ``AssertionError`` naming the file for
    one that cannot be read or parsed."""
    import ast

    from ._cli_io import InputError, read_source

    try:
        source = read_source(str(path))
        ast.parse(source, filename=str(path))
    except InputError as e:
        raise AssertionError(str(e)) from None
    except SyntaxError as e:
        raise AssertionError(f"{path}:{e.lineno}:{e.offset}: SyntaxError: {e.msg}") from None
    return source


def check_conversion(before, expected=None, *, function=None, regenerate=None) -> str:
    """Convert the file ``before`` and compare with ``expected``.

    ``expected`` defaults to ``NAME.after.py`` beside ``NAME.py`` (the whole
    module as ``autoflow convert NAME.py`` prints it) or, with
    ``function="f"``, to ``NAME.f.after.py`` holding only the converted ``f``
    (one golden per function). Raises ``AssertionError`` with a unified diff
    when they differ; ``pytest --autoflow-update`` (the plugin's flag),
    ``AUTOFLOW_REGENERATE=1`` or ``regenerate=True`` rewrite the expected file
    instead. Returns the converted text (of the module, or of the function).
    """
    before = Path(before)
    expected = Path(expected) if expected is not None else expected_path(before, function)
    actual, _ = convert_module(_read(before), str(before))
    if function is not None:
        actual = function_source(actual, function, f"the conversion of {before}")
    if _regenerating(regenerate):
        expected.write_text(actual, encoding="utf-8")
        return actual
    if not expected.exists():
        raise AssertionError(f"{expected} does not exist; run pytest with --autoflow-update "
                             "(or AUTOFLOW_REGENERATE=1) to create it, then review it")
    want = expected.read_text(encoding="utf-8")
    if actual != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), actual.splitlines(True),
                                            str(expected), "converted"))
        raise AssertionError(f"conversion of {before} differs from {expected} "
                             f"(pytest --autoflow-update or AUTOFLOW_REGENERATE=1 rewrites it):\n{diff}")
    return actual


def _same(a, b):
    import jax
    import numpy as np
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    if ta != tb:
        return False
    return all(np.shape(x) == np.shape(y) and np.allclose(np.asarray(x), np.asarray(y),
                                                          rtol=1e-5, atol=1e-6, equal_nan=True)
               for x, y in zip(la, lb))


def _outcome(fn, args):
    try:
        return "value", fn(*args)
    except Exception as e:  # noqa: BLE001 - the user's exception is the result compared
        return "raised", e


def _describe(outcome):
    kind, value = outcome
    return f"raises {type(value).__name__}: {value}" if kind == "raised" else f"gives {value!r}"


def check_behaviour(before, cases, *, jit=True):
    """Run the functions of the file ``before`` eagerly and converted, and compare.

    ``cases`` maps a function name to a list of argument tuples. Each function
    runs as written, converted (the module ``autoflow convert`` prints) on
    concrete values and, with ``jit=True``, converted under ``jax.jit``. The
    results must agree (pytrees of equal structure, arrays equal to float
    tolerance); an exception raised as written must be raised, of the same type
    (or a subclass, which an ``except`` of it catches), by the converted function on
    concrete values. An ``AssertionError``
    names the function and the input where they differ.
    """
    import jax

    before = Path(before)
    source = _read(before)
    converted, _ = convert_module(source, str(before))
    eager_ns = {"__name__": before.stem, "__file__": str(before)}
    exec(compile(source, str(before), "exec"), eager_ns)
    conv_ns = {"__name__": before.stem, "__file__": str(before)}
    exec(compile(converted, str(before) + " (converted)", "exec"), conv_ns)
    for name, inputs in cases.items():
        if name not in eager_ns:
            raise AssertionError(f"{before.name} has no function `{name}`")
        for args in inputs:
            args = args if isinstance(args, tuple) else (args,)
            call = f"{before.name}: {name}{args!r}"
            want = _outcome(eager_ns[name], args)
            runs = [("converted", conv_ns[name])]
            if jit and want[0] == "value":
                runs.append(("converted under jax.jit", jax.jit(conv_ns[name])))
            for how, fn in runs:
                got = _outcome(fn, args)
                if want[0] == "raised":
                    # (of its type or a subclass, which an `except` of it catches:
                    # autoflow's UnboundVariableError is an UnboundLocalError)
                    same = got[0] == "raised" and isinstance(got[1], type(want[1]))
                else:
                    same = got[0] == "value" and _same(want[1], got[1])
                if not same:
                    raise AssertionError(f"{call} {_describe(got)} {how}, "
                                         f"but {_describe(want)} when run as written")
