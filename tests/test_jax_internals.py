"""autoflow on a JAX whose private API changed (``runtime/jax/``, ``selfcheck.py``).

Each fault of ``tests/jax_faults.py`` is what a JAX release does to a private name
autoflow uses (deletes it, adds a keyword, makes a rule raise). In a fresh process
with the fault applied before autoflow is imported, every converted program must
still give Python's results, autoflow must say so in exactly one warning naming what
is lost, and nothing of JAX's internals may reach the user's program. (Slow: a
process each. ``tests/test_jax_paths.py``, in the fast tier, injects a fault into
every row of ``jx.PATHS`` in one process.)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autoflow
from autoflow.runtime import jax as jx
from autoflow.runtime.jax import selfcheck

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import jax_faults  # noqa: E402

# what each fault costs (the path named in the warning)
LOST = {
    "hijax_classes_deleted": "primitives",
    "lowering_helper_deleted": "primitives",
    "trace_to_jaxpr_new_keyword": "trace a thunk",
    "lowering_rules_raise": "direct lowering",
    "new_arg_signature_changed": "body inputs",
    "rule_tables_helpers_deleted": "primitives",
    "staging_rule_missing": "primitives",
    "custom_derivatives_moved": "custom rules",
    "frame_exclusion_missing": "frames",
}


def _run(fault):
    out = subprocess.run([sys.executable, os.path.join(HERE, "jax_faults.py"), fault],
                         capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


needs_primitives = pytest.mark.skipif(not jx.primitives(),
                                      reason="this JAX lacks the private API to begin with")


@needs_primitives
@pytest.mark.parametrize("fault", sorted(jax_faults.FAULTS))
def test_a_changed_private_api_keeps_results_and_warns_once(fault):
    got = _run(fault)
    if "moot" in got:
        pytest.skip(f"this JAX has no {got['moot']} to change")
    assert all(got["ok"]), got["ok"]
    assert len(got["warnings"]) == 1, got["warnings"]
    warning = got["warnings"][0]
    assert f"({LOST[fault]}: " in warning and "Results are the same" in warning
    assert f"pip install 'jax{jx.FULL_RANGE}'" in warning
    assert "call_hi_primitive" not in got["jaxpr"]
    if LOST[fault] == "primitives":  # the public path: JAX's own while loop
        assert "while[" in got["jaxpr"] and "while_loop[" not in got["jaxpr"]


@needs_primitives
def test_without_a_fault_nothing_is_lost_and_nothing_is_said():
    got = _run("none")
    # (on a JAX that lacks some private path to begin with, one warning says so)
    assert all(got["ok"]) and len(got["warnings"]) == (1 if jx.lost else 0)
    assert "while_loop[" in got["jaxpr"]
    assert "call_hi_primitive" not in " ".join(got["hlo_names"])


@pytest.mark.skipif(jx.version() < (0, 10, 2),
                    reason="this JAX lacks some private paths (benchmarks/JAX_MATRIX.md)")
def test_the_full_self_check_passes_on_this_jax():
    """The private paths compile to the operations of the public path and compute
    its values, under jit, vmap, grad and jvp."""
    assert selfcheck._problem(full=True) is None
    assert jx.trace_thunk_problem() is None
    assert jx.lost == {}


def halve_until_small(x):
    n = 0
    while x > 1.0:
        if x > 100.0:
            x = x / 4.0
        else:
            x = x / 2.0
        n += 1
    return x, n


@needs_primitives
def test_programs_name_their_constructs_as_hand_written_lax_does():
    conv = autoflow.convert(halve_until_small)
    text = str(jax.make_jaxpr(conv)(jnp.float32(300.0)))
    assert "while_loop[" in text and "call_hi_primitive" not in text
    hlo = jax.jit(conv).lower(jnp.float32(300.0)).as_text(debug_info=True)
    assert "call_hi_primitive" not in hlo
    assert "halve_until_small)/while/" in hlo
    # JAX's own names for what it emits (a profiler shows them): the loop is `while`, as
    # hand-written `lax.while_loop` is, and its body's operations sit under it once
    # (not `jit(f)/while_loop/jit(f)/while/body/...`); the `if`, a select here, is
    # `select_n`, as `jnp.where` is
    assert "halve_until_small)/while_loop" not in hlo
    if "direct lowering" not in jx.lost:
        assert "halve_until_small)/while/body/select_n" in hlo, hlo
    compiled = jax.jit(conv).lower(jnp.float32(300.0)).compile().as_text()
    names = set(re.findall(r'op_name="([^"]*)"', compiled))
    assert names and all(n.count("jit(") <= 1 for n in names), names
    for fn, arg in ((jax.grad(lambda x: conv(x)[0]), jnp.float32(300.0)),
                    (jax.vmap(conv), jnp.array([0.5, 300.0], jnp.float32))):
        assert "call_hi_primitive" not in str(jax.make_jaxpr(fn)(arg))
    assert np.allclose(jax.jit(conv)(jnp.float32(300.0))[0], halve_until_small(300.0)[0])


def test_the_jax_under_test_is_within_what_autoflow_says_it_was_tested_on():
    """When the test environment gets a newer JAX, this fails until NEWEST_TESTED is
    raised (after the suite and benchmarks/jax_matrix.sh pass on it)."""
    assert jx.MIN_JAX <= jx.version() <= jx.NEWEST_TESTED
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        selfcheck.warn_lost()  # nothing lost here: nothing said
