"""How grading a class scales (``python -m tools.class_scale``): with the class's size on one machine (``curve``:
the cost a submission and the grader's own memory at 16, 64, 128 submissions; docs/performance.md), and with
Slurm tasks (``slurm``: one machine and 1, 2, 3 tasks; docs/class_grading.md, "On a Slurm cluster").

The class: CS336 repositories made from the cs336 profile's catalogue (a correct one, the profile's pitfalls
and allowed variations, then the modern track's pitfalls), graded under ``--profile cs336`` with the
grader's defaults. Per run: the wall time from the command's start to its merged gradebook, submissions a
minute, and for the Slurm runs the tasks' own run times (``scontrol show job``: each array task's start and
end) and the time outside them (the wall time less the span from the first task's start to the last one's
end: submitting, the first task's wait in the queue, the waiter's last poll and the merge).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ..cli import ToolError
from .graded_run import ROOT


def members() -> list[tuple[str, tuple]]:
    """(name, patches): a correct repository, the cs336 profile's pitfalls and variations, the modern track's pitfalls."""
    from transformer_spec.catalogue import cs336
    from transformer_spec.catalogue.pitfalls import catalogue

    modern = [p for p in catalogue() if p.component in ("rmsnorm", "rotary", "swiglu", "gqa", "minillama")]
    return [("correct", ()), *((m.name, m.patches) for m in (*cs336.PITFALLS, *cs336.VARIATIONS, *modern))]


def write_cs336_class(dest: Path, size: int) -> list[str]:
    """``size`` repositories in ``dest`` (the catalogue's members in order, again with a suffix if more are asked)."""
    from transformer_spec.catalogue import cs336

    every = members()
    names = []
    for i in range(size):
        name, patches = every[i % len(every)]
        name = name if i < len(every) else f"{name}_{i // len(every) + 1}"
        cs336.write_repository(dest / name, "cs336_basics", patches)
        names.append(name)
    return names


@dataclass
class Run:
    label: str
    tasks: int  # 0: one machine
    wall: float  # seconds, the command's start to its merged gradebook
    size: int
    task_seconds: list[float]  # each Slurm task's run time
    span: float = 0.0  # the first task's start to the last task's end

    @property
    def per_minute(self) -> float:
        return 60 * self.size / self.wall


def _grade(argv: list[str]) -> float:
    return _grade_watched(argv)[0]


def _grade_watched(argv: list[str]) -> tuple[float, int]:
    """``tools.grade ARGV --profile cs336``: its wall time, and the grader's own peak resident memory (its
    process alone, not the children that run the submissions: ``VmHWM`` read every 0.2 s), in kB."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "tools.grade", *argv, "--profile", "cs336", "--no-progress"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = 0
    status = Path(f"/proc/{proc.pid}/status")
    while proc.poll() is None:
        try:
            for line in status.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]))
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    stderr = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0:
        raise ToolError(f"tools.grade {' '.join(argv)} failed: {stderr.strip()[-500:]}")
    return time.perf_counter() - start, peak


def curve(sizes: list[int]) -> str:
    """The class graded at each size (one machine, the grader's defaults): cost a submission and memory."""
    lines = ["| submissions | wall | seconds a submission | submissions a minute | the grader's peak memory |",
             "|---:|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory(prefix="class-curve-") as tmp:
        for size in sizes:
            klass = Path(tmp) / f"class{size}"
            write_cs336_class(klass, size)
            wall, peak = _grade_watched([str(klass), "--out", str(Path(tmp) / f"out{size}")])
            lines.append(f"| {size} | {wall:.0f} s | {wall / size:.2f} | {60 * size / wall:.2f} | {peak / 1024:.0f} MB |")
            shutil.rmtree(klass)
    return "\n".join(lines)


def _task_times(out: Path) -> list[tuple[datetime, datetime]]:
    """Each array task's start and end (``scontrol show job -o``: one line of key=value fields a task)."""
    times = []
    for job in json.loads((out / ".grade" / "slurm" / "job.json").read_text())["jobs"]:
        proc = subprocess.run(["scontrol", "show", "job", "-o", job["id"]], capture_output=True, text=True)
        if proc.returncode != 0:
            raise ToolError(f"scontrol show job {job['id']}: {proc.stderr.strip()} (raise MinJobAge in slurm.conf)")
        for line in proc.stdout.splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            start, end = (datetime.fromisoformat(fields[k]) for k in ("StartTime", "EndTime"))
            times.append((start, end))
    return times


def measure(size: int, tasks: list[int]) -> tuple[list[Run], list[str]]:
    if shutil.which("sbatch") is None:
        raise ToolError("no Slurm here (sbatch is not on PATH): start a one-node Slurm with .ci/slurm-single-node start")
    runs = []
    with tempfile.TemporaryDirectory(prefix="slurm-figures-") as tmp:
        klass = Path(tmp) / "class"
        names = write_cs336_class(klass, size)
        wall = _grade([str(klass), "--out", str(Path(tmp) / "one")])
        runs.append(Run("one machine (`--jobs` 2)", 0, wall, size, []))
        books = {(Path(tmp) / "one" / "gradebook.csv").read_text()}
        for n in tasks:
            out = Path(tmp) / f"slurm{n}"
            wall = _grade([str(klass), "--out", str(out), "--slurm", "--slurm-tasks", str(n)])
            times = _task_times(out)
            span = (max(e for _, e in times) - min(s for s, _ in times)).total_seconds()
            runs.append(Run(f"Slurm, {n} task{'s' if n > 1 else ''} of 1 core", n, wall, size,
                            [(e - s).total_seconds() for s, e in times], span))
            books.add((out / "gradebook.csv").read_text())
        if len(books) != 1:
            raise ToolError("the gradebooks differ between one machine and Slurm: run tests/test_grade_slurm.py")
    return runs, names


def table(runs: list[Run], cores: int) -> str:
    one = runs[0]
    lines = ["| how | wall | submissions a minute | each task's run time | outside the tasks |", "|---|---:|---:|---|---:|"]
    for r in runs:
        if r.tasks == 0:
            lines.append(f"| {r.label} | {r.wall:.0f} s | {r.per_minute:.2f} | | |")
            continue
        lines.append(f"| {r.label} | {r.wall:.0f} s | {r.per_minute:.2f} | "
                     f"{', '.join(f'{s:.0f}' for s in r.task_seconds)} s | {r.wall - r.span:.0f} s |")
    lines.append("")
    lines.append(f"On one machine a submission costs {one.wall * cores / one.size:.1f} core-seconds ({one.size} in "
                 f"{one.wall:.0f} s on {cores} cores).")
    return "\n".join(lines)
