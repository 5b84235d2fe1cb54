"""The Gradescope autograder bundle (``python -m tools.release --gradescope OUT.zip``), end to end:
built, laid out under ``$AUTOGRADER_ROOT`` as Gradescope lays it out, and run as Gradescope runs it.

The bundle's ``run_autograder`` runs in this test's environment: only ``setup.sh``'s apt-get and pip
part is not run here (its text is checked instead). In its place, ``PYTHON`` is a virtual
environment over this interpreter's packages in which, as after ``setup.sh``'s editable install,
the project is the bundle's copy in ``source/`` (the grader's children, whose sandbox shows them
only the installed project, import that copy, not this checkout).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import jsonschema
import pytest

from tests.profiles.repositories import cs336_repository
from tests.test_grading import GRADESCOPE_SCHEMA
from tools import gradescope_bundle, release
from tools.grade.cli import build_single_parser
from tools.grading_options import settings_arguments, settings_of
from transformer_spec.catalogue.patching import REFERENCE_DIR, write_patched_reference
from transformer_spec.catalogue.pitfalls import by_name

#: the slow set (conftest.py: run with --slow): builds Gradescope's bundle and runs its run_autograder
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
# A small file of the suite (attention and multi-head attention): the gradings stay short.
SMALL = "spec_tests/test_seed001_worked_example.py"
SETTINGS = ["--tests", SMALL, "--memory-mb", "2500"]  # the default time limits: a loaded machine is slow


@pytest.fixture
def root():
    """``AUTOGRADER_ROOT``, outside ``/tmp`` as Gradescope's ``/autograder`` is: the grader's sandbox
    mounts an empty ``/tmp``, so an environment installed under it would be invisible to its children."""
    base = Path("/var/tmp") if Path("/var/tmp").is_dir() else None
    path = Path(tempfile.mkdtemp(prefix="gradescope-test-", dir=base)) / "autograder"
    yield path
    shutil.rmtree(path.parent, ignore_errors=True)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "autograder.zip"
    assert release.main(["--gradescope", str(out), *SETTINGS]) == 0
    return out


def _lay_out(bundle: Path, root: Path) -> None:
    """What Gradescope does: the zip extracted (modes kept) into source/, run_autograder copied to
    the root, empty submission/ and results/."""
    source = root / "source"
    with zipfile.ZipFile(bundle) as zf:
        for info in zf.infolist():
            zf.extract(info, source)
            os.chmod(source / info.filename, (info.external_attr >> 16) & 0o777 or 0o644)
    shutil.copy2(source / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir()
    (root / "results").mkdir()


def venv_over_source(root: Path) -> str:
    """setup.sh's environment, made here without installing anything: this interpreter's packages,
    and the bundle's copy of the project first on the path (what ``pip install -e`` of it gives)."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    (site,) = venv.glob("lib/python*/site-packages")
    (site / "bundle_source.pth").write_text(f"{root / 'source'}\n")
    return str(venv / "bin" / "python")


