"""The class's submissions: one entry per student, its shard, its copy into a sandbox and its hash."""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from transformer_spec.loader import outside_symlinks

from .settings import MAX_SUBMISSION_BYTES, GradeError


#: a single-file submission: a module, or a Jupyter notebook (its code cells, transformer_spec.notebooks)
GRADED_SUFFIXES = (".py", ".ipynb")


@dataclass
class Entry:
    student: str
    target: Path | None  # the .py file or package folder to grade
    copy_root: Path | None  # what is copied into the sandbox (the student's folder, or the file)
    problem: str = ""


def _candidates(folder: Path) -> tuple[list[Path], list[Path]]:
    pkgs = sorted(p for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").is_file()
                  and not p.name.startswith((".", "__")))
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in GRADED_SUFFIXES
                   and p.name not in ("conftest.py", "setup.py") and not p.name.startswith(("test_", ".")))
    return pkgs, files


def discover(submissions: Path) -> list[Entry]:
    """One entry per student, sorted by id."""
    if not submissions.is_dir():
        raise GradeError(f"{submissions} is not a folder of submissions")
    entries = []
    for p in sorted(submissions.iterdir()):
        if p.name.startswith((".", "__")):
            continue
        if p.is_file() and p.suffix in GRADED_SUFFIXES:
            entries.append(Entry(p.stem, p, p))
        elif p.is_dir() and (p / "__init__.py").is_file():
            entries.append(Entry(p.name, p, p))
        elif p.is_dir():
            pkgs, files = _candidates(p)
            if len(pkgs) == 1:
                entries.append(Entry(p.name, pkgs[0], p))
            elif not pkgs and len(files) == 1:
                entries.append(Entry(p.name, files[0], p))
            else:
                what = (f"{len(pkgs)} packages" if pkgs else f"{len(files)} .py or .ipynb files")
                entries.append(Entry(p.name, None, None,
                                     f"the folder holds {what}; expected exactly one package folder, one .py file or one notebook"))
    return entries


def shard_of(student: str, n: int) -> int:
    """The 1-based shard a student belongs to among ``n`` (a hash of the id: stable as the class grows)."""
    return int(hashlib.sha256(student.encode()).hexdigest(), 16) % n + 1


def copy_submission(entry: Entry, dest: Path) -> Path:
    """Copy the submission into ``dest``; returns the path of the copied target."""
    src = entry.copy_root
    assert src is not None and entry.target is not None
    total = 0

    def count(path: Path) -> None:
        nonlocal total
        total += path.stat().st_size if path.is_file() and not path.is_symlink() else 0
        if total > MAX_SUBMISSION_BYTES:
            raise GradeError(f"the submission is larger than {MAX_SUBMISSION_BYTES // 2**20} MB")

    links = outside_symlinks(src) if src.is_dir() else \
        [(src, src.resolve())] if src.is_symlink() and src.resolve().parent != src.parent.resolve() else []
    if links:  # the loader refuses them too; a copy would carry them (or their target) into the sandbox
        raise GradeError(f"{links[0][0].name} is a symlink to {links[0][1]}, outside the submission's folder; "
                         f"submit the files themselves")
    if src.is_file():
        count(src)
        shutil.copy2(src, dest / src.name)
        return dest / src.name
    for path in src.rglob("*"):
        count(path)
    root = dest / src.name
    shutil.copytree(src, root, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    return root / entry.target.relative_to(src) if entry.target != src else root


def submission_hash(entry: Entry) -> str:
    h = hashlib.sha256()
    src = entry.copy_root
    if src is None:
        return "none"
    paths = [src] if src.is_file() else sorted(p for p in src.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for p in paths:
        h.update(str(p.relative_to(src.parent)).encode() + b"\0")
        h.update(p.read_bytes() if not p.is_symlink() else os.readlink(p).encode())
        h.update(b"\0")
    return h.hexdigest()
