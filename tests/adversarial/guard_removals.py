"""Ways code inside the grading process removes the forbidden-API guard (issue 26), each a
``remove(guard)``: what a submission that found the guard with ``gc`` would do. They reach into the
guard's private state on purpose, as hostile code does; ``tests/test_forbidden.py`` checks that
each one is seen, charged as a forbidden use and undone.
"""

from __future__ import annotations

import sys

from transformer_spec.guard import forbidden_files, forbidden_ops


def _reinstall(guard) -> None:
    guard.uninstall()
    guard.install()


REMOVALS = {
    "uninstall": lambda g: g.uninstall(),
    "uninstall_and_install": _reinstall,
    "library_destroyed": lambda g: forbidden_ops._LIBRARY[0]._destroy(),
    # only this guard's (this run's own guard watches too, and would charge this test)
    "operator_watch_dropped": lambda g: forbidden_ops._WATCHES.remove(g.seal.ops),
    "file_watch_dropped": lambda g: forbidden_files._WATCHES.remove(g.seal.files),
    "finder_dropped": lambda g: sys.meta_path.remove(g.seal.finder),
}
