"""Issue 47: a class graded through a real Slurm (``tools.grade --slurm``) is the class graded on one machine,
test for test, and a task cancelled mid-run changes nothing but the time.

Graded on the golden tests (``--tests spec_tests``): what is compared is the distribution, not the suite.
Against a real one-node Slurm (``.ci/slurm-single-node start``; CI starts it), never a mock. The class: 12
CS336 repositories under ``--profile cs336`` (the handout's layout, correct; the independent implementation;
the profile's own pitfalls and the track's; an allowed variation; the handout's stubs with a forged report and a
model returning zeros with a forged report, both hostile; a syntax error), graded once on this machine and once
through an array of 3 tasks, one of which is cancelled (``scancel``) after it saved its first student: the
grader submits that shard again, ``--resume`` grades only the rest, and the merged gradebook, records and
feedback equal the single machine's. Without Slurm the test is skipped, except in CI, where it fails.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.adversarial import attacks
from tests.profiles.repositories import cs336_repository, handout_repository
from transformer_spec.catalogue import cs336, pitfalls

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

REPO = Path(__file__).resolve().parent.parent
#: the golden tests only (the class costs half the full suite's time; the gradings compared are the same)
SETTINGS = ["--profile", "cs336", "--tests", "spec_tests", "--no-progress"]


def _slurm_runs() -> bool:
    if shutil.which("sinfo") is None:
        return False
    proc = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    return proc.returncode == 0 and any(s.startswith(("idle", "mixed", "alloc")) for s in proc.stdout.split())


@pytest.fixture(scope="module")
def slurm_up():
    if not _slurm_runs():
        if os.environ.get("CI"):
            pytest.fail("CI runs these tests against a real Slurm: .ci/run starts it with .ci/slurm-single-node start")
        pytest.skip("no Slurm here: start a one-node Slurm with .ci/slurm-single-node start (as root)")


def make_class(folder: Path) -> list[str]:
    """The class of 12 repositories (see the module's docstring)."""
    handout_repository(folder / "alice")
    cs336_repository(folder / "independent")
    by_name = pitfalls.by_name()
    for i, pitfall in enumerate((*cs336.PITFALLS[:4], by_name["rmsnorm_subtracts_mean"], by_name["rope_half_split_pairs"])):
        cs336.write_repository(folder / f"pitfall_{i}_{pitfall.name}", "cs336_basics", pitfall.patches)
    cs336.write_repository(folder / f"variation_{cs336.VARIATIONS[0].name}", "cs336_basics",
                           cs336.VARIATIONS[0].patches)
    forger = handout_repository(folder / "forger_with_stubs", stubs=True)
    (forger / "tests" / "adapters.py").write_text((forger / "tests" / "adapters.py").read_text() + "\n"
                                                  + attacks.FORGE_CHILD_REPORT_ANCHORS_FAIL)
    zeros = handout_repository(folder / "zeros_and_a_forged_report") / "tests" / "adapters.py"
    zeros.write_text(zeros.read_text() + "\n_ts_lm = run_transformer_lm\n\n\ndef run_transformer_lm(*args, **kwargs):\n"
                     "    return _ts_lm(*args, **kwargs) * 0\n" + attacks.FORGE_CHILD_REPORT)
    broken = handout_repository(folder / "syntax_error") / "cs336_basics" / "model.py"
    broken.write_text(broken.read_text() + "\ndef oops(:\n")
    return sorted(p.name for p in folder.iterdir())


_SANDBOX_PATH = re.compile(r"/tmp/transformer-spec-grade-[^/\s]+/[^/\s]+")


def graded(out: Path) -> dict[str, tuple]:
    """Everything a grade is: the gradebook's row and, per student, each test's status and score, the
    diagnoses and the feedback (a sandbox's random folder normalised; times left out)."""
    with open(out / "gradebook.csv", newline="") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    result = {}
    for student, row in rows.items():
        record = json.loads((out / "students" / student / "record.json").read_text())
        tests = sorted((t["name"], t["status"], t["score"]) for t in record["tests"])
        feedback = _SANDBOX_PATH.sub("SANDBOX", (out / "students" / student / "feedback.md").read_text())
        result[student] = (row, tests, record["diagnoses"], feedback)
    return result


@pytest.fixture(scope="module")
def one_machine(tmp_path_factory, slurm_up):
    root = tmp_path_factory.mktemp("slurm")
    names = make_class(root / "class")
    out = root / "one_machine"
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "tools.grade", str(root / "class"), "--out", str(out), "--jobs", "2",
                           *SETTINGS], cwd=REPO, capture_output=True, text=True, timeout=1000)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root, names, graded(out), time.monotonic() - start


