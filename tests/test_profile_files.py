"""A profile of one's own (issue 30): a course's Python file that defines ``PROFILE``, chosen with
``--profile path/to/file.py`` in pytest, ``tools.grade`` and ``tools.grade single``.

The worked example of docs/adapters.md, ``docs/examples/course_profile.py``, renames the classic
contract's names and arguments (its attention's and causal mask's masks mean *keep*). The reference
written in that course's names (``tests/profiles/renamed_classic_submission.py``) scores 100 through
it; the same file with one mistake loses only that component's points, in pytest and in the class
grader, whose sandboxed children see the profile file; a broken profile file is one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from transformer_spec import profiles
from transformer_spec.catalogue.patching import write_patched_reference

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "docs" / "examples" / "course_profile.py"
SUBMISSION = REPO / "tests" / "profiles" / "renamed_classic_submission.py"
# the course forgets that its causal mask means keep: it returns the contract's blocked mask
MISTAKE = ("    return ~reference.causal_mask(size, device)", "    return reference.causal_mask(size, device)")


def _rubric_allowing_reference(tmp_path: Path) -> Path:
    """The classic rubric without ``reference`` among the forbidden imports: the submission here wraps the reference."""
    text = (REPO / "transformer_spec" / "rubric.toml").read_text()
    assert '    "reference",\n' in text
    path = tmp_path / "rubric.toml"
    path.write_text(text.replace('    "reference",\n', ""))
    return path


def _submission(dest: Path, mistake: bool) -> Path:
    text = SUBMISSION.read_text()
    if mistake:
        assert MISTAKE[0] in text
        text = text.replace(*MISTAKE)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text)
    return dest


def _package(folder: Path, name: str, mistake: bool) -> Path:
    """The submission as a self-contained package ``folder/<name>`` (in the sandbox, the project's
    ``reference`` is not importable): a copy of the reference whose ``__init__`` is the course's names."""
    pkg = write_patched_reference(folder, [], name)
    (pkg / "__init__.py").rename(pkg / "_reference.py")
    text = _submission(folder / "tmp.py", mistake).read_text()
    (folder / "tmp.py").unlink()
    for old, new in (("import reference\n", "from . import _reference as reference\n"),
                     ("from reference import *", "from ._reference import *")):
        assert old in text
        text = text.replace(old, new)
    (pkg / "__init__.py").write_text(text)
    return pkg


def _pytest(tmp_path: Path, submission: Path, name: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / f"{name}.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "spec_tests", "properties", "-q", "-p", "no:cacheprovider",
         "--profile", str(EXAMPLE), "--impl", str(submission), "--rubric", str(_rubric_allowing_reference(tmp_path)),
         "--grade-json", str(out)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-2000:]
    return proc, json.loads(out.read_text())


def _by_component(results: dict) -> dict[str, float]:
    earned: dict[str, float] = {}
    for t in results["tests"]:
        earned[t["tags"][0]] = earned.get(t["tags"][0], 0.0) + t["score"]
    return earned


@pytest.mark.timeout(300)  # two pytest runs: 25 s idle
def test_the_worked_example_gives_the_reference_in_the_courses_names_100_and_a_mistake_loses_its_component(tmp_path):
    proc, results = _pytest(tmp_path, SUBMISSION, "correct")
    assert results["score"] == pytest.approx(100.0), proc.stdout[-3000:]
    assert "not applicable under profile renamed-classic" in proc.stdout
    _, broken = _pytest(tmp_path, _submission(tmp_path / "broken" / "mine.py", mistake=True), "broken")
    full, got = _by_component(results), _by_component(broken)
    assert got["masks"] < full["masks"]
    assert {c: v for c, v in got.items() if c != "masks"} == {c: v for c, v in full.items() if c != "masks"}
    assert any("Reproduce:" in t["output"] and "--profile course_profile.py" in t["output"]
               for t in broken["tests"] if t["status"] == "failed")


