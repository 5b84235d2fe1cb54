"""The class's submissions: one entry per student, its shard, its copy into a sandbox and its hash."""

from __future__ import annotations

import hashlib
import os
import shutil
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from transformer_spec.grader import tree
from transformer_spec.grader.settings import MAX_SUBMISSION_BYTES, GradeError
from transformer_spec.grader.text import file_name
from transformer_spec.submission.loader import outside_symlinks

#: a single-file submission: a module, or a Jupyter notebook (its code cells, transformer_spec.submission.notebooks)
GRADED_SUFFIXES = (".py", ".ipynb")


@dataclass
class Entry:
    student: str  # the id: safe text (transformer_spec/grader/text.py), unique in the class
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


def _key(student: str, casefold: bool = False) -> str:
    """Ids that look the same (NFC and NFD; case too where the output disk ignores it) share a key."""
    key = unicodedata.normalize("NFKC", student)
    return key.casefold() if casefold else key


def _own(entry: Entry, path: Path) -> bool:
    """The entry's id is its own name as it is: a folder's or a file's full name, canonical (NFC) text."""
    return entry.student in (path.name, path.stem) and unicodedata.normalize("NFC", entry.student) == entry.student \
        and entry.student == entry.student.lower()


def _unique(entries: list[Entry], paths: list[Path], casefold: bool = False) -> list[Entry]:
    """Every entry keeps its row, and an id that is the entry's own name keeps it (issue 45: a folder
    ``Honest_OK`` made its classmate ``honest_ok`` into ``honest_ok~2``). Among ids that collide (``alice.py``
    beside ``alice/``, look-alikes; names differing in case only where the output disk ignores case,
    ``casefold``), the one entry whose id is its own canonical name keeps it; the others become their whole
    names, then their ASCII escapes, then numbered; each says so."""
    groups: dict[str, list[int]] = {}
    for i, e in enumerate(entries):
        groups.setdefault(_key(e.student, casefold), []).append(i)
    for members in groups.values():
        if len(members) < 2:
            continue
        owners = [i for i in members if _own(entries[i], paths[i])]
        if len(owners) == 1:
            members = [i for i in members if i != owners[0]]
            taken = _key(entries[owners[0]].student, casefold)
            for i in members:  # the whole name; a look-alike (not canonical text) or a collision: its escape
                name = file_name(paths[i].name)
                clash = lambda n, i=i: _key(n, casefold) == taken or any(  # noqa: E731
                    _key(n, casefold) == _key(entries[j].student, casefold) for j in members if j != i)
                if unicodedata.normalize("NFC", name) != name or clash(name):
                    name = ascii(paths[i].name)[1:-1]
                if clash(name):
                    name += f"~{members.index(i) + 2}"
                entries[i].student = name
                entries[i].note = (f"id {name!r}: its name collides with the id {entries[owners[0]].student!r} of "
                                   "another entry, which keeps it")
            continue
        names = [file_name(paths[i].name) for i in members]
        if len({_key(n, casefold) for n in names}) < len(names):
            names = [ascii(paths[i].name)[1:-1] for i in members]
        if len({_key(n, casefold) for n in names}) < len(names):
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


def discover(submissions: Path, adapter: str | None = None, casefold: bool = False,
             only: Path | None = None) -> list[Entry]:
    """One entry per name of the class folder (but the :func:`ignored` ones), sorted by name; ids unique
    (``casefold``: also when they differ in case only, for an output disk that ignores case).
    ``adapter``: see :func:`_entry`; ``only``: that one entry of the folder (``tools.grade single``)."""
    if not submissions.is_dir():
        what = "is a file" if submissions.exists() else "does not exist"
        raise GradeError(f"{submissions} {what}: give the class folder, one .py file, notebook or folder per student "
                         "(one submission: python -m tools.grade single SUBMISSION --results-json FILE)")
    paths = [only] if only is not None else [p for p in sorted(submissions.iterdir()) if not ignored(p)]
    return _unique([_entry(p, adapter) for p in paths], paths, casefold)


