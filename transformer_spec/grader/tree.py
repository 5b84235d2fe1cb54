"""A submission's files, walked without recursion and within limits: what the grader copies and hashes.

A class folder is the students' to shape (issue 45): a folder nested 1,200 levels deep stopped the whole
batch with a ``RecursionError`` (``rglob`` and ``copytree`` recurse), a 10 GiB sparse file was read whole to
hash it (twice), 200,000 empty files doubled the batch's time and memory, and a FIFO made ``copytree`` fail
with a raw ``shutil.Error`` naming the grader's temp folders. :func:`scan` walks with an explicit stack,
reads only what :func:`os.lstat` says, and stops at the first limit it meets (:class:`Scan.problem`, a
reason in the student's words); :func:`copy_tree` copies what a scan found; :func:`digest` hashes it, reading
file contents only when the whole tree is within the size limit.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from transformer_spec.files import hash_file

#: deeper than this, a submission's folders are no code a course hands in
MAX_DEPTH = 64
#: more entries than this, the walk stops (a reason says so)
MAX_ENTRIES = 250_000


@dataclass
class Scan:
    """What lies under a submission's root (paths relative to it, in walk order, folders before what they hold)."""

    root: Path
    folders: list[str] = field(default_factory=list)
    files: list[tuple[str, int]] = field(default_factory=list)  # (path, size in bytes, as lstat says)
    links: list[tuple[str, str]] = field(default_factory=list)  # (path, its target text)
    special: list[str] = field(default_factory=list)  # FIFOs, sockets, devices: never copied
    size: int = 0
    problem: str = ""  # why the walk stopped (a limit), in a student's words; "" when it did not

    @property
    def entries(self) -> int:
        return len(self.folders) + len(self.files) + len(self.links) + len(self.special)


def scan(root: Path, max_bytes: int | None = None, skip: frozenset[str] = frozenset({"__pycache__"})) -> Scan:
    """Walk ``root`` (a folder; a file is its own one-entry scan) without following links, stopping at the first
    limit: :data:`MAX_DEPTH`, :data:`MAX_ENTRIES`, ``max_bytes`` (the files' apparent sizes: a sparse file counts
    as what it claims, and is never read)."""
    root = Path(root)
    out = Scan(root)
    if not root.is_dir() or root.is_symlink():
        st = root.lstat()
        out.files.append((root.name, st.st_size))
        out.size = st.st_size
        if max_bytes is not None and out.size > max_bytes:
            out.problem = f"it is larger than {max_bytes // 2**20} MB"
        return out
    stack: list[tuple[str, int]] = [("", 0)]
    while stack and not out.problem:
        rel, depth = stack.pop()
        try:
            with os.scandir(root / rel if rel else root) as it:
                found = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            out.problem = f"a folder of it cannot be read ({exc.strerror or type(exc).__name__})"
            break
        below = []
        for e in found:
            path = f"{rel}/{e.name}" if rel else e.name
            if out.entries >= MAX_ENTRIES:
                out.problem = f"it holds more than {MAX_ENTRIES} files and folders"
                break
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                out.special.append(path)
                continue
            if stat.S_ISLNK(st.st_mode):
                out.links.append((path, os.readlink(e.path)))
            elif stat.S_ISDIR(st.st_mode):
                if e.name in skip:
                    continue
                if depth + 1 > MAX_DEPTH:
                    out.problem = f"its folders are nested deeper than {MAX_DEPTH} levels"
                    break
                out.folders.append(path)
                below.append((path, depth + 1))
            elif stat.S_ISREG(st.st_mode):
                out.files.append((path, st.st_size))
                out.size += st.st_size
                if max_bytes is not None and out.size > max_bytes:
                    out.problem = f"it is larger than {max_bytes // 2**20} MB"
                    break
            else:
                out.special.append(path)
        stack.extend(reversed(below))
    return out


def copy_tree(found: Scan, dest: Path, leave_out: frozenset[str] = frozenset()) -> None:
    """Copy what ``found`` holds into ``dest`` (a new folder): folders, regular files (with their modes and
    times) and links as links, but the paths in ``leave_out`` and anything special (a FIFO is never opened)."""
    dest.mkdir(parents=True)
    for rel in found.folders:
        if not any(rel == o or rel.startswith(o + "/") for o in leave_out):
            (dest / rel).mkdir()
    for rel, _ in found.files:
        if not any(rel == o or rel.startswith(o + "/") for o in leave_out):
            shutil.copy2(found.root / rel, dest / rel, follow_symlinks=False)
    for rel, target in found.links:
        if not any(rel == o or rel.startswith(o + "/") for o in leave_out):
            os.symlink(target, dest / rel)


def digest(found: Scan, max_bytes: int) -> str:
    """A SHA-256 of the tree: names, link targets and contents; names and sizes only when the files are over
    ``max_bytes`` together (such a submission is refused anyway, and is never read)."""
    h = hashlib.sha256()
    whole = found.size <= max_bytes and not found.problem
    for rel, size in found.files:
        h.update(os.fsencode(rel) + b"\0")
        if whole:
            hash_file(h, found.root / rel if found.root.is_dir() else found.root)
        else:
            h.update(str(size).encode())
        h.update(b"\0")
    for rel, target in found.links:
        h.update(os.fsencode(rel) + b"\0link\0" + os.fsencode(target) + b"\0")
    return ("" if whole else "unread-") + h.hexdigest()


def fingerprint(found: Scan) -> str:
    """A cheap fingerprint of the tree (names, sizes, modification times, link targets; no content read): what
    shows that a class folder changed while it was graded."""
    h = hashlib.sha256(found.problem.encode())
    for rel, size in found.files:
        try:
            mtime = (found.root / rel).lstat().st_mtime_ns if found.root.is_dir() else found.root.lstat().st_mtime_ns
        except OSError:
            mtime = -1
        h.update(f"{rel}\0{size}\0{mtime}\0".encode(errors="surrogateescape"))
    for rel, target in found.links:
        h.update(f"{rel}\0link\0{target}\0".encode(errors="surrogateescape"))
    return h.hexdigest()
