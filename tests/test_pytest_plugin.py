"""The pytest plugin used as a user would, in a pytest subprocess (issue 22, item 5)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT = Path(__file__).resolve().parent / "plugin_project"


def _plugin_args():
    """Installed autoflow registers its plugin through the pytest11 entry point,
    as a user's pytest finds it; a bare source checkout loads it by name."""
    from importlib.metadata import entry_points

    installed = any(ep.value == "autoflow.pytest_plugin" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "autoflow.pytest_plugin"]


def copy_project(dest):
    """The plugin project, copied into ``dest`` writable (the checkout may be read-only:
    copying keeps file modes)."""
    shutil.copytree(PROJECT, dest, copy_function=shutil.copyfile)
    for folder, dirs, files in os.walk(dest):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    return dest


def run_pytest(where, *args):
    env = dict(os.environ, PYTHONPATH=str(ROOT), AUTOFLOW_REGENERATE="")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *_plugin_args(), *args,
                           *([] if any(a.endswith(".py") for a in args) else [str(where)])],
                          cwd=where, env=env, capture_output=True, text=True, timeout=600)


def test_plugin_golden_update_and_behaviour(tmp_path):
    proj = tmp_path / "proj"
    copy_project(proj)
    after = proj / "golden" / "step.after.py"
    one = proj / "golden" / "step.step.after.py"
    # No expected files yet: the golden tests fail and say how to create them.
    r = run_pytest(proj)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "does not exist" in r.stdout and "--autoflow-update" in r.stdout
    assert "2 failed, 1 passed" in r.stdout, r.stdout
    # --autoflow-update writes them; then all tests pass.
    r = run_pytest(proj, "--autoflow-update")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "if_stmt" in after.read_text()
    # The per-function golden holds that function only, with its comment.
    assert one.read_text().startswith("def step(x):") and "def checked" not in one.read_text()
    assert "# Double positive inputs." in one.read_text()
    # A function with nothing to convert keeps its text, literal spelling included.
    assert "    return x * 1e-4  # nothing to convert here\n" in after.read_text()
    r = run_pytest(proj)
    assert r.returncode == 0, r.stdout + r.stderr


def test_plugin_reports_stale_goldens_and_behaviour_mismatches(tmp_path):
    """(The slow tier: five more pytest processes.)"""
    proj = tmp_path / "proj"
    copy_project(proj)
    after = proj / "golden" / "step.after.py"
    r = run_pytest(proj, "--autoflow-update")
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
    # An exception raised as written must be raised by the converted function:
    # a conversion that loses the raise is a behaviour mismatch.
    (proj / "test_raise.py").write_text(
        "from pathlib import Path\n"
        "import autoflow.testing as t\n"
        "def test_raises(autoflow_golden):\n"
        "    autoflow_golden.check_behaviour('golden/step.py', {'checked': [(-20.0,), (3.0,)]})\n"
        "def test_lost_raise(autoflow_golden, monkeypatch):\n"
        "    real = t.convert_module\n"
        "    def broken(src, fn):\n"
        "        out, ch = real(src, fn)\n"
        "        return out.replace('raise af.exception', 'return af.exception'), ch\n"
        "    monkeypatch.setattr(t, 'convert_module', broken)\n"
        "    autoflow_golden.check_behaviour('golden/step.py', {'checked': [(-20.0,)]})\n")
    r = run_pytest(proj, "test_raise.py")
    assert "1 failed, 1 passed" in r.stdout, r.stdout
    assert "checked(-20.0,)" in r.stdout and "raises ValueError" in r.stdout, r.stdout


def test_golden_sources_are_read_as_python_reads_them(tmp_path):
    from autoflow.testing import check_behaviour, check_conversion

    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbfdef f(x):\n    if x > 0:\n        return x\n    return -x\n")
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# -*- coding: latin-1 -*-\ndef g(x):\n    s = '\xe9'\n"
                      b"    if x > 0:\n        return x * len(s)\n    return -x\n")
    for path, name in ((bom, "f"), (latin, "g")):
        check_conversion(path, regenerate=True)
        check_conversion(path)
        check_behaviour(path, {name: [(1.5,), (-2.0,)]})
    broken = tmp_path / "broken.py"
    broken.write_text("def h(x)\n    return x\n")
    with pytest.raises(AssertionError, match=r"broken\.py:1:9: SyntaxError"):
        check_conversion(broken, regenerate=True)


def test_check_behaviour_takes_a_subclass_of_the_eager_exception(tmp_path):
    """A variable bound on one path only: Python raises UnboundLocalError, converted
    code autoflow's UnboundVariableError, a subclass (an `except UnboundLocalError:`
    catches it): the same behaviour."""
    from autoflow.testing import check_behaviour

    before = tmp_path / "unit.py"
    before.write_text("def unit(x):\n    if x > 0:\n        u = x\n    return u\n")
    check_behaviour(before, {"unit": [(-1.0,), (2.0,)]})
