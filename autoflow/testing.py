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
        regenerate = os.environ.get("AUTOFLOW_REGENERATE", "") not in ("", "0")
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
                             f"(AUTOFLOW_REGENERATE=1 rewrites it):\n{diff}")
    return actual