def test_a_renamed_argument_counts_as_named_in_an_error():
    example = profiles.get(str(EXAMPLE))
    assert example.name == "renamed-classic" and example.origin == str(EXAMPLE)
    assert example.argument_names_of(["d_model", "num_heads"]) == ("d_model", "num_heads", "embed_dim", "n_heads")
    assert profiles.get(profiles.DEFAULT).argument_names_of(["mask"]) == ("mask",)


@pytest.mark.parametrize("text, says", [
    ("x = 1\n", "it must define PROFILE"),
    ("raise RuntimeError('oops')\n", "importing it failed: RuntimeError: oops"),
    ("from transformer_spec.profiles import Profile\nPROFILE = Profile('mine', 's', track='classic', "
     "lacks=frozenset({'wieghts'}))\n", "lacks names no capability: wieghts"),
    ("from transformer_spec.profiles import Profile\nPROFILE = Profile('cs336', 's', track='classic')\n",
     "is a shipped profile's"),
    ("from transformer_spec.profiles import Profile\nPROFILE = Profile('mine', 's', track='retro')\n",
     "its track must be one of"),
])
def test_a_broken_profile_file_is_one_line_naming_the_option(tmp_path, text, says):
    path = tmp_path / "mine.py"
    path.write_text(text)
    with pytest.raises(ValueError, match="^--profile ") as info:
        profiles.get(str(path))
    assert says in str(info.value) and "\n" not in str(info.value)


def test_the_tools_take_a_profile_file_and_refuse_a_missing_one_in_one_line(tmp_path, capsys):
    proc = subprocess.run([sys.executable, "-m", "tools.grade", str(tmp_path), "--out", str(tmp_path / "o"),
                           "--profile", str(tmp_path / "nothing.py")], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2 and "no such file" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    from tools import release
    from tools.grade.cli import build_single_parser
    from tools.grading_options import settings_of

    args = build_single_parser().parse_args(["s.py", "--results-json", "r.json", "--profile", str(EXAMPLE)])
    settings = settings_of(args)
    assert (settings.profile, settings.track) == (str(EXAMPLE), "classic")
    for argv in (["--gradescope", str(tmp_path / "b.zip")], ["--prairielearn", str(tmp_path / "pl")]):
        assert release.main([*argv, "--profile", str(EXAMPLE)]) == 2
        err = capsys.readouterr().err
        assert "the platforms' files take a shipped profile" in err and err.count("\n") == 1, err


@pytest.mark.slow
@pytest.mark.timeout(600)  # a class graded and two pytest runs: 49 s idle, over 120 s on a loaded machine
def test_the_class_grader_grades_through_a_profile_file_as_pytest_does(tmp_path):
    """The sandboxed children (the grading run and the hidden re-checks) load the profile from their own
    copy of the file; each grade is the pytest report, test for test; the feedback names the course's
    functions and its re-run command the file."""
    from tools import grade

    folder = tmp_path / "class"
    packages = {"alice": _package(folder / "alice", "course_alice", mistake=False),
                "bob": _package(folder / "bob", "course_bob", mistake=True)}
    out = tmp_path / "out"
    assert grade.main([str(folder), "--out", str(out), "--profile", str(EXAMPLE), "--jobs", "2", "--no-progress",
                       "--rubric", str(_rubric_allowing_reference(tmp_path))]) == 0
    for student in ("alice", "bob"):
        batch = json.loads((out / "students" / student / "results.json").read_text())
        _, mine = _pytest(tmp_path, packages[student], student)
        assert {t["name"]: (t["score"], t["status"]) for t in batch["tests"]} == \
            {t["name"]: (t["score"], t["status"]) for t in mine["tests"]}, student
    assert json.loads((out / "students" / "alice" / "results.json").read_text())["score"] == pytest.approx(100.0)
    feedback = (out / "students" / "bob" / "feedback.md").read_text()
    assert "masks (subsequent_mask)" in feedback, feedback
    assert "--profile course_profile.py" in feedback
