"""What the student reads (``feedback.md``), and Gradescope's file (``results.json``)."""

from __future__ import annotations

from transformer_spec import profiles
from transformer_spec.contract import registry
from transformer_spec.grader.record import Record, first_line
from transformer_spec.grader.settings import MAX_TEST_OUTPUT
from transformer_spec.grader.text import md_block, md_code, md_text
from transformer_spec.results import results_file
from transformer_spec.results.results_file import format_points

STATUS_TEXT = {
    "ok": "graded normally",
    "no-submission": "nothing gradable was found",
    "import-error": "the submission could not be imported, so every test scores 0",
    "forbidden-api": "the submission used an API the assignment forbids; the affected components score 0",
    "timeout": "some code did not finish in time; tests that did not finish score 0",
    "memory-limit": "the submission ran out of memory; tests that could not finish score 0",
    "output-limit": "the submission printed too much; the run was stopped and tests not run score 0",
    "interrupted": "the submission interrupted the test run; tests not run score 0",
    "crashed": "the submission ended the test process; tests not run score 0",
    "grader-error": "the grader itself failed on this submission (not the submission's fault); grade it again "
                    "with --resume",
    "tampering": "results reported from inside the submission's process were proved false by the grader's "
                 "hidden re-check (of a test's own inputs, or of the submission's files); only passes the "
                 "grader confirmed count",
}


def results_json(record: Record, seconds: float = 0.0) -> dict:
    """The student's ``results.json`` (the one writer of :mod:`transformer_spec.results.results_file`)."""
    rows = results_file.component_rows(record.tests)
    lines = [f"transformer-spec: {record.student} scored {format_points(record.total)} / {format_points(record.possible)}",
             f"status: {record.status} ({STATUS_TEXT.get(record.status, '')})"]
    if record.detail:
        lines.append(record.detail)
    lines += ["", *results_file.table_lines(rows)]
    profile = _profile(record)
    if profile.functions:  # the course's own names for what each component grades
        lines += ["", f"Your functions ({profile.name} profile), by component:",
                  *(f"  {r.component}: {', '.join(profile.functions[r.component])}" for r in rows
                    if r.component in profile.functions)]
    if record.diagnoses:
        lines += ["", *(record.diagnoses[c] for c in registry.names() if c in record.diagnoses)]
    if any(t["visibility"] != "visible" for t in record.tests):
        lines += ["", "Some tests are hidden until grades are published; the total is shown then."]
    return results_file.results_json(record.tests, "\n".join(lines) + "\n", seconds,
                                     {"diagnoses": dict(record.diagnoses), "status": record.status})


#: failing tests of a component shown with their whole message in feedback.md (the rest: one line each)
FULL_MESSAGES = 3
#: statuses whose every test fails for the one reason in ``detail``: no list of tests
_ONE_REASON = ("no-submission", "import-error")


def _one_line(text: str, n: int = 160) -> str:
    line = first_line(text, n + 1)
    return line if len(line) <= n else line[:n - 3] + "..."


def _profile(record: Record) -> profiles.Profile:
    """The profile the record was graded with (the contract's own names for one it does not know)."""
    try:
        return profiles.get(record.profile)
    except ValueError:
        return profiles.get(profiles.DEFAULT)


def feedback_md(record: Record) -> str:
    """What the student reads: the score, then per component its points, its diagnosis (once),
    and its failing tests (the first few with their whole message)."""
    rows = results_file.component_rows(record.tests)
    profile = _profile(record)
    out = [f"# Feedback for {md_text(record.student)}", "",
           f"**Score: {format_points(record.total)} / {format_points(record.possible)}** (status: `{record.status}`: "
           f"{STATUS_TEXT.get(record.status, '')})", ""]
    if record.detail:  # may quote the submission's own text (an exception): shown, never read as Markdown
        out += [*md_block(record.detail), ""]
    out += ["| component | points | tests passed |", "|---|---:|---:|"]
    out += [f"| {profile.label(r.component)} | {r.earned:.2f} / {r.possible:.2f} | {r.passed} / {r.total} |"
            for r in rows]
    hidden = sum(1 for t in record.tests if t["visibility"] != "visible")
    if record.status in _ONE_REASON:
        out += ["", "Every test scores 0 for the reason above; fix it and submit again."]
    else:
        for row in rows:
            comp = row.component
            failed = [t for t in record.tests if t["tags"][0] == comp and t["status"] != "passed"
                      and t["visibility"] == "visible"]
            if not failed:
                continue
            out += ["", f"## {profile.label(comp)}: {row.earned:.2f} / {row.possible:.2f} points "
                        f"({row.passed} of {row.total} tests passed)", ""]
            if comp in record.diagnoses:  # the grading child's: text, not Markdown
                out += [md_text(record.diagnoses[comp]), ""]
            out += [f"{len(failed)} test(s) did not pass:", ""]
            for t in failed[:FULL_MESSAGES]:
                out += [f"### {md_code(t['name'])}", "", *md_block((t["output"] or "failed").strip()[:MAX_TEST_OUTPUT]), ""]
            if failed[FULL_MESSAGES:]:
                out += ["The others (the first line of each message; the whole message is in results.json):", ""]
                out += [f"- {md_code(t['name'])}: {md_text(_one_line(t['output'] or 'failed'))}"
                        for t in failed[FULL_MESSAGES:]]
    if hidden:
        out += ["", f"{hidden} hidden test(s) are shown after the grades are published."]
    out += ["", "Re-run a test yourself with the command in its message "
                f"(`pytest --impl path/to/your_submission{profile.rerun()} \"<test id>\"`)."]
    return "\n".join(out).rstrip() + "\n"
