"""Advice that works (issue 45): every fix an error suggests, applied as written, runs.

The error reference (``docs/error-reference.md``) holds, for each kind of error autoflow
raises, a program that raises it and, after it, the same program with the fix that the
message suggests applied as written: a block marked ``<!-- fix: TEXT -->``, where TEXT is
quoted from the message (``autoflow.jit(multiples, static_argnames=("n",))``,
``out = out.at[count].set(item)``...). This test runs the page in order: each failing
program must raise its error, each fix's TEXT must be in the message just raised, and
each fixed program must run (its own ``assert``s check what it computes). The list built
in a traced loop has both of its fixes: the static bound and a buffer with a count.
(``tests/test_docs.py`` checks the page's other blocks by the same rules.)
"""

from __future__ import annotations

from .test_docs import ALL, DOCS, _run_page

PAGE = DOCS / "error-reference.md"

# Errors that are the program's own, with no advice of autoflow's to follow: a traced
# `assert` that fails on these inputs, the user's `raise`, and Python's own
# UnboundLocalError (a variable no path bound).
OWN = ("AssertionError", "ValueError", "UnboundLocalError")


def _kinds():
    return [b for b in ALL if b.page == "docs/error-reference.md" and b.raises is not None
            and b.skip is None]


def test_every_error_kind_has_a_failing_program():
    names = {b.raises.partition(":")[0].strip() for b in _kinds()}
    assert {"ConversionError", "TracedShapeError", "TracedSliceError",
            "NonConcreteBooleanIndexError", "TracerBoolConversionError",
            "LoopLimitError"} <= names, names
    assert len(_kinds()) >= 20


def test_each_error_is_followed_by_the_fix_its_message_suggests(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    raised = _run_page(PAGE, tmp_path)  # each raises, each fix is suggested and runs
    assert len(raised) == len(_kinds())
    missing = [block.where for block, _, fixes in raised
               if not fixes and block.raises.partition(":")[0].strip() not in OWN]
    assert not missing, f"errors whose message's fix is not applied on the page: {missing}"
    # the list built in a traced loop: both fixes, from one message
    (message, fixes), = [(m, f) for b, m, f in raised if "grows in each iteration" in m]
    assert {f.fix for f in fixes} == {'autoflow.jit(multiples, static_argnames=("n",))',
                                      "out = out.at[count].set(item)"}, message