def test_a_class_graded_through_slurm_with_a_cancelled_task_is_the_class_graded_on_one_machine(one_machine):
    root, names, expected, local_seconds = one_machine
    assert len(names) >= 12 and sorted(expected) == names
    rows = {s: e[0] for s, e in expected.items()}
    full = rows["alice"]["possible"]
    assert rows["alice"]["status"] == "ok" and rows["alice"]["total"] == full
    assert rows["independent"]["total"] == rows[f"variation_{cs336.VARIATIONS[0].name}"]["total"] == full
    assert all(float(rows[n]["total"]) < float(full) for n in names if n.startswith("pitfall_")), rows
    assert rows["forger_with_stubs"]["status"] == rows["zeros_and_a_forged_report"]["status"] == "tampering"
    assert float(rows["syntax_error"]["total"]) == 0  # the adapters import the package inside each function

    out = root / "slurm"
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "tools.grade", str(root / "class"), "--out", str(out), "--slurm",
                             "--slurm-tasks", "3", *SETTINGS], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    state = out / ".grade" / "slurm"
    # the largest shard is cancelled once it has saved its first student (and before its last)
    shards = {}
    from transformer_spec.grader.submissions import shard_of
    for n in names:
        shards.setdefault(shard_of(n, 3), []).append(n)
    victim = max(shards, key=lambda k: len(shards[k]))
    assert len(shards[victim]) >= 2, shards
    records = state / "shards" / str(victim) / "students"
    deadline = time.monotonic() + 900
    while not list(records.glob("*/record.json")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    job = json.loads((state / "job.json").read_text())["jobs"][0]["id"]
    subprocess.run(["scancel", f"{job}_{victim}"], check=True)
    kept = {p.parent.name: p.stat().st_mtime_ns for p in records.glob("*/record.json")}
    assert len(kept) < len(shards[victim]), "the task finished before it was cancelled"
    stdout, stderr = proc.communicate(timeout=900)
    slurm_seconds = time.monotonic() - start
    assert proc.returncode == 0, stderr[-3000:]
    jobs = json.loads((state / "job.json").read_text())["jobs"]
    assert [j["shards"] for j in jobs] == [[1, 2, 3], [victim]], (jobs, stderr)
    assert f"submitted again Slurm job {jobs[1]['id']}: 1 task(s), shard(s) {victim}/3" in stderr, stderr
    # no student graded twice: what the cancelled task saved was kept, not graded again
    assert {s: (records / s / "record.json").stat().st_mtime_ns for s in kept} == kept
    assert "sandbox: bubblewrap" in stdout, stdout  # each task says its tier; bubblewrap works inside Slurm here
    got = graded(out)
    assert sorted(got) == names
    for student in names:
        assert got[student] == expected[student], student
    print(f"\none machine: {local_seconds:.0f} s; through Slurm (3 tasks, one cancelled): {slurm_seconds:.0f} s")


def test_a_shard_whose_tasks_keep_failing_ends_as_grader_error_rows_and_the_grader_reattaches(tmp_path, slurm_up):
    """The submitting command stopped (Ctrl-C) after it submitted: the job keeps running, and the same command
    with ``--resume`` re-attaches to it. Tasks that fail without grading anyone (an instructor's template that
    never runs the grader) are submitted again twice, then their shards' students are ``grader-error`` rows
    naming the jobs and the logs: the gradebook is complete, never missing. Other settings are refused."""
    import signal

    klass = tmp_path / "class"
    klass.mkdir()
    for name in ("ann", "ben", "cat", "dan"):
        (klass / f"{name}.py").write_text("x = 1\n")
    template = tmp_path / "task.sh"
    template.write_text("#!/bin/bash\n$OPTIONS\nsleep 2; echo 'a module that does not load' >&2; exit 3\n")
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "tools.grade", str(klass), "--out", str(out), "--slurm", "--slurm-tasks", "2",
            "--slurm-template", str(template), "--no-progress"]
    first = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    state = out / ".grade" / "slurm" / "job.json"
    deadline = time.monotonic() + 120
    while not (state.is_file() and json.loads(state.read_text())["jobs"]):
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.1)
    first.send_signal(signal.SIGINT)
    _, stderr = first.communicate(timeout=60)
    job = json.loads(state.read_text())["jobs"][0]["id"]
    assert first.returncode != 0 and f"the Slurm job(s) {job} keep running" in stderr and "--resume" in stderr, stderr
    assert "Traceback" not in stderr, stderr
    refused = subprocess.run([*argv, "--resume", "--time-limit", "30"], cwd=REPO, capture_output=True, text=True)
    assert refused.returncode == 2 and "other settings" in refused.stderr, refused.stderr
    again = subprocess.run([*argv, "--resume"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    jobs = json.loads(state.read_text())["jobs"]
    assert jobs[0]["id"] == job and len(jobs) == 3, jobs  # the first job waited for, then two more rounds
    with open(out / "gradebook.csv", newline="") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert sorted(rows) == ["ann", "ben", "cat", "dan"]
    for row in rows.values():
        assert row["status"] == "grader-error" and "ended 3 times in a row without grading anyone" in row["detail"], row
        assert str(out / ".grade" / "slurm" / "logs") in row["detail"]
    assert "given up after 3 failed tasks" in again.stderr
