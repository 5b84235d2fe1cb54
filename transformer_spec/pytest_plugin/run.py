"""The state of one graded run: its settings, one :class:`Outcome` per graded test, and how the run
is going. The grading plugin's hooks (:mod:`.grading`) fill it in; the run's report
(:mod:`.run_report`: the score table, the notes, results.json) reads it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from transformer_spec.pytest_plugin import failures
from transformer_spec.scoring import rubric
from transformer_spec.pytest_plugin.plugin import under_test
from transformer_spec.results import outcomes
from transformer_spec.results.outcomes import Outcome

RUN = pytest.StashKey["GradingRun"]()  # where a run keeps its GradingRun (config.stash)


@dataclass
class GradingRun:
    """Everything one graded run knows: the settings, one :class:`Outcome` per graded test, and
    how the run is going."""

    rubric: rubric.Rubric
    grading: bool
    grade_json: Path | None
    time_limit: float | None
    start: float = field(default_factory=time.monotonic)
    results: dict[str, Outcome] = field(default_factory=dict)
    points: dict[str, float] = field(default_factory=dict)
    components: dict[str, str | None] = field(default_factory=dict)
    stubs: set[str] = field(default_factory=set)
    current: Outcome | None = None
    interrupted: str | None = None
    stopped_for_time: bool = False
    collected: bool = False
    last_write: float = 0.0
    diagnoses: dict[str, str] = field(default_factory=dict)  # component -> its diagnosis
    mistakes: dict[str, tuple[str, ...]] = field(default_factory=dict)  # component -> the pitfalls it names
    examples: failures.Examples = field(default_factory=failures.Examples)  # the running property's failing calls
    timeouts: dict[str, tuple[float, float]] = field(default_factory=dict)  # node id -> (limit, timer start)
    ungraded_passed: int = 0  # tests without points (no component, or dropped) that passed
    ungraded_failed: set[str] = field(default_factory=set)  # node ids of tests without points that failed
    #: node id -> the name not implemented yet it failed on (the terminal's short form), and where each raised
    not_implemented: dict[str, str] = field(default_factory=dict)
    stub_where: dict[str, str] = field(default_factory=dict)
    call_mark: int = 0  # where the running test's calls into a course's API begin (profiles.calls)
    left_out: dict[str, int] = field(default_factory=dict)  # optional component -> its tests the rubric left out
    #: node id -> (why, fix) of a graded test failed on an ImportError (outcomes.common_import_failure)
    import_failures: dict[str, tuple[str, str]] = field(default_factory=dict)

    def end(self, config: pytest.Config) -> outcomes.RunEnd:
        sub = under_test(config).imported
        error = None if sub is None or sub.error is None else (f"{sub.error}\nFix: {sub.fix}" if sub.fix else sub.error)
        kind = sub.error_kind if error else None
        if error is None and sub is not None:
            error = outcomes.common_import_failure(self.results.values(), self.import_failures)
            kind = outcomes.Kind.IMPORT if error else None
        return outcomes.RunEnd(error, kind, self.stubs, self.interrupted, self.time_limit, self.stopped_for_time)

    def settle(self, config: pytest.Config) -> outcomes.RunEnd:
        end = self.end(config)
        outcomes.settle(self.results.values(), end)
        return end


def grading_run(config: pytest.Config) -> GradingRun | None:
    """The graded run of ``config`` (None on an xdist worker, which reports to its controller)."""
    return config.stash.get(RUN, None)
