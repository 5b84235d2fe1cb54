"""The pitfall catalogue is well-formed and every patch still applies to the reference."""

from pathlib import Path

import pytest
from hypothesis import Phase, settings

from tools import mutants
from transformer_spec.catalogue import of_profile as catalogue_of
from transformer_spec import profiles
from transformer_spec.catalogue.patching import PatchError, load_patched_reference, write_patched_reference
from transformer_spec.catalogue.pitfalls import by_name, catalogue, check_catalogue
from transformer_spec.contract import registry
from transformer_spec.pytest_plugin import failures, hypothesis_profiles  # noqa: F401 - registers the profiles

ROOT = Path(__file__).resolve().parent.parent
CATALOGUE = catalogue()
BY_NAME = by_name()
COMPONENTS = registry.names()


def test_catalogue_is_well_formed():
    check_catalogue()
    assert len(CATALOGUE) >= 40
    assert len(BY_NAME) == len(CATALOGUE), "pitfall names must be unique"
    for p in CATALOGUE:
        assert p.component in COMPONENTS, p.name
        assert p.name.isidentifier(), p.name
        assert p.explanation.strip() and "\n" not in p.explanation, p.name
        assert p.patches and all(old != new for _, old, new in p.patches), p.name


def test_every_component_but_none_has_pitfalls():
    assert {p.component for p in CATALOGUE} == set(COMPONENTS)


@pytest.mark.parametrize("pitfall", CATALOGUE, ids=lambda p: p.name)
def test_every_patch_applies_and_the_copy_imports(tmp_path, pitfall):
    broken = load_patched_reference(tmp_path, pitfall.patches, pitfall.name)
    assert broken.error is None, broken.error


def test_patches_are_distinct():
    seen = {}
    for p in CATALOGUE:
        key = tuple(sorted(p.patches))
        assert key not in seen, f"{p.name} and {seen.get(key)} apply the same patches"
        seen[key] = p.name


def test_a_patch_that_no_longer_applies_fails_loudly(tmp_path):
    with pytest.raises(PatchError, match="found it 0 times"):
        write_patched_reference(tmp_path, [("attention.py", "text that is not there", "x")])


def test_mutation_profile_is_fast_and_reproducible():
    s = settings.get_profile("mutation")
    assert s.deadline is None and s.database is None and s.derandomize
    assert Phase.shrink not in s.phases and Phase.generate in s.phases
    assert "mutation" in hypothesis_profiles.PROFILES


def test_kill_matrix_verdicts():
    ref = mutants.Row(mutants.REFERENCE, None)
    assert ref.verdict == "clean" and ref.ok
    assert mutants.Row("x", "ffn").verdict == "SURVIVED"
    assert mutants.Row("x", "ffn", failed={"encoder": ["t"]}).verdict == "KILLED ONLY ELSEWHERE"
    row = mutants.Row("x", "ffn", failed={"ffn": ["a", "b"], "encoder": ["t"]})
    assert row.verdict == "killed" and row.ok
    lines = mutants.format_matrix([ref, row])
    assert "[2]" in lines[-1] and lines[-1].rstrip().endswith("killed")
    failed_ref = mutants.Row(mutants.REFERENCE, None, failed={"masks": ["t"]})
    assert not failed_ref.ok


def test_the_kill_matrix_grades_through_the_class_grader_with_the_grading_profile_and_one_thread():
    """What a student is graded with (issue 27: the bounded shrink is where hypothesis's own errors
    once reached students, and a run without shrinking never saw them); ``--profile mutation`` too."""
    s = mutants.grader_settings()
    assert s.hypothesis_profile == "grading" and s.limits.threads == 1 and not s.diagnose and s.rechecks
    assert mutants.grader_settings("mutation").hypothesis_profile == "mutation"
    row = mutants.row_of("x", None)
    assert row.error == "not graded" and not row.ok


def _failed(nodeid: str, output: str, kind: str = "assertion") -> dict:
    return {"name": f"[attention] {nodeid}", "tags": ["attention"], "status": "failed", "kind": kind, "output": output}


