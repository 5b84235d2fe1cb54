"""A kill-matrix row (``python -m tools.mutants``): what one graded copy failed, by component, its verdict, and
whether a student can read its failure messages; made from the class grader's record of it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import hypothesis.errors
from transformer_spec.contract.registry import Pitfall

from transformer_spec.catalogue import placeholders
from transformer_spec.catalogue.variations import Variation
from transformer_spec.pytest_plugin.failures import COURSE_EXAMPLE_HEADING, EXAMPLE_HEADING
from transformer_spec.results.outcomes import Kind
from transformer_spec.results.results_file import nodeid_of

REFERENCE = "(reference)"
INDEPENDENT = "(independent)"
CORRECT = (REFERENCE, INDEPENDENT)  # rows that must be clean


@dataclass
class Row:
    """One graded run: which tests failed, by component.

    ``component`` is the pitfall's or variation's component (``None`` for the correct
    implementations); ``must_pass`` marks rows of correct code (the correct implementations and
    the allowed variations), which must fail no test.
    """

    name: str
    component: str | None
    must_pass: bool = False
    failed: dict[str, list[str]] = field(default_factory=dict)
    uncovered: list[str] = field(default_factory=list)  # the independent implementation's missing names' tests
    total: int = 0
    seconds: float = 0.0
    error: str | None = None
    status: str = "ok"  # the class grader's
    class_total: float = 0.0
    differs: list[str] = field(default_factory=list)  # tests whose class grade is not the child's pytest report
    unreadable: list[str] = field(default_factory=list)  # failures a student cannot read (student_messages)
    unseen: str = ""  # a pitfall the course profile cannot see: the capability that hides it (its catalogue's)
    kept: float | None = None  # a placeholder's row: the share of its component's points it keeps
    group: str = ""  # a variation graded in a group (tools/mutants_groups.py): the group's row name

    @property
    def same_as_pytest(self) -> bool:
        """The class grade is the grading child's own pytest report, with status ``ok`` (timeouts aside)."""
        return not self.differs and self.status in ("ok", "timeout")

    @property
    def killed(self) -> bool:
        return bool(self.failed)

    @property
    def killed_in_own(self) -> bool:
        return self.component in self.failed

    @property
    def verdict(self) -> str:
        if self.error:
            return "ERROR"
        if not self.same_as_pytest:
            return "GRADER DIFFERS"
        if self.unreadable:
            return "UNREADABLE"
        if self.component is None or self.must_pass:
            return "clean" if not self.failed else "CORRECT CODE FAILS"
        if self.unseen:
            return "unseen" if not self.failed else "LISTED UNSEEN BUT KILLED"
        if not self.failed:
            return "SURVIVED"
        if self.kept is not None and not placeholders.within(self.kept):
            return "PLACEHOLDER KEEPS TOO MUCH"
        return "killed" if self.killed_in_own else "KILLED ONLY ELSEWHERE"

    @property
    def ok(self) -> bool:
        return self.verdict in ("clean", "killed", "unseen")


#: the names of hypothesis's own errors (its module's exception classes): a failure message that
#: holds one shows the tool's internals instead of the student's mistake
HYPOTHESIS_ERRORS = tuple(sorted(n for n, c in vars(hypothesis.errors).items()
                                 if isinstance(c, type) and issubclass(c, BaseException) and not n.startswith("_")))


def unreadable(test: dict) -> str | None:
    """Why the failure message of ``test`` (a record's failed test) is not one a student can read,
    or None: it holds a hypothesis error, or it is a property that failed on a value and does not
    show its smallest failing example (issue 27), in the contract's arguments or the course's calls (issue 44)."""
    output = test.get("output") or ""
    internal = [n for n in HYPOTHESIS_ERRORS if re.search(rf"(hypothesis\.errors\.|\b){n}\b(:|\()", output)]
    if internal:
        return f"a hypothesis error ({', '.join(internal)})"
    if nodeid_of(test).startswith("properties/") and test.get("kind") in (Kind.ASSERTION, Kind.ERROR) \
            and EXAMPLE_HEADING not in output and COURSE_EXAMPLE_HEADING not in output:
        return "no smallest failing example"  # (under a course profile: shown as the course's calls)
    return None


def row_of(item: Pitfall | Variation | str, record) -> Row:
    """The row of ``item`` from its class-grader record: the failures the grading child reported
    (its pytest report, so the kill matrix is pytest's), and any test whose class grade differs."""
    correct = isinstance(item, str)
    name = item if correct else item.name
    row = Row(name, None if correct else item.component, must_pass=correct or isinstance(item, Variation))
    if record is None:
        row.error = "not graded"
        return row
    row.status, row.class_total, row.seconds = record.status, record.total, record.seconds
    row.total = len(record.tests)
    for t in record.tests:
        kind = t.get("kind")
        if kind in (Kind.HIDDEN, Kind.CONTRADICTED):
            row.differs.append(f"{nodeid_of(t)} ({t['output'][:200]})")
            continue
        if t["status"] == "passed":
            continue
        why = unreadable(t)
        if why:
            row.unreadable.append(f"{nodeid_of(t)}: {why}")
        if kind == Kind.NOT_RUN:
            row.error = f"tests not run ({t['output'].splitlines()[0] if t['output'] else record.detail})"
        if name == INDEPENDENT and kind == Kind.NOT_SUBMITTED:
            # a component it does not implement (yet): not covered, not over-specified
            row.uncovered.append(nodeid_of(t))
            continue
        row.failed.setdefault(t["tags"][0], []).append(nodeid_of(t))
    if record.status not in ("ok", "timeout") and not row.error:
        row.error = f"status {record.status}: {record.detail}"
    return row
