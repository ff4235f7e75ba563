import os

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
