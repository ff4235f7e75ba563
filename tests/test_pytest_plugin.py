"""The pytest plugin used as a user would, in a pytest subprocess (issue 22, item 5)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = Path(__file__).resolve().parent / "plugin_project"


def run_pytest(where, *args):
    env = dict(os.environ, PYTHONPATH=str(ROOT), AUTOFLOW_REGENERATE="")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "autoflow.pytest_plugin", *args, str(where)],
                          cwd=where, env=env, capture_output=True, text=True, timeout=600)


def test_plugin_golden_update_and_behaviour(tmp_path):
    proj = tmp_path / "proj"
    shutil.copytree(PROJECT, proj)
    after = proj / "golden" / "step.after.py"
    # No expected file yet: the golden test fails and says how to create it.
    r = run_pytest(proj)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "does not exist" in r.stdout and "1 passed" in r.stdout
    # --autoflow-update writes it; then both tests pass.
    r = run_pytest(proj, "--autoflow-update")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "if_stmt" in after.read_text()
    r = run_pytest(proj)
    assert r.returncode == 0, r.stdout + r.stderr
    # A stale golden: a readable unified diff naming the line that changed.
    after.write_text(after.read_text().replace("x * 2.0", "x * 3.0"))
    r = run_pytest(proj)
    assert r.returncode == 1
    assert "-" in r.stdout and "x * 3.0" in r.stdout and "x * 2.0" in r.stdout
    assert "--autoflow-update" in r.stdout
    r = run_pytest(proj, "--autoflow-update")
    assert r.returncode == 0 and "x * 3.0" not in after.read_text()
    # A behaviour mismatch names the function and the input. Make the file's
    # own function differ between eager and converted runs: it reads a global
    # the converted module does not share, via a counter of calls.
    (proj / "test_mismatch.py").write_text(
        "from pathlib import Path\n"
        "import autoflow.testing as t\n"
        "def test_mismatch(autoflow_golden, monkeypatch):\n"
        "    real = t.convert_module\n"
        "    def broken(src, fn):\n"
        "        out, ch = real(src, fn)\n"
        "        return out.replace('x * 2.0', 'x * 5.0'), ch\n"
        "    monkeypatch.setattr(t, 'convert_module', broken)\n"
        "    autoflow_golden.check_behaviour(Path(__file__).parent / 'golden' / 'step.py',\n"
        "                                    {'step': [(-1.0,), (4.0,)]})\n")
    r = run_pytest(proj, "test_mismatch.py")
    assert r.returncode == 1
    assert "step((4.0,))" in r.stdout or "step(4.0,)" in r.stdout, r.stdout
