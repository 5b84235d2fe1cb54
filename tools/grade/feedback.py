"""What the student reads (``feedback.md``), and Gradescope's file (``results.json``)."""

from __future__ import annotations

from transformer_spec.contract import COMPONENTS

from .record import Record, first_line, format_number
from .settings import MAX_TEST_OUTPUT

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
    "tampering": "results reported from inside the submission's process were contradicted by the grader's "
                 "own re-check; those components score 0",
}


def component_table(record: Record, skeleton: list[dict]) -> list[tuple[str, float, float, int, int]]:
    rows = []
    for comp in COMPONENTS:
        ts = [t for t in record.tests if t["tags"][0] == comp]
        if ts:
            rows.append((comp, sum(t["score"] for t in ts), sum(t["max_score"] for t in ts),
                         sum(1 for t in ts if t["status"] == "passed"), len(ts)))
    return rows


def results_json(record: Record, ctx_skeleton: list[dict], seconds: float = 0.0) -> dict:
    rows = component_table(record, ctx_skeleton)
    lines = [f"transformer-spec: {record.student} scored {format_number(record.total)} / {format_number(record.possible)}",
             f"status: {record.status} ({STATUS_TEXT.get(record.status, '')})"]
    if record.detail:
        lines.append(record.detail)
    lines += ["", f"{'component':<12} {'points':>17}   {'tests passed':>12}"]
    lines += [f"{c:<12} {f'{e:.2f} / {p:.2f}':>17}   {f'{n} / {m}':>12}" for c, e, p, n, m in rows]
    if record.diagnoses:
        lines += ["", *(record.diagnoses[c] for c in COMPONENTS if c in record.diagnoses)]
    hidden = any(t["visibility"] != "visible" for t in record.tests)
    if hidden:
        lines += ["", "Some tests are hidden until grades are published; the total is shown then."]
    tests = [{"name": t["name"], "number": t["number"], "score": round(t["score"], 4),
              "max_score": round(t["max_score"], 4), "status": t["status"], "output": t["output"],
              "output_format": "text", "tags": t["tags"], "visibility": t["visibility"]} for t in record.tests]
    return {"score": round(record.total, 4), "execution_time": round(seconds, 2), "output": "\n".join(lines) + "\n",
            "output_format": "text", "test_output_format": "text", "stdout_visibility": "hidden",
            "extra_data": {"diagnoses": dict(record.diagnoses)}, "tests": tests}


#: failing tests of a component shown with their whole message in feedback.md (the rest: one line each)
FULL_MESSAGES = 3
#: statuses whose every test fails for the one reason in ``detail``: no list of tests
_ONE_REASON = ("no-submission", "import-error")


def _one_line(text: str, n: int = 160) -> str:
    line = first_line(text, n + 1)
    return line if len(line) <= n else line[:n - 3] + "..."


def feedback_md(record: Record) -> str:
    """What the student reads: the score, then per component its points, its diagnosis (once),
    and its failing tests (the first few with their whole message)."""
    rows = component_table(record, record.tests)
    out = [f"# Feedback for {record.student}", "",
           f"**Score: {format_number(record.total)} / {format_number(record.possible)}** (status: `{record.status}`: "
           f"{STATUS_TEXT.get(record.status, '')})", ""]
    if record.detail:
        out += [f"> {record.detail}", ""]
    out += ["| component | points | tests passed |", "|---|---:|---:|"]
    out += [f"| {c} | {e:.2f} / {p:.2f} | {n} / {m} |" for c, e, p, n, m in rows]
    hidden = sum(1 for t in record.tests if t["visibility"] != "visible")
    if record.status in _ONE_REASON:
        out += ["", "Every test scores 0 for the reason above; fix it and submit again."]
    else:
        for comp, earned, possible, passed, total in rows:
            failed = [t for t in record.tests if t["tags"][0] == comp and t["status"] != "passed"
                      and t["visibility"] == "visible"]
            if not failed:
                continue
            out += ["", f"## {comp}: {earned:.2f} / {possible:.2f} points ({passed} of {total} tests passed)", ""]
            if comp in record.diagnoses:
                out += [record.diagnoses[comp], ""]
            out += [f"{len(failed)} test(s) did not pass:", ""]
            for t in failed[:FULL_MESSAGES]:
                out += [f"### {t['name']}", "", "```text", (t["output"] or "failed").strip()[:MAX_TEST_OUTPUT], "```", ""]
            if failed[FULL_MESSAGES:]:
                out += ["The others (the first line of each message; the whole message is in results.json):", ""]
                out += [f"- `{t['name']}`: {_one_line(t['output'] or 'failed')}" for t in failed[FULL_MESSAGES:]]
    if hidden:
        out += ["", f"{hidden} hidden test(s) are shown after the grades are published."]
    out += ["", "Re-run a test yourself with the command in its message "
                "(`pytest --impl path/to/your_submission \"<test id>\"`)."]
    return "\n".join(out).rstrip() + "\n"
