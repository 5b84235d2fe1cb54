"""Gradescope's ``results.json``, and the score table: one writer for pytest and the class grader.

``pytest --grade-json`` (:mod:`transformer_spec.pytest_plugin.grading`) and ``tools.grade`` (one file per
student) both describe each graded test by :func:`test_entry` and write the file with
:func:`results_json`; the table of points per component (:func:`component_rows`,
:func:`table_lines`) is the same in the terminal, in ``results.json`` and in ``feedback.md``.
Gradescope's format: https://gradescope-autograders.readthedocs.io/en/latest/specs/
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from transformer_spec.contract import registry
from transformer_spec.files import atomic_write

HIDDEN_VISIBILITY = "after_published"
#: results.json's points: Gradescope adds them up as written
POINT_DECIMALS = 4


def format_points(x: float) -> str:
    """Points as a student reads them: ``91.47``, ``100``, ``0.5``."""
    return f"{round(x, 2):g}"


def test_entry(nodeid: str, component: str, number: str, points: float, score: float, passed: bool,
               output: str, hidden: bool, kind: str | None = None) -> dict:
    """One test, as the class grader's records keep it and :func:`results_json` writes it
    (``kind``: the outcome kind, :class:`transformer_spec.results.outcomes.Kind`)."""
    return {"name": f"[{component}] {nodeid}", "number": number, "score": score, "max_score": points,
            "status": "passed" if passed else "failed", "output": output, "tags": [component],
            "visibility": HIDDEN_VISIBILITY if hidden else "visible", "kind": kind}


def nodeid_of(entry: dict) -> str:
    """The node id of a :func:`test_entry` (its name is ``[component] node id``)."""
    return entry["name"][len(entry["tags"][0]) + 3:]


@dataclass
class Row:
    component: str
    earned: float
    possible: float
    passed: int
    total: int


def component_rows(entries: list[dict]) -> list[Row]:
    """Points and passes per component, in report order (then any component the registry in use does not
    know, as the entries give them)."""
    rows = []
    known = registry.names()
    for comp in [*known, *dict.fromkeys(t["tags"][0] for t in entries if t["tags"][0] not in known)]:
        ts = [t for t in entries if t["tags"][0] == comp]
        if ts:
            rows.append(Row(comp, sum(t["score"] for t in ts), sum(t["max_score"] for t in ts),
                            sum(1 for t in ts if t["status"] == "passed"), len(ts)))
    return rows


def table_lines(rows: list[Row]) -> list[str]:
    """The score table: one line per component, then the total."""
    lines = [f"{'component':<12} {'points':>17}   {'tests passed':>12}"]
    lines += [f"{r.component:<12} {f'{r.earned:.2f} / {r.possible:.2f}':>17}   {f'{r.passed} / {r.total}':>12}"
              for r in rows]
    earned, possible = sum(r.earned for r in rows), sum(r.possible for r in rows)
    passed, total = sum(r.passed for r in rows), sum(r.total for r in rows)
    lines.append(f"{'total':<12} {f'{earned:.2f} / {possible:.2f}':>17}   {f'{passed} / {total}':>12}")
    return lines


def results_json(entries: list[dict], output: str, seconds: float, extra: dict) -> dict:
    """Gradescope's ``results.json`` as a dict (points rounded as Gradescope adds them)."""
    tests = [{"name": t["name"], "number": t["number"], "score": round(t["score"], POINT_DECIMALS),
              "max_score": round(t["max_score"], POINT_DECIMALS), "status": t["status"], "output": t["output"],
              "output_format": "text", "tags": t["tags"], "visibility": t["visibility"],
              "extra_data": {"kind": t.get("kind")}} for t in entries]
    return {
        "score": round(sum(t["score"] for t in entries), POINT_DECIMALS),
        "execution_time": round(seconds, 2),
        "output": output,
        "output_format": "text",
        "test_output_format": "text",
        "stdout_visibility": "hidden",
        "extra_data": extra,
        "tests": tests,
    }


def write(path: Path, data: dict) -> None:
    atomic_write(path, json.dumps(data, indent=2) + "\n")
