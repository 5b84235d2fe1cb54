"""A submission that ends the process inside a test fails that test, as any other error would.

``os._exit(n)`` in a method (a leftover debugging line, a "stop here" in a notebook's cell) would
end pytest itself: every later test unrun, ``--grade-json`` left as it was written at the start
(every test "not run", 0 points). During the run ``os._exit`` raises :class:`ProcessExit`
instead, so the test fails with a message saying what happened and the run goes on; pytest's own
``os._exit`` at the end of the run (:mod:`transformer_spec.guard.fast_exit`) is the real one. (``sys.exit``
already raises ``SystemExit``, which pytest reports as that test's failure.)
"""

from __future__ import annotations

import contextlib
import os

import pytest


class ProcessExit(SystemExit):
    """``os._exit`` called while a test ran."""


def _refuse_exit(status: int = 0) -> None:
    raise ProcessExit(f"the submission called os._exit({status}) during this test: a method must return or raise, "
                      "not end the process (remove the call)")


@contextlib.contextmanager
def no_process_exit():
    """``os._exit`` raises :class:`ProcessExit` inside (the re-check child uses it too)."""
    real = os._exit
    os._exit = _refuse_exit
    try:
        yield
    finally:
        os._exit = real


def pytest_configure(config: pytest.Config) -> None:
    """For the whole run: the tests, and what else runs the submission's code (its import, the
    diagnosis's probes at the end). The run's own exit keeps the real one
    (:func:`transformer_spec.guard.fast_exit.exit_now` holds it from before any submission is imported)."""
    stack = contextlib.ExitStack()
    stack.enter_context(no_process_exit())
    config.add_cleanup(stack.close)
