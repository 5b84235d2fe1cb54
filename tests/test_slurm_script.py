"""The Slurm task's script and command (``tools.grade --slurm``, transformer_spec/grader/slurm.py), and the
command line's one-line answers, without a cluster: what every task runs must survive any class path and
any instructor's template. The grading through a real Slurm is tests/test_grade_slurm.py (slow)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from transformer_spec.grader import slurm
from transformer_spec.grader.settings import GradeError

REPO = Path(__file__).resolve().parent.parent


def test_a_task_grades_its_own_shard_resumed_with_the_settings_given(tmp_path):
    klass = tmp_path / "class $(id) 'q'"
    command = slurm.task_command(klass, tmp_path / "out", 3, ["--profile", "cs336", "--time-limit", "30"])
    env = dict(os.environ, SLURM_ARRAY_TASK_ID="2", SLURM_CPUS_PER_TASK="4")
    # the shell a task runs in expands the array index and the cores, and nothing of the class's name
    echoed = subprocess.run(["bash", "-c", command.replace("exec ", "exec printf '%s\\n' ", 1)], env=env,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    assert echoed[1:] == ["-m", "tools.grade", str(klass), "--out", str(tmp_path / "out" / ".grade/slurm/shards/2"),
                          "--shard", "2/3", "--resume", "--no-progress", "--jobs", "4", "--profile", "cs336",
                          "--time-limit", "30"]
    assert echoed[0] == sys.executable


def test_the_script_holds_the_options_and_an_instructors_template_places_them(tmp_path):
    options = slurm.SlurmOptions(tasks=3, partition="gpu dev", time="30", mem="6G", extra=["--account=cs336"])
    text = slurm.script("echo graded", tmp_path, options, minutes=99)
    sbatch = [shlex.split(line)[1] for line in text.splitlines() if line.startswith("#SBATCH")]
    assert sbatch == ["--job-name=transformer-spec-grade", f"--output={tmp_path}/.grade/slurm/logs/%A_%a.out",
                      "--cpus-per-task=1", "--mem=6G", "--time=30", "--requeue", "--partition=gpu dev", "--account=cs336"]
    assert text.startswith("#!/bin/bash\n") and text.rstrip().endswith("echo graded")
    assert "--time=99" in slurm.script("x", tmp_path, slurm.SlurmOptions(), minutes=99)  # the default: from the class
    template = tmp_path / "task.sh"
    template.write_text("#!/bin/bash\n$OPTIONS\nmodule load python/3.11  # costs $$5\n$COMMAND\n")
    mine = slurm.script("echo graded", tmp_path, slurm.SlurmOptions(template=template), minutes=5)
    assert "module load python/3.11  # costs $5\necho graded" in mine and "#SBATCH --requeue" in mine
    template.write_text("$OPTIONS\n$HOME\n$COMMAND\n")
    with pytest.raises(GradeError, match=r"--slurm-template .*only \$OPTIONS and \$COMMAND"):
        slurm.script("x", tmp_path, slurm.SlurmOptions(template=template), minutes=5)


def _grade(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools.grade", *args], cwd=REPO, capture_output=True, text=True,
                          env=env, timeout=120)


def test_slips_with_slurm_get_one_line_each(tmp_path):
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "a.py").write_text("x = 1\n")
    out = str(tmp_path / "out")
    proc = _grade(str(klass), "--out", out, "--slurm", "--shard", "1/2")
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "leave out --shard and --jobs" in proc.stderr
    proc = _grade(str(klass), "--out", out, "--slurm", "--slurm-tasks", "0")
    assert proc.returncode == 2 and "--slurm-tasks: takes a whole number >= 1, got '0'" in proc.stderr, proc.stderr
    # no Slurm here (a PATH without sbatch): one line, and nothing written in --out
    bare = tmp_path / "bin"
    bare.mkdir()
    env = dict(os.environ, PATH=str(bare))
    proc = subprocess.run([sys.executable, "-m", "tools.grade", str(klass), "--out", out, "--slurm"], cwd=REPO,
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "sbatch is not on PATH" in proc.stderr, proc.stderr
    assert not Path(out).exists()


def test_the_queue_is_read_for_the_jobs_own_tasks_only(tmp_path, monkeypatch):
    calls = []

    def fake(argv):
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, "12_1 RUNNING\n12_2 PENDING\n12_3 COMPLETED\n13_1 CANCELLED\n", "")

    monkeypatch.setattr(slurm, "_run", fake)
    assert slurm.queued(["12", "13"]) == {"12_1": "RUNNING", "12_2": "PENDING"}
    assert calls[0][calls[0].index("-j") + 1] == "12,13"
    assert slurm.queued([]) == {} and len(calls) == 1
    monkeypatch.setattr(slurm, "_run", lambda argv: subprocess.CompletedProcess(
        argv, 1, "", "slurm_load_jobs error: Invalid job id specified"))
    assert slurm.queued(["12"]) == {}  # ended long ago: Slurm forgot them
