"""The architecture's rules, checked on the source (``docs/architecture.md``).

* no module of ``transformer_spec/`` or ``tools/`` is over 400 lines;
* no module uses another module's private (underscore) name: neither ``from x import _y`` nor
  ``x._y`` on a project module it imported (tests included);
* one ``results.json`` writer (:mod:`transformer_spec.results.results_file`);
* the layers: import-linter's contracts (``[tool.importlinter]`` in pyproject.toml: the package's
  layers, no import circles, the package never imports ``tools``) hold, and fail on an upward import
  or a circle; at most 5 modules of ``transformer_spec/`` lie outside its subpackages, each subpackage
  says what it is for and what it may use, and ``tools/grade`` is a command line of at most 200 lines.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("transformer_spec", "tools")
PROJECT = ("transformer_spec", "tools", "reference", "tests", "spec_tests", "properties")
MAX_LINES = 400


def _modules(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (REPO / f).rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", _modules(*PACKAGES), ids=lambda p: str(p.relative_to(REPO)))
def test_no_module_is_over_400_lines(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(REPO)} has {lines} lines; split it along what it does"


def _private_uses(path: Path) -> list[str]:
    """``from m import _x`` and ``m._x`` where ``m`` is a project module imported by ``path``."""
    tree = ast.parse(path.read_text())
    modules: set[str] = set()  # local names bound to project modules
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = node.module or ""
            project = node.level > 0 or source.split(".")[0] in PROJECT
            for alias in node.names:
                if project and alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"line {node.lineno}: from {'.' * node.level}{source} import {alias.name}")
                if project:
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PROJECT:
                    modules.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name) and node.value.id in modules):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


@pytest.mark.parametrize("path", _modules(*PROJECT), ids=lambda p: str(p.relative_to(REPO)))
def test_no_module_uses_another_modules_private_names(path):
    if "adversarial" in path.parts:
        pytest.skip("the hostile submissions attack the harness's internals on purpose")
    assert _private_uses(path) == [], f"{path.relative_to(REPO)} reaches into private names"


def test_one_results_json_writer():
    writers = [str(p.relative_to(REPO)) for p in _modules(*PACKAGES)
               if '"test_output_format"' in p.read_text()]
    assert writers == ["transformer_spec/results/results_file.py"]


LINT = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` with the project's contracts, on the packages under ``root``."""
    return subprocess.run([sys.executable, "-c", LINT], cwd=root, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)}, timeout=120)


def test_the_layers_hold():
    run = _lint_imports(REPO)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "0 broken" in run.stdout


@pytest.mark.parametrize("module, line, broken", [
    ("transformer_spec/contract/names.py", "from transformer_spec.pytest_plugin import grading", "the package's layers"),
    ("transformer_spec/grader/sandbox.py", "from transformer_spec.grader import children", "no import circles"),
    ("transformer_spec/scoring/rubric.py", "import tools.grade", "never imports a command line"),
])
def test_an_upward_import_or_a_circle_breaks_a_contract(tmp_path, module, line, broken):
    for part in ("transformer_spec", "tools"):
        shutil.copytree(REPO / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    with open(tmp_path / module, "a") as f:
        f.write(f"\n{line}\n")
    run = _lint_imports(tmp_path)
    assert run.returncode == 1 and "Broken contracts" in run.stdout, run.stdout[-3000:]
    assert broken in run.stdout.split("Broken contracts")[1], run.stdout[-3000:]


def test_the_package_is_its_subpackages():
    loose = sorted(p.name for p in (REPO / "transformer_spec").glob("*.py"))
    assert len(loose) <= 5, loose
    for init in sorted((REPO / "transformer_spec").glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "May use" in doc, f"{init.relative_to(REPO)}: say what the subpackage is for and what it may use"
    lines = sum(len(p.read_text().splitlines()) for p in (REPO / "tools" / "grade").glob("*.py"))
    assert lines <= 200, f"tools/grade is the command line: {lines} lines; the engine is transformer_spec/grader"
