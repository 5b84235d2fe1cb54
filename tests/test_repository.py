"""A course's repository loads as its install would make it (transformer_spec/submission/repository.py, issue 44): its
packages from its own folders (the root, ``src/``, what pyproject.toml names), its metadata from pyproject.toml,
never a classmate's package of the same name, never in place of the grader's own packages; and pytest never
takes the repository given to ``--impl`` for a test path (its conftest.py is the student's code)."""

from __future__ import annotations

import importlib
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

from transformer_spec.pytest_plugins import VALUE_OPTIONS, option_values
from transformer_spec.submission import repository

REPO = Path(__file__).resolve().parent.parent


def _package(root: Path, name: str, body: str, version: str | None = "1.2.3", where: str = "") -> Path:
    folder = root / where / name if where else root / name
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(body)
    if version is not None:
        (root / "pyproject.toml").write_text(f'[project]\nname = "{name.replace("_", "-")}"\nversion = "{version}"\n')
    return root


@pytest.fixture
def restore_imports():
    """Every test's repository forgotten afterwards: its finder, and the modules it imported."""
    path, meta, modules = list(sys.path), list(sys.meta_path), set(sys.modules)
    yield
    sys.path[:], sys.meta_path[:] = path, meta
    for name in set(sys.modules) - modules:
        del sys.modules[name]
    repository.deactivate()


def test_a_repository_reads_its_own_version_without_being_installed(tmp_path, restore_imports):
    """The handout's ``__init__.py``: ``importlib.metadata.version("cs336_basics")`` at import. Not installed, it
    raised PackageNotFoundError (half of a real class got 0); activated, it reads pyproject.toml's [project]."""
    root = _package(tmp_path / "r", "ts_handout_pkg",
                    'import importlib.metadata\n__version__ = importlib.metadata.version("ts_handout_pkg")\n')
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version("ts_handout_pkg")
    found = repository.activate(root)
    assert found.packages == {"ts_handout_pkg": root.resolve()} and found.version == "1.2.3"
    assert importlib.import_module("ts_handout_pkg").__version__ == "1.2.3"
    assert importlib.metadata.distribution("ts-handout-pkg").metadata["Name"] == "ts-handout-pkg"


def test_src_layouts_and_the_folders_pyproject_names_are_import_roots(tmp_path, restore_imports):
    root = _package(tmp_path / "r", "ts_src_pkg", "WHERE = 'src'\n", where="src")
    _package(root, "ts_lib_pkg", "WHERE = 'lib'\n", version=None, where="lib")
    (root / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "1"\n[tool.setuptools.packages.find]\n'
                                         'where = ["lib"]\n')
    repository.activate(root)
    assert importlib.import_module("ts_src_pkg").WHERE == "src"
    assert importlib.import_module("ts_lib_pkg").WHERE == "lib"


def test_a_classmates_package_of_the_same_name_is_never_seen(tmp_path, restore_imports):
    """Two repositories in one process (a test run, the kill matrix), both with ``cs336_basics``: the second
    gets its own, even after the first was imported, and lazily (an adapter importing inside a function)."""
    alice = _package(tmp_path / "alice", "ts_same_name", "WHO = 'alice'\n")
    bob = _package(tmp_path / "bob", "ts_same_name", "WHO = 'bob'\n")
    repository.activate(alice)
    assert importlib.import_module("ts_same_name").WHO == "alice"
    repository.activate(bob)
    assert importlib.import_module("ts_same_name").WHO == "bob"


def test_an_installed_package_of_the_same_name_is_not_the_repositorys(tmp_path, restore_imports):
    installed = _package(tmp_path / "site", "ts_installed_twin", "WHO = 'installed'\n", version=None)
    sys.path.insert(0, str(installed))  # as if a classmate's package, or the instructor's, were installed
    repository.activate(_package(tmp_path / "mine", "ts_installed_twin", "WHO = 'mine'\n"))
    assert importlib.import_module("ts_installed_twin").WHO == "mine"


def test_the_graders_own_packages_and_imported_modules_are_never_taken_over(tmp_path, restore_imports):
    root = tmp_path / "r"
    for name in ("reference", "transformer_spec", "torch", "tests"):
        _package(root, name, "HOSTILE = True\n", version=None)
    found = repository.activate(root)
    assert set(found.packages) == {"torch", "tests"}  # read, but the grader's names are never mapped
    import torch

    import reference

    assert not hasattr(reference, "HOSTILE") and not hasattr(torch, "HOSTILE")


def test_the_values_of_the_suites_options_are_not_test_paths():
    """``--impl path/to/repository`` read before the suite's options exist: pytest took the repository for a
    test path and ran its conftest.py (a CS336 one in Python 3.12 syntax stopped the run)."""
    args = ["spec_tests", "--impl", "repo", "--profile", "cs336", "--rubric=r.toml", "-q"]
    assert option_values(args) == ["repo", "cs336"]
    assert set(VALUE_OPTIONS) >= {"--impl", "--profile", "--rubric", "--grade-json"}


@pytest.mark.parametrize("form", [("--impl", "{repo}"), ("--impl={repo}",)])
def test_a_repositorys_conftest_never_runs(tmp_path, form):
    from tests.profiles.repositories import handout_repository

    repo = handout_repository(tmp_path / "repo")
    (repo / "conftest.py").write_text("raise SystemExit('the repository conftest ran')\n")
    impl = [part.format(repo=repo) for part in form]
    proc = subprocess.run([sys.executable, "-m", "pytest", "spec_tests/modern/test_golden.py", "-q", "-p",
                           "no:cacheprovider", "--profile", "cs336", *impl], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert "the repository conftest ran" not in proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stdout[-2000:]
