"""Root conftest: loads the transformer-spec pytest plugins (``--impl``, the ``impl`` fixture, the
grading plugin): the list in :data:`transformer_spec.layout.PLUGINS`; and the project's slow set.

**The slow set** (issue 28). The project's integration tests (``tests/``) that grade a class, build
and install a wheel or a bundle, or drive a browser or a terminal carry ``@pytest.mark.slow``.
``python -m pytest`` leaves them out, so what a contributor runs before a commit takes minutes;
``python -m pytest --slow`` runs them too (CI does; the README gives both commands and their times).
"""

import pytest

from transformer_spec.layout import PLUGINS

pytest_plugins = list(PLUGINS)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run the project's slow integration tests (class grading, wheel and bundle "
                          "builds, browsers, terminals); CI runs them")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: a slow integration test, run only with --slow (conftest.py)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave the slow set out unless ``--slow`` is given (deselected, so the summary counts them)."""
    if config.getoption("--slow"):
        return
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item.get_closest_marker("slow") is None]
