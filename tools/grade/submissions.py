"""The class's submissions: one entry per student, its shard, its copy into a sandbox and its hash."""

from __future__ import annotations

import hashlib
import os
import shutil
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from transformer_spec.files import hash_file
from transformer_spec.loader import outside_symlinks

from .settings import MAX_SUBMISSION_BYTES, GradeError
from .text import file_name

#: a single-file submission: a module, or a Jupyter notebook (its code cells, transformer_spec.notebooks)
GRADED_SUFFIXES = (".py", ".ipynb")


@dataclass
class Entry:
    student: str  # the id: safe text (tools/grade/text.py), unique in the class
    target: Path | None  # the .py file or package folder to grade
    copy_root: Path | None  # what is copied into the sandbox (the student's folder, or the file)
    problem: str = ""
    note: str = ""  # said in the record's detail (an id made unique, links left out of the copy)
    #: a course's repository, graded through the profile's adapter file (``adapter``, relative to ``target``)
    adapter: str | None = None


#: what an operating system, an LMS export or a tool leaves in a folder: never a student's entry
NOT_ENTRIES = frozenset({"__MACOSX", "__pycache__", ".DS_Store", "Thumbs.db", "desktop.ini", ".git",
                         ".ipynb_checkpoints", ".gitignore", ".gitattributes"})


def _candidates(folder: Path) -> tuple[list[Path], list[Path]]:
    pkgs = sorted(p for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").is_file()
                  and not p.name.startswith((".", "__")))
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in GRADED_SUFFIXES
                   and p.name not in ("conftest.py", "setup.py") and not p.name.startswith(("test_", ".")))
    return pkgs, files


def _entry(p: Path, adapter: str | None = None) -> Entry:
    """The entry of one name of the class folder: graded, or a row that says why it cannot be.
    ``adapter``: the profile's adapter file (a course's repository is graded through it, so the
    folder that holds it is the submission)."""
    name = file_name(p.name)
    if p.name.startswith((".", "__")):
        return Entry(name, None, None, f"{name}: a hidden or special name (it starts with '.' or '__'); "
                                       "rename it to grade it")
    if p.is_symlink():
        return Entry(name, None, None, f"{name} is a symbolic link; submit the file or folder itself")
    if adapter is not None:
        if p.is_dir() and (p / adapter).is_file() and not (p / adapter).is_symlink():
            return Entry(name, p, p, adapter=adapter)
        return Entry(name, None, None, f"{name} holds no {adapter}: this profile grades a repository through that "
                                       "file (the course's adapter functions, filled in)")
    if p.is_file() and p.suffix in GRADED_SUFFIXES:
        return Entry(file_name(p.stem), p, p)
    if p.is_dir() and (p / "__init__.py").is_file():
        return Entry(name, p, p)
    if p.is_dir():
        pkgs, files = _candidates(p)
        if len(pkgs) == 1:
            return Entry(name, pkgs[0], p)
        if not pkgs and len(files) == 1:
            return Entry(name, files[0], p)
        what = f"{len(pkgs)} packages" if pkgs else f"{len(files)} .py or .ipynb files"
        return Entry(name, None, None,
                     f"the folder holds {what}; expected exactly one package folder, one .py file or one notebook")
    if p.is_file():
        return Entry(name, None, None, f"{name} is not a .py file, a notebook (.ipynb) or a folder; "
                                       "rename it (a Python file ends in .py)")
    return Entry(name, None, None, f"{name} is not a regular file or a folder")


def _key(student: str) -> str:
    """Ids that look the same (NFC and NFD, or case on a case-insensitive disk) share a key."""
    return unicodedata.normalize("NFKC", student).casefold()


def _unique(entries: list[Entry], paths: list[Path]) -> list[Entry]:
    """Every entry keeps its row: ids that collide (``alice.py`` beside ``alice/``, look-alikes)
    become the entries' whole names, then their ASCII escapes, then numbered; each says so."""
    groups: dict[str, list[int]] = {}
    for i, e in enumerate(entries):
        groups.setdefault(_key(e.student), []).append(i)
    for members in groups.values():
        if len(members) < 2:
            continue
        names = [file_name(paths[i].name) for i in members]
        if len({_key(n) for n in names}) < len(names):
            names = [ascii(paths[i].name)[1:-1] for i in members]
        if len({_key(n) for n in names}) < len(names):
            names = [f"{n}~{k + 1}" for k, n in enumerate(names)]
        shared = entries[members[0]].student
        for i, n in zip(members, names, strict=True):
            entries[i].student = n
            entries[i].note = (f"id {n!r}: {len(members)} entries of the class folder would share the id "
                               f"{shared!r}; each is graded under its own name")
    return entries


