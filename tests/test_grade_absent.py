"""The proof that needs no re-check: passes claimed for a component whose names the submission's
files cannot define (``transformer_spec/grader/absent.py``).

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

from tools import mutants
from transformer_spec.catalogue.patching import REFERENCE_DIR
from transformer_spec.contract import registry
from transformer_spec.grader import absent
from transformer_spec.layout import ROOT

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


_LOADED_STUBS = """
import json, sys
from transformer_spec import files, profiles
from transformer_spec.contract import tracks
from transformer_spec.pytest_plugin import stubs
from transformer_spec.submission import loader
target, track, course = sys.argv[1:4]
profile = profiles.get(course) if course != "-" else None
tracks.use(profile.track if profile else track)
if profile:
    profiles.use(profile)
sub = loader.load(target, profile=profile)
assert sub.error is None, sub.error
print(json.dumps(sorted(stubs.loaded_stub_names(sub, [str(p) for p in files.submission_paths(target)], profile))))
"""


def _loaded_stubs(target: Path, track: str = "classic", course: str = "-") -> set[str]:
    """The names that are stubs as ``target`` is loaded (in a process of its own: a repository is loaded once)."""
    run = subprocess.run([sys.executable, "-c", _LOADED_STUBS, str(target), track, course], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return set(json.loads(run.stdout.strip().splitlines()[-1]))


def test_stubs_hidden_from_the_reading_are_found_in_the_code_as_loaded(tmp_path):
    """Issue 45: one ``vars()`` call made the reading give up, and the handout's stubs with a forged report kept
    93.47. The re-check child reads the functions the tests reach as the submission loads them (their own code
    objects, never what a ``__wrapped__`` points to): the stubs are found whatever the source says, a name bound to
    real code at load time is not, and correct code has none."""
    from tests.profiles.repositories import handout_repository
    from transformer_spec import profiles

    cs336 = profiles.get("cs336")
    every = {n for names in cs336.functions.values() for n in names}
    stubs = handout_repository(tmp_path / "stubs", stubs=True)
    adapters = stubs / "tests" / "adapters.py"
    text = adapters.read_text()
    adapters.write_text(text + "\nvars()\n")
    assert absent.stub_components(stubs, cs336) == set() and not absent.stubs_read_for_sure(stubs)
    assert _loaded_stubs(stubs, course="cs336") == every
    assert absent.components_of_stubs(every, cs336) == set(cs336.functions)
    # bound to real code at load time, through vars(): no longer a stub, its component no proof
    adapters.write_text(text + "\nvars()['run_softmax'] = lambda x, dim: x.softmax(dim)\n")
    found = _loaded_stubs(stubs, course="cs336")
    assert found == every - {"run_softmax"}
    assert "softmax" not in absent.components_of_stubs(found, cs336)
    # a wrapper whose __wrapped__ is a stub may call other code: not read as one
    adapters.write_text(text + "\nimport functools\n_stub = run_softmax\n"
                               "@functools.wraps(_stub)\ndef run_softmax(x, dim):\n    return x.softmax(dim)\n")
    assert "run_softmax" not in _loaded_stubs(stubs, course="cs336")
    real = handout_repository(tmp_path / "real")
    assert _loaded_stubs(real, course="cs336") == set()
    subprocess.run([sys.executable, "-m", "tools.release", "--out", str(tmp_path / "kit"), "--track", "modern"],
                   cwd=ROOT, check=True, capture_output=True)
    kit = tmp_path / "kit" / "my_transformer"
    (kit / "__init__.py").write_text((kit / "__init__.py").read_text() + "\nvars()\n")
    assert absent.components_of_stubs(_loaded_stubs(kit, "modern"), None) >= {"rmsnorm", "gqa", "minillama"}
    assert _loaded_stubs(ROOT / "tests" / "independent" / "alt_modern.py", "modern") == set()
    assert _loaded_stubs(REFERENCE_DIR) == set()


def test_a_forger_on_stubs_hidden_from_the_reading_gets_nothing(tmp_path):
    """Issue 45's attacks 1 and 2, through ``tools.grade single``: the handout's stub adapters (under ``--profile
    cs336``) and the modern starter kit (``--track modern``), each with the report forger of the attack corpus and
    one ``vars()`` call, claimed 93.47 and 92.95. The stubs as loaded prove the claims false: ``tampering``, 0."""
    from tests.adversarial import attacks
    from tests.profiles.repositories import handout_repository

    forger = handout_repository(tmp_path / "cs336" / "frank", stubs=True)
    adapters = forger / "tests" / "adapters.py"
    adapters.write_text(adapters.read_text() + "\nvars()\n" + attacks.FORGE_CHILD_REPORT_ANCHORS_FAIL)
    subprocess.run([sys.executable, "-m", "tools.release", "--out", str(tmp_path / "kit"), "--track", "modern"],
                   cwd=ROOT, check=True, capture_output=True)
    kit = tmp_path / "kit" / "my_transformer"
    (kit / "__init__.py").write_text((kit / "__init__.py").read_text() + "\nvars()\n"
                                     + attacks.FORGE_CHILD_REPORT_ANCHORS_FAIL)
    for target, options in ((forger, ["--profile", "cs336"]), (kit, ["--track", "modern"])):
        out = tmp_path / f"{target.name}.json"
        run = subprocess.run([sys.executable, "-m", "tools.grade", "single", str(target), "--results-json", str(out),
                              *options], cwd=ROOT, capture_output=True, text=True, timeout=900)
        results = json.loads(out.read_text())
        assert results["score"] == 0, (options, results["output"][:1500], run.stderr[-1500:])
        assert "tampering" in results["output"] and "as the submission loads it" in results["output"], \
            results["output"][:1500]


_SPY = '''
import functools as _ts_f, os as _ts_o
def _ts_spy(fn):
    @_ts_f.wraps(fn)
    def call(*args, **kwargs):
        with open({log!r}, "a") as f:
            f.write(_ts_o.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0] + "\\t" + fn.__name__ + "\\n")
        return fn(*args, **kwargs)
    return call
for _ts_n in [n for n in list(globals()) if (n.startswith("run_") or n == "get_adamw_cls")]:
    globals()[_ts_n] = _ts_spy(globals()[_ts_n])
'''


def test_under_the_profile_every_test_of_a_component_calls_its_functions(tmp_path):
    """What makes the stub proof a proof under a course profile: a test reaches a component's code only through
    its functions (CS336's adapters), so when every one of them is a stub, no test of the component can pass (the
    stub rule). Shown on a correct repository whose adapters log each call with the test that made it: every
    graded test calls one of its own component's functions."""
    from tests.profiles.repositories import handout_repository
    from transformer_spec import profiles
    from transformer_spec.results.results_file import nodeid_of

    cs336 = profiles.get("cs336")
    repo = handout_repository(tmp_path / "repo")
    log = tmp_path / "calls.tsv"
    adapters = repo / "tests" / "adapters.py"
    adapters.write_text(adapters.read_text() + _SPY.format(log=str(log)))
    out = tmp_path / "grade.json"
    subprocess.run([sys.executable, "-m", "pytest", "spec_tests", "properties", "-q", "-p", "no:cacheprovider",
                    "--profile", "cs336", "--impl", str(repo), "--grade-json", str(out)], cwd=ROOT,
                   capture_output=True, timeout=1200)
    called: dict[str, set[str]] = {}
    for line in log.read_text().splitlines():
        test, function = line.split("\t")
        called.setdefault(test, set()).add(function)
    tests = json.loads(out.read_text())["tests"]
    assert tests and all(t["status"] == "passed" for t in tests), "the correct repository must pass everything"
    silent = [f"{nodeid_of(t)} ({t['tags'][0]}: calls {sorted(called.get(nodeid_of(t), ()))})" for t in tests
              if not called.get(nodeid_of(t), set()) & set(cs336.functions.get(t["tags"][0], ()))]
    assert not silent, f"{len(silent)} test(s) pass without calling their component's functions: {silent[:5]}"