def test_a_failure_a_student_cannot_read_is_a_gap():
    """A message holding one of hypothesis's own errors, or a failing property without its smallest
    example, makes the row UNREADABLE (the run exits 1); ordinary messages are fine."""
    flaky = _failed("properties/test_x.py::test_law", "hypothesis.errors.FlakyStrategyDefinition: Inconsistent data")
    assumption = _failed("properties/test_x.py::test_law", "UnsatisfiedAssumption: failed to satisfy assume()")
    bare = _failed("properties/test_x.py::test_law", "AssertionError: rows do not sum to 1")
    shown = _failed("properties/test_x.py::test_law", f"rows do not sum to 1\n{failures.EXAMPLE_HEADING}\n  d_k = 2")
    golden = _failed("spec_tests/test_y.py::test_value", "Found 3 differences: expected 1, got 2")
    missing = _failed("properties/test_x.py::test_law", "`MiniGPT` is not defined", kind="not submitted")
    assert "FlakyStrategyDefinition" in mutants.unreadable(flaky)
    assert "UnsatisfiedAssumption" in mutants.unreadable(assumption)
    assert mutants.unreadable(bare) == "no smallest failing example"
    assert mutants.unreadable(shown) is None and mutants.unreadable(golden) is None and mutants.unreadable(missing) is None
    assert mutants.Row("x", "attention", failed={"attention": ["a"]}, unreadable=["a: ..."]).verdict == "UNREADABLE"


def test_a_row_whose_class_grade_differs_from_its_pytest_report_is_a_gap():
    assert mutants.Row("x", "ffn", failed={"ffn": ["a"]}, differs=["b (0 points: ...)"]).verdict == "GRADER DIFFERS"
    assert mutants.Row("x", "ffn", failed={"ffn": ["a"]}, status="tampering").verdict == "GRADER DIFFERS"
    assert mutants.Row(mutants.REFERENCE, None, status="timeout").verdict == "clean"


def test_unknown_pitfall_is_a_usage_error(capsys):
    with pytest.raises(SystemExit):
        mutants.main(["--only", "no_such_pitfall"])
    assert "unknown pitfall" in capsys.readouterr().err


def test_every_row_of_an_optional_component_is_graded_by_default_in_the_matrix_whose_rubric_gives_it_points():
    """The modern matrix grades the track's default rubric (its optional training utilities get no
    points there) and leaves their rows out; the cs336 profile's matrix, whose rubric gives them points,
    grades each of them. ``--every`` (or ``--only`` naming one) grades them under the contract's names."""
    from transformer_spec.scoring import rubric

    variations, pitfalls = mutants.rows_of_track("modern")
    every_v, every_p = mutants.rows_of_track("modern", every=True)
    left_out = {r.name for r in [*every_v, *every_p]} - {r.name for r in [*variations, *pitfalls]}
    assert left_out and all(mutants.optional(r) for r in [*every_v, *every_p] if r.name in left_out)
    assert not any(mutants.optional(r) for r in [*variations, *pitfalls])
    course_v, course_p = mutants.rows_of_track("modern", "cs336")
    assert left_out <= {r.name for r in [*course_v, *course_p]}
    cs336 = rubric.load_rubric(profiles.get("cs336").rubric, track="modern").components
    assert all(cs336[r.component] > 0 for r in [*every_v, *every_p] if r.name in left_out)
    assert mutants.grader_settings(track="modern").rubric is None  # the track's default rubric
    assert "adamw = " in mutants.grader_settings(track="modern", optional=True).rubric
    assert mutants.grader_settings(track="modern", course="cs336", optional=True).rubric is None  # the profile's own


def test_a_course_profiles_matrix_leaves_out_the_pitfalls_it_lists_unseen_unless_every():
    """``--profile cs336`` grades every pitfall its profile can see; ``--every`` also grades those its
    catalogue lists as unseen, and fails one that gets killed (``LISTED UNSEEN BUT KILLED``)."""
    unseen = catalogue_of(profiles.get("cs336")).UNSEEN
    _, pitfalls = mutants.rows_of_track("modern", "cs336")
    _, every = mutants.rows_of_track("modern", "cs336", every=True)
    assert unseen and {p.name for p in every} - {p.name for p in pitfalls} == set(unseen)
    assert mutants.Row("x", "gqa", unseen="gqa", failed={"gqa": ["t"]}).verdict == "LISTED UNSEEN BUT KILLED"


def test_the_student_command_check_reads_a_kill_matrix_and_names_a_bad_one(tmp_path, capsys):
    """``tools.student_command`` (issue 44: the grade a student checks is the grade they get) takes the kill
    matrix's JSON, which says its track and profile; anything else is one line naming the file and the fix."""
    import json

    from tools import student_command

    bad = tmp_path / "m.json"
    for text in ("not json", json.dumps({"rows": []})):  # the second: written before the matrix said its track
        bad.write_text(text)
        with pytest.raises(SystemExit) as exit_info:
            student_command.main([str(bad)])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert "not a kill matrix's JSON written by python -m tools.mutants --json" in err and "Traceback" not in err
    bad.write_text(json.dumps({"rows": [], "track": "modern", "profile": "contract"}))
    with pytest.raises(SystemExit):  # nothing to check is no success
        student_command.main([str(bad)])
    assert "no row graded with status ok: nothing to check" in capsys.readouterr().err


