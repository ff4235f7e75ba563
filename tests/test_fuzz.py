"""Differential fuzzing: random control-flow programs, eager Python vs ``autoflow.jit``.

``tests/fuzzgen.py`` writes random functions (nested ``if``/``elif``/``else``,
bounded ``while``, ``for`` over static ranges, traced ranges and arrays,
``break``/``continue``/``return`` in branches and loops, loop ``else``,
``and``/``or``/``not``, chained comparisons, ternaries) over int and float
scalars and float arrays of shape (3,), from ``random.Random(seed)``. About
two programs in three also share state across
those statements (closures over the variables loops rebind, a ``nonlocal``
counter, attributes of a local object, dict items, a fixed-length list, lists
appended to once per iteration of a static loop; see ``fuzzgen.FEATURES``) and
return it. Each
program is written to a real file, imported, and run eagerly and under
``autoflow.jit`` on two inputs. The oracle:

* the results are equal (same structure and shapes; ints exactly, floats to
  ``rtol=1e-5``), or autoflow raises an ``autoflow.AutoflowError`` (a
  refusal); refusals must stay under 1% of the programs;
* any other exception, or any difference, fails with the program's source,
  seed and inputs;
* ``autoflow.to_source`` output unparses stably (``ast.unparse(ast.parse(s))``
  is a fixed point after one round).

Profiles (environment variables):

* ``AUTOFLOW_FUZZ_STATE=0``: leave out the shared-state features (closures,
  attributes, containers changed in branches and loops), as before they existed.
* ``AUTOFLOW_FUZZ_EXAMPLES``: how many programs (default 300, the fast CI
  profile, about a minute on two cores; ``AUTOFLOW_FUZZ_EXAMPLES=5000`` is
  the long profile);
* ``AUTOFLOW_FUZZ_SEED``: the first seed (default 0); programs use seeds
  ``SEED .. SEED + EXAMPLES - 1``;
* ``AUTOFLOW_FUZZ_AVOID``: comma-separated features to leave out as well
  (``push,ys``; see ``fuzzgen.generate``), to look past a known bug.

Reproduce one program with ``python -m tests.fuzzgen SEED`` (prints its
source and what went wrong); ``python -m tests.fuzzgen SEED --scan COUNT``
checks COUNT programs and groups the failures by error.
"""

from __future__ import annotations

import collections
import os

import pytest

from . import fuzzgen
from .fuzzgen import check, generate

EXAMPLES = int(os.environ.get("AUTOFLOW_FUZZ_EXAMPLES", "300"))
# Programs with shared state (closures over carried variables, attribute updates,
# list/dict mutation in branches and loops) are generated unless
# AUTOFLOW_FUZZ_STATE=0 (see the README's fuzzer record).
AVOID = ("state",) if os.environ.get("AUTOFLOW_FUZZ_STATE") == "0" else ()
AVOID += tuple(a for a in os.environ.get("AUTOFLOW_FUZZ_AVOID", "").split(",") if a)
FIRST_SEED = int(os.environ.get("AUTOFLOW_FUZZ_SEED", "0"))
MAX_REFUSAL_RATE = 0.01
SHOWN = 5  # full reports printed per failing test; the rest are listed by seed


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """Every program's ``fuzzgen.Outcome``, grouped by kind."""
    fuzzgen.set_tmpdir(tmp_path_factory.mktemp("fuzz_programs"))
    by_kind = collections.defaultdict(list)
    for seed in range(FIRST_SEED, FIRST_SEED + EXAMPLES):
        outcome = check(seed, avoid=AVOID)
        by_kind[outcome.kind].append(outcome)
    return by_kind


def _summary(failures, what):
    groups = collections.defaultdict(list)
    for o in failures:
        groups[o.signature()].append(o.seed)
    lines = [f"{len(failures)} of {EXAMPLES} programs: {what}", "by error:"]
    for sig, seeds in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"  {len(seeds):4}  {sig}\n        seeds {seeds[:20]}")
    # One full report per distinct error first, then more up to SHOWN.
    shown, seen = [], set()
    for o in failures:
        if o.signature() not in seen:
            seen.add(o.signature())
            shown.append(o)
    shown += [o for o in failures if o not in shown]
    lines += [o.report() for o in shown[:max(SHOWN, len(seen))]]
    return "\n\n".join(lines)


def test_generator_is_deterministic():
    for seed in (0, 1, 12345):
        assert generate(seed) == generate(seed)
    assert generate(0) != generate(1)


def test_programs_run_eagerly(outcomes):
    """The generator only writes programs whose eager run succeeds."""
    bad = outcomes["generator"]
    if bad:
        pytest.fail(_summary(bad, "eager run raised (a bug in tests/fuzzgen.py)"), pytrace=False)


def test_to_source_round_trip(outcomes):
    bad = outcomes["roundtrip"]
    if bad:
        pytest.fail(_summary(bad, "autoflow.to_source output does not unparse stably"),
                    pytrace=False)


def test_jit_matches_eager(outcomes):
    bad = outcomes["difference"] + outcomes["internal"]
    if bad:
        pytest.fail(_summary(bad, "autoflow.jit differs from eager Python, or raised an "
                                  "exception that is not an AutoflowError"), pytrace=False)


def test_refusals_are_rare(outcomes):
    refused = outcomes["refused"]
    if len(refused) >= MAX_REFUSAL_RATE * EXAMPLES:
        pytest.fail(_summary(refused, "autoflow raised an AutoflowError "
                                      f"(fewer than {MAX_REFUSAL_RATE:.0%} allowed)"),
                    pytrace=False)


def test_ran_them_all(outcomes):
    counts = {kind: len(v) for kind, v in sorted(outcomes.items())}
    print(f"autoflow fuzz: {EXAMPLES} programs from seed {FIRST_SEED}: {counts}")
    lowered = collections.Counter(pair for o in outcomes["ok"] for pair in set(o.lowered))
    for (statement, how), count in sorted(lowered.items()):
        print(f"  {statement:8} -> {how}: {count} programs")
    assert sum(counts.values()) == EXAMPLES
    assert counts.get("ok", 0) > 0
