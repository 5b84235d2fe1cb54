"""The attack corpus of issue 15 graded beside honest students (``tests/adversarial/attack_corpus.py``).

One batch (module fixture): every attack, the honest students (a copy of ``reference/`` and
``tests/independent``'s implementation) and the two baselines the expectations refer to, graded
by ``python -m tools.grade`` (``grade_class``) on the oracle tests only, ``--jobs 2``. Then:
each submission gets what its honest code earns, the honest students 100 with status ``ok``,
every student is in the gradebook, nothing of the class still runs, nothing is left on disk
outside the output folder, the class folder is unchanged, the output folder agrees with itself,
and the grader's memory stays bounded; and ``tools.grade single`` (Gradescope's path) gives two
results.json-rewriting attacks what their code earns. Measured on this project's shared 2-core
machine: 414 s under a load of ~5 from other work, 594 s under 7-10 (not measured on an idle machine).

The grader runs in a process of its own (``tests/adversarial/run.py``): an attack on the grader
process must not take this test down with it, and its command line must name the class and
output folders as a real run's does.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.adversarial import run as attack_run
from tests.adversarial.attack_corpus import (
    HONEST,
    RECHECK_TESTS,
    build_attacks,
    build_modern_attacks,
    build_recheck_attacks,
)
from tests.adversarial.expect import problems

#: the slow set (conftest.py: run with --slow): grades the attack corpus as a class, and each attack through tools.grade single
pytestmark = [pytest.mark.slow, pytest.mark.timeout(720)]

STUDENTS = [
    "base_buggy", "big_frames", "bypass_direct", "bypass_guard_removed_at_import", "bypass_guard_removed_in_call",
    "bypass_guard_removed_reinstalled", "bypass_reference_by_path", "bypass_reference_thread",
    "bypass_sdpa_aten_math", "bypass_sdpa_c_nn", "bypass_sdpa_fake_filename", "bypass_sdpa_oracle_window",
    "bypass_sdpa_thread", "bypass_symlinks",
    "esc_append_code", "esc_disk_fill", "esc_edit_results_in_place", "esc_kill_classmates", "esc_many_procs",
    "esc_pipe_junk", "esc_read_secrets", "esc_rewrite_class", "esc_rewrite_outputs", "esc_steal_class_folder",
    "esc_steal_sandbox", "esc_stop_grader", "forge_atexit_results", "forge_buggy_anchors_fail", "forge_buggy_recheck_missing", "forge_channel_send", "forge_child_report",
    "forge_child_report_anchors_fail", "forge_raw_frames", "forge_report_hook", "honest_independent",
    "honest_reference", "limit_three_interpreters", "zz_kill_grader",
]
#: the grader's own memory, in MB, with every report it was sent (the issue measured 1.7 GB)
MAX_GRADER_MB = 1200


def _tmp_entries() -> set[str]:
    return set(os.listdir("/tmp")) if os.path.isdir("/tmp") else set()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("attacks").resolve()
    subs, out = root / "subs", root / "out"
    expect = build_attacks(subs)
    before = attack_run.tree_hash(subs)
    tmp_before = _tmp_entries()
    run = None
    try:
        run = attack_run.grade(subs, out, root, jobs=2, timeout=600)
        got = attack_run.records(out)
        after = attack_run.tree_hash(subs)
        new_tmp = sorted(_tmp_entries() - tmp_before)
        yield root, expect, run, got, before, after, new_tmp
    finally:
        roots = run.tmp_roots if run is not None else []
        attack_run.kill_class([str(root), *roots])
        for p in attack_run.hostile_files(roots):
            p.unlink(missing_ok=True)


def _ours(name: str, tmp_roots: list[str]) -> bool:
    """A new entry of /tmp that this run made: an attack's file, or one named after the grader's
    temp root (other runs on the machine make temp folders of their own at the same time)."""
    return name.startswith(attack_run.HOSTILE_FILES) or any(Path(r).name in name for r in tmp_roots)


def test_the_batch_finishes_with_every_student_in_the_gradebook(graded):
    root, expect, run, got, _, _, _ = graded
    assert sorted(expect) == STUDENTS
    assert not run.timed_out and run.returncode == 0, f"the grader ended with {run.returncode} after {run.seconds:.0f} s " \
        f"(timed out: {run.timed_out}):\n{run.output}"
    with open(root / "out" / "gradebook.csv", newline="") as f:
        book = {r["student"] for r in csv.DictReader(f)}
    assert book == set(STUDENTS), f"missing {sorted(set(STUDENTS) - book)}, unknown {sorted(book - set(STUDENTS))}"
    assert set(got) == set(STUDENTS), f"no record for {sorted(set(STUDENTS) - set(got))}"


@pytest.mark.parametrize("student", STUDENTS)
def test_each_submission_gets_what_its_code_earns(graded, student):
    _, expect, _, got, _, _, _ = graded
    bad = problems(student, expect[student], got, "base_buggy")
    assert not bad, "\n".join(bad)


def test_the_honest_students_score_100_with_status_ok(graded):
    _, _, _, got, _, _, _ = graded
    wrong = {s: (got[s].status, got[s].total, got[s].possible, got[s].detail) if s in got else "missing"
             for s in HONEST if s not in got or got[s].status != "ok" or got[s].total != got[s].possible}
    assert not wrong, f"honest students harmed by their classmates: {wrong}"


def test_nothing_of_the_class_runs_afterwards(graded):
    _, _, run, _, _, _, _ = graded
    assert not run.alive_at_exit, f"{len(run.alive_at_exit)} processes of the class outlived the grader: " \
        f"{run.alive_at_exit[:5]}"
    assert not run.alive_later, f"{len(run.alive_later)} processes of the class still ran 6 s later: {run.alive_later[:5]}"


def test_nothing_is_left_on_disk_outside_the_output_folder(graded):
    _, _, run, _, _, _, new_tmp = graded
    assert run.tmp_roots, "the grader did not note its temp root in OUT/.grade"
    left = [r for r in run.tmp_roots if os.path.exists(r)]
    assert not left, f"the grader's temp root is still there: {left}"
    hostile = attack_run.hostile_files(run.tmp_roots)
    assert not hostile, f"files written outside the sandbox: {[(str(p), p.stat().st_size) for p in hostile]}"
    ours = [n for n in new_tmp if _ours(n, run.tmp_roots)]
    assert not ours, f"new entries in /tmp from the run: {ours}"


def test_the_class_folder_is_unchanged(graded):
    _, _, _, _, before, after, _ = graded
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert not changed, f"the class folder was changed during grading: {changed[:10]}"


def test_the_output_folder_agrees_with_itself(graded):
    root, _, _, got, _, _, _ = graded
    out = root / "out"
    with open(out / "gradebook.csv", newline="") as f:
        book = {r["student"]: r for r in csv.DictReader(f)}
    wrong = []
    for s, r in got.items():
        results = json.loads((out / "students" / s / "results.json").read_text())
        row = book.get(s, {})
        if not (row.get("status") == r.status and float(row.get("total", -1)) == r.total
                and abs(results["score"] - r.total) < 0.01):
            wrong.append((s, r.status, r.total, row.get("status"), row.get("total"), results["score"]))
        names = sorted(p.name for p in (out / "students" / s).iterdir())
        if names != ["feedback.md", "log.txt", "record.json", "results.json"]:
            wrong.append((s, names))
    assert not wrong, f"record.json, gradebook.csv and results.json disagree: {wrong}"
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["gradebook.csv", "report.html", "students"]


def test_the_graders_memory_stays_bounded(graded):
    _, _, run, _, _, _, _ = graded
    assert 0 < run.peak_mb < MAX_GRADER_MB, f"the grader's peak memory was {run.peak_mb:.0f} MB (big_frames sends " \
        f"40 report frames of 15 MB)"


def test_no_child_sees_the_home_folder_or_the_repository(graded):
    root, expect, _, _, _, _, _ = graded
    for s, e in expect.items():
        log = root / "out" / "students" / s / "log.txt"
        text = log.read_text(errors="replace") if log.is_file() else ""
        seen = [m for m in e.extra.get("log_forbids", ()) if m in text]
        assert not seen, f"{s}: {seen}"


def _graded_alone(root: Path, student: str, tmp_path: Path) -> dict:
    """``student`` graded by ``tools.grade single`` (Gradescope's path): its results.json. Nothing
    of the run may outlive it."""
    shutil.copytree(root / "subs" / student, tmp_path / "sub" / student)
    results = tmp_path / "results.json"
    run = None
    try:
        run = attack_run.grade_single(tmp_path / "sub" / student, results, tmp_path)
    finally:
        attack_run.kill_class([str(tmp_path), *(run.tmp_roots if run is not None else [])])
    assert run.returncode == 0 and not run.timed_out, run.output
    assert not run.alive_at_exit, f"processes outlived the single grader: {run.alive_at_exit[:5]}"
    return json.loads(results.read_text())


#: Gradescope's path (issue 15, item 1): rewriting results.json at exit, or after the grader is gone
SINGLE = ["forge_atexit_results", "esc_rewrite_outputs"]


@pytest.mark.parametrize("student", SINGLE)
def test_the_single_grader_gives_what_the_code_earns(graded, tmp_path, student):
    root, expect, _, got, _, _, _ = graded
    assert expect[student].points == "buggy" and "base_buggy" in got
    score = _graded_alone(root, student, tmp_path)["score"]
    assert score == pytest.approx(got["base_buggy"].total, abs=0.01), \
        f"{student}: results.json says {score}; its code earns {got['base_buggy'].total} (base_buggy's grade)"


#: members of each kind (honest, forger, bypass, escape) graded again alone by ``tools.grade single``
SAME = ["honest_independent", "forge_report_hook", "bypass_sdpa_c_nn", "esc_pipe_junk"]


@pytest.mark.parametrize("student", SAME)
def test_the_single_grader_agrees_with_the_class_grader(graded, tmp_path, student):
    root, _, _, got, _, _, _ = graded
    data = _graded_alone(root, student, tmp_path)
    assert data["score"] == pytest.approx(got[student].total, abs=0.01), (student, data["score"], got[student].total)
    assert data["extra_data"]["status"] == got[student].status


#: issue 45's attacks 11 and 12, their controls and the honest students (``build_recheck_attacks``)
RECHECK_STUDENTS = ["base_no_checks", "base_seq2seq_zeros", "forge_errors_raise_in_recheck", "forge_seq2seq_zeros",
                    "honest_independent", "honest_reference"]


@pytest.fixture(scope="module")
def rechecked(tmp_path_factory):
    """A class of its own graded with the tests that anchor the errors and seq2seq re-checks (the oracle tests
    of the corpus above hold neither): (expectations, records)."""
    root = tmp_path_factory.mktemp("rechecked").resolve()
    expect = build_recheck_attacks(root / "subs")
    run = attack_run.grade(root / "subs", root / "out", root, jobs=2, timeout=600, extra=("--tests", *RECHECK_TESTS))
    assert not run.timed_out and run.returncode == 0, run.output[-3000:]
    return expect, attack_run.records(root / "out")


@pytest.mark.parametrize("student", RECHECK_STUDENTS)
def test_a_forger_that_fools_a_recheck_keeps_at_most_what_its_code_earns(rechecked, student):
    """Attack 11: constructors without argument checks, every test claimed passed, and in the re-check child every
    constructor raising a ValueError that names every argument (each errors re-check first makes a valid call,
    which must not raise). Attack 12: Seq2SeqTransformer returning zeros, every test claimed passed. Each keeps
    at most its control's grade plus the tests no re-check checks; the honest students get 100, status ok."""
    expect, got = rechecked
    assert sorted(expect) == RECHECK_STUDENTS
    bad = problems(student, expect[student], got, "base_no_checks")
    assert not bad, "\n".join(bad)


#: the modern track's hostile class (``build_modern_attacks``)
MODERN_STUDENTS = ["honest_independent", "honest_reference", "kit_forger", "kit_unmodified", "minillama_zeros",
                   "minillama_zeros_forger"]


@pytest.fixture(scope="module")
def modern(tmp_path_factory):
    """The modern track's hostile class graded as a class (``--track modern``, the whole modern suite)."""
    root = tmp_path_factory.mktemp("modern").resolve()
    expect = build_modern_attacks(root / "subs")
    run = attack_run.grade(root / "subs", root / "out", root, jobs=2, timeout=600,
                           extra=("--track", "modern", "--tests", "spec_tests", "properties", "--time-limit", "300",
                                  "--test-timeout", "60", "--wall", "400", "--memory-mb", "3000"))
    assert not run.timed_out and run.returncode == 0, run.output[-3000:]
    return expect, attack_run.records(root / "out")


@pytest.mark.parametrize("student", MODERN_STUDENTS)
def test_a_forger_on_the_modern_track_keeps_at_most_what_its_code_earns(modern, student):
    """Issue 45's attack 2 (the starter kit and the report forger: ``tampering``, 0) and MiniLlama returning zeros
    with the forger (at most the placeholder's grade plus the tests no re-check checks), graded as a class beside
    the honest students, who get 100 with status ok."""
    expect, got = modern
    assert sorted(expect) == MODERN_STUDENTS
    bad = problems(student, expect[student], got, "minillama_zeros")
    assert not bad, "\n".join(bad)