def test_every_placeholder_applies_and_computes_nothing(tmp_path):
    """Each placeholder row (transformer_spec/catalogue/placeholders.py) applies to the reference, and the component it
    names then returns zeros, its input or ones of the right shape: what the kill matrix's `kept` column grades."""
    import torch

    from transformer_spec.catalogue import placeholders
    from transformer_spec.catalogue.patching import load_patched_reference

    rows = placeholders.rows(placeholders.components_of("classic", "contract", True), every=True)
    assert {p.component for p in rows} == set(placeholders.components_of("classic", "contract", True))
    by_name = {p.name: p for p in rows}
    x = torch.randn(2, 3, 8)
    for kind, expected in (("zeros", torch.zeros_like(x)), ("input", x), ("constant", torch.ones_like(x))):
        impl = load_patched_reference(tmp_path, by_name[f"placeholder_{kind}_ffn"].patches, kind)
        out = impl.FeedForward(8, 16, dropout=0.0).eval()(x)
        assert out.shape == x.shape and torch.equal(out, expected), kind
    impl = load_patched_reference(tmp_path, by_name["placeholder_zeros_masks"].patches, "masks")
    assert not impl.causal_mask(4).any()
    tests = [{"tags": ["ffn"], "score": 1.0, "max_score": 4.0}, {"tags": ["ffn"], "score": 0.0, "max_score": 4.0},
             {"tags": ["mha"], "score": 5.0, "max_score": 5.0}]
    assert placeholders.kept(tests, "ffn") == 0.125 and placeholders.kept(tests, "seq2seq") is None
    assert placeholders.within(0.2) and not placeholders.within(0.21)


def test_the_no_shrink_profile_is_grading_without_its_shrink_phase():
    """The placeholder rows' profile (tools.mutants grades them with it): grading's examples, seeds and phases
    but shrinking, so each test passes or fails as under grading (a test fails at its first failing example)."""
    grading, quick = settings.get_profile("grading"), settings.get_profile(hypothesis_profiles.NO_SHRINK_PROFILE)
    assert Phase.shrink in grading.phases and list(quick.phases) == [p for p in grading.phases if p != Phase.shrink]
    for attr in ("max_examples", "derandomize", "database", "deadline", "suppress_health_check"):
        assert getattr(quick, attr) == getattr(grading, attr), attr
    assert hypothesis_profiles.NO_SHRINK_PROFILE in hypothesis_profiles.PROFILES


@pytest.mark.slow
def test_a_placeholder_passes_and_fails_the_same_tests_without_shrinking(tmp_path):
    """What the kill matrix's placeholder rows rely on, on a real run: the zeros placeholder of attention
    (it fails most of the attention laws, each shrinking under grading) gets the same status on every test
    of the attention properties under ``no-shrink`` as under ``grading``."""
    import json
    import subprocess
    import sys

    from transformer_spec.catalogue import placeholders

    row = next(p for p in placeholders.rows(["attention"]) if p.component == "attention")
    write_patched_reference(tmp_path, row.patches, "impl")
    statuses = {}
    for profile in ("grading", hypothesis_profiles.NO_SHRINK_PROFILE):
        out = tmp_path / f"{profile}.json"
        subprocess.run([sys.executable, "-m", "pytest", "properties/test_attention_laws.py", "-q", "-p", "no:cacheprovider",
                        f"--impl={tmp_path / 'impl'}", "--grade-json", str(out), "--hypothesis-profile", profile],
                       cwd=ROOT, capture_output=True, timeout=600)
        statuses[profile] = {t["name"]: t["status"] for t in json.loads(out.read_text())["tests"]}
    assert statuses["grading"] == statuses[hypothesis_profiles.NO_SHRINK_PROFILE]
    assert "failed" in statuses["grading"].values() and "passed" in statuses["grading"].values()


def test_the_placeholder_rows_are_a_class_of_their_own_graded_without_shrinking(monkeypatch):
    """Their verdict is each test's pass or fail (``kept``), so ``run_all`` grades them under ``no-shrink``
    while the other rows keep the profile asked for (``grading``: what a student is graded with); first, as
    what each breaks keeps the pitfall groups apart."""
    from transformer_spec.catalogue import placeholders

    seen = []
    monkeypatch.setattr(mutants, "_graded", lambda items, profile, *a: seen.append((len(items), profile)) or {})
    holders = placeholders.rows(["ffn"])
    mutants.run_all([BY_NAME["relu_instead_of_gelu"]], placeholder_rows=holders)
    assert seen == [(len(holders), hypothesis_profiles.NO_SHRINK_PROFILE), (3, "grading")]
    seen.clear()
    mutants.run_all([], profile="mutation", placeholder_rows=holders)  # no shrinking anyway: one profile
    assert seen == [(len(holders), "mutation"), (2, "mutation")]
