"""Install and run without the clone: the wheel ``python -m build`` makes, installed in a fresh
virtual environment, checks and grades a submission from a folder outside the clone.

Slow (a virtual environment with torch; ~2-3 min): one module-scoped install serves every test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from transformer_spec import layout
from transformer_spec.catalogue.patching import INDEPENDENT_IMPL

REPO = Path(__file__).resolve().parent.parent
# Building, installing and one sandboxed grading each take minutes on a busy 2-core machine.
#: the slow set (conftest.py: run with --slow): builds the sdist and the wheel and installs them in a fresh virtual environment
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]


def _run(cmd, cwd, timeout=900, env=None):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env)
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the venv's bin folder, a folder outside the clone): the wheel built from this clone and
    installed with its dependencies at constraints.txt's versions."""
    pytest.importorskip("build")
    tmp = tmp_path_factory.mktemp("wheel")
    # the sdist, then the wheel from it in a temp folder: no build/ folder left in the clone
    proc = _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", tmp / "dist", REPO], cwd=tmp)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    wheel = next((tmp / "dist").glob("transformer_spec-*.whl"))
    proc = _run([sys.executable, "-m", "venv", tmp / "venv"], cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    bin_dir = tmp / "venv" / "bin"
    pip = [bin_dir / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
           "-c", REPO / "constraints.txt"]
    proc = _run([*pip, "torch==2.13.0"], cwd=tmp)  # the CPU build (an unpinned torch pulls CUDA)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    proc = _run([*pip, wheel], cwd=tmp)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(INDEPENDENT_IMPL, elsewhere / "my_transformer.py")
    return bin_dir, elsewhere


def _site_packages(bin_dir: Path) -> Path:
    out = _run([bin_dir / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=bin_dir)
    return Path(out.stdout.strip())


def test_the_wheel_adds_no_generic_top_level_names(installed):
    bin_dir, _ = installed
    site = _site_packages(bin_dir)
    ours = [p.name for p in site.iterdir() if p.name.startswith("transformer_spec")]
    assert sorted(ours)[0] == "transformer_spec" and all(n.startswith("transformer_spec") for n in ours)
    for name in layout.PARTS:
        assert not (site / name).exists(), f"the wheel put a top-level {name!r} into site-packages"
        assert (site / "transformer_spec" / name / "__init__.py").is_file()
    assert list((site / "transformer_spec" / "spec_tests" / "snapshots").glob("*.pt"))


def test_check_grades_a_submission_outside_the_clone(installed):
    """The plugins come from the pytest11 entry point: there is no conftest.py anywhere here."""
    bin_dir, elsewhere = installed
    proc = _run([bin_dir / "transformer-spec", "check", "my_transformer.py", "-q"], cwd=elsewhere)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "score of my_transformer.py: 100 / 100" in proc.stdout, proc.stdout[-2000:]  # the name as typed
    assert not list(elsewhere.rglob("conftest.py"))


def test_a_course_own_pytest_run_beside_the_installed_suite_is_untouched(installed):
    """pytest loads the pytest11 entry point in every run of the environment: a course's own tests (a
    CS336 student's, calling torch's attention, in a folder of its own) run as if the suite were not
    installed: no rubric, no forbidden-API guard, no score (found on the 22 CS336 repositories)."""
    bin_dir, elsewhere = installed
    own = elsewhere / "a_course_repository"
    (own / "tests").mkdir(parents=True)
    (own / "tests" / "test_own.py").write_text(
        "import torch\nimport torch.nn.functional as F\n\n\ndef test_attention():\n"
        "    q = torch.ones(1, 2, 4)\n    assert F.scaled_dot_product_attention(q, q, q).shape == (1, 2, 4)\n")
    proc = _run([bin_dir / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=own)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "1 passed" in proc.stdout and "score" not in proc.stdout and "rubric" not in proc.stdout + proc.stderr


def test_a_failure_names_the_command_that_reruns_it(installed):
    bin_dir, elsewhere = installed
    broken = elsewhere / "broken"
    broken.mkdir(exist_ok=True)
    source = (elsewhere / "my_transformer.py").read_text()
    assert "factor = 1.0 / math.sqrt(d_k)" in source
    (broken / "mine.py").write_text(source.replace("factor = 1.0 / math.sqrt(d_k)", "factor = 1.0", 1))  # no scaling
    proc = _run([bin_dir / "transformer-spec", "check", "mine.py", "spec_tests/test_seed001_worked_example.py",
                 "-q"], cwd=broken)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    line = next(x for x in proc.stdout.splitlines() if "Reproduce: transformer-spec check" in x)
    nodeid = line.split('"')[1]
    again = _run([bin_dir / "transformer-spec", "check", "mine.py", nodeid, "-q"], cwd=broken)
    assert again.returncode == 1 and "1 failed" in again.stdout, again.stdout[-3000:]


def test_the_installed_reference_is_forbidden_to_a_submission(installed):
    bin_dir, elsewhere = installed
    cheat = elsewhere / "cheat"
    cheat.mkdir(exist_ok=True)
    (cheat / "copied.py").write_text("from transformer_spec.reference import *  # noqa\n")
    proc = _run([bin_dir / "transformer-spec", "check", "copied.py", "spec_tests/test_seed001_worked_example.py",
                 "-q"], cwd=cheat)
    assert proc.returncode != 0 and "forbidden" in proc.stdout.lower(), proc.stdout[-3000:]


@pytest.mark.skipif(shutil.which("bwrap") is None and os.geteuid() != 0, reason="no sandbox on this machine")
def test_grade_single_grades_a_submission_outside_the_clone(installed):
    """The sandboxed path: the suite's copy gets its conftest.py and settings from the package,
    and the children cannot see the installed reference."""
    bin_dir, elsewhere = installed
    graded = elsewhere / "graded"
    graded.mkdir(exist_ok=True)
    # The same correct code, which first looks for the installed reference's files: had the sandbox
    # shown them, the import would fail and the grade be 0.
    peek = ("import pathlib as _p, transformer_spec as _ts\n"
            "_here = _p.Path(_ts.__file__).parent\n"
            "assert not (_here / 'reference' / 'attention.py').exists(), 'the sandbox shows the reference'\n"
            "assert not (_here / 'tools' / 'grade').exists(), 'the sandbox shows the grader'\n")
    future = "from __future__ import annotations\n"
    (graded / "my_transformer.py").write_text(
        (elsewhere / "my_transformer.py").read_text().replace(future, future + peek, 1))
    unsandboxed = _run([bin_dir / "transformer-spec", "check", "my_transformer.py", "-q"], cwd=graded)
    assert "the sandbox shows the reference" in unsandboxed.stdout, unsandboxed.stdout[-2000:]  # the peek sees them
    proc = _run([bin_dir / "transformer-spec", "grade", "single", "my_transformer.py", "--results-json",
                 graded / "results.json", "--no-progress"], cwd=graded)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((graded / "results.json").read_text())
    assert results["score"] == 100, proc.stdout[-3000:] + json.dumps(results)[:3000]


def test_the_wheels_pytest_settings_are_the_clones():
    ini = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    for key, value in layout.PYTEST_INI.items():
        assert ini[key] == value, f"pyproject.toml's {key} = {ini[key]!r}, transformer_spec/layout.py has {value!r}"
    import ast
    tree = ast.parse((REPO / "setup.py").read_text())
    parts = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                 and getattr(n.targets[0], "id", "") == "PARTS")
    assert parts == layout.PARTS, "setup.py's PARTS must be transformer_spec/layout.py's"
    conftest = (REPO / "conftest.py").read_text()
    assert "layout import PLUGINS" in conftest


def test_release_writes_the_starter_kit_and_refuses_the_bundles(installed):
    bin_dir, elsewhere = installed
    proc = _run([bin_dir / "transformer-spec", "release", "--out", elsewhere / "kit"], cwd=elsewhere)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (elsewhere / "kit" / "contract.md").is_file() and (elsewhere / "kit" / "my_transformer").is_dir()
    proc = _run([bin_dir / "transformer-spec", "release", "--gradescope", elsewhere / "autograder.zip"], cwd=elsewhere)
    assert proc.returncode != 0 and "build it from a clone" in proc.stderr, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert not (elsewhere / "autograder.zip").exists()
