import os

import pytest

# The project's own tests run strict (every fallback is an error) unless a
# test says otherwise; see the README's fallback policy.
os.environ.setdefault("AUTOFLOW_STRICT", "1")

# Run only through tests/test_pytest_plugin.py, in a pytest subprocess, as a user would.
collect_ignore = ["plugin_project"]

# autoflow's own golden files use its pytest plugin (`pytest --autoflow-update`).
# Installed packages register it via the pytest11 entry point; load it here
# only when that is missing (a source checkout), never twice.
def _plugin_installed():
    from importlib.metadata import entry_points
    return any(ep.value == "autoflow.pytest_plugin" for ep in entry_points(group="pytest11"))


if not _plugin_installed():
    pytest_plugins = ["autoflow.pytest_plugin"]


def pytest_sessionstart(session):
    """Run autoflow's check of JAX's private API once, before any test: on a JAX that
    lacks some of it (the oldest supported one), its one warning is given here, not
    inside the first test that stages a loop (where a test that asserts "no warning"
    would see it). tests/test_jax_internals.py checks the warning in fresh processes."""
    import warnings

    from autoflow.runtime import selfcheck

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        selfcheck.ready()


# Test tiers. `pytest -q` (the README's command) runs the fast tier: every construct
# and public entry point, in at most 5 minutes on 2 cores. `--tier slow` runs the
# rest except `signal`; `--tier signal` the timing-dependent signal test, best alone
# on a quiet machine; `--tier all` everything. `.ci/run` runs fast, slow and signal,
# so CI runs every test once. A test is slow when a file or test id below names it
# (kept here, in one table, rather than as markers spread over the files), or when
# it is marked `@pytest.mark.slow` / `@pytest.mark.signal` itself. An entry that
# matches no collected test is an error, so the table cannot go stale silently.
SLOW = {
    # whole files
    "tests/test_ecosystem.py": "ecosystem libraries (Equinox, Flax, optax, diffrax)",
    "tests/test_notebook.py": "a notebook run in a Jupyter kernel",
    "tests/test_fuzz.py": "the differential fuzzer's 300 programs (AUTOFLOW_FUZZ_EXAMPLES)",
    "tests/test_scaling.py": "conversion scaling up to thousands of lines",
    "tests/test_benchmarks_quick.py": "the benchmark suite's smoke run",
    "tests/test_jax_internals.py": "fault injection, each fault in a fresh process",
    "tests/test_peer_styles.py": "376 programs in other converters' styles (95 s); the "
                                 "fast tier has each construct in tests/semantics",
    "tests/test_algorithms.py": "160+ textbook numeric algorithms (issue 43), each under jit, "
                                "vmap and grad; the fast tier has each construct in "
                                "tests/test_strings.py and tests/test_long_tail.py",
    # single tests (prefixes of test ids: every parameter of a test unless one is named)
    "tests/semantics/test_nested_returns.py::test_nested_returns_traced_conditions":
        "depths 1-8, every path traced (30-80 s each); the fixtures return_* are fast",
    "tests/semantics/test_long_chains.py::test_chain_with_returns[-1.0]": "[0.5] is fast",
    "tests/semantics/test_long_chains.py::test_chain_with_returns[1.5]": "[0.5] is fast",
    "tests/semantics/test_long_chains.py::test_chain_with_returns[2.5]": "[0.5] is fast",
    "tests/semantics/test_long_chains.py::test_chain_with_returns[3.5]": "[0.5] is fast",
    "tests/semantics/test_long_chains.py::test_chain_with_returns[4.5]": "[0.5] is fast",
    "tests/test_gradients.py::test_equinox_filter_checkpoint": "an ecosystem library",
    "tests/semantics/test_nested_returns.py::test_every_if_converts_at_depth_20": "depth 20",
    "tests/semantics/test_nested_returns.py::test_return_inside_if_inside_loop": "every placement, traced",
    "tests/test_gradients.py::test_any_checkpoint_budget_gives_the_same_gradient": "long loops, many budgets",
    "tests/test_gradients.py::test_higher_order_through_checkpoint": "third-order derivatives of a long loop",
    "tests/test_gradients.py::test_reverse_over_reverse": "second-order reverse mode",
    "tests/test_gradients.py::test_checkpointed_scan_body_calling_a_converted_loop": "a scan of checkpointed loops",
    # The gradient compositions: the fast tier runs every composition on one program
    # (data_while), the slow tier on the others.
    "tests/test_gradients.py::test_reverse_mode_compositions[range_break-": "other programs",
    "tests/test_gradients.py::test_reverse_mode_compositions[nested-": "other programs",
    "tests/test_gradients.py::test_reverse_mode_compositions[range_return-": "other programs",
    "tests/test_gradients.py::test_reverse_mode_compositions[while_in_while-": "other programs",
    "tests/test_gradients.py::test_reverse_mode_under_vmap[nested-": "other programs",
    "tests/test_gradients.py::test_reverse_mode_under_vmap[range_break-": "other programs",
    "tests/test_gradients.py::test_reverse_mode_under_vmap[range_return-": "other programs",
    "tests/test_gradients.py::test_reverse_mode_under_vmap[while_in_while-": "other programs",
    "tests/test_gradients.py::test_checkpoint_around_a_loop[nested-": "other programs",
    "tests/test_gradients.py::test_checkpoint_around_a_loop[range_return-": "other programs",
    "tests/test_gradients.py::test_checkpoint_around_a_loop_under_vmap[nested-": "other programs",
    "tests/test_gradients.py::test_second_order[nested]": "other programs",
    "tests/test_gradients.py::test_second_order[range_break]": "other programs",
    "tests/test_vmap_loops.py::test_vmap_of_vmap_and_grad_through_masked_loops": "vmap of vmap of grad",
    "tests/test_direct_lowering.py::test_direct_lowering_compiles_to_the_same_program[1]": "[0] is fast",
    "tests/test_direct_lowering.py::test_direct_lowering_compiles_to_the_same_program[2]": "[0] is fast",
}
SIGNAL = {
    "tests/test_errors_teach.py::test_ctrl_c_stops_a_runaway_loop_when_debug_loops_is_set":
        "a real SIGINT to a process running a compiled loop (timing-dependent)",
}
TIERS = ("fast", "slow", "signal", "all")


