"""A course's repository, made importable as the course's own tests import it: without pip, without
the network, and without a classmate's (or any installed) package of the same name.

A course's workflow installs the student's repository before its tests run (CS336's ``uv run``, or
``pip install -e .``): its packages import from the repository, and its package metadata exists.
The handout's own ``cs336_basics/__init__.py`` reads that metadata at import
(``importlib.metadata.version("cs336_basics")``), and raises ``PackageNotFoundError`` when the
repository was only copied. The grader installs nothing, so :func:`activate` gives the process what
the install would have given it:

* **its packages**: every folder with an ``__init__.py`` at an import root of the repository (the
  root itself, ``src/``, and the folders its ``pyproject.toml`` names for setuptools or hatch),
  ``tests`` among them (a CS336 student's package may import ``tests.common``, as its own pytest run
  from the repository's root allows). A finder at the front of ``sys.meta_path`` maps exactly those
  names onto the repository, so an installed package or another repository's package of the same
  name is never imported in its place; one of another repository already imported in this process
  is forgotten first. The grader's own packages (:data:`GRADER_PACKAGES`) and any name the process
  imported before the repository came (``torch``, ``pytest``) are never taken over.
* **its metadata**: the name and version of ``[project]`` in its ``pyproject.toml``, for
  ``importlib.metadata`` (``version``, ``metadata``, ``distribution``); a version the file leaves
  ``dynamic`` reads ``0``.

A later :func:`activate` in the same process (another repository) replaces both.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.metadata
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

from transformer_spec import layout

#: the grader's own top-level packages (a clone's; the wheel keeps them inside ``transformer_spec``): a
#: repository's package of one of these names is never mapped, so the suite, its oracles and the reference
#: stay the grader's own
GRADER_PACKAGES = frozenset({"transformer_spec", *layout.PARTS})


def normalize(name: str) -> str:
    """A distribution's name as ``importlib.metadata`` compares it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Repository:
    """What installing the repository at ``root`` would have made importable."""

    root: Path
    #: top-level package name -> the import root it lives in
    packages: dict[str, Path] = field(default_factory=dict)
    #: ``[project]`` name and version, or None (no pyproject.toml, or no static name)
    name: str | None = None
    version: str | None = None


def _pyproject(root: Path) -> dict:
    try:
        return tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def _table(data, *keys):
    """``data[k1][k2]...`` when every step is a table, else None (a pyproject.toml may hold anything)."""
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _import_roots(root: Path, pyproject: dict) -> list[Path]:
    """The folders whose packages the repository's install would make importable: the root, ``src/``,
    and what ``pyproject.toml`` names (setuptools' ``packages.find.where`` and ``package-dir``, hatch's
    wheel ``packages``), each only when it lies inside the repository."""
    named: list[str] = []
    where = _table(pyproject, "tool", "setuptools", "packages", "find", "where")
    named += [w for w in where if isinstance(w, str)] if isinstance(where, list) else []
    package_dir = _table(pyproject, "tool", "setuptools", "package-dir", "")
    named += [package_dir] if isinstance(package_dir, str) else []
    wheel = _table(pyproject, "tool", "hatch", "build", "targets", "wheel", "packages")
    named += [str(Path(p).parent) for p in wheel if isinstance(p, str)] if isinstance(wheel, list) else []
    roots: list[Path] = []
    resolved = root.resolve()
    for candidate in [root, root / "src", *(root / n for n in named)]:
        try:
            real = candidate.resolve()
        except (OSError, RuntimeError):
            continue
        if candidate.is_dir() and (real == resolved or resolved in real.parents) and real not in roots:
            roots.append(real)
    return roots


def read(root: str | Path) -> Repository:
    """The repository at ``root``, read from its files (nothing is imported)."""
    root = Path(root).resolve()
    pyproject = _pyproject(root)
    packages: dict[str, Path] = {}
    for where in _import_roots(root, pyproject):
        try:
            children = sorted(where.iterdir())
        except OSError:
            continue
        for child in children:
            if (child.name.isidentifier() and child.name not in GRADER_PACKAGES and child.name not in packages
                    and not child.is_symlink() and child.is_dir() and (child / "__init__.py").is_file()):
                packages[child.name] = where
    name, version = _table(pyproject, "project", "name"), _table(pyproject, "project", "version")
    name = name if isinstance(name, str) else None
    version = version if isinstance(version, str) else None
    if name is not None and version is None:
        version = "0"  # dynamic: what a build backend would compute is not known without running it
    return Repository(root, packages, name, version)


class _Metadata(importlib.metadata.Distribution):
    """The repository's package metadata, as its install would have written it (name and version)."""

    def __init__(self, repo: Repository):
        self._repo = repo
        self._text = f"Metadata-Version: 2.1\nName: {repo.name}\nVersion: {repo.version}\n"

    def read_text(self, filename):
        if filename in ("METADATA", "PKG-INFO"):
            return self._text
        if filename == "top_level.txt":
            return "".join(f"{n}\n" for n in self._repo.packages)
        return None

    def locate_file(self, path):
        return self._repo.root / path


class _Finder(importlib.abc.MetaPathFinder):
    """At the front of ``sys.meta_path``: the repository's top-level packages and its metadata."""

    def __init__(self, repo: Repository, packages: dict[str, Path]):
        self.repo = repo
        self.packages = packages

    def find_spec(self, fullname, path=None, target=None):
        where = self.packages.get(fullname) if path is None else None
        if where is None:
            return None
        return importlib.machinery.PathFinder.find_spec(fullname, [str(where)])

    def find_distributions(self, context=None):
        context = context if context is not None else importlib.metadata.DistributionFinder.Context()
        if self.repo.name is None:
            return iter(())
        if context.name is not None and normalize(context.name) != normalize(self.repo.name):
            return iter(())
        return iter((_Metadata(self.repo),))


_ACTIVE: list[_Finder] = []  # the finder of this process's repository (at most one)


def _forget(name: str) -> None:
    for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[module]


def activate(root: str | Path) -> Repository:
    """Make the repository at ``root`` importable as its install would (see the module docstring);
    returns what was read. Replaces the repository an earlier call activated in this process."""
    repo = read(root)
    previous = _ACTIVE.pop() if _ACTIVE else None
    if previous is not None:
        if previous in sys.meta_path:
            sys.meta_path.remove(previous)
        for name in previous.packages:  # another repository's modules are never this one's
            _forget(name)
    packages = {n: w for n, w in repo.packages.items() if n not in sys.modules}
    finder = _Finder(repo, packages)
    sys.meta_path.insert(0, finder)
    _ACTIVE.append(finder)
    importlib.invalidate_caches()
    return repo


def deactivate() -> None:
    """Forget the repository :func:`activate` made importable (its finder; its modules stay imported)."""
    while _ACTIVE:
        finder = _ACTIVE.pop()
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)


def active() -> Repository | None:
    """The repository :func:`activate` made importable in this process, or None."""
    return _ACTIVE[-1].repo if _ACTIVE else None
