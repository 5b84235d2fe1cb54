"""PrairieLearn's external grader (``python -m tools.release --prairielearn DIR``), read back and run:
the question's ``externalGradingOptions``, and the entrypoint ``run.sh`` run on a ``/grade`` laid out as
PrairieLearn lays it out (``PL_GRADE_ROOT`` points at it), with the image's copy of the project in
place of the image (as in ``tests/test_gradescope_bundle.py``: a virtual environment over this
interpreter's packages with that copy first on the path)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

from tests.profiles.repositories import cs336_repository
from tests.test_gradescope_bundle import (  # noqa: F401  (root: a fixture)
    SETTINGS,
    pinned_torch,
    root,
    single_grade,
    venv_over_source,
)
from tools import gradescope_bundle, prairielearn, release
from transformer_spec.catalogue.patching import REFERENCE_DIR, write_patched_reference
from transformer_spec.catalogue.pitfalls import by_name

#: the slow set (conftest.py: run with --slow): runs the PrairieLearn grader's run.sh on student files
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent

# PrairieLearn's results.json (docs.prairielearn.com, "External Grading", "Grading results"): `score`
# in [0, 1] unless "gradable" is false; tests as <pl-external-grader-results> renders them. The
# keys are closed here so that a misspelt key (max_score for max_points) fails.
TEST_SCHEMA = {
    "type": "object",
    "required": ["name", "points", "max_points"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "description": {"type": "string"},
        "points": {"type": "number", "minimum": 0},
        "max_points": {"type": "number", "minimum": 0},
        "message": {"type": "string"},
        "output": {"type": "string"},
        "images": {"type": "array"},
    },
}
PL_SCHEMA = {
    "type": "object",
    "required": ["gradable", "message"],
    "additionalProperties": False,
    "properties": {
        "gradable": {"type": "boolean"},
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "message": {"type": "string"},
        "output": {"type": "string"},
        "format_errors": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
        "images": {"type": "array"},
        "tests": {"type": "array", "items": TEST_SCHEMA},
    },
    "if": {"properties": {"gradable": {"const": True}}},
    "then": {"required": ["score", "tests"]},
}


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pl") / "course"
    assert release.main(["--prairielearn", str(out), *SETTINGS]) == 0
    return out


def _lay_out(course: Path, grade: Path) -> None:
    """/grade as PrairieLearn fills it (serverFilesCourse/ with the options' folder, an empty student/),
    and the image's project copy at grade/../source (where :func:`venv_over_source` puts it on the path)."""
    shutil.copytree(course / "serverFilesCourse", grade / "serverFilesCourse")
    (grade / "student").mkdir()
    (grade / "data").mkdir()
    shutil.copytree(course / "image" / "source", grade.parent / "source")


def _run(grade: Path, python: str) -> dict:
    env = dict(os.environ, PL_GRADE_ROOT=str(grade), TRANSFORMER_SPEC_SOURCE=str(grade.parent / "source"),
               PYTHON=python)
    script = grade / "serverFilesCourse" / prairielearn.COURSE_FOLDER / "run.sh"
    proc = subprocess.run(["bash", str(script)], cwd=grade, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads((grade / "results" / "results.json").read_text())
    jsonschema.validate(results, PL_SCHEMA)
    return results


def test_the_options_name_the_entrypoint_the_course_files_and_a_timeout_within_the_limit(course):
    options = json.loads((course / prairielearn.OPTIONS_NAME).read_text())["externalGradingOptions"]
    assert set(options) == {"enabled", "image", "serverFilesCourse", "entrypoint", "timeout"}
    assert options["enabled"] is True and options["image"] == prairielearn.DEFAULT_IMAGE
    assert options["serverFilesCourse"] == ["transformer_spec/"]
    # PrairieLearn copies serverFilesCourse/<listed> to /grade/serverFilesCourse/<listed>.
    prefix = "/grade/serverFilesCourse/"
    assert options["entrypoint"].startswith(prefix)
    script = course / "serverFilesCourse" / options["entrypoint"].removeprefix(prefix)
    assert script.is_file() and os.access(script, os.X_OK)
    assert options["entrypoint"].removeprefix(prefix).startswith(options["serverFilesCourse"][0])
    # PrairieLearn's limit is 600 s; the default grading stops within 420 + 60 + 60 s.
    assert isinstance(options["timeout"], int) and 540 < options["timeout"] <= 600
    text = script.read_text()
    assert subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True).returncode == 0
    assert '-m tools.grade single "$GRADE/student"' in text and "--tests spec_tests/" in text


def test_the_image_installs_bubblewrap_and_the_pinned_versions(course):
    docker = (course / "image" / "Dockerfile").read_text()
    assert "apt-get install -y --no-install-recommends bubblewrap" in docker
    assert f'-c constraints.txt "torch=={pinned_torch()}"' in docker
    assert gradescope_bundle.TORCH_CPU_INDEX in docker and '-c constraints.txt -e ".[dev]"' in docker
    assert f"COPY source {prairielearn.SOURCE}" in docker
    for needed in ("pyproject.toml", "constraints.txt", "transformer_spec/grader/single.py", "tools/prairielearn.py",
                   "reference/__init__.py", "spec_tests", "properties"):
        assert (course / "image" / "source" / needed).exists(), needed
    assert not (course / "image" / "source" / "tests").exists()


@pytest.mark.timeout(900)  # two gradings on a loaded machine
def test_run_sh_grades_the_student_files_as_the_single_grader_does(course, root, tmp_path):  # noqa: F811
    grade = root / "grade"
    _lay_out(course, grade)
    python = venv_over_source(root)  # the environment over root/source, the image copy
    # A correct package, in a folder of the student's files: full marks.
    shutil.copytree(REFERENCE_DIR, grade / "student" / "my_transformer", ignore=shutil.ignore_patterns("__pycache__"))
    results = _run(grade, python)
    assert results["gradable"] is True and results["score"] == pytest.approx(1.0)
    assert results["tests"] and all(t["points"] == t["max_points"] for t in results["tests"])
    # The seed's best-known mistake (no 1/sqrt(d_k)): the single grader's fraction, test by test.
    shutil.rmtree(grade / "student" / "my_transformer")
    write_patched_reference(grade / "student", by_name()["no_scaling"].patches, "my_transformer")
    results = _run(grade, python)
    expected = single_grade(grade / "student", tmp_path / "direct.json", SETTINGS)
    possible = sum(t["max_score"] for t in expected["tests"])
    assert results["gradable"] is True and 0 <= results["score"] < 1
    assert results["score"] == pytest.approx(expected["score"] / possible)
    assert {t["name"]: (t["points"], t["max_points"]) for t in results["tests"]} == \
        {t["name"]: (t["score"], t["max_score"]) for t in expected["tests"]}
    lost = [t for t in results["tests"] if t["points"] < t["max_points"]]
    assert lost and all(t["output"] and t["message"] == "failed" for t in lost)
    assert any("attention" in t["description"] for t in lost)


@pytest.mark.timeout(900)  # two gradings on a loaded machine
def test_run_sh_grades_a_cs336_repository_through_the_profile(root, tmp_path):  # noqa: F811
    """Issue 30: a course written with ``--profile cs336`` grades a student's repository (its package and
    its filled-in ``tests/adapters.py``, as a workspace leaves them in ``/grade/student``) as the single
    grader does, test for test; the handout's keep mask read as blocked loses attention's points only,
    and the feedback names the student's adapter function."""
    settings = ["--tests", "properties/test_attention_laws.py", "spec_tests/modern/test_oracles.py",
                "--memory-mb", "2500", "--profile", "cs336"]
    course = tmp_path / "course"
    assert release.main(["--prairielearn", str(course), *settings]) == 0
    grade = root / "grade"
    _lay_out(course, grade)
    grade.joinpath("student").rmdir()
    cs336_repository(grade / "student", ("blocked = None if mask is None else ~mask", "blocked = mask"))
    results = _run(grade, venv_over_source(root))
    expected = single_grade(grade / "student", tmp_path / "direct.json", settings)
    assert results["gradable"] is True and 0 < results["score"] < 1
    assert results["score"] == pytest.approx(expected["score"] / sum(t["max_score"] for t in expected["tests"]))
    assert {t["name"]: (t["points"], t["max_points"]) for t in results["tests"]} == \
        {t["name"]: (t["score"], t["max_score"]) for t in expected["tests"]}
    lost = {t["description"] for t in results["tests"] if t["points"] < t["max_points"]}
    assert lost == {"component attention"}, results["output"][-2000:]
    assert "run_scaled_dot_product_attention" in results["output"]


@pytest.mark.timeout(300)
def test_run_sh_leaves_a_results_json_when_grading_fails(course, root):  # noqa: F811
    grade = root / "grade"
    _lay_out(course, grade)
    (grade / "student").rmdir()  # the grader stops with a usage error and writes nothing
    results = _run(grade, venv_over_source(root))
    assert results["gradable"] is False and results["tests"] == []
    assert "could not grade this submission" in results["message"] and "no such file or folder" in results["message"]
    # No usable Python at all: the script's own fixed result.
    (grade / "student").mkdir()
    results = _run(grade, python="false")
    assert results["gradable"] is False and "could not run Python" in results["message"]


GRADESCOPE = {
    "score": 3.5, "execution_time": 12.0, "output": "scored 3.5 / 5\n",
    "tests": [
        {"name": "[attention] spec_tests/a.py::test_x", "number": "1.1", "score": 2.0, "max_score": 2.0,
         "status": "passed", "output": "", "tags": ["attention"], "visibility": "visible"},
        {"name": "[mha] spec_tests/b.py::test_y", "number": "2.1", "score": 0.5, "max_score": 2.0,
         "status": "failed", "output": "values differ: expected 1, got 2", "tags": ["mha"], "visibility": "visible"},
        {"name": "[errors] spec_tests/c.py::test_z", "number": "3.1", "score": 1.0, "max_score": 1.0,
         "status": "passed", "output": "secret input 7", "tags": ["errors"], "visibility": "after_published"},
    ],
}


def test_to_prairielearn_scores_the_fraction_and_keeps_every_test():
    results = prairielearn.to_prairielearn(GRADESCOPE)
    jsonschema.validate(results, PL_SCHEMA)
    assert results["gradable"] is True and results["score"] == pytest.approx(0.7)  # 3.5 of 5 points
    assert results["output"] == "scored 3.5 / 5\n" and "3.5 / 5" in results["message"]
    first, second, hidden = results["tests"]
    assert first == {"name": "[attention] spec_tests/a.py::test_x", "description": "component attention",
                     "points": 2.0, "max_points": 2.0, "message": "passed", "output": ""}
    assert (second["points"], second["max_points"], second["message"]) == (0.5, 2.0, "failed")
    assert second["output"] == "values differ: expected 1, got 2"
    # PrairieLearn has no "after published": a hidden test counts but shows neither its id nor its output.
    assert (hidden["points"], hidden["max_points"]) == (1.0, 1.0)
    assert "test_z" not in hidden["name"] and hidden["output"] == "" and "errors" in hidden["name"]


def test_to_prairielearn_with_nothing_possible_scores_0():
    results = prairielearn.to_prairielearn({"score": 0.0, "output": "no test", "tests": []})
    jsonschema.validate(results, PL_SCHEMA)
    assert results["score"] == 0.0 and results["tests"] == []


def test_convert_without_the_graders_results_is_not_gradable_and_says_why(tmp_path):
    log = tmp_path / "log"
    log.write_text("starting\nerror: the submission folder holds 2 .py files\n\n")
    out = tmp_path / "results.json"
    assert prairielearn.main([str(tmp_path / "missing.json"), str(out), "--log", str(log), "--status", "2"]) == 0
    results = json.loads(out.read_text())
    jsonschema.validate(results, PL_SCHEMA)
    assert results["gradable"] is False and "score" not in results
    assert "exit status 2" in results["message"] and "holds 2 .py files" in results["message"]
    (tmp_path / "broken.json").write_text("[1, 2]")
    assert prairielearn.convert(tmp_path / "broken.json", out)["gradable"] is False


@pytest.mark.parametrize("args, message", [
    (["--prairielearn", "{tmp}/file"], "--prairielearn {tmp}/file: is a file"),
    (["--prairielearn", "{tmp}/done"], "--prairielearn {tmp}/done: already holds a grader"),
    (["--prairielearn", "{tmp}/pl", "--image", "a b"], "--image 'a b': not a Docker image name"),
    (["--prairielearn", "{tmp}/pl", "--time-limit", "600"], "--time-limit/--wall: a grading may take 720 s"),
    (["--prairielearn", "{tmp}/pl", "--tests", "tests"], "--tests tests: not a file or folder of the suite"),
    (["--prairielearn", "{tmp}/pl", "--name", "kit"], "--name applies to the starter kit"),
    (["--gradescope", "{tmp}/ag.zip", "--image", "x"], "--image applies to --prairielearn, not to --gradescope"),
])
def test_bad_arguments_are_one_line_errors_naming_the_argument(tmp_path, capsys, args, message):
    (tmp_path / "file").write_text("")
    (tmp_path / "done" / "serverFilesCourse" / "transformer_spec").mkdir(parents=True)
    assert release.main([a.format(tmp=tmp_path) for a in args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("release: error: ") and err.count("\n") == 1, err
    assert message.format(tmp=tmp_path) in err
    assert not (tmp_path / "pl").exists() and (tmp_path / "done" / "serverFilesCourse" / "transformer_spec").is_dir()


def test_force_rewrites_and_a_rubric_travels_with_the_entrypoint(tmp_path):
    out = tmp_path / "pl"
    assert release.main(["--prairielearn", str(out), "--image", "me/grader:1"]) == 0
    stale = out / "image" / "source" / "stale.txt"
    stale.write_text("old")
    rubric = tmp_path / "mine.toml"
    shutil.copyfile(REPO / "transformer_spec" / "rubric.toml", rubric)
    assert release.main(["--prairielearn", str(out), "--force", "--rubric", str(rubric)]) == 0
    assert not stale.exists()
    course = out / "serverFilesCourse" / prairielearn.COURSE_FOLDER
    assert (course / prairielearn.RUBRIC_NAME).read_bytes() == rubric.read_bytes()
    assert f'--rubric "$HERE/{prairielearn.RUBRIC_NAME}"' in (course / "run.sh").read_text()
    image = json.loads((out / prairielearn.OPTIONS_NAME).read_text())["externalGradingOptions"]["image"]
    assert image == prairielearn.DEFAULT_IMAGE
