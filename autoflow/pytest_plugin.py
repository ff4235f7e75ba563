"""pytest plugin for autoflow golden files (registered via the ``pytest11`` entry point).

``pytest --autoflow-update`` rewrites the expected ``NAME.after.py`` (or
``NAME.FUNCTION.after.py``) files instead of comparing. The ``autoflow_golden``
fixture gives ``check_conversion`` and ``check_behaviour`` (see
``autoflow.testing``), with relative paths taken from the test file's folder.
"""

from pathlib import Path

import pytest

from . import testing


def pytest_addoption(parser):
    group = parser.getgroup("autoflow")
    group.addoption("--autoflow-update", action="store_true", default=False,
                    help="rewrite autoflow golden files (NAME.after.py) instead of comparing")


def pytest_configure(config):
    if config.getoption("--autoflow-update", default=False):
        testing.UPDATE = True


class Golden:
    """What the ``autoflow_golden`` fixture returns."""

    def __init__(self, folder: Path):
        self.folder = folder

    def _path(self, path):
        return path if path is None or Path(path).is_absolute() else self.folder / path

    def check_conversion(self, before, expected=None, *, function=None):
        return testing.check_conversion(self._path(before), self._path(expected),
                                        function=function)

    def check_behaviour(self, before, cases, *, jit=True):
        return testing.check_behaviour(self._path(before), cases, jit=jit)


@pytest.fixture
def autoflow_golden(request):
    return Golden(Path(str(request.fspath)).parent)
