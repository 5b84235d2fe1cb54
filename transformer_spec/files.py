"""Files: the one atomic writer every tool and plugin uses, which files are a submission's own, and
paths as a student reads them."""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path


def hash_file(h, path: str | os.PathLike, chunk: int = 1 << 20):
    """Feed the file at ``path`` to the hash object ``h`` a chunk at a time (a submission's file may
    be huge, or sparse: it is never read whole into memory); returns ``h``."""
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h


def atomic_write(path: str | os.PathLike, data: bytes | str) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder, then ``os.replace``.

    A crash or ``kill -9`` mid-write leaves the previous file (or none) and at most a hidden
    ``.<name>.*.tmp`` file, never half a file. The file gets the mode ``open()`` would give it
    (0666 less the umask), not ``mkstemp``'s private 0600. Returns ``path``.
    """
    path = Path(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def current_umask() -> int:
    """The process's umask, read from ``/proc/self/status`` (setting it to read it back, the only
    other way, would race with other threads creating files); 0o022 where that is unavailable."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def relative(path: str) -> str:
    """``path`` relative to the current folder when it is inside it, else as it is (messages)."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def submission_paths(target: str, origin: str | None = None) -> list[Path]:
    """The files and folders that hold the submission's own code, without importing it.

    A package (folder with ``__init__.py``, or a module name that resolves to one) is its whole
    folder; a single ``.py`` file is the file and the other ``.py`` files beside it (helpers it
    may import), except test files and ``conftest.py``.
    """
    path: Path | None = None
    if origin and os.path.exists(origin):
        path = Path(origin)
    elif target.endswith(".py") or os.sep in target or "/" in target or Path(target).exists():
        path = Path(target).expanduser()
    else:
        try:
            spec = importlib.util.find_spec(target)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin and os.path.exists(spec.origin):
            path = Path(spec.origin)
    if path is None or not path.exists():
        return []
    path = path.resolve()
    if path.is_dir():
        return [path]
    if path.name == "__init__.py":
        return [path.parent]
    paths = [path]
    for sibling in sorted(path.parent.glob("*.py")):
        if sibling != path and not sibling.name.startswith("test_") and sibling.name != "conftest.py":
            paths.append(sibling)
    return paths
