"""GitHub Classroom's autograding workflow: ``python -m tools.release --github-classroom DIR [settings]``.

Writes the assignment's template repository: the starter kit (``DIR/<name>/``, as ``--out``) and
``DIR/.github/workflows/classroom.yml``. With a course profile (``--profile cs336``) the template is the
course's own handout: only the workflow is written, to be added to it, and the workflow checks the
student's repository out into ``submission/`` and grades all of it there. On every push the workflow checks out the student's
repository and the course's copy of this project (``--grader-repo OWNER/NAME``, ``--grader-ref``;
a private one is read with the secret ``TRANSFORMER_SPEC_TOKEN``), installs it (bubblewrap, the
pinned torch CPU build, the project through ``constraints.txt``), grades ``<name>/`` once with
``python -m tools.grade single``, then runs one step of GitHub Classroom's command grader
(``classroom-resources/autograding-command-grader@v1``) per component, worth that component's
points, whose command (:mod:`tools.classroom_check`) passes iff the component earned all its
points; ``classroom-resources/autograding-grading-reporter@v1`` reports the sum.

The YAML is written by hand (the project does not depend on a YAML library): every value is a
JSON string or number, which YAML reads as written.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
from pathlib import Path

from transformer_spec.files import atomic_write
from transformer_spec.grader.settings import GradeError
from transformer_spec.scoring import rubric as rubrics

from . import gradescope_bundle
from .grading_options import settings_arguments, settings_of

WORKFLOW = Path(".github") / "workflows" / "classroom.yml"
RUBRIC = Path(".github") / "transformer_spec_rubric.toml"
GRADER_PATH = ".transformer-spec"  # the grader's checkout, in the student's workspace
#: where a course profile's repository is checked out (the whole repository is the submission)
REPOSITORY_PATH = "submission"
RESULTS = ".transformer-spec-results.json"  # in the workspace
TOKEN_SECRET = "TRANSFORMER_SPEC_TOKEN"
PYTHON_VERSION = "3.11"
COMMAND_GRADER = "classroom-resources/autograding-command-grader@v1"
REPORTER = "classroom-resources/autograding-grading-reporter@v1"
CHECK_MINUTES = 2  # each component's check reads one file
JOB_MINUTES_BESIDES_GRADING = 20  # checkouts, apt-get, pip (torch is large), the checks
REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$")


class ClassroomError(Exception):
    """A bad argument; the message names it."""


def component_points(rubric_path: Path | None, track: str = "classic") -> dict[str, int]:
    """The points of each component with points (the rubric's, else the track's default rubric's); the
    command grader awards whole points only."""
    try:
        components = rubrics.load_rubric(rubric_path, track).components
    except rubrics.RubricError as exc:
        raise ClassroomError(str(exc)) from None
    points = {}
    for name, value in components.items():
        if value != int(value):
            flag = f"--rubric {rubric_path}" if rubric_path else "the default rubric"
            raise ClassroomError(f"{flag}: component {name!r} has {value:g} points; GitHub Classroom's command "
                                 "grader awards whole points only")
        if value > 0:
            points[name] = int(value)
    return points


def _q(value: str) -> str:
    return json.dumps(value)


def workflow(points: dict[str, int], grader_repo: str, grader_ref: str, package: str, grade_args: list[str],
             torch_version: str, grading_minutes: int, rubric: bool = False, repository: bool = False) -> str:
    """The workflow's text. ``repository``: the submission is the student's whole repository (a course
    profile's, reached through its adapter file), checked out into ``package`` beside the grader's
    checkout, so that neither the grader nor the results file lies inside what is graded."""
    extra = "".join(f" {shlex.quote(a)}" for a in grade_args)
    if rubric:
        extra += f' --rubric "$GITHUB_WORKSPACE/{RUBRIC.as_posix()}"'
    install = "\n".join([
        "sudo apt-get update",
        "sudo apt-get install -y bubblewrap",
        f"cd {GRADER_PATH}",
        f'python -m pip install -c constraints.txt "torch=={torch_version}" --extra-index-url '
        f"{gradescope_bundle.TORCH_CPU_INDEX}",
        'python -m pip install -c constraints.txt -e ".[dev]"',
    ]) + "\n"
    grade = (f'cd {GRADER_PATH} && python -m tools.grade single "$GITHUB_WORKSPACE/{package}" '
             f'--results-json "$GITHUB_WORKSPACE/{RESULTS}" --no-progress{extra}\n')
    token = "${{ secrets." + TOKEN_SECRET + " || github.token }}"
    lines = [
        "# GitHub Classroom's autograding (written by `python -m tools.release --github-classroom`; rebuild it",
        "# rather than edit it). One grading of the submission, then one command-grader step per component,",
        "# worth the component's points, passing iff the component earned all of them.",
        f"name: {_q('Autograding Tests')}",
        '"on": ["push", "workflow_dispatch", "repository_dispatch"]',
        "permissions:",
        '  checks: "write"',
        '  actions: "read"',
        '  contents: "read"',
        "jobs:",
        "  run-autograding-tests:",
        '    runs-on: "ubuntu-latest"',
        "    if: \"${{ github.actor != 'github-classroom[bot]' }}\"",
        f"    timeout-minutes: {grading_minutes + JOB_MINUTES_BESIDES_GRADING}",
        "    steps:",
        f"      - name: {_q('Check out the submission')}",
        '        uses: "actions/checkout@v4"',
        *(["        with:", f"          path: {_q(package)}"] if repository else []),
        f"      - name: {_q('Check out the grader')}",
        '        uses: "actions/checkout@v4"',
        "        with:",
        f"          repository: {_q(grader_repo)}",
        f"          ref: {_q(grader_ref)}",
        f"          path: {_q(GRADER_PATH)}",
        f"          token: {_q(token)}",
        '      - uses: "actions/setup-python@v5"',
        "        with:",
        f"          python-version: {_q(PYTHON_VERSION)}",
        f"      - name: {_q('Install the grader')}",
        f"        run: {_q(install)}",
        f"      - name: {_q('Grade the submission')}",
        "        continue-on-error: true  # the checks below say what is missing",
        f"        timeout-minutes: {grading_minutes}",
        f"        run: {_q(grade)}",
    ]
    for name, value in points.items():
        # No cd and no shell syntax: the command grader runs it in the workspace with PATH and HOME only.
        check = f"python {GRADER_PATH}/tools/classroom_check.py {RESULTS} --component {shlex.quote(name)}"
        lines += [
            f"      - name: {_q(name)}",
            f"        id: {_q(name)}",
            f"        if: {_q('${{ !cancelled() }}')}",
            f"        uses: {_q(COMMAND_GRADER)}",
            "        with:",
            f"          test-name: {_q(name)}",
            '          setup-command: ""',
            f"          command: {_q(check)}",
            f"          timeout: {CHECK_MINUTES}",
            f"          max-score: {value}",
        ]
    lines += [
        f"      - name: {_q('Autograding Reporter')}",
        f"        if: {_q('${{ !cancelled() }}')}",
        f"        uses: {_q(REPORTER)}",
        "        env:",
        *[f"          {name.upper()}_RESULTS: {_q('${{ steps.' + name + '.outputs.result }}')}" for name in points],
        "        with:",
        f"          runners: {_q(','.join(points))}",
    ]
    return "\n".join(lines) + "\n"


def _grading_minutes(args: argparse.Namespace) -> int:
    wall = args.wall if args.wall is not None else args.time_limit + args.test_timeout + 60
    return int(-(-wall // 60)) + 2  # the grader's wall clock, in whole minutes, and its start-up


def build(out: Path, args: argparse.Namespace, grader_repo: str | None, grader_ref: str, package: str,
          force: bool = False) -> Path:
    """Write ``out/.github/workflows/classroom.yml`` (and the rubric it names); returns the workflow.
    The starter kit is written by the caller (``tools.release``)."""
    gradescope_bundle.require_clone()  # the torch pin comes from the clone's constraints.txt
    if not grader_repo:
        raise ClassroomError("--grader-repo OWNER/NAME is required with --github-classroom: the repository of "
                             "the course's copy of transformer-spec, which the workflow checks out")
    if not REPO_RE.match(grader_repo):
        raise ClassroomError(f"--grader-repo {grader_repo}: not a GitHub repository name OWNER/NAME")
    if not grader_ref or any(c.isspace() for c in grader_ref):
        raise ClassroomError(f"--grader-ref {grader_ref!r}: not a branch, tag or commit")
    out = Path(out)
    target = out / WORKFLOW
    if target.exists() and not force:
        raise ClassroomError(f"--github-classroom {out}: {WORKFLOW.as_posix()} already exists; remove it or pass "
                             "--force to overwrite it")
    try:
        settings = settings_of(args, bundle=True)  # a bad rubric or test path fails now, not in every student's repository
    except GradeError as exc:
        raise ClassroomError(str(exc)) from None
    points = component_points(args.rubric or settings.profile_object().rubric, settings.track)
    repository = settings.profile_object().adapter is not None
    text = workflow(points, grader_repo, grader_ref, REPOSITORY_PATH if repository else package,
                    settings_arguments(args), gradescope_bundle.pinned_torch(),
                    _grading_minutes(args), args.rubric is not None, repository)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, text.encode())
    if args.rubric is not None:
        shutil.copyfile(args.rubric, out / RUBRIC)
    return target
