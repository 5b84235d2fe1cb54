"""Forbidden files: a forbidden module's files (``reference/``) may not be opened by path.

``import reference`` is refused by the import guard (:mod:`transformer_spec.guard.forbidden`); this
module closes the other doors to the same code: ``importlib.util.spec_from_file_location`` on
``reference/attention.py``, ``runpy.run_path``, ``exec(open(...).read())``, a ``sys.path`` entry
inside the folder, a symlink into it. All of them open a file whose real path is inside the
folder, and every open in every thread raises the ``open`` audit event (``sys.addaudithook``):
while a watcher is armed and the calling thread is outside :func:`forbidden_ops.oracle`, the
hook hands the path to the watcher, which records the use and raises.

An audit hook cannot be removed: :func:`watch` installs it on first use only (a graded run's
guard, when the submission is not itself the forbidden module), and it returns at once while
nobody watches. A child process (``subprocess``) reading the files is not seen; the class
grader's sandbox does not show ``reference/`` to the submission at all.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable

from transformer_spec.guard import forbidden_ops


class Watch:
    """Files under ``roots`` (real paths) are forbidden while ``armed()``; ``on_open(path)`` raises."""

    def __init__(self, roots: Iterable[str], on_open: Callable[[str], None], armed: Callable[[], bool]):
        self.roots = tuple(os.path.realpath(r) for r in roots)
        self.on_open = on_open
        self.armed = armed

    def covers(self, path: str) -> bool:
        return any(path == r or path.startswith(r + os.sep) for r in self.roots)


_WATCHES: list[Watch] = []
_INSTALLED: list[bool] = []
_BUSY = threading.local()


def watch(roots: Iterable[str], on_open: Callable[[str], None], armed: Callable[[], bool]) -> Watch | None:
    """Start watching ``roots`` (None if there are none); :func:`unwatch` ends it."""
    w = Watch(roots, on_open, armed)
    if not w.roots:
        return None
    if not _INSTALLED:
        sys.addaudithook(_audit)
        _INSTALLED.append(True)
    _WATCHES.append(w)
    return w


def watching(w: Watch | None) -> bool:
    """Whether ``w`` (from :func:`watch`) still watches (False: code in this process removed it)."""
    return w is None or w in _WATCHES


def unwatch(w: Watch | None) -> None:
    if w in _WATCHES:
        _WATCHES.remove(w)


def _audit(event: str, args: tuple) -> None:
    if event != "open" or not _WATCHES or forbidden_ops.allowed() or getattr(_BUSY, "on", False):
        return
    target = args[0] if args else None
    if not isinstance(target, (str, bytes, os.PathLike)):
        return  # a file descriptor
    _BUSY.on = True
    try:
        path = os.path.realpath(os.fsdecode(target))
        hits = [w for w in tuple(_WATCHES) if w.covers(path) and w.armed()]
    finally:
        _BUSY.on = False
    for w in hits:
        w.on_open(path)