# Under --track modern ("contract") the same passed 6 of 7 runs on a loaded machine; the failing run's
# output was not kept, so the modern case stays out of CI until it is understood (issue 45's note).
@pytest.mark.parametrize("course", ["cs336"])
def test_a_placeholder_with_a_forged_report_keeps_no_more_than_its_code_earns(tmp_path, course):
    """The attack after issue 45's 1 and 2: code that runs, on the modern track and under ``--profile cs336``.
    MiniLlama returning zeros (the kill matrix's placeholder: its real code runs first) with the attack corpus's
    forger, which reports every test passed, graded through ``tools.grade single``: the model's formula tests
    have twins (under cs336 through the adapters, whose float32 one is the only model test the profile
    collects), whose public replay proves the claimed pass false (``tampering``), and the grade is at most what
    the same code without the forger gets (under cs336, before that twin, it kept every forged pass)."""
    from tests.adversarial import attacks
    from transformer_spec.catalogue import placeholders

    row = next(p for p in placeholders.rows(placeholders.components_of("modern", course)) if p.component == "minillama")
    mutants.write_row(row, tmp_path / "class", "modern", course)
    honest = tmp_path / "class" / row.name
    forger = tmp_path / "forger"
    shutil.copytree(honest, forger)
    infected = forger / "tests" / "adapters.py" if course == "cs336" else forger / f"mutant_{row.name}" / "__init__.py"
    infected.write_text(infected.read_text() + "\n" + attacks.FORGE_CHILD_REPORT)
    options = ["--profile", "cs336"] if course == "cs336" else ["--track", "modern"]
    results = {}
    for target in (honest, forger):
        out = tmp_path / f"{target.name}.json"
        run = subprocess.run([sys.executable, "-m", "tools.grade", "single", str(target), "--results-json", str(out),
                              *options], cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert out.exists(), run.stderr[-1500:]
        results[target.name] = json.loads(out.read_text())
    honest_score, forged = results[row.name]["score"], results["forger"]
    assert 0 < honest_score < 100, results[row.name]["output"][:1500]
    assert "tampering" in forged["output"], forged["output"][:1500]
    assert forged["score"] <= honest_score, (forged["score"], honest_score, forged["output"][:1500])
