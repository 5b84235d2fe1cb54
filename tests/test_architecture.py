"""The architecture's rules, checked on the source (``docs/architecture.md``).

* no module of ``transformer_spec/`` or ``tools/`` is over 400 lines;
* no module uses another module's private (underscore) name: neither ``from x import _y`` nor
  ``x._y`` on a project module it imported (tests included);
* one ``results.json`` writer (:mod:`transformer_spec.results_file`).
"""

from __future__ import annotations

import ast
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
    assert writers == ["transformer_spec/results_file.py"]
