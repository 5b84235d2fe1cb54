"""The proof that needs no re-check: passes claimed for a component whose names the submission's
files cannot define (``tools/grade/absent.py``).

It is proof only if no test of such a component can pass: both halves are shown here, the reading
of the source (what binds a name, what makes the reading give up) and, on the suite itself, that
a submission without a component's names passes none of its tests."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tools.grade import absent
from transformer_spec import registry
from transformer_spec.layout import ROOT
from transformer_spec.patching import REFERENCE_DIR

#: the slow set (conftest.py: run with --slow): grades classes whose files lack names
pytestmark = pytest.mark.slow

NAMED = {c.name for c in registry.components() if any("." not in n.name for n in c.names)}


def _write(tmp_path: Path, source: str) -> Path:
    p = tmp_path / "sub.py"
    p.write_text(source)
    return p


def test_the_reading_holds_when_grading_threads_read_at_once(tmp_path):
    """The class grader reads each student's files in its grading threads. On CPython before 3.13 two
    ``ast.parse`` at once could fail with a spurious ``SystemError`` (gh-106905) when the garbage
    collector ran a finalizer mid-parse, and the student got a ``grader-error``: all 0 where pytest
    gave 96.92 (the cs336 class test in CI), or 28 (the sample class's ``system_exit``). Here two
    threads read while making such garbage; each reading must give the same names."""
    sub = _write(tmp_path, (REFERENCE_DIR / "seq2seq.py").read_text() * 3)
    expected = absent.bound_names(sub)
    assert expected and "Seq2SeqTransformer" in expected

    class Finalised:  # cyclic garbage whose finalizer lets another thread run mid-parse
        def __del__(self):
            time.sleep(0)

    got, errors = [], []

    def read():
        for _ in range(100):
            for _ in range(200):
                garbage = Finalised()
                garbage.cycle = garbage
            try:
                got.append(absent.bound_names(sub))
            except Exception as exc:  # noqa: BLE001 - what a grading thread would have raised
                errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=read) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(got) == 200 and all(g == expected for g in got), errors[:3]


def test_source_the_parser_cannot_take_makes_the_reading_give_up(tmp_path):
    """Nesting too deep for the parser is unknown, never a grader error (a hostile file's trick)."""
    assert absent.bound_names(_write(tmp_path, "causal_mask = " + "-" * 200_000 + "1\n")) is None
    assert absent.bound_names(_write(tmp_path, "causal_mask = 1\n")) == {"causal_mask"}


@pytest.mark.parametrize("source", [
    "def causal_mask(n): ...", "class FeedForward: ...", "causal_mask = None", "from x import causal_mask",
    "from x import y as causal_mask", "import causal_mask", "for causal_mask in []: pass",
    "def f():\n    global causal_mask\n    causal_mask = 1", "import m\nm.causal_mask = 1",
    "with open('x') as causal_mask: pass", "(causal_mask := 1)", "try: pass\nexcept E as causal_mask: pass",
    "match x:\n    case [*causal_mask]: pass", "match x:\n    case {**causal_mask}: pass", "def f(causal_mask): ...",
])
def test_any_binding_of_a_name_counts_as_defining_it(tmp_path, source):
    assert "causal_mask" in absent.bound_names(_write(tmp_path, source)) or \
        "FeedForward" in absent.bound_names(_write(tmp_path, source))


@pytest.mark.parametrize("source", [
    "exec('causal_mask = 1')", "globals()['causal_mask'] = 1", "import sys\nsys.modules[__name__].x = 1",
    "setattr(object, 'x', 1)", "from torch import *", "def __getattr__(name): ...", "import importlib",
    "vars()['x'] = 1", "__import__('os')", "x = (lambda: 0).__dict__", "def f(:", "getattr(__builtins__, 'exec')",
])
def test_the_reading_gives_up_where_a_name_could_be_bound_unseen(tmp_path, source):
    assert absent.bound_names(_write(tmp_path, source)) is None
    assert absent.absent_components(tmp_path / "sub.py") == set()


def test_compiled_code_or_a_symlink_makes_the_reading_give_up(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("x = 1\n")
    assert absent.absent_components(tmp_path / "pkg") == NAMED
    (tmp_path / "pkg" / "fast.so").write_bytes(b"\0")
    assert absent.absent_components(tmp_path / "pkg") == set()


def test_correct_submissions_and_notebooks_define_every_component(tmp_path):
    assert absent.absent_components(REFERENCE_DIR) == set()
    assert absent.absent_components(ROOT / "tests" / "independent" / "alt_submission.py") == set()
    nb = {"cells": [{"cell_type": "code", "id": "c1", "metadata": {}, "outputs": [], "execution_count": None,
                     "source": "def causal_mask(n):\n    pass\n"}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "sub.ipynb").write_text(json.dumps(nb))
    assert "masks" not in absent.absent_components(tmp_path / "sub.ipynb")
    assert "ffn" in absent.absent_components(tmp_path / "sub.ipynb")


def _passed(impl: str, tests: list[str], tmp_path: Path) -> dict[str, list[str]]:
    """component -> the tests ``pytest --grade-json`` reports passed for ``impl``."""
    out = tmp_path / f"{Path(impl).stem}.json"
    subprocess.run([sys.executable, "-m", "pytest", *tests, "-q", "-p", "no:cacheprovider", "--impl", impl,
                    "--grade-json", str(out), "--hypothesis-profile", "mutation"], cwd=ROOT, capture_output=True,
                   timeout=900)
    passed: dict[str, list[str]] = {}
    for t in json.loads(out.read_text())["tests"]:
        if t["status"] == "passed":
            passed.setdefault(t["tags"][0], []).append(t["name"])
    return passed


def test_no_test_of_a_component_passes_without_its_names(tmp_path):
    """The masks alone (every other named component absent), and the reference without the masks."""
    only_masks = tmp_path / "only_masks.py"
    parts = [(REFERENCE_DIR / f).read_text() for f in ("_validation.py", "masks.py")]  # one file, no import of the reference
    only_masks.write_text("\n".join(line for part in parts for line in part.splitlines()
                                    if not line.startswith(("from __future__", "from ._validation"))))
    assert absent.absent_components(only_masks) == NAMED - {"masks"}
    passed = _passed(str(only_masks), ["spec_tests", "properties"], tmp_path)
    assert passed.get("masks"), "the run graded nothing"
    assert not {c: t for c, t in passed.items() if c in NAMED - {"masks"}}, "passes without their component's names"
    no_masks = tmp_path / "no_masks"
    shutil.copytree(REFERENCE_DIR, no_masks, ignore=shutil.ignore_patterns("__pycache__"))
    init = no_masks / "__init__.py"
    init.write_text(init.read_text().replace("from .masks import causal_mask, padding_mask\n", ""))
    assert absent.absent_components(no_masks) == set()  # masks.py still defines them: the reading over-approximates
    files = sorted({str(p.relative_to(ROOT)) for p in [*ROOT.glob("spec_tests/test_*.py"), *ROOT.glob("properties/test_*.py")]
                    if 'component("masks")' in p.read_text()})
    passed = _passed(str(no_masks), files, tmp_path)
    assert passed.get("position"), "the run graded nothing"
    assert not passed.get("masks"), "masks tests pass without the masks"


def test_under_a_course_profile_the_courses_functions_are_read(tmp_path):
    """Issue 44: a CS336 repository written with the handout's names (``TransformerLM``,
    ``RotaryPositionalEmbedding``) defines none of the contract's; its adapter functions reach every component.
    Read with the contract's names it was called ``tampering``; read with the course's, nothing is absent, and a
    repository whose adapters lack ``run_rope`` is absent in ``rotary`` only."""
    from tests.profiles.repositories import handout_repository
    from transformer_spec import profiles

    cs336 = profiles.get("cs336")
    repo = handout_repository(tmp_path / "repo")
    (repo / "data").unlink()  # as in the sandbox's copy, which leaves out links that leave the repository
    (repo / "tests" / "conftest.py").unlink()  # Python 3.12 syntax: the reading gives up on what it cannot parse
    (repo / "cs336_basics" / "__init__.py").write_text("")  # importlib: the reading gives up too
    assert "rotary" in absent.absent_components(repo), "the contract's names: the handout writes none for rotary"
    assert absent.absent_components(repo, cs336) == set()
    adapters = repo / "tests" / "adapters.py"
    adapters.write_text(adapters.read_text().replace("def run_rope(", "def run_rope_unused("))
    assert absent.absent_components(repo, cs336) == {"rotary"}


def test_components_defined_only_as_stubs_are_read_from_the_source(tmp_path):
    """Issue 45: the handout's stub adapters (or an untouched starter kit) with a forged report claimed 93 points.
    No test of a component every name of which is a stub can be reported passed by an honest child (the stub rule),
    so a claimed pass there is proof. Read by the grading child's own rule (``NotImplementedError`` reached before
    any ``return``), a class being a stub when one of its methods is; nothing is claimed where a name is bound
    otherwise, or where the files could rebind it unseen (``vars()``, ``setattr``, ``exec``)."""
    import subprocess
    import sys

    from tests.profiles.repositories import handout_repository
    from transformer_spec import profiles

    cs336 = profiles.get("cs336")
    stubs = handout_repository(tmp_path / "stubs", stubs=True)
    (stubs / "data").unlink()
    every = {c for c in profiles.get("cs336").functions}
    assert absent.stub_components(stubs, cs336) == every
    real = handout_repository(tmp_path / "real")
    (real / "data").unlink()
    assert absent.stub_components(real, cs336) == set()
    adapters = stubs / "tests" / "adapters.py"
    text = adapters.read_text()
    adapters.write_text(text + "\n\nrun_rope = print\n")  # bound otherwise: rotary is no proof any more
    assert "rotary" not in absent.stub_components(stubs, cs336)
    adapters.write_text(text + "\nvars()\n")
    assert absent.stub_components(stubs, cs336) == set()
    for track in ("classic", "modern"):
        subprocess.run([sys.executable, "-m", "tools.release", "--out", str(tmp_path / track), "--track", track],
                       cwd=ROOT, check=True, capture_output=True)
        kit = tmp_path / track / "my_transformer"
        assert absent.stub_components(kit) >= {"attention", "masks"}, track
    assert absent.stub_components(REFERENCE_DIR) == set()
    assert absent.stub_components(ROOT / "tests" / "independent" / "alt_submission.py") == set()
    assert absent.stub_components(ROOT / "tests" / "independent" / "alt_modern.py") == set()