def ignored(p: Path) -> bool:
    """Not an entry: what the system leaves (:data:`NOT_ENTRIES`), or a hidden name (``.vscode``)
    that is not a ``.py`` file or a notebook (a hidden one of those looks handed in: it gets a row)."""
    return p.name in NOT_ENTRIES or p.name.startswith(".") and not (p.suffix in GRADED_SUFFIXES and p.is_file())


def hidden_names(submissions: Path) -> list[str]:
    """The hidden names :func:`discover` passes over (a warning names them), but the system's own."""
    return [file_name(p.name) for p in sorted(submissions.iterdir()) if ignored(p) and p.name not in NOT_ENTRIES]


def discover(submissions: Path, adapter: str | None = None) -> list[Entry]:
    """One entry per name of the class folder (but the :func:`ignored` ones), sorted by name; ids unique.
    ``adapter``: see :func:`_entry`."""
    if not submissions.is_dir():
        raise GradeError(f"{submissions} is not a folder of submissions")
    paths = [p for p in sorted(submissions.iterdir()) if not ignored(p)]
    return _unique([_entry(p, adapter) for p in paths], paths)


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
    left_out: set[Path] = set()
    if links and entry.adapter is not None:
        # A repository keeps links that git keeps (a dataset's folder, often dangling); the loader refuses
        # only those beside the adapter file, which its import could follow. The others are left out of
        # the copy: nothing outside the repository reaches the sandbox, and the grade is the one pytest
        # gives the repository (it never reads them).
        beside_adapter = {link for link, _ in outside_symlinks(src / entry.adapter)}
        refused = [(link, real) for link, real in links if link in beside_adapter]
        left_out = {link for link, _ in links} - {link for link, _ in refused}
        links = refused
        if left_out:
            shown = ", ".join(str(p.relative_to(src)) for p in sorted(left_out)[:3])
            more = f" and {len(left_out) - 3} more" if len(left_out) > 3 else ""
            said = f"links leaving the repository left out of the copy: {file_name(shown)}{more}"
            if said not in entry.note:  # graded twice after a crash: said once
                entry.note = "; ".join(filter(None, [entry.note, said]))
    if links:  # the loader refuses them too; a copy would carry them (or their target) into the sandbox
        raise GradeError(f"{links[0][0].name} is a symlink to {links[0][1]}, outside the submission's folder; "
                         f"submit the files themselves")
    # In the sandbox the entry's own name is safe text (a name that is not UTF-8 cannot be compiled
    # or imported, and would print raw escapes in the messages the student reads).
    root = dest / file_name(src.name)
    if src.is_file():
        count(src)
        shutil.copy2(src, root)
        return root
    for path in src.rglob("*"):
        count(path)

    def ignore(folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n == "__pycache__" or Path(folder, n) in left_out}

    shutil.copytree(src, root, symlinks=True, ignore=ignore)
    return root / entry.target.relative_to(src) if entry.target != src else root


def submission_hash(entry: Entry) -> str:
    h = hashlib.sha256()
    src = entry.copy_root
    if src is None:
        return "none"
    paths = [src] if src.is_file() else sorted(p for p in src.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    if sum(p.lstat().st_size for p in paths) > MAX_SUBMISSION_BYTES:  # refused when copied: names and sizes will do
        for p in paths:
            h.update(os.fsencode(p.relative_to(src.parent)) + b"\0" + str(p.lstat().st_size).encode() + b"\0")
        return "too-large-" + h.hexdigest()
    for p in paths:
        h.update(os.fsencode(p.relative_to(src.parent)) + b"\0")  # a name need not be UTF-8
        if p.is_symlink():
            h.update(os.fsencode(os.readlink(p)))
        else:
            hash_file(h, p)
        h.update(b"\0")
    return h.hexdigest()
