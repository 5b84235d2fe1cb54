"""Course profiles (``transformer_spec/profiles``): the laws, written once for the contract, grade a
course's own API. The reference behind a CS336-style ``tests/adapters.py`` scores 100 on what the cs336
profile can express; a common CS336 mistake through the same adapter loses its component's points; what
the profile cannot express is left out and said once; bad choices get one-line errors."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.adversarial import attacks
from tests.profiles.repositories import cs336_repository, handout_repository
from transformer_spec import profiles
from transformer_spec.scoring import rubric

REPO = Path(__file__).resolve().parent.parent
PROFILES = REPO / "tests" / "profiles"
ADAPTED_REFERENCE = PROFILES / "cs336_reference"  # the reference behind CS336-style adapters
ADAPTED_INDEPENDENT = PROFILES / "cs336_independent"  # tests/independent/alt_modern.py behind the same


def _rubric_allowing_reference(tmp_path: Path) -> Path:
    """The cs336 rubric without ``reference`` among the forbidden imports: the adapter here is the
    reference itself (a student's adapter imports their own package)."""
    text = profiles.get("cs336").rubric.read_text()
    assert '    "reference",\n' in text
    path = tmp_path / "rubric.toml"
    path.write_text(text.replace('    "reference",\n', ""))
    return path


def _grade(tmp_path: Path, repo: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "spec_tests", "properties", "-q", "-p", "no:cacheprovider",
         "--profile", "cs336", "--impl", str(repo), "--rubric", str(_rubric_allowing_reference(tmp_path)),
         "--grade-json", str(out), *args],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    return proc, (json.loads(out.read_text()) if out.exists() else None)


def _by_component(results: dict) -> dict[str, float]:
    earned: dict[str, float] = {}
    for t in results["tests"]:
        earned[t["tags"][0]] = earned.get(t["tags"][0], 0.0) + t["score"]
    return earned


@pytest.mark.parametrize("repo", [ADAPTED_REFERENCE, ADAPTED_INDEPENDENT], ids=["reference", "independent"])
def test_correct_code_behind_a_cs336_adapter_scores_100_and_the_rest_is_said_not_applicable(tmp_path, repo):
    proc, results = _grade(tmp_path, repo)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert results["score"] == pytest.approx(100.0), proc.stdout[-3000:]
    assert "NotExpressible" not in proc.stdout, "a test reached what the profile cannot express: it lacks a needs marker"
    line = next(l for l in proc.stdout.splitlines() if "not applicable under profile cs336" in l)
    for capability in ("weights", "scale", "generate", "gqa"):
        assert f"need {capability}" in line, line


def test_a_mask_read_as_blocked_instead_of_keep_loses_attention_through_the_adapter(tmp_path):
    # CS336's masks mean "keep"; passing the handout's mask on as a "blocked" mask is the mistake.
    broken = cs336_repository(tmp_path / "student", ("blocked = None if mask is None else ~mask", "blocked = mask"))
    proc, results = _grade(tmp_path, broken)
    earned = _by_component(results)
    points = rubric.load_rubric(profiles.get("cs336").rubric, track="modern").components
    assert earned["attention"] < points["attention"] and results["score"] < 100, proc.stdout[-3000:]
    untouched = ("rmsnorm", "rotary", "swiglu", "softmax", "adamw", "get_batch")
    assert all(earned[c] == pytest.approx(points[c]) for c in untouched), earned


def test_a_profile_implies_its_track_and_refuses_another():
    proc = subprocess.run([sys.executable, "-m", "pytest", "--profile", "cs336", "--track", "classic",
                           "--collect-only", "-q", "spec_tests/test_contract_basics.py"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "--profile cs336 grades the modern track" in proc.stderr, proc.stderr


def test_an_unknown_profile_and_a_repository_without_adapters_get_one_line_errors(tmp_path):
    with pytest.raises(ValueError, match="--profile must be one of contract, cs336 or a profile's .py file, got 'cs999'"):
        profiles.get("cs999")
    (tmp_path / "empty_repo").mkdir()
    proc, results = _grade(tmp_path, tmp_path / "empty_repo")
    assert results["score"] == 0
    assert "the cs336 profile grades a repository holding tests/adapters.py" in proc.stdout, proc.stdout[-2000:]


def test_a_needs_marker_names_only_known_capabilities():
    profiles.check_capabilities(["weights", "gqa"], "t")
    with pytest.raises(ValueError, match="needs\\('wieghts'\\) names no capability"):
        profiles.check_capabilities(["wieghts"], "t")


def test_an_adapter_file_with_relative_imports_loads_as_the_courses_tests_package_does(tmp_path):
    """The handout's tests import ``tests.adapters`` as a module of the ``tests`` package, so an adapter
    file may import its neighbours relatively (a real repository did: it scored 0 before the profile
    loaded the file as a package's module)."""
    repo = cs336_repository(tmp_path / "repo")
    (repo / "tests" / "__init__.py").write_text("")
    (repo / "tests" / "_helper.py").write_text("def identity(t):\n    return t\n")
    adapters = repo / "tests" / "adapters.py"
    adapters.write_text(adapters.read_text() + (
        "\nfrom ._helper import identity  # noqa: E402 - relative, as the course's tests package allows\n\n"
        "_rmsnorm = run_rmsnorm  # noqa: F821\n\n\n"
        "def run_rmsnorm(d_model, eps, weights, in_features):\n"
        "    return identity(_rmsnorm(d_model, eps, weights, in_features))\n"))
    proc, results = _grade(tmp_path, repo)
    assert results["score"] == pytest.approx(100.0), proc.stdout[-3000:]


KEEP_AS_BLOCKED = ('scores.masked_fill(~mask, float("-inf"))', 'scores.masked_fill(mask, float("-inf"))')


@pytest.mark.slow
@pytest.mark.timeout(900)  # a class graded and a pytest run per honest student: about 2.5 min idle
def test_the_class_grader_grades_cs336_repositories_as_pytest_does_and_names_their_functions(tmp_path):
    """Issues 30 and 44: ``tools.grade --profile cs336`` grades a folder of repositories laid out exactly as the
    handout lays them out (its ``__init__.py`` reading the package's installed version, adapters importing inside
    their functions, the handout's class names, its Python 3.12 ``tests/conftest.py``, a dangling dataset link),
    none of them installed, and ``tools.grade single --profile cs336`` one; each graded row is its ``pytest --profile
    cs336 --grade-json`` report test for test (issue 25's rule). A correct repository gets 100 with no accusation;
    an untouched handout gets 0 and a row saying what is not implemented yet; a repository whose package metadata
    is missing is an import error saying so, never ``ok`` with 0; the feedback speaks of the student's functions
    and of the handout's mask; a folder without the adapter file gets a row saying so."""
    from tools import grade

    folder = tmp_path / "class"
    alice = handout_repository(folder / "alice")
    (alice / "conftest.py").write_text("raise SystemExit('a repository conftest ran')\n")  # never loaded (issue 45)
    handout_repository(folder / "bob", KEEP_AS_BLOCKED)
    os.mkfifo(folder / "bob" / "pipe")  # a special file: left out of the copy, said in the row
    (folder / "carol").mkdir()
    (folder / "carol" / "model.py").write_text("x = 1\n")
    handout_repository(folder / "dave", stubs=True)
    handout_repository(folder / "erin", metadata=False)
    # issue 45: the handout's stubs with a forged report; a name that is a command; shapes that once stopped a class
    forger = handout_repository(folder / "frank", stubs=True)
    (forger / "tests" / "adapters.py").write_text((forger / "tests" / "adapters.py").read_text() + "\n"
                                                  + attacks.FORGE_CHILD_REPORT_ANCHORS_FAIL)
    # code that runs: a model returning zeros (its real code runs first), alone and with the forger claiming
    # every test passed; the float32 formula test's twin through the adapters proves the claim false
    zeros = "\n_ts_lm = run_transformer_lm\n\n\ndef run_transformer_lm(*args, **kwargs):\n    return _ts_lm(*args, **kwargs) * 0\n"
    for name, forged in (("hank", ""), ("gina", attacks.FORGE_CHILD_REPORT)):
        adapters = handout_repository(folder / name) / "tests" / "adapters.py"
        adapters.write_text(adapters.read_text() + zeros + forged)
    handout_repository(folder / "$(id)", KEEP_AS_BLOCKED)
    deep = handout_repository(folder / "deep") / "nest"
    deep.mkdir()
    os.makedirs(deep / "/".join(["d"] * 80))
    with open(handout_repository(folder / "sparse") / "weights.bin", "wb") as f:
        f.truncate(10 * 2**30)
    for name in ("Honest_OK", "honest_ok"):  # ids that differ in case only: each keeps its own
        (folder / name).mkdir()
    out = tmp_path / "out"
    assert grade.main([str(folder), "--out", str(out), "--profile", "cs336", "--jobs", "2", "--no-progress"]) == 0
    rows = {r[0]: r for r in list(csv.reader((out / "gradebook.csv").read_text().splitlines()))[1:]}
    assert rows["frank"][1] == "tampering" and float(rows["frank"][2]) == 0, rows["frank"]
    assert rows["gina"][1] == "tampering" and float(rows["gina"][2]) <= float(rows["hank"][2]) < 100, (rows["gina"], rows["hank"])
    assert "only as stubs" in rows["frank"][-1]
    assert rows["$(id)"][1:3] == rows["bob"][1:3], rows["$(id)"]
    reruns = [t["output"] for t in json.loads((out / "students" / "$(id)" / "results.json").read_text())["tests"]]
    assert any("Reproduce: pytest --impl '$(id)' --profile cs336 \"" in o for o in reruns)
    assert rows["deep"][1] == "no-submission" and "nested deeper than 64 levels" in rows["deep"][-1]
    assert rows["sparse"][1] == "no-submission" and "larger than 50 MB" in rows["sparse"][-1]
    assert str(tmp_path) not in (out / "gradebook.csv").read_text()
    assert rows["Honest_OK"][1] == rows["honest_ok"][1] == "no-submission"
    assert "special files (FIFOs, sockets, devices) left out of the copy: pipe" in rows["bob"][-1]
    for student, status, score in (("alice", "ok", 100.0), ("bob", "ok", None), ("dave", "ok", 0.0),
                                   ("erin", "import-error", 0.0), ("hank", "ok", None)):
        batch = json.loads((out / "students" / student / "results.json").read_text())
        mine = tmp_path / f"{student}.json"
        subprocess.run([sys.executable, "-m", "pytest", "spec_tests", "properties", "-q", "-p", "no:cacheprovider",
                        "--profile", "cs336", "--impl", str(folder / student), "--grade-json", str(mine)],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
        pytest_report = json.loads(mine.read_text())
        assert {t["name"]: (t["score"], t["status"]) for t in batch["tests"]} == \
            {t["name"]: (t["score"], t["status"]) for t in pytest_report["tests"]}, (student, batch["output"][:1500])
        assert batch["score"] == pytest_report["score"] == (score if score is not None else batch["score"])
        assert rows[student][1] == status, rows[student]
    assert 0 < json.loads((out / "students" / "bob" / "results.json").read_text())["score"] < 100
    assert "links leaving the repository left out of the copy: data" in rows["alice"][-1]
    assert "not implemented yet (raises NotImplementedError): run_rmsnorm, run_rope" in (out / "gradebook.csv").read_text()
    erin = json.loads((out / "students" / "erin" / "results.json").read_text())
    assert "package metadata of 'cs336_basics'" in rows["erin"][-1], rows["erin"]
    assert "package metadata of 'cs336_basics'" in erin["output"] and "[project]" in erin["tests"][0]["output"], erin
    # the single grader (Gradescope's run_autograder) gives the same repository the same grade
    single = tmp_path / "bob-single.json"
    assert grade.main(["single", str(folder / "bob"), "--results-json", str(single), "--profile", "cs336",
                       "--no-progress"]) == 0
    assert {t["name"]: (t["score"], t["status"]) for t in json.loads(single.read_text())["tests"]} == \
        {t["name"]: (t["score"], t["status"]) for t in json.loads((tmp_path / "bob.json").read_text())["tests"]}
    feedback = (out / "students" / "bob" / "feedback.md").read_text()
    assert "## attention (run_scaled_dot_product_attention): " in feedback, feedback
    assert "| gqa (run_multihead_self_attention, run_multihead_self_attention_with_rope) |" in feedback
    assert 'Reproduce: pytest --impl bob --profile cs336 "' in feedback
    assert "tampering" not in rows["dave"][1]  # the honest untouched handout: no stub proof against it
    # a counterexample is the course's own call: the handout's keep mask, as the student's function got it
    assert "run_scaled_dot_product_attention(Q=tensor(" in feedback and "mask=tensor([[[ True, False" in feedback
    output = json.loads((out / "students" / "bob" / "results.json").read_text())["output"]
    assert "  rotary: run_rope" in output
    # the diagnosis names the mistake through the course's API, in the handout's words, on both paths
    for text in (output, json.loads((tmp_path / "bob.json").read_text())["output"]):
        assert "[pitfall `mask_inverted`]" in text and "in the handout True means the query may attend" in text, text
    assert "mask_inverted" in (out / "report.html").read_text()  # counted in the class report
    gradebook = (out / "gradebook.csv").read_text()
    assert "carol,no-submission,0," in gradebook and "holds no tests/adapters.py" in gradebook
    assert [r for r in rows.values() if r[1] == "tampering"] == [rows["frank"], rows["gina"]]  # only the forgers


def test_the_class_grader_refuses_a_track_the_profile_does_not_grade(tmp_path, capsys):
    from tools import grade

    (tmp_path / "class").mkdir()
    assert grade.main([str(tmp_path / "class"), "--out", str(tmp_path / "out"), "--profile", "cs336",
                       "--track", "classic"]) == 2
    err = capsys.readouterr().err
    assert "--profile cs336 grades the modern track; leave out --track classic" in err and err.count("\n") == 1


def test_the_platforms_take_a_profile_and_the_kit_refuses_one(tmp_path, capsys):
    """The Gradescope bundle passes ``--profile`` on to ``tools.grade single``; the starter kit (the
    contract's names: a course's students start from its handout) refuses it in one line, and so does
    ``--name`` for GitHub Classroom, whose template is then the handout (tests/test_github_classroom.py)."""
    from tools import gradescope_bundle, release
    from tools.grade.cli import build_single_parser
    from tools.grading_options import settings_arguments, settings_of

    args = build_single_parser().parse_args(["sub", "--results-json", "r.json", "--profile", "cs336"])
    assert settings_arguments(args) == ["--profile", "cs336"]
    settings = settings_of(args)
    assert (settings.profile, settings.track) == ("cs336", "modern")
    assert settings.rubric_object().components["masks"] == 0  # the profile's own rubric
    for argv in (["--out", str(tmp_path / "kit")],
                 ["--github-classroom", str(tmp_path / "gh"), "--grader-repo", "o/r", "--name", "kit"]):
        assert release.main([*argv, "--profile", "cs336"]) == 2
        err = capsys.readouterr().err
        assert "--profile cs336" in err and err.count("\n") == 1, err


def test_the_cs336_kill_matrix_catalogue_is_consistent(tmp_path):
    """Every row of ``python -m tools.mutants --profile cs336`` can be written (each patch applies once),
    its names are new, and every pitfall listed as unseen is a modern pitfall hidden by a capability the
    profile lacks (``tools.mutants`` fails a listed pitfall that gets killed)."""
    from tools import mutants
    from transformer_spec.catalogue import cs336 as catalogue
    from transformer_spec.contract import registry

    variations, pitfalls = mutants.rows_of_track("modern", "cs336", every=True)
    own = [*catalogue.PITFALLS, *catalogue.VARIATIONS]
    assert set(own) <= set(variations) | set(pitfalls)
    assert not {r.name for r in own} & {p.name for p in registry.pitfalls()}
    modern = {p.name for p in pitfalls}
    for name, capability in catalogue.UNSEEN.items():
        assert name in modern and capability in profiles.get("cs336").lacks, (name, capability)
    for item in [*own, mutants.REFERENCE, mutants.INDEPENDENT]:
        mutants.write_row(item, tmp_path, "modern", "cs336")
        name = item if isinstance(item, str) else item.name
        assert (tmp_path / name / "tests" / "adapters.py").is_file()


def test_the_ranks_the_handout_fixes_are_kept(tmp_path):
    """Issue 44: an RMSNorm written for the handout's (batch_size, sequence_length, d_model) and an attention for its
    (batch_size, ..., seq_len, d_k) keep every point: the profile lifts lower-rank inputs to the rank the text
    promises (and folds higher ones), quoted in ``cs336.RANKS``. Before, they failed 7 of 10 RMSNorm laws and
    every attention test given 2-D tensors."""
    from transformer_spec.profiles import InputRank, cs336, lifted

    assert "(batch_size, sequence_length, d_model)" in cs336.RANKS["run_rmsnorm"].quote
    x = torch.randn(5, 4)
    (y,), lower = lifted(InputRank(3, 3, "", ""), x)
    assert y.shape == (1, 5, 4) and lower(y).shape == (5, 4)
    (y,), lower = lifted(InputRank(3, 3, "", ""), torch.randn(2, 3, 5, 4))
    assert y.shape == (6, 5, 4) and lower(y).shape == (2, 3, 5, 4)
    repo = cs336_repository(tmp_path / "repo")
    adapters = repo / "tests" / "adapters.py"
    adapters.write_text(adapters.read_text() + (
        "\n_rmsnorm, _sdpa = run_rmsnorm, run_scaled_dot_product_attention  # noqa: F821\n\n\n"
        "def run_rmsnorm(d_model, eps, weights, in_features):\n"
        "    assert in_features.dim() == 3, 'written for (batch_size, sequence_length, d_model)'\n"
        "    return _rmsnorm(d_model, eps, weights, in_features)\n\n\n"
        "def run_scaled_dot_product_attention(Q, K, V, mask=None):\n"
        "    assert Q.dim() >= 3, 'written for (batch_size, ..., seq_len, d_k)'\n"
        "    return _sdpa(Q, K, V, mask)\n"))
    proc, results = _grade(tmp_path, repo)
    assert results["score"] == pytest.approx(100.0), proc.stdout[-3000:]


def test_a_counterexample_under_a_profile_is_the_courses_own_call():
    """Issue 44: a CS336 student reads the call their function got (the keep mask as the handout means it, the
    handout's argument names), not the contract's arguments (``LlamaConfig(...)``, a *blocked* mask)."""
    from transformer_spec.profiles import calls

    def run_scaled_dot_product_attention(Q, K, V, mask=None):
        return Q

    api = type(sys)("course")
    api.run_scaled_dot_product_attention = run_scaled_dot_product_attention
    recorded = calls.recording(api)
    start = calls.mark()
    keep = torch.tensor([[True, False], [True, True]])
    recorded.run_scaled_dot_product_attention(torch.zeros(1, 2, 2), torch.ones(1, 2, 2), torch.ones(1, 2, 3), keep)
    keep[0, 1] = True  # changed afterwards: the call is shown as it was made
    text = "\n".join(calls.format_calls(calls.since(start), "heading"))
    assert "run_scaled_dot_product_attention(Q=tensor(" in text
    assert "mask=tensor([[ True, False], [ True, True]])" in text, text
    assert calls.since(calls.mark()) == []
