"""The grading plugin's own hooks: how another plugin follows a graded run without reaching
into it (as pytest-timeout and pytest-xdist publish theirs). Registered by
:mod:`transformer_spec.pytest_plugin.grading` (``pytest_addhooks``)."""

from __future__ import annotations

import pytest


@pytest.hookspec
def pytest_transformer_spec_report(config: pytest.Config, report: dict) -> None:
    """A snapshot of the graded run as plain data (:func:`transformer_spec.results.outcomes.child_report`).

    Called after collection (every test "not run"), after each graded test, and twice at the end:
    once before the diagnosis runs the submission's code again (so a submission that hangs or
    exits there still leaves its results), and once with the diagnoses. The class grader's child
    (:mod:`transformer_spec.grader.isolation`) sends each snapshot to its parent.
    """
