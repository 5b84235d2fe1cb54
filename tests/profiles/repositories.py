"""CS336-style repositories as students hand them in, for the tests of the cs336 profile."""

from __future__ import annotations

import shutil
from pathlib import Path

from transformer_spec.profiles.cs336_catalogue import ADAPTERS

PROFILES = Path(__file__).resolve().parent
REPO = PROFILES.parent.parent


def cs336_repository(dest: Path, mistake: tuple[str, str] | None = None) -> Path:
    """A self-contained CS336-style repository, as a student hands it in: its package
    (``cs336_basics/model.py``, the independent implementation) and its filled-in ``tests/adapters.py``
    (the shared adapter functions over that package; ``mistake``: one (old, new) edit of them)."""
    package = dest / "cs336_basics"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    shutil.copyfile(REPO / "tests" / "independent" / "alt_modern.py", package / "model.py")
    text = ADAPTERS.read_text()
    if mistake is not None:
        assert mistake[0] in text
        text = text.replace(*mistake)
    (dest / "tests").mkdir()
    (dest / "tests" / "adapters.py").write_text(
        text + "\n\nfrom cs336_basics import model as _model  # noqa: E402\n\nglobals().update(adapters_for(_model))\n")
    return dest
