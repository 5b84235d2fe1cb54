"""The grade of one student as the tool decided it, and how its numbers and messages are shortened."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from transformer_spec.grader.text import csv_cell, safe_data
from transformer_spec.results.results_file import format_points


@dataclass
class Record:
    student: str
    status: str
    total: float
    possible: float
    components: dict[str, float]
    detail: str
    submission: str
    submission_sha256: str
    tests: list[dict] = field(default_factory=list)
    tampered: dict[str, str] = field(default_factory=dict)
    diagnoses: dict[str, str] = field(default_factory=dict)  # component -> the diagnosis of its failures
    sandbox: str = ""  # the tier the children ran in (transformer_spec/grader/sandbox.py)
    seconds: float = 0.0  # the grading child's run time
    # component -> the catalogue's pitfalls its diagnosis names (the class report counts them;
    # reported by the child, so a submission could misname its own mistakes, never its points)
    mistakes: dict[str, list[str]] = field(default_factory=dict)
    profile: str = "contract"  # the course API graded (transformer_spec/profiles): the feedback names its functions

    def __post_init__(self) -> None:
        """A student's text is data (transformer_spec/grader/text.py): every string made safe here, once, so
        every output (files, report, terminal) gets text it can write."""
        for f in fields(self):
            setattr(self, f.name, safe_data(getattr(self, f.name)))

    def row(self, comps: list[str]) -> list[str]:
        """The gradebook's row: text cells a spreadsheet cannot read as formulas."""
        return [csv_cell(self.student), csv_cell(self.status), format_points(self.total), format_points(self.possible),
                *(format_points(self.components.get(c, 0.0)) for c in comps), csv_cell(self.detail)]




def first_line(text: str, n: int = 200) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line[:n]
