"""pytest plugin for autoflow golden files (registered via the ``pytest11`` entry point).

``pytest --autoflow-update`` rewrites the expected ``NAME.after.py`` files
instead of comparing. The ``autoflow_golden`` fixture gives
``check_conversion`` and ``check_behaviour`` (see ``autoflow.testing``).
"""

import pytest

from . import testing


def pytest_addoption(parser):
    parser.addoption("--autoflow-update", action="store_true", default=False,
                     help="rewrite autoflow golden files (NAME.after.py) instead of comparing")


def pytest_configure(config):
    if config.getoption("--autoflow-update", default=False):
        testing.UPDATE = True


class Golden:
    check_conversion = staticmethod(testing.check_conversion)
    check_behaviour = staticmethod(testing.check_behaviour)


@pytest.fixture
def autoflow_golden():
    return Golden()