def pytest_addoption(parser):
    parser.addoption("--tier", choices=TIERS, default="fast",
                     help="which tests to run: fast (default), slow, signal, or all "
                          "(see SLOW in tests/conftest.py)")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: in the slow tier (pytest --tier slow)")
    config.addinivalue_line("markers", "signal: in the signal tier (pytest --tier signal)")
    if config.getoption("--tier") in ("signal", "all"):
        # the signal test's own switch (it skips itself without it)
        os.environ.setdefault("AUTOFLOW_SIGNAL_TESTS", "1")


def _tier_of(item, used):
    if item.get_closest_marker("signal"):
        return "signal"
    if item.get_closest_marker("slow"):
        return "slow"
    nodeid = item.nodeid if item.nodeid.startswith("tests/") else "tests/" + item.nodeid
    for table, tier in ((SIGNAL, "signal"), (SLOW, "slow")):
        for key in table:
            # a file, a test (every parameter), one parameter, or a parameter prefix ("[a-")
            if nodeid.startswith(key) and (len(nodeid) == len(key) or key[-1] in "[-"
                                           or nodeid[len(key)] in "[:"):
                used.add(key)
                return tier
    return "fast"


def pytest_collection_modifyitems(config, items):
    tier = config.getoption("--tier")
    used, keep, drop = set(), [], []
    for item in items:
        t = _tier_of(item, used)
        (keep if tier in ("all", t) else drop).append(item)
    # Only a run over the whole suite can tell that an entry matches nothing.
    whole = [str(a) for a in config.args] in ([], [str(config.rootpath / "tests")], ["tests"])
    stale = sorted((set(SLOW) | set(SIGNAL)) - used) if whole and not config.option.keyword \
        and not config.option.markexpr else []
    if stale:
        raise pytest.UsageError("tests/conftest.py: tier entries that match no test: "
                                + ", ".join(stale))
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_report_header(config):
    tier = config.getoption("--tier")
    more = "" if tier == "all" else " (other tiers: --tier slow, --tier signal, --tier all)"
    return f"autoflow test tier: {tier}{more}"
