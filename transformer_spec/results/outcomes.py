"""Typed outcomes: what happened to each graded test, and the report a grading child sends.

Every graded test ends with one :class:`Kind`, set where it happens (the loader, the failure
description, the scoring rules), never found later by reading a message. A test earns its
points exactly when its kind is :attr:`Kind.PASSED`. The class grader's statuses derive from
these kinds (``transformer_spec/grader/decision.py``).

:func:`settle` applies the scoring rules (``docs/grading.md``) to the raw outcomes of a run;
:func:`child_report` and :func:`read_report` are the two ends of the report a grading child
sends its parent (made for the parent: node id, component, kind, message, counterexample; the
parent checks every field, since the child runs a submission).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field


class Kind(str, enum.Enum):
    """The outcome of one graded test."""

    PASSED = "passed"
    ASSERTION = "assertion"        # the test's check failed: a wrong value, shape, behaviour
    ERROR = "error"                # the code raised an unexpected exception
    TIMEOUT = "timeout"            # the test did not finish in time
    MEMORY = "memory"              # the code ran out of memory
    STUB = "stub"                  # a name it used is not implemented yet (raises NotImplementedError)
    NOT_SUBMITTED = "not submitted"  # a contract name the submission does not define
    IMPORT = "import error"        # the submission could not be imported at all
    FORBIDDEN = "forbidden"        # a forbidden API was used (in this test or its component)
    NOT_RUN = "not run"            # the run ended (time limit, interruption) before the test
    SKIPPED = "skipped"
    OTHER = "other"                # failed without an exception of its own
    HIDDEN = "hidden re-check"     # claimed passed; the class grader's re-check on other inputs fails (neutral)
    CONTRADICTED = "contradicted"  # claimed passed; proved false, or unconfirmed once the report was proved false


#: the kinds of failure a named diagnosis (:mod:`transformer_spec.diagnosis.diagnose`) can explain
DIAGNOSED = (Kind.ASSERTION, Kind.ERROR, Kind.OTHER)

#: how torch says a CPU allocation failed: a plain RuntimeError, recognisable by its text only
_TORCH_OUT_OF_MEMORY = ("DefaultCPUAllocator: can't allocate memory", "DefaultCPUAllocator: not enough memory")


def is_out_of_memory(exc: BaseException) -> bool:
    """A ``MemoryError``, or torch's RuntimeError for a failed CPU allocation."""
    if isinstance(exc, MemoryError):
        return True
    return isinstance(exc, RuntimeError) and any(w in str(exc) for w in _TORCH_OUT_OF_MEMORY)


def kind_of_import_failure(exc: BaseException) -> Kind:
    """Why importing a submission failed: out of memory, a forbidden API, or anything else."""
    if is_out_of_memory(exc):
        return Kind.MEMORY
    return getattr(type(exc), "outcome_kind", None) or Kind.IMPORT


@dataclass
class Outcome:
    """One graded test: its points, what it did, and (after :func:`settle`) its kind and score."""

    nodeid: str
    component: str
    points: float
    hidden: bool
    number: str = ""
    ran: str = "not run"  # "passed", "failed", "skipped", "not run": what pytest saw
    failure: Kind | None = None  # the kind of failure ``message`` describes (failed tests)
    message: str = ""
    example: str = ""  # a property's smallest failing example, as shown in ``message``
    uses: set[str] = field(default_factory=set)  # contract names the test used
    duration: float = 0.0
    kind: Kind = Kind.NOT_RUN  # set by settle
    score: float = 0.0
    final: str = ""  # what the student reads
    uses_stub: bool = False


@dataclass
class RunEnd:
    """How a run ended, for :func:`settle`: the submission's import error, stubs, interruptions."""

    submission_error: str | None = None
    submission_error_kind: Kind | None = None
    stubs: set[str] = field(default_factory=set)
    interrupted: str | None = None
    time_limit: float | None = None
    stopped_for_time: bool = False

    def not_run(self) -> str:
        if self.interrupted:
            return f"not run: {self.interrupted}"
        if self.stopped_for_time:
            return f"not run: the run's time limit of {self.time_limit:g} s was reached"
        return "not run"


def settle(outcomes: Iterable[Outcome], end: RunEnd) -> None:
    """Give every outcome its kind, score and final message (idempotent). The rules:

    a test earns its points when it passed (all of a property's examples), used no forbidden API
    (nor did another test of its component: a forbidden API fails the whole component), and used
    no contract name that is still a stub.
    """
    outcomes = list(outcomes)
    forbidden_in: dict[str, str] = {}
    for r in outcomes:
        if r.failure == Kind.FORBIDDEN and r.component not in forbidden_in:
            forbidden_in[r.component] = r.message.splitlines()[0]
    for r in outcomes:
        r.score, r.final = 0.0, r.message
        stubs = sorted(r.uses & end.stubs)
        r.uses_stub = bool(stubs)
        if end.submission_error is not None:
            r.kind = end.submission_error_kind or Kind.IMPORT
            r.final = end.submission_error if r.ran != "not run" else f"{end.not_run()}; {end.submission_error}"
        elif r.ran == "not run":
            r.kind, r.final = Kind.NOT_RUN, end.not_run()
        elif r.ran == "skipped":
            r.kind = Kind.SKIPPED
        elif r.ran == "failed":
            r.kind = r.failure or Kind.OTHER
        elif stubs:
            names = ", ".join(f"`{s}`" for s in stubs)
            verb = "is" if len(stubs) == 1 else "are"
            r.kind = Kind.STUB
            r.final = (f"passed, but {names} {verb} not implemented yet (raises NotImplementedError): "
                       f"no points for tests that use {'it' if len(stubs) == 1 else 'them'} until then")
        elif r.component in forbidden_in:
            r.kind = Kind.FORBIDDEN
            r.final = (f"passed, but the component '{r.component}' scores 0: another of its tests "
                       f"found {forbidden_in[r.component]}")
        else:
            r.kind, r.score, r.final = Kind.PASSED, r.points, ""


