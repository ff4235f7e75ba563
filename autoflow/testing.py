"""Golden before/after checks of conversions, for users' tests and ours.

::

    from autoflow.testing import check_conversion

    def test_my_step():
        check_conversion("tests/golden/step.py")   # compares with step.after.py

The expected output of ``NAME.py`` is ``NAME.after.py`` beside it: the
module as ``autoflow convert NAME.py`` prints it. Set ``AUTOFLOW_REGENERATE=1``
(or pass ``regenerate=True``) to rewrite the expected files after a
deliberate change, then review the diff.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from .transforms.module import convert_module

# Set by the pytest plugin's ``--autoflow-update`` flag.
UPDATE = False


def expected_path(before) -> Path:
    before = Path(before)
    return before.with_name(before.stem + ".after.py")


def check_conversion(before, expected=None, *, regenerate=None) -> str:
    """Convert the file ``before`` and compare with ``expected`` (``NAME.after.py``).

    Raises ``AssertionError`` with a unified diff when they differ. Returns
    the converted text.
    """
    before = Path(before)
    expected = Path(expected) if expected is not None else expected_path(before)
    if regenerate is None:
        regenerate = UPDATE or os.environ.get("AUTOFLOW_REGENERATE", "") not in ("", "0")
    actual, _ = convert_module(before.read_text(encoding="utf-8"), str(before))
    if regenerate or not expected.exists():
        if not regenerate:
            raise AssertionError(f"{expected} does not exist; run with AUTOFLOW_REGENERATE=1 "
                                 "to create it, then review it")
        expected.write_text(actual, encoding="utf-8")
        return actual
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


def check_behaviour(before, cases, *, jit=True):
    """Run the functions of the file ``before`` eagerly and converted, and compare.

    ``cases`` maps a function name to a list of argument tuples. Each function
    runs as written, converted on concrete values and (``jit=True``) converted
    under ``jax.jit``; an ``AssertionError`` names the function and the input
    where the results differ.
    """
    import jax

    before = Path(before)
    source = before.read_text(encoding="utf-8")
    converted, _ = convert_module(source, str(before))
    eager_ns = {"__name__": before.stem, "__file__": str(before)}
    exec(compile(source, str(before), "exec"), eager_ns)
    conv_ns = {"__name__": before.stem, "__file__": str(before)}
    exec(compile(converted, str(before) + " (converted)", "exec"), conv_ns)
    for name, inputs in cases.items():
        for args in inputs:
            args = args if isinstance(args, tuple) else (args,)
            want = eager_ns[name](*args)
            runs = [("converted", conv_ns[name])]
            if jit:
                runs.append(("converted under jax.jit", jax.jit(conv_ns[name])))
            for how, fn in runs:
                got = fn(*args)
                if not _same(want, got):
                    raise AssertionError(f"{before.name}: {name}{args!r} gives {got!r} {how}, "
                                         f"but {want!r} when run as written")
