"""CS336-style repositories as students hand them in, for the tests of the cs336 profile."""

from __future__ import annotations

import shutil
from pathlib import Path

from transformer_spec.catalogue.cs336 import ADAPTERS

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


HANDOUT = PROFILES / "handout"

#: the handout's tests/conftest.py begins with Python 3.12 syntax; the grader must never load a repository's conftest
CONFTEST_312 = "import numpy as np\n\n\ndef _canonicalize_array[A: (np.ndarray,)](arr: A) -> np.ndarray:\n    return arr\n"


def stub_adapters(text: str) -> str:
    """The handout's adapters untouched: every function's body is ``raise NotImplementedError``."""
    import ast

    tree = ast.parse(text)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            node.body = [ast.Raise(exc=ast.Name("NotImplementedError", ast.Load()), cause=None)]
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def handout_repository(dest: Path, mistake: tuple[str, str] | None = None, *, metadata: bool = True,
                       stubs: bool = False) -> Path:
    """A repository laid out exactly as the CS336 handout lays it out, filled in by a student: ``pyproject.toml``
    naming the package (``metadata``: with its [project] name and version), ``cs336_basics/__init__.py`` reading
    its own installed version, the handout's class names in ``cs336_basics/model.py`` (``mistake``: one (old, new)
    edit of it), ``tests/adapters.py`` importing inside its functions (``stubs``: the handout's untouched, every
    function raising NotImplementedError), the handout's ``tests/conftest.py`` in Python 3.12 syntax, and a
    dataset link that git keeps and that dangles anywhere but on the course's machines."""
    package = dest / "cs336_basics"
    package.mkdir(parents=True)
    project = '[project]\nname = "cs336_basics"\nversion = "1.0.6"\nrequires-python = ">=3.11"\n\n' if metadata else ""
    (dest / "pyproject.toml").write_text(project + '[tool.pytest.ini_options]\naddopts = "-s"\n')
    (package / "__init__.py").write_text('import importlib.metadata\n\n__version__ = importlib.metadata.version('
                                         '"cs336_basics")\n')
    model = (HANDOUT / "model.py").read_text()
    if mistake is not None:
        assert model.count(mistake[0]) == 1, mistake
        model = model.replace(*mistake)
    (package / "model.py").write_text(model)
    (dest / "tests").mkdir()
    (dest / "tests" / "__init__.py").write_text("")
    adapters = (HANDOUT / "adapters.py").read_text()
    (dest / "tests" / "adapters.py").write_text(stub_adapters(adapters) if stubs else adapters)
    (dest / "tests" / "conftest.py").write_text(CONFTEST_312)
    (dest / "data").symlink_to("/data/cs336/TinyStories")
    return dest