def _run_autograder(root: Path, python: str) -> dict:
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), PYTHON=python)
    proc = subprocess.run([str(root / "run_autograder")], cwd=root, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(results, GRADESCOPE_SCHEMA)
    return results


def single_grade(submission: Path, results: Path, settings: list[str]) -> dict:
    """What ``tools.grade single`` writes for ``submission`` with ``settings``: the grade each platform's
    script must give, test for test."""
    cmd = [sys.executable, "-m", "tools.grade", "single", str(submission), "--results-json", str(results),
           *settings, "--no-progress"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(results.read_text())


def _scores(results: dict) -> dict[str, tuple[float, float, str]]:
    return {t["name"]: (t["score"], t["max_score"], t["status"]) for t in results["tests"]}


def _submit_correct(submission: Path) -> None:
    # The package's files uploaded as they are: submission/ itself is the package.
    shutil.copytree(REFERENCE_DIR, submission, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))


def _submit_unscaled(submission: Path) -> None:
    # A package folder uploaded: submission/my_transformer/.
    write_patched_reference(submission, by_name()["no_scaling"].patches, "my_transformer")


@pytest.mark.timeout(900)  # two gradings; a loaded machine may need more than the default 120 s
@pytest.mark.parametrize("submit", [_submit_correct, _submit_unscaled], ids=["correct", "unscaled"])
def test_run_autograder_writes_what_the_single_grader_writes(bundle, root, tmp_path, submit):
    _lay_out(bundle, root)
    submit(root / "submission")
    results = _run_autograder(root, venv_over_source(root))
    expected = single_grade(root / "submission", tmp_path / "direct.json", SETTINGS)
    assert _scores(results) == _scores(expected)
    assert results["score"] == expected["score"]
    total = sum(t["max_score"] for t in results["tests"])
    if submit is _submit_correct:
        assert results["score"] == pytest.approx(total) and total > 0
    else:
        lost = {t["tags"][0] for t in results["tests"] if t["score"] < t["max_score"]}
        assert results["score"] < total and "attention" in lost


@pytest.mark.timeout(900)  # a bundle build and two gradings
def test_run_autograder_grades_a_cs336_repository_through_the_profile(root, tmp_path):
    """Issue 30: a bundle built with ``--profile cs336`` grades a student's repository uploaded as it is
    (Gradescope's ``submission/`` is the repository's root, holding ``tests/adapters.py``) as the single
    grader does; the handout's keep mask read as blocked loses attention's points only."""
    settings = ["--tests", "properties/test_attention_laws.py", "spec_tests/modern/test_oracles.py",
                "--memory-mb", "2500", "--profile", "cs336"]
    bundle = tmp_path / "autograder.zip"
    assert release.main(["--gradescope", str(bundle), *settings]) == 0
    _lay_out(bundle, root)
    cs336_repository(root / "submission", ("blocked = None if mask is None else ~mask", "blocked = mask"))
    results = _run_autograder(root, venv_over_source(root))
    assert _scores(results) == _scores(single_grade(root / "submission", tmp_path / "direct.json", settings))
    lost = {t["tags"][0] for t in results["tests"] if t["score"] < t["max_score"]}
    assert lost == {"attention"}, results["output"][-2000:]
    assert "run_scaled_dot_product_attention" in results["output"]


@pytest.mark.timeout(300)
def test_run_autograder_leaves_a_results_json_when_grading_fails(bundle, root):
    _lay_out(bundle, root)
    (root / "submission").rmdir()  # the grader stops with a usage error and writes nothing
    results = _run_autograder(root, venv_over_source(root))
    assert results["score"] == 0 and results["tests"] == []
    assert "could not grade this submission" in results["output"]
    assert "no such file or folder" in results["output"]
    # No usable Python at all: the script's own fixed message.
    (root / "submission").mkdir()
    results = _run_autograder(root, python="false")
    assert results["score"] == 0 and "could not grade this submission" in results["output"]


def test_bundle_holds_the_scripts_and_the_project_and_nothing_else(bundle):
    with zipfile.ZipFile(bundle) as zf:
        infos = {i.filename: i for i in zf.infolist()}
    for script in ("setup.sh", "run_autograder"):
        assert script in infos, f"{script} must be at the zip's top level"
        assert (infos[script].external_attr >> 16) & stat.S_IXUSR, f"{script} must be executable"
    for needed in ("pyproject.toml", "constraints.txt", "README.md", "conftest.py", "docs/contract.md",
                   "transformer_spec/rubric.toml", "transformer_spec/grader/single.py", "reference/__init__.py",
                   "spec_tests/test_torch_oracle.py", "properties/__init__.py"):
        assert needed in infos, needed
    for name in infos:
        parts = name.split("/")
        assert parts[0] not in ("tests", ".git", ".ci", ".hypothesis", ".pytest_cache"), name
        assert "__pycache__" not in parts and not name.endswith(".pyc"), name
        assert not any(p.endswith(".egg-info") for p in parts), name
    tracked = subprocess.run(["git", "ls-files", *gradescope_bundle.INCLUDE], cwd=REPO, capture_output=True,
                             text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout: the tracked files cannot be listed")
    missing = [f for f in tracked.stdout.split() if (REPO / f).is_file() and f not in infos]
    assert not missing, f"tracked files left out of the bundle: {missing}"


def pinned_torch() -> str:
    lines = [ln for ln in (REPO / "constraints.txt").read_text().splitlines() if ln.startswith("torch==")]
    assert len(lines) == 1
    return lines[0].removeprefix("torch==").strip()


def test_setup_sh_installs_bubblewrap_and_the_pinned_versions(bundle):
    with zipfile.ZipFile(bundle) as zf:
        setup = zf.read("setup.sh").decode()
        script = zf.read("run_autograder").decode()
    installs = [ln.strip() for ln in setup.splitlines() if ln.strip().startswith("apt-get install")]
    assert installs and "bubblewrap" in installs[0].split() and "python3-venv" in installs[0].split()
    assert f'pip install -c constraints.txt "torch=={pinned_torch()}"' in setup
    assert 'pip install -c constraints.txt -e ".[dev]"' in setup
    assert setup.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in setup
    assert script.startswith("#!/usr/bin/env bash\n")
    for text in (setup, script):
        check = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
    assert '-m tools.grade single "$ROOT/submission" --results-json "$RESULTS"' in script
    assert f"--tests {SMALL} --memory-mb 2500" in script


FAKE = """#!/usr/bin/env bash
# A stand-in for apt-get, bwrap and python3: logs its name, folder and arguments.
echo "$(basename "$0") [$PWD] $*" >> "$FAKE_LOG"
if [ "$(basename "$0")" != python3 ] && [ "$(basename "$0")" != python ]; then exit 0; fi
case "$*" in
    *version_info*) [ -z "${FAKE_OLD:-}" ] ;;
    "-m venv "*) mkdir -p "$3/bin" && cp "$0" "$3/bin/python" ;;
    --version) echo "Python 3.8.0" ;;
esac
"""


@pytest.mark.parametrize("old_python", [False, True], ids=["python-3.11+", "python-too-old"])
def test_setup_sh_runs_its_steps_in_order(bundle, tmp_path, old_python):
    # setup.sh run for real, with apt-get, bwrap and python3 replaced by stand-ins that log their calls.
    source = tmp_path / "source"
    with zipfile.ZipFile(bundle) as zf:
        zf.extract("setup.sh", source)
    fakes = tmp_path / "bin"
    fakes.mkdir()
    for name in ("apt-get", "bwrap", "python3"):
        (fakes / name).write_text(FAKE)
        (fakes / name).chmod(0o755)
    log = tmp_path / "log"
    env = {"PATH": f"{fakes}:/usr/bin:/bin", "FAKE_LOG": str(log), "TRANSFORMER_SPEC_VENV": str(tmp_path / "venv"),
           **({"FAKE_OLD": "1"} if old_python else {})}
    proc = subprocess.run(["bash", str(source / "setup.sh")], cwd=tmp_path, env=env, capture_output=True, text=True)
    calls = log.read_text().splitlines()
    venv_python = f"python [{source}]"
    if old_python:
        assert proc.returncode == 1 and "Python 3.8.0 is too old" in proc.stderr
        assert not any(c.startswith(venv_python) for c in calls)
        return
    assert proc.returncode == 0, proc.stderr
    steps = [c for c in calls if c.startswith(("apt-get", venv_python))]
    assert steps[0].startswith("apt-get") and steps[0].endswith(" update")
    assert "bubblewrap" in steps[1].split() and steps[1].startswith("apt-get") and " install -y " in steps[1]
    torch = f"{venv_python} -m pip install -c constraints.txt torch=={pinned_torch()} --extra-index-url "
    assert steps[2].startswith(torch)
    assert steps[3] == f"{venv_python} -m pip install -c constraints.txt -e .[dev]"
    assert steps[4].startswith(f"{venv_python} -c import torch")
    assert f"python3 [{tmp_path}] -m venv {tmp_path / 'venv'}" in calls
    # TORCH_INDEX_URL="" leaves pip's default index alone.
    log.unlink()
    proc = subprocess.run(["bash", str(source / "setup.sh")], cwd=tmp_path, env={**env, "TORCH_INDEX_URL": ""},
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert f"{venv_python} -m pip install -c constraints.txt torch=={pinned_torch()}" in log.read_text().splitlines()


def test_settings_reach_the_single_grader_unchanged():
    parser = build_single_parser()
    built = parser.parse_args(["sub", "--results-json", "r.json", *SETTINGS, "--threads", "2", "--no-rechecks"])
    passed = settings_arguments(built)
    again = parser.parse_args(["sub", "--results-json", "r.json", *passed])
    assert settings_of(again) == settings_of(built)
    assert settings_arguments(parser.parse_args(["sub", "--results-json", "r.json"])) == []


def test_a_rubric_travels_in_the_bundle(tmp_path):
    rubric = tmp_path / "my_rubric.toml"
    shutil.copyfile(REPO / "transformer_spec" / "rubric.toml", rubric)
    out = tmp_path / "ag.zip"
    assert release.main(["--gradescope", str(out), "--rubric", str(rubric)]) == 0
    with zipfile.ZipFile(out) as zf:
        assert zf.read(gradescope_bundle.RUBRIC_NAME) == rubric.read_bytes()
        assert f'--rubric "$SOURCE/{gradescope_bundle.RUBRIC_NAME}"' in zf.read("run_autograder").decode()


@pytest.mark.parametrize("args, message", [
    (["--gradescope", "{tmp}/ag.tar"], "--gradescope {tmp}/ag.tar: the bundle's name must end in .zip"),
    (["--gradescope", "{tmp}/exists.zip"], "--gradescope {tmp}/exists.zip: already exists; remove it or pass --force"),
    (["--gradescope", "{tmp}/folder.zip", "--force"], "--gradescope {tmp}/folder.zip: is a folder"),
    (["--gradescope", "{tmp}/ag.zip", "--name", "kit"], "--name applies to the starter kit"),
    (["--gradescope", "{tmp}/ag.zip", "--tests", "tests"], "--tests tests: not a file or folder of the suite"),
    (["--gradescope", "{tmp}/ag.zip", "--rubric", "{tmp}/none.toml"], "none.toml: cannot be read"),
    (["--out", "{tmp}/kit", "--tests", SMALL], "--tests applies to the Gradescope bundle"),
    (["--out", "{tmp}/kit", "--rubric", "{tmp}/none.toml"], "--rubric applies to the Gradescope bundle"),
])
def test_bad_arguments_are_one_line_errors_naming_the_argument(tmp_path, capsys, args, message):
    (tmp_path / "exists.zip").write_bytes(b"old")
    (tmp_path / "folder.zip").mkdir()
    assert release.main([a.format(tmp=tmp_path) for a in args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("release: error: ") and err.count("\n") == 1, err
    assert message.format(tmp=tmp_path) in err
    assert (tmp_path / "exists.zip").read_bytes() == b"old" and not (tmp_path / "ag.zip").exists()


def test_force_replaces_an_existing_bundle(tmp_path):
    out = tmp_path / "ag.zip"
    out.write_bytes(b"old")
    assert release.main(["--gradescope", str(out), "--force"]) == 0
    with zipfile.ZipFile(out) as zf:
        assert "run_autograder" in zf.namelist()


def docs_recipe() -> str:
    """The bash block of docs/grading.md that tries the zip locally, as written there."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "grading.md").read_text()
    start = text.index("Try the zip before uploading it")
    block = text[text.index("```bash\n", start) + len("```bash\n"):]
    return block[:block.index("```")]


@pytest.mark.timeout(1200)  # setup.sh installs torch and the project: ~2 min here, more on a loaded machine
def test_the_docs_local_try_recipe_runs_as_written(tmp_path):
    """Issue 48: a new user followed the recipe from a virtual environment and it failed. Its four lines,
    run as they are written from a folder holding autograder.zip and path/to/my_transformer: the zip's
    setup.sh builds its own environment, and run_autograder grades the reference with full marks."""
    recipe = docs_recipe()
    assert recipe.startswith("R=/var/tmp/ag ") and "setup.sh" in recipe, recipe
    assert release.main(["--gradescope", str(tmp_path / "autograder.zip"), *SETTINGS]) == 0
    shutil.copytree(REFERENCE_DIR, tmp_path / "path" / "to" / "my_transformer")
    env = dict(os.environ, TORCH_INDEX_URL="")  # pip's own index holds the CPU build on CI's machine
    try:
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", recipe], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=1200)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        results = json.loads(Path("/var/tmp/ag/results/results.json").read_text())
    finally:
        shutil.rmtree("/var/tmp/ag", ignore_errors=True)
    possible = sum(t["max_score"] for t in results["tests"])
    assert results["tests"] and results["score"] == pytest.approx(possible), results.get("output")
