"""One component of a graded submission, pass or fail: GitHub Classroom's command grader.

    python -m tools.classroom_check results.json --component attention

``results.json`` is what ``python -m tools.grade single`` wrote (Gradescope's format). The exit
status is 0 when the component earned all its points, 1 when it lost some (the failing tests are
printed, each with its score and message), 2 when the file cannot be used or holds no test of the
component. The command grader of the workflow ``tools.release --github-classroom`` writes awards a
step's points on exit status 0 only.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

TOLERANCE = 1e-6  # points are rounded to a few decimals; a full score may sit a hair under
HIDDEN = ("hidden", "after_published")  # Gradescope's visibilities that keep a test's details from students
OUTPUT_CHARS = 1500  # of each failing test's message, in the step's log


class CheckError(Exception):
    """The results cannot be used for this component; the message names the file or the argument."""


@dataclass
class ComponentScore:
    component: str
    earned: float
    possible: float
    failing: list[dict] = field(default_factory=list)  # the component's tests that lost points

    @property
    def full(self) -> bool:
        return self.possible > 0 and self.earned >= self.possible - TOLERANCE


def component_score(results: dict, component: str) -> ComponentScore:
    """The component's points in ``results`` (its tests are those tagged with its name)."""
    tests = results.get("tests") if isinstance(results, dict) else None
    if not isinstance(tests, list):
        raise CheckError("not a results.json of tools.grade single (no list of tests)")
    mine = [t for t in tests if isinstance(t, dict) and (t.get("tags") or [None])[0] == component]
    if not mine:
        graded = sorted({(t.get("tags") or ["?"])[0] for t in tests if isinstance(t, dict)})
        why = (f": {results['output'].strip().splitlines()[0]}"
               if not graded and isinstance(results.get("output"), str) and results["output"].strip() else "")
        raise CheckError(f"--component {component}: no test of this component in the results "
                         f"(components graded: {', '.join(graded) or 'none'}){why}")
    earned = sum(float(t.get("score", 0)) for t in mine)
    possible = sum(float(t.get("max_score", 0)) for t in mine)
    failing = [t for t in mine if float(t.get("score", 0)) < float(t.get("max_score", 0)) - TOLERANCE]
    return ComponentScore(component, earned, possible, failing)


def report(score: ComponentScore) -> str:
    """What the step's log shows."""
    head = f"component {score.component}: {score.earned:g} / {score.possible:g} points"
    if score.full:
        return head + ": full points"
    lines = [head + f"; {len(score.failing)} test(s) lost points:"]
    for t in score.failing:
        if t.get("visibility") in HIDDEN:  # as Gradescope would: its points count, its details wait
            lines.append(f"- a hidden test: {float(t.get('score', 0)):g} / {float(t.get('max_score', 0)):g}")
            continue
        output = str(t.get("output", "")).strip()
        if len(output) > OUTPUT_CHARS:
            output = output[:OUTPUT_CHARS] + " ..."
        lines.append(f"- {t.get('name', '?')}: {float(t.get('score', 0)):g} / {float(t.get('max_score', 0)):g}")
        lines += [f"    {ln}" for ln in output.splitlines()] or ["    (no message)"]
    return "\n".join(lines)


def load(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise CheckError(f"{path}: no such file (the grading step wrote no results; see its log)") from None
    except (OSError, ValueError) as exc:
        raise CheckError(f"{path}: not a readable results.json ({exc})") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.classroom_check", allow_abbrev=False,
                                     description="Exit 0 iff the component earned all its points in the "
                                                 "results.json of tools.grade single.")
    parser.add_argument("results_json", type=Path, help="the results.json tools.grade single wrote")
    parser.add_argument("--component", required=True, help="the component to check, e.g. attention")
    args = parser.parse_args(argv)
    try:
        score = component_score(load(args.results_json), args.component)
    except CheckError as exc:
        print(f"classroom_check: error: {exc}", file=sys.stderr)
        return 2
    print(report(score))
    return 0 if score.full else 1


if __name__ == "__main__":
    sys.exit(main())
