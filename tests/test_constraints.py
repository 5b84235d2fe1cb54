"""The project is tested with pinned versions: ``constraints.txt`` pins every dependency.

A new machine installs through it (the README's install block, ``.ci/run``), so it gets the
versions CI saw; a dependency added to ``pyproject.toml`` without a pin would drift again.
"""

from __future__ import annotations

import os
import re
from importlib import metadata
from pathlib import Path

import pytest

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parent.parent
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins() -> dict[str, str]:
    """``constraints.txt`` as canonical name -> pinned version."""
    out = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"constraints.txt: {line!r} is not pinned with =="
            out[_canonical(name)] = version.strip()
    return out


def direct_dependencies() -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"]) + [r for extra in project["optional-dependencies"].values() for r in extra]
    names = []
    for req in reqs:
        if ";" in req and "python_version < '3.11'" in req:
            continue  # tomli: only below Python 3.11, where tomllib is missing
        names.append(_canonical(_NAME.match(req).group(1)))
    return names


def test_every_direct_dependency_is_pinned():
    missing = [n for n in direct_dependencies() if n not in pins()]
    assert not missing, f"constraints.txt pins no version of {missing}: add `NAME==VERSION` lines"


def test_the_readme_and_ci_install_through_the_constraints():
    ci = (REPO / ".ci" / "run").read_text()
    readme = (REPO / "README.md").read_text()
    for text, where in ((ci, ".ci/run"), (readme, "README.md")):
        assert 'pip install -c constraints.txt -e ".[dev]"' in text.replace("--quiet ", ""), where
        assert "-c constraints.txt torch==" in text, where


@pytest.mark.skipif(os.environ.get("CI") != "true", reason="CI installs exactly the pinned versions")
def test_ci_runs_with_the_pinned_versions():
    wrong = {}
    for name, version in pins().items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # pinned as a dependency of an extra this run did not install
        if installed.split("+")[0] != version.split("+")[0]:
            wrong[name] = (version, installed)
    assert not wrong, f"installed versions differ from constraints.txt (pinned, installed): {wrong}"
