"""PrairieLearn's external grader: ``python -m tools.release --prairielearn DIR [settings]``.

PrairieLearn runs a question's ``externalGradingOptions.entrypoint`` in a Docker container whose
``/grade`` holds ``serverFilesCourse/`` (the course files the options list), ``student/`` (the
submitted files) and ``data/``; the entrypoint must leave ``/grade/results/results.json``
(``score`` in 0..1, ``gradable``, ``message``, ``output``, ``tests`` with ``name``,
``description``, ``points``, ``max_points``, ``message``, ``output``). :func:`build` writes:

* ``DIR/serverFilesCourse/transformer_spec/run.sh``: the entrypoint. It grades ``$PL_GRADE_ROOT/student``
  (default root ``/grade``) with ``python -m tools.grade single`` (which writes Gradescope's
  results.json) from ``$TRANSFORMER_SPEC_SOURCE`` (default: the image's copy of this project),
  then converts that with :func:`to_prairielearn`. It always leaves a valid results.json: when the
  grader writes none, ``gradable: false`` and a message saying why (the student keeps the attempt).
* ``DIR/image/``: a ``Dockerfile`` and a copy of this project: the image the options name
  (grading jobs have no network, so torch, bubblewrap and the project are installed in it).
* ``DIR/externalGradingOptions.json``: the snippet for the question's ``info.json``.

``python -m tools.prairielearn GRADESCOPE.json RESULTS.json [--log FILE] [--status N]`` is the
conversion ``run.sh`` calls.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
from pathlib import Path

from transformer_spec.files import atomic_write
from transformer_spec.grader.settings import GradeError

from . import gradescope_bundle
from .grading_options import settings_arguments, settings_of
from .cli import Parser, run_main

COURSE_FOLDER = "transformer_spec"  # under serverFilesCourse/
ENTRYPOINT = f"/grade/serverFilesCourse/{COURSE_FOLDER}/run.sh"
SOURCE = "/opt/transformer-spec/source"  # the project's copy in the image
RUBRIC_NAME = "rubric.toml"
OPTIONS_NAME = "externalGradingOptions.json"
DEFAULT_IMAGE = "transformer-spec-grader:latest"
MAX_TIMEOUT = 600  # seconds: PrairieLearn's limit for a grading job
MARGIN = 30  # seconds the job needs besides the grading (start-up, conversion)
HIDDEN = ("hidden", "after_published")


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def to_prairielearn(gradescope_results: dict) -> dict:
    """Gradescope's results.json (what ``tools.grade single`` writes) as PrairieLearn's results:
    ``score`` is the points earned over the points possible, one PrairieLearn test per test.
    PrairieLearn shows every test at once, so a test Gradescope would hide keeps its points but
    not its name or output."""
    tests = []
    possible = 0.0
    for t in gradescope_results.get("tests", []):
        points, max_points = _number(t.get("score")), _number(t.get("max_score"))
        possible += max_points
        component = ", ".join(t.get("tags") or []) or "ungraded"
        passed = t.get("status") == "passed" if "status" in t else points >= max_points
        entry = {"name": t.get("name", "test"), "description": f"component {component}", "points": points,
                 "max_points": max_points, "message": "passed" if passed else "failed", "output": t.get("output", "")}
        if t.get("visibility") in HIDDEN:
            entry.update(name=f"hidden test ({component})", output="",
                         message=("passed" if passed else "failed") + "; its details are hidden")
        tests.append(entry)
    earned = _number(gradescope_results.get("score"))
    score = min(1.0, max(0.0, earned / possible)) if possible > 0 else 0.0
    return {"gradable": True, "score": score, "message": f"{earned:g} / {possible:g} points",
            "output": gradescope_results.get("output", ""), "tests": tests}


def not_gradable(reason: str) -> dict:
    """The results of a job the grader could not finish: PrairieLearn counts no attempt."""
    message = (f"The autograder could not grade this submission: {reason}. Nothing was scored and the attempt "
               "does not count; ask your instructor to look at the grading job's log.")
    return {"gradable": False, "message": message, "format_errors": [message], "output": "", "tests": []}


def _last_line(log: Path | None) -> str:
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()] if log else []
    except OSError:
        lines = []
    return lines[-1][:400] if lines else "no message"


def convert(gradescope_json: Path, results_json: Path, log: Path | None = None, status: int | None = None) -> dict:
    """Write PrairieLearn's results for the grader's ``gradescope_json``; when that is missing or
    not a Gradescope results object, a not-gradable result naming the last line of ``log``."""
    try:
        data = json.loads(Path(gradescope_json).read_text())
        if not isinstance(data, dict) or "score" not in data or not isinstance(data.get("tests", []), list):
            raise ValueError("not a results object")
        results = to_prairielearn(data)
    except (OSError, ValueError):
        where = f" (exit status {status})" if status is not None else ""
        results = not_gradable(f"the grader wrote no results{where}: {_last_line(log)}")
    atomic_write(Path(results_json), json.dumps(results, indent=2).encode())
    return results


def run_sh(grade_args: list[str], rubric: bool = False) -> str:
    """The entrypoint; ``grade_args`` go to ``tools.grade single`` (``--rubric`` names the course
    folder's copy when ``rubric``)."""
    extra = "".join(f" {shlex.quote(a)}" for a in grade_args)
    if rubric:
        extra += f' --rubric "$HERE/{RUBRIC_NAME}"'
    fallback = json.dumps(not_gradable("the grading script could not run Python"))
    return f"""#!/usr/bin/env bash
# PrairieLearn's external-grading entrypoint (written by `python -m tools.release --prairielearn`;
# rebuild it rather than edit it).
#   PL_GRADE_ROOT           (default /grade): student/ is graded, results/results.json is written
#   TRANSFORMER_SPEC_SOURCE (default {SOURCE}): the project the grader runs from
#   PYTHON                  the interpreter (default: the image's {gradescope_bundle.VENV}, else python3)
# It always leaves a valid results.json: when the grader writes none, "gradable": false saying why.
set -u
HERE="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
GRADE="${{PL_GRADE_ROOT:-/grade}}"
SOURCE="${{TRANSFORMER_SPEC_SOURCE:-{SOURCE}}}"
RESULTS="$GRADE/results/results.json"
{gradescope_bundle.CHOOSE_PYTHON}
mkdir -p "$GRADE/results"
rm -f "$RESULTS"
WORK="$(mktemp -d)"
status=0
(cd "$SOURCE" && exec "$PYTHON" -m tools.grade single "$GRADE/student" --results-json "$WORK/gradescope.json" \\
    --no-progress{extra}) 2>"$WORK/log" || status=$?
cat "$WORK/log"  # the grader's messages, in the job's log
if ! (cd "$SOURCE" && exec "$PYTHON" -m tools.prairielearn "$WORK/gradescope.json" "$RESULTS" --log "$WORK/log" \\
        --status "$status") || [ ! -s "$RESULTS" ]; then
    printf '%s\\n' {shlex.quote(fallback)} >"$RESULTS"
fi
rm -rf "$WORK"
exit 0  # a low grade is a grade; results.json says what happened
"""


def dockerfile(torch_version: str) -> str:
    venv = gradescope_bundle.VENV
    return f"""# The grading image of the PrairieLearn question (written by `python -m tools.release --prairielearn`).
# Build and push it where PrairieLearn can pull it, under the name externalGradingOptions.json gives:
#   docker build -t NAME . && docker push NAME
FROM python:3.11-slim
# bubblewrap: the single grader's sandbox (bwrap).
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap && rm -rf /var/lib/apt/lists/*
COPY source {SOURCE}
WORKDIR {SOURCE}
# PyTorch's CPU build (PyPI's Linux wheel of torch is a multi-GB CUDA build), then the project.
RUN python -m venv {venv} \\
 && {venv}/bin/python -m pip install --no-cache-dir -c constraints.txt "torch=={torch_version}" \\
    --extra-index-url {gradescope_bundle.TORCH_CPU_INDEX} \\
 && {venv}/bin/python -m pip install --no-cache-dir -c constraints.txt -e ".[dev]" \\
 && {venv}/bin/python -c "import torch, transformer_spec, tools.grade; print('grader ready: torch', torch.__version__)"
"""


def grading_options(image: str, timeout: int) -> dict:
    """The question's ``info.json`` part."""
    return {"externalGradingOptions": {"enabled": True, "image": image, "serverFilesCourse": [f"{COURSE_FOLDER}/"],
                                       "entrypoint": ENTRYPOINT, "timeout": timeout}}


def _timeout(args: argparse.Namespace) -> int:
    wall = args.wall if args.wall is not None else args.time_limit + args.test_timeout + 60
    if wall + MARGIN > MAX_TIMEOUT:
        raise gradescope_bundle.BundleError(
            f"--time-limit/--wall: a grading may take {wall:g} s, but PrairieLearn stops a job after {MAX_TIMEOUT} s "
            f"(keep --wall, or --time-limit + --test-timeout + 60, under {MAX_TIMEOUT - MARGIN} s)")
    return MAX_TIMEOUT


def build(out: Path, args: argparse.Namespace, image: str = DEFAULT_IMAGE, force: bool = False) -> list[Path]:
    """Write the course files to ``out`` with the settings of ``args``; returns the files written."""
    gradescope_bundle.require_clone()
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise gradescope_bundle.BundleError(f"--prairielearn {out}: is a file; give a folder to write to")
    ours = [out / "serverFilesCourse" / COURSE_FOLDER, out / "image", out / OPTIONS_NAME]
    if any(p.exists() for p in ours) and not force:
        raise gradescope_bundle.BundleError(f"--prairielearn {out}: already holds a grader; remove it or pass "
                                            "--force to overwrite it")
    if not image or any(c.isspace() for c in image):
        raise gradescope_bundle.BundleError(f"--image {image!r}: not a Docker image name")
    try:
        settings_of(args, bundle=True)  # a bad rubric or test path fails now, not in PrairieLearn
    except GradeError as exc:
        raise gradescope_bundle.BundleError(str(exc)) from None
    timeout = _timeout(args)
    for p in ours:
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink(missing_ok=True)
    course = ours[0]
    written: list[tuple[Path, bytes, int]] = [
        (course / "run.sh", run_sh(settings_arguments(args), args.rubric is not None).encode(),
         gradescope_bundle.EXECUTABLE),
        (out / "image" / "Dockerfile", dockerfile(gradescope_bundle.pinned_torch()).encode(), gradescope_bundle.REGULAR),
        (out / OPTIONS_NAME, (json.dumps(grading_options(image, timeout), indent=2) + "\n").encode(),
         gradescope_bundle.REGULAR),
    ]
    if args.rubric is not None:
        written.append((course / RUBRIC_NAME, Path(args.rubric).read_bytes(), gradescope_bundle.REGULAR))
    for name, path in gradescope_bundle.project_files(exclude=out.resolve()):
        mode = gradescope_bundle.EXECUTABLE if path.stat().st_mode & 0o111 else gradescope_bundle.REGULAR
        written.append((out / "image" / "source" / name, path.read_bytes(), mode))
    for path, data, mode in written:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data)
        path.chmod(mode)
    return [p for p, _, _ in written]


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m tools.prairielearn",
                                     description="Convert the single grader's Gradescope results.json into "
                                                 "PrairieLearn's results.json (what run.sh calls).")
    parser.add_argument("gradescope_json", type=Path, help="the results.json tools.grade single wrote")
    parser.add_argument("results_json", type=Path, help="where to write PrairieLearn's results.json")
    parser.add_argument("--log", type=Path, default=None, help="the grader's log (its last line explains a failure)")
    parser.add_argument("--status", type=int, default=None, help="the grader's exit status")
    args = parser.parse_args(argv)
    try:
        results = convert(args.gradescope_json, args.results_json, args.log, args.status)
    except OSError as exc:
        print(f"prairielearn: error: {args.results_json}: cannot be written ({exc.strerror})", file=sys.stderr)
        return 2
    print(results["message"] if not results["gradable"] else f"PrairieLearn score {results['score']:.4f}")
    return 0


if __name__ == "__main__":
    run_main(main)