def common_import_failure(outcomes: Iterable[Outcome], import_failures: dict[str, tuple[str, str]]) -> str | None:
    """A failure that is not the code under test's: every graded test that ran failed on the same
    ImportError (``import_failures``: node id -> why, fix), raised where the code imports its modules
    as it runs (an adapter importing inside its functions, a package reading its own metadata). The
    run is then an import error with that reason and its fix (returned, for :class:`RunEnd`), never
    a grade of 0 for wrong answers. None: some graded test ran otherwise."""
    ran = [r for r in outcomes if r.ran in ("passed", "failed")]
    reasons = {import_failures.get(r.nodeid) for r in ran}
    if not ran or len(reasons) != 1 or None in reasons:
        return None
    (why, fix), = reasons
    return (f"{why}\nEvery graded test failed on it, where the code under test imports it: not a wrong answer "
            f"of the code.\nFix: {fix}")


# --------------------------------------------------------------------------------------------
# The report a grading child sends its parent (transformer_spec/grader/isolation.py carries it)
# --------------------------------------------------------------------------------------------
REPORT = "report"


def child_report(outcomes: Iterable[Outcome], end: RunEnd, *, final: bool,
                 diagnoses: dict[str, str] | None = None, mistakes: dict | None = None) -> dict:
    """The report of a run so far, as plain data (settled outcomes only)."""
    return {
        "kind": REPORT,
        "final": final,
        "submission_error": end.submission_error,
        "submission_error_kind": end.submission_error_kind.value if end.submission_error_kind else None,
        "interrupted": bool(end.interrupted),
        "stopped_for_time": end.stopped_for_time,
        "diagnoses": dict(diagnoses or {}),
        "mistakes": {c: list(names) for c, names in (mistakes or {}).items()},
        "tests": [{"nodeid": r.nodeid, "component": r.component, "number": r.number, "hidden": r.hidden,
                   "kind": r.kind.value, "failure": r.failure.value if r.failure else None,
                   "message": r.final, "counterexample": r.example}
                  for r in outcomes],
    }


@dataclass
class ReportedTest:
    nodeid: str
    component: str
    number: str
    hidden: bool
    kind: Kind
    failure: Kind | None  # the test's own kind of failure (``kind`` may come from its component)
    message: str
    counterexample: str


@dataclass
class Report:
    """A child's report as the parent reads it (every field checked)."""

    final: bool
    submission_error: str | None
    submission_error_kind: Kind | None
    interrupted: bool
    stopped_for_time: bool
    diagnoses: dict[str, str]
    tests: dict[str, ReportedTest]  # by node id
    mistakes: dict[str, list[str]] = field(default_factory=dict)  # component -> pitfall names (unchecked)


class MalformedReport(ValueError):
    """A report that does not have the shape :func:`child_report` gives it."""


def _kind(value) -> Kind:
    try:
        return Kind(value)
    except ValueError:
        raise MalformedReport(f"unknown outcome kind {value!r}") from None


def _text(value, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise MalformedReport(f"{what} is not text")
    return value[:limit]


def read_report(data, max_text: int = 4000) -> Report:
    """Check and convert a report (``MalformedReport`` naming what is wrong)."""
    if not isinstance(data, dict) or data.get("kind") != REPORT:
        raise MalformedReport("not a report")
    tests: dict[str, ReportedTest] = {}
    for t in data.get("tests") if isinstance(data.get("tests"), list) else ():
        if not isinstance(t, dict):
            raise MalformedReport("a test entry is not a table")
        nodeid = _text(t.get("nodeid"), "a node id", 2000)
        tests[nodeid] = ReportedTest(nodeid, _text(t.get("component"), "a component", 100),
                                     _text(t.get("number", ""), "a number", 20), bool(t.get("hidden")),
                                     _kind(t.get("kind")), _kind(t["failure"]) if t.get("failure") else None,
                                     _text(t.get("message", ""), "a message", max_text),
                                     _text(t.get("counterexample", ""), "a counterexample", max_text))
    error = data.get("submission_error")
    diagnoses = data.get("diagnoses") if isinstance(data.get("diagnoses"), dict) else {}
    mistakes = data.get("mistakes") if isinstance(data.get("mistakes"), dict) else {}
    if not all(isinstance(v, list) for v in mistakes.values()):
        raise MalformedReport("mistakes are not lists of names")
    return Report(
        final=bool(data.get("final")),
        submission_error=_text(error, "the submission error", max_text) if error is not None else None,
        submission_error_kind=_kind(data["submission_error_kind"]) if data.get("submission_error_kind") else None,
        interrupted=bool(data.get("interrupted")), stopped_for_time=bool(data.get("stopped_for_time")),
        diagnoses={str(c): _text(d, "a diagnosis", max_text) for c, d in diagnoses.items()},
        tests=tests,
        mistakes={_text(c, "a component", 100): [_text(n, "a pitfall name", 100) for n in names[:10]]
                  for c, names in list(mistakes.items())[:50]},
    )
