"""GitHub Classroom's template repository (``python -m tools.release --github-classroom DIR``): the
workflow parsed back with PyYAML and its steps checked, and each component step's command run as
the command grader runs it (a fresh shell in the workspace, only ``PATH`` and ``HOME`` set) on
hand-written results.json files; plus :mod:`tools.classroom_check` alone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.test_gradescope_bundle import pinned_torch
from tools import classroom, classroom_check, release
from transformer_spec import profiles
from transformer_spec.contract import tracks
from transformer_spec.scoring import rubric as rubrics

REPO = Path(__file__).resolve().parent.parent
GRADER = "course-org/transformer-spec"


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("classroom") / "template"
    assert release.main(["--github-classroom", str(out), "--grader-repo", GRADER, "--grader-ref", "v1.2"]) == 0
    return out


def _workflow(template: Path) -> dict:
    return yaml.safe_load((template / ".github" / "workflows" / "classroom.yml").read_text())


def _steps(template: Path) -> list[dict]:
    (job,) = _workflow(template)["jobs"].values()
    return job["steps"]


def _component_steps(steps: list[dict]) -> list[dict]:
    return [s for s in steps if s.get("uses", "").startswith("classroom-resources/autograding-command-grader@")]


def test_the_template_holds_the_kit_and_the_workflow(template):
    assert (template / "my_transformer" / "__init__.py").is_file() and (template / "contract.md").is_file()
    flow = _workflow(template)
    assert "push" in flow["on"] and flow["permissions"]["checks"] == "write"
    (job,) = flow["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest" and "github-classroom[bot]" in job["if"]


def test_the_grader_is_checked_out_installed_and_run_once(template):
    steps = _steps(template)
    checkouts = [s for s in steps if s.get("uses", "").startswith("actions/checkout@")]
    assert len(checkouts) == 2 and "with" not in checkouts[0]  # the student's repository, then the grader
    grader = checkouts[1]["with"]
    assert (grader["repository"], grader["ref"], grader["path"]) == (GRADER, "v1.2", classroom.GRADER_PATH)
    runs = [s["run"] for s in steps if "run" in s]
    install = next(r for r in runs if "pip install" in r).splitlines()
    assert "sudo apt-get install -y bubblewrap" in install
    torch = next(line for line in install if "torch==" in line)
    assert f'-c constraints.txt "torch=={pinned_torch()}"' in torch
    assert "https://download.pytorch.org/whl/cpu" in torch
    assert 'python -m pip install -c constraints.txt -e ".[dev]"' in install
    grades = [r for r in runs if "tools.grade single" in r]
    assert len(grades) == 1
    assert '"$GITHUB_WORKSPACE/my_transformer"' in grades[0] and classroom.RESULTS in grades[0]
    grade_index = next(i for i, s in enumerate(steps) if "tools.grade single" in s.get("run", ""))
    assert all(steps.index(s) > grade_index for s in _component_steps(steps))


def test_one_step_per_component_worth_its_points(template):
    steps = _steps(template)
    graders = _component_steps(steps)
    points = rubrics.load_rubric().components
    assert [s["with"]["test-name"] for s in graders] == [c for c in tracks.component_names("classic") if points[c] > 0]
    for step in graders:
        name = step["with"]["test-name"]
        assert step["id"] == name and step["with"]["max-score"] == points[name]
        assert f"--component {name}" in step["with"]["command"]
        assert isinstance(step["with"]["timeout"], int) and step["with"]["timeout"] >= 1  # minutes
    assert sum(s["with"]["max-score"] for s in graders) == rubrics.load_rubric().total == 100
    (reporter,) = [s for s in steps if s.get("uses", "").startswith("classroom-resources/autograding-grading-reporter@")]
    assert reporter["with"]["runners"].split(",") == [s["id"] for s in graders]
    assert reporter["env"] == {f"{s['id'].upper()}_RESULTS": f"${{{{ steps.{s['id']}.outputs.result }}}}"
                               for s in graders}


def _test(component: str, score: float, max_score: float, output: str = "") -> dict:
    return {"name": f"[{component}] spec_tests/t.py::test_{component}_{score}", "number": "1.1", "score": score,
            "max_score": max_score, "status": "passed" if score == max_score else "failed", "output": output,
            "tags": [component], "visibility": "visible"}


RESULTS = {"score": 9.0, "execution_time": 1.0, "output": "scored 9 / 12", "tests": [
    _test("attention", 3.0, 3.0), _test("attention", 4.0, 4.0),
    _test("mha", 2.0, 2.0), _test("mha", 0.0, 3.0, "MultiHeadAttention output: values differ: expected 1, got 2"),
]}


def test_the_step_commands_pass_exactly_the_components_with_full_points(template, tmp_path):
    # The workspace: the student's checkout with the grader's checkout and the grading's results.json.
    workspace = tmp_path / "workspace"
    shutil.copytree(template, workspace)
    (workspace / classroom.GRADER_PATH).symlink_to(REPO)
    (workspace / classroom.RESULTS).write_text(json.dumps(RESULTS))
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    commands = {s["with"]["test-name"]: s["with"]["command"] for s in _component_steps(_steps(template))}

    def run(component):
        return subprocess.run(["bash", "-c", commands[component]], cwd=workspace, env=env, capture_output=True,
                              text=True, timeout=120)

    full, partial, absent = run("attention"), run("mha"), run("ffn")
    assert full.returncode == 0, full.stdout + full.stderr
    assert "7 / 7 points" in full.stdout
    assert partial.returncode == 1 and "2 / 5 points" in partial.stdout
    assert "values differ: expected 1, got 2" in partial.stdout and "test_mha_0.0" in partial.stdout
    assert "test_mha_2.0" not in partial.stdout  # only the tests that lost points
    assert absent.returncode == 2 and "--component ffn: no test of this component" in absent.stderr
    (workspace / classroom.RESULTS).unlink()  # the grading step wrote nothing
    missing = run("attention")
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_component_score_adds_up_the_components_tests():
    score = classroom_check.component_score(RESULTS, "mha")
    assert (score.earned, score.possible, score.full) == (2.0, 5.0, False)
    assert [t["score"] for t in score.failing] == [0.0]
    assert classroom_check.component_score(RESULTS, "attention").full
    # A score rounded a hair under full is full; one a hundredth under is not.
    assert classroom_check.component_score({"tests": [_test("ffn", 6 - 1e-9, 6.0)]}, "ffn").full
    assert not classroom_check.component_score({"tests": [_test("ffn", 5.99, 6.0)]}, "ffn").full


def test_a_hidden_test_that_lost_points_shows_its_points_but_not_its_details(capsys):
    hidden = dict(_test("errors", 0.0, 2.0, "secret input 7"), visibility="after_published")
    score = classroom_check.component_score({"tests": [_test("errors", 4.0, 4.0), hidden]}, "errors")
    text = classroom_check.report(score)
    assert not score.full and "4 / 6 points" in text and "a hidden test: 0 / 2" in text
    assert "secret input 7" not in text and "test_errors_0.0" not in text


def test_an_ungradable_submission_fails_every_check_with_the_reason(tmp_path, capsys):
    # tools.grade single lists every test at 0 with the reason when the submission cannot be imported.
    broken = {"score": 0.0, "output": "the submission cannot be graded: SyntaxError at attention.py:3",
              "tests": [_test("attention", 0.0, 7.0, "SyntaxError at attention.py:3")]}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(broken))
    assert classroom_check.main([str(path), "--component", "attention"]) == 1
    assert "SyntaxError at attention.py:3" in capsys.readouterr().out
    path.write_text(json.dumps({"score": 0.0, "output": "nothing graded: the folder is empty\n", "tests": []}))
    assert classroom_check.main([str(path), "--component", "attention"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing graded: the folder is empty" in err
    path.write_text("{not json")
    assert classroom_check.main([str(path), "--component", "attention"]) == 2
    assert "not a readable results.json" in capsys.readouterr().err


def test_a_rubric_sets_the_points_and_travels_in_the_template(tmp_path):
    rubric = tmp_path / "mine.toml"
    rubric.write_text('[components]\nattention = 60\nmha = 40\n')
    out = tmp_path / "t"
    assert release.main(["--github-classroom", str(out), "--grader-repo", GRADER, "--rubric", str(rubric),
                         "--name", "kit"]) == 0
    steps = _steps(out)
    assert {s["with"]["test-name"]: s["with"]["max-score"] for s in _component_steps(steps)} == \
        {"attention": 60, "mha": 40}
    assert (out / classroom.RUBRIC).read_bytes() == rubric.read_bytes()
    grade = next(s["run"] for s in steps if "tools.grade single" in s.get("run", ""))
    assert f'--rubric "$GITHUB_WORKSPACE/{classroom.RUBRIC.as_posix()}"' in grade
    assert '"$GITHUB_WORKSPACE/kit"' in grade and (out / "kit" / "__init__.py").is_file()


@pytest.mark.parametrize("args, message", [
    (["--github-classroom", "{tmp}/t"], "--grader-repo OWNER/NAME is required with --github-classroom"),
    (["--github-classroom", "{tmp}/t", "--grader-repo", "no-slash"], "--grader-repo no-slash: not a GitHub repository"),
    (["--github-classroom", "{tmp}/t", "--grader-repo", GRADER, "--grader-ref", "a b"], "--grader-ref 'a b'"),
    (["--github-classroom", "{tmp}/done", "--grader-repo", GRADER], "classroom.yml already exists"),
    (["--github-classroom", "{tmp}/t", "--grader-repo", GRADER, "--rubric", "{tmp}/half.toml"],
     "component 'attention' has 2.5 points; GitHub Classroom's command grader awards whole points only"),
    (["--github-classroom", "{tmp}/t", "--grader-repo", GRADER, "--image", "x"], "--image applies to --prairielearn"),
    (["--out", "{tmp}/t", "--grader-repo", GRADER], "--grader-repo applies to --github-classroom, not to --out"),
])
def test_bad_arguments_are_one_line_errors_naming_the_argument(tmp_path, capsys, args, message):
    (tmp_path / "done" / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / "done" / ".github" / "workflows" / "classroom.yml").write_text("old")
    (tmp_path / "half.toml").write_text("[components]\nattention = 2.5\n")
    assert release.main([a.format(tmp=tmp_path) for a in args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("release: error: ") and err.count("\n") == 1, err
    assert message.format(tmp=tmp_path) in err
    assert not (tmp_path / "t").exists()
    assert (tmp_path / "done" / ".github" / "workflows" / "classroom.yml").read_text() == "old"


def test_force_rewrites_the_workflow_and_the_kit(tmp_path):
    out = tmp_path / "t"
    assert release.main(["--github-classroom", str(out), "--grader-repo", GRADER]) == 0
    (out / ".github" / "workflows" / "classroom.yml").write_text("old")
    assert release.main(["--github-classroom", str(out), "--grader-repo", GRADER, "--force"]) == 0
    assert "autograding-command-grader" in (out / ".github" / "workflows" / "classroom.yml").read_text()
    assert os.access(out / "my_transformer" / "__init__.py", os.R_OK)


# A course profile's repository (issue 30): the template is the course's handout; the workflow grades the
# student's whole repository, checked out beside the grader's checkout

@pytest.fixture(scope="module")
def cs336_template(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("classroom") / "cs336"
    assert release.main(["--github-classroom", str(out), "--grader-repo", GRADER, "--profile", "cs336"]) == 0
    return out


def test_a_course_profiles_workflow_checks_the_repository_out_beside_the_grader_and_grades_all_of_it(cs336_template):
    assert sorted(p.name for p in cs336_template.iterdir()) == [".github"]  # no kit: the course's handout is the template
    steps = _steps(cs336_template)
    checkouts = [s for s in steps if s.get("uses", "").startswith("actions/checkout@")]
    assert checkouts[0]["with"] == {"path": classroom.REPOSITORY_PATH}
    assert checkouts[1]["with"]["path"] == classroom.GRADER_PATH != classroom.REPOSITORY_PATH
    (grade,) = [s["run"] for s in steps if "tools.grade single" in s.get("run", "")]
    assert f'"$GITHUB_WORKSPACE/{classroom.REPOSITORY_PATH}"' in grade and "--profile cs336" in grade
    assert f'"$GITHUB_WORKSPACE/{classroom.RESULTS}"' in grade  # outside the graded repository
    points = rubrics.load_rubric(profiles.get("cs336").rubric, "modern").components
    assert {s["with"]["test-name"]: s["with"]["max-score"] for s in _component_steps(steps)} == \
        {c: int(v) for c, v in points.items() if v > 0}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_course_profiles_workflow_grades_a_repository_and_every_component_check_passes(cs336_template, tmp_path):
    """The grading step and the component steps run as GitHub runs them, on a correct CS336-style repository
    in ``submission/`` (the independent implementation behind a filled-in tests/adapters.py)."""
    from tests.profiles.repositories import cs336_repository

    workspace = tmp_path / "workspace"
    workspace.mkdir()
    cs336_repository(workspace / classroom.REPOSITORY_PATH)
    (workspace / classroom.GRADER_PATH).symlink_to(REPO)
    steps = _steps(cs336_template)
    (grade,) = [s["run"] for s in steps if "tools.grade single" in s.get("run", "")]
    env = {**os.environ, "GITHUB_WORKSPACE": str(workspace)}
    proc = subprocess.run(["bash", "-c", grade], cwd=workspace, env=env, capture_output=True, text=True, timeout=500)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = json.loads((workspace / classroom.RESULTS).read_text())
    assert results["score"] == pytest.approx(100.0), results["output"][-2000:]
    check_env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    for step in _component_steps(steps):
        check = subprocess.run(["bash", "-c", step["with"]["command"]], cwd=workspace, env=check_env,
                               capture_output=True, text=True, timeout=120)
        assert check.returncode == 0, (step["with"]["test-name"], check.stdout, check.stderr)
