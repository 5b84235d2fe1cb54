"""Broken copies of the reference, made by small source patches.

A patch is ``(file, old, new)``: in ``reference/<file>``, the text ``old`` (which must occur
exactly once, so a patch that no longer applies is noticed) becomes ``new``. Tests use this to
show that the suite catches a mistake; the pitfall catalogue is a list of such patches.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterable
from pathlib import Path

from transformer_spec import layout
from transformer_spec.submission import loader

REFERENCE_DIR = layout.REFERENCE_DIR
# A second correct implementation, written from the contract alone in another style: every test
# must pass it and no diagnosis may name a mistake in it (tools.mutants, diagnose.accuracy).
INDEPENDENT_IMPL = layout.ROOT / "tests" / "independent" / "alt_submission.py"  # in a clone only
Patch = tuple[str, str, str]
_counter = itertools.count()


class PatchError(ValueError):
    """A patch whose ``old`` text does not occur exactly once in its file."""


def write_patched_reference(dest: Path, patches: Iterable[Patch], name: str = "broken") -> Path:
    """Copy ``reference/`` to ``dest/<name>`` with ``patches`` applied; returns the package folder."""
    pkg = Path(dest) / name
    shutil.copytree(REFERENCE_DIR, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for file, old, new in patches:
        path = pkg / file
        text = path.read_text()
        count = text.count(old)
        if count != 1:
            raise PatchError(f"patch for reference/{file}: expected the text once, found it {count} times: {old!r}")
        path.write_text(text.replace(old, new))
    return pkg


def load_patched_reference(dest: Path, patches: Iterable[Patch], name: str = "broken") -> loader.Submission:
    """:func:`write_patched_reference`, then load it through the loader under a unique name."""
    pkg = write_patched_reference(dest, patches, f"{name}_{next(_counter)}")
    return loader.load(str(pkg))


def load_patched_independent(dest: Path, patches: Iterable[Patch], name: str = "independent") -> loader.Submission:
    """The independent implementation (:data:`INDEPENDENT_IMPL`, one file) with ``patches`` applied
    (each patch's file is ``alt_submission.py``), as a package ``dest/<name>_<n>`` loaded through the
    loader: the same mistakes in code not derived from the reference."""
    pkg = Path(dest) / f"{name}_{next(_counter)}"
    pkg.mkdir(parents=True)
    text = INDEPENDENT_IMPL.read_text()
    for file, old, new in patches:
        count = text.count(old)
        if file != INDEPENDENT_IMPL.name or count != 1:
            raise PatchError(f"patch for {file}: expected the text once in {INDEPENDENT_IMPL.name}, found it "
                             f"{count if file == INDEPENDENT_IMPL.name else 0} times: {old!r}")
        text = text.replace(old, new)
    (pkg / "__init__.py").write_text(text)
    return loader.load(str(pkg))
