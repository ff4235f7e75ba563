"""When ``import autoflow`` loads the runtime (issue 36: first calls).

Without JAX loaded, ``import autoflow`` imports neither JAX nor ``autoflow.runtime``
(the rewriter, ``to_source`` and the command line need neither); with JAX loaded
already, it loads the runtime, so that the first ``convert`` does not.
"""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROBE = ("import sys; {first}import autoflow; "
         "print('jax' in sys.modules, 'autoflow.runtime' in sys.modules)")


def _loaded(first):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", PROBE.format(first=first)], env=env,
                         capture_output=True, text=True, check=True, cwd=ROOT)
    return out.stdout.split()


def test_import_autoflow_alone_loads_neither_jax_nor_the_runtime():
    assert _loaded("") == ["False", "False"]


def test_import_autoflow_after_jax_loads_the_runtime():
    assert _loaded("import jax; ") == ["True", "True"]
