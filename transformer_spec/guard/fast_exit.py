"""Ends a finished pytest run at once, without the interpreter's teardown.

Once the last hook has run, a run of the suite has nothing left to do, yet the process goes on
for ~1.5 s: pytest's last ``gc.collect()`` passes and then the interpreter's shutdown, which
frees every module, tensor and cached strategy one by one (``python -c "import torch"`` alone
spends ~0.7 s there). Measured with ``python -m tools.bench --only suite``: see
docs/performance.md. So this plugin, once every ``pytest_unconfigure`` hook has run, flushes the
standard streams and logging and calls ``os._exit`` with the run's exit status.

It does so only when nothing can be lost:

* pytest is the program (``python -m pytest`` or the ``pytest`` script), not a library called by
  one (mutmut, ``pytest.main`` in a script, pytester's in-process runs), which would be killed
  before it could go on;
* this is the outermost run in the process (a test's in-process pytest run ends normally);
* no coverage measurement is active (coverage writes its data at exit), not an xdist worker;
* the run ended normally (tests passed or failed, or nothing was collected), not with a usage
  error, an interruption or an internal error, which pytest reports on its normal way out.

Under the same conditions it also spares the run's garbage collector what will live until that exit: once
the tests are collected, :func:`gc.freeze` moves every object then alive (modules, torch, hypothesis,
the collected tests) out of the collector's reach, whose full collections otherwise scan them again
and again (0.9 of the 2.5 s a graded run of the reference spent collecting; 12 full collections).

Option ``--no-fast-exit`` and ini key ``fast_exit = false`` turn both off (e.g. to see what
Python reports at shutdown).
"""

from __future__ import annotations

import gc
import logging
import os
import sys
from pathlib import Path

import pytest

_SESSION = pytest.StashKey[pytest.Session]()
# Not USAGE_ERROR: pytest prints a usage error after the hooks have run.
_ENDS_NORMALLY = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED)
_depth = 0  # configured runs in this process: more than one inside pytester's in-process runs


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("transformer-spec")
    group.addoption("--no-fast-exit", action="store_false", dest="fast_exit", default=None,
                    help="let the interpreter shut down normally after the run (ini: fast_exit)")
    parser.addini("fast_exit", type="bool", default=True,
                  help="end the process with os._exit once the run is over (default true)")


def pytest_configure(config: pytest.Config) -> None:
    global _depth
    _depth += 1


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_SESSION] = session


def pytest_collection_finish(session: pytest.Session) -> None:
    """What is alive once the tests are collected lives until the process ends (see above)."""
    if _depth == 1 and _enabled(session.config) and _pytest_is_the_program():
        gc.freeze()


def _pytest_is_the_program() -> bool:
    """``python -m pytest`` or the ``pytest`` console script, not a program that calls pytest."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name == "pytest.__main__":
        return True
    return bool(sys.argv) and Path(sys.argv[0]).name in ("pytest", "py.test")


def _coverage_active() -> bool:
    coverage = sys.modules.get("coverage")
    return coverage is not None and coverage.Coverage.current() is not None


def _enabled(config: pytest.Config) -> bool:
    option = config.getoption("fast_exit", default=None)
    return bool(config.getini("fast_exit")) if option is None else option


def pytest_unconfigure(config: pytest.Config) -> None:
    """Decides, and leaves the exit itself to a cleanup: pytest runs the config's cleanups after
    *every* plugin's ``pytest_unconfigure``, the last registered first, so the exit comes after
    all of them (the grading child's report channel is closed in one: exiting from a hook could
    come before it and lose the last report)."""
    global _depth
    _depth -= 1
    session = config.stash.get(_SESSION, None)
    if (session is None or _depth or not _enabled(config) or hasattr(config, "workerinput")
            or session.exitstatus not in _ENDS_NORMALLY or not _pytest_is_the_program()
            or _coverage_active()):
        return
    config.add_cleanup(lambda: exit_now(int(session.exitstatus)))


_REAL_EXIT = os._exit  # taken before any submission is imported (transformer_spec.guard.exits replaces os._exit)


def exit_now(status: int) -> None:
    """Flush logging and the standard streams, then end the process with ``status`` at once."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can be written anyway
            pass
    _REAL_EXIT(status)
