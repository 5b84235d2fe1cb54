"""The pytest plugin: chooses the implementation under test and reports on it.

Loaded by the repository's root ``conftest.py``. Options:

* ``--impl TARGET``: the implementation under test (module name, ``.py`` file or package
  folder); default ``$TRANSFORMER_IMPL`` or ``reference``.
* ``--torch-threads N``: torch's intra-op threads for the run (default 1: the suite's tensors
  are small, and one thread is faster for them and identical between machines).

Fixtures: ``impl`` (the :class:`~transformer_spec.loader.Submission` under test).
"""

from __future__ import annotations

import pytest

from . import loader

_SUBMISSION = pytest.StashKey[loader.Submission]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("transformer-spec")
    group.addoption(
        "--impl", action="store", default=None, metavar="TARGET",
        help="implementation under test: an importable module name, a .py file or a package folder "
             f"(default: ${loader.ENV_VAR} or '{loader.DEFAULT_TARGET}')",
    )
    group.addoption(
        "--torch-threads", action="store", type=int, default=1, metavar="N",
        help="torch.set_num_threads(N) for the run (default 1)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "component(name): the contract component a test grades")
    import torch

    threads = config.getoption("--torch-threads")
    if threads is not None:
        if threads < 1:
            raise pytest.UsageError(f"--torch-threads must be at least 1, got {threads}")
        torch.set_num_threads(threads)


def get_submission(config: pytest.Config) -> loader.Submission:
    """The submission of this run, imported once on first use."""
    if _SUBMISSION not in config.stash:
        config.stash[_SUBMISSION] = loader.load(config.getoption("--impl"), require_contract=True)
    return config.stash[_SUBMISSION]


def pytest_report_header(config: pytest.Config) -> str:
    sub = get_submission(config)
    if sub.error:
        return f"implementation under test: {sub.target} -- CANNOT BE GRADED (why: below)"
    return f"implementation under test: {sub.target} ({sub.origin})"


@pytest.fixture(scope="session")
def impl(pytestconfig: pytest.Config) -> loader.Submission:
    """The implementation under test. ``impl.MultiHeadAttention`` is the submission's class."""
    return get_submission(pytestconfig)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and call.excinfo.errisinstance(loader.SubmissionError):
        # The submission is at fault, not the test: one line says what is missing or broken.
        report.longrepr = str(call.excinfo.value)