def ignores_case(folder: Path) -> bool:
    """Whether the disk of ``folder`` takes names that differ in case for one name (probed inside it: the
    folders made for the probe are removed again, so a grading that stops early leaves nothing behind)."""
    made = [p for p in (folder, *folder.parents) if not p.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    probe = folder / ".case-probe-a"
    try:
        probe.write_text("")
        return (folder / ".case-probe-A").exists()
    finally:
        probe.unlink(missing_ok=True)
        for p in made:  # innermost first
            p.rmdir()


def shard_of(student: str, n: int) -> int:
    """The 1-based shard a student belongs to among ``n`` (a hash of the id: stable as the class grows)."""
    return int(hashlib.sha256(student.encode()).hexdigest(), 16) % n + 1


def _outside(src: Path, rel: str) -> Path | None:
    """The real target of the link ``rel`` of ``src`` when it leaves ``src`` (a loop of links leaves it too)."""
    try:
        real = (src / rel).resolve()
    except (RuntimeError, OSError):
        return Path(f"{os.readlink(src / rel)} (a loop of links)")
    root = src.resolve()
    return None if real == root or root in real.parents else real


def _said(entry: Entry, text: str) -> None:
    if text not in entry.note:  # graded twice after a crash: said once
        entry.note = "; ".join(filter(None, [entry.note, text]))


def _shown(paths: list[str]) -> str:
    more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
    return file_name(", ".join(sorted(paths)[:3])) + more


def copy_submission(entry: Entry, dest: Path) -> Path:
    """Copy the submission into ``dest``; returns the path of the copied target. Walked and copied without
    recursion and within limits (:mod:`transformer_spec.grader.tree`): a shape the grader refuses is a :class:`GradeError`
    saying why in the student's words, never a traceback or the grader's own paths."""
    src = entry.copy_root
    assert src is not None and entry.target is not None
    if src.is_symlink() and src.resolve().parent != src.parent.resolve():
        raise GradeError(f"{file_name(src.name)} is a symlink to a file outside the submission's folder; "
                         "submit the files themselves")
    found = tree.scan(src, MAX_SUBMISSION_BYTES)
    if found.problem:
        raise GradeError(found.problem)
    links = [(rel, real) for rel, _ in found.links if (real := _outside(src, rel)) is not None] if src.is_dir() else []
    left_out: set[str] = set()
    if links and entry.adapter is not None:
        # A repository keeps links that git keeps (a dataset's folder, often dangling); the loader refuses
        # only those beside the adapter file, which its import could follow. The others are left out of
        # the copy: nothing outside the repository reaches the sandbox, and the grade is the one pytest
        # gives the repository (it never reads them).
        beside_adapter = {str(link.relative_to(src)) for link, _ in outside_symlinks(src / entry.adapter)}
        left_out = {rel for rel, _ in links if rel not in beside_adapter}
        links = [(rel, real) for rel, real in links if rel in beside_adapter]
        if left_out:
            _said(entry, f"links leaving the repository left out of the copy: {_shown(list(left_out))}")
    if links:  # the loader refuses them too; a copy would carry them (or their target) into the sandbox
        raise GradeError(f"{file_name(Path(links[0][0]).name)} is a symlink to {file_name(str(links[0][1]))}, "
                         f"outside the submission's folder; submit the files themselves")
    if found.special:
        _said(entry, f"special files (FIFOs, sockets, devices) left out of the copy: {_shown(found.special)}")
    # In the sandbox the entry's own name is safe text (a name that is not UTF-8 cannot be compiled
    # or imported, and would print raw escapes in the messages the student reads).
    root = dest / file_name(src.name)
    if src.is_file():
        shutil.copy2(src, root)
        return root
    tree.copy_tree(found, root, frozenset(left_out) | frozenset(found.special))
    return root / entry.target.relative_to(src) if entry.target != src else root


def submission_hash(entry: Entry) -> str:
    """The submission's SHA-256 (names, link targets and contents; names and sizes for one over the size limit,
    never read), the record's and ``--resume``'s way to know it again."""
    src = entry.copy_root
    if src is None:
        return "none"
    found = tree.scan(src, MAX_SUBMISSION_BYTES)
    return tree.digest(found, MAX_SUBMISSION_BYTES)
