"""A class graded on a Slurm cluster (``python -m tools.grade CLASS --out OUT --slurm``): one job array
whose task K grades shard K of N (``tools.grade CLASS --shard K/N --resume``, the usual sandboxes, into
``OUT/.grade/slurm/shards/K``), this process waiting over the shards' records, and the merge of
:func:`~transformer_spec.grader.batch.merge` into ``OUT``: the folder one machine writes.

Plain ``sbatch`` and ``squeue`` through :mod:`subprocess` (no library: a job array, a poll and
``--resume`` are all it takes, and a cluster's login node has the Slurm commands but rarely an extra
Python package; docs/class_grading.md, "On a Slurm cluster").

Failures as a cluster has them: a task requeued by Slurm (``--requeue``: a node lost, preemption) stays
in the queue and is waited for; a task that ends without finishing its shard (``scancel``, a time limit,
a crash) has its shard submitted again, where ``--resume`` grades only the students not yet graded (no
student lost or graded twice); a shard whose tasks end :attr:`SlurmOptions.retries` + 1 times in a row
without grading anyone becomes its students' ``grader-error`` rows, with the job ids and the log to read.

What the cluster adds never reaches a grade: each shard's records are signed under its own key and
verified by the merge, with the settings' fingerprint; ``--resume`` re-attaches to the jobs of ``OUT``
(their ids are in ``OUT/.grade/slurm/job.json``) and refuses other settings.
"""

from __future__ import annotations

import json
import math
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

from transformer_spec import layout
from transformer_spec.files import atomic_write
from transformer_spec.grader.batch import merge, nothing_to_grade
from transformer_spec.grader.output import Output
from transformer_spec.grader.record import Record
from transformer_spec.grader.settings import STATE_DIR, GradeError, Settings
from transformer_spec.grader.submissions import Entry, discover, ignores_case, shard_of, submission_hash
from transformer_spec.grader.suite import Suite
from transformer_spec.grader.text import file_name, one_line

SLURM_DIR = Path(STATE_DIR) / "slurm"  # under OUT: the job's state, its tasks' logs and shards
JOB_NAME = "transformer-spec-grade"
#: the states of a task still in Slurm's hands (it may yet run, or run again)
ACTIVE = frozenset({"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_FED",
                    "REQUEUE_HOLD", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD"})
#: the script every task runs; an instructor's template (``--slurm-template``) places the same two names
DEFAULT_TEMPLATE = "#!/bin/bash\n$OPTIONS\n\n$COMMAND\n"


@dataclass
class SlurmOptions:
    """What ``--slurm-*`` asks of the cluster."""

    tasks: int = 4  # the array's width: the class in this many shards
    partition: str | None = None
    time: str | None = None  # sbatch's --time per task; None: every submission of the largest shard at its wall limit
    mem: str = "4G"  # sbatch's --mem per task
    extra: list[str] = field(default_factory=list)  # more sbatch arguments, as given
    template: Path | None = None  # a script with $OPTIONS and $COMMAND
    poll: float = 3.0  # seconds between two looks at the queue and the records
    retries: int = 2  # a shard submitted again at most this many times in a row without progress


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise GradeError(f"--slurm: {argv[0]} is not on PATH: run on a machine of the cluster that submits jobs "
                         "(a login node), or start a one-node Slurm here with .ci/slurm-single-node start") from None


def task_command(submissions: Path, out: Path, tasks: int, grade_args: list[str]) -> str:
    """The shell line a task runs: the usual class grader on its shard (``$SLURM_ARRAY_TASK_ID``), resumed
    when the task is run again, as many submissions at once as the task has cores."""
    shard = out / SLURM_DIR / "shards"
    argv = [sys.executable, "-m", "tools.grade", str(submissions)]
    quoted = " ".join(shlex.quote(a) for a in argv)
    rest = " ".join(shlex.quote(a) for a in grade_args)
    return (f"cd {shlex.quote(str(layout.ROOT))} && exec {quoted} --out {shlex.quote(str(shard))}/$SLURM_ARRAY_TASK_ID "
            f"--shard $SLURM_ARRAY_TASK_ID/{tasks} --resume --no-progress --jobs ${{SLURM_CPUS_PER_TASK:-1}}"
            + (f" {rest}" if rest else ""))


def script(command: str, out: Path, options: SlurmOptions, minutes: int) -> str:
    """The batch script of the array (``#SBATCH`` lines, then ``command``), from ``options.template``."""
    lines = [f"--job-name={JOB_NAME}", f"--output={out / SLURM_DIR / 'logs'}/%A_%a.out", "--cpus-per-task=1",
             f"--mem={options.mem}", f"--time={options.time or minutes}", "--requeue"]
    if options.partition:
        lines.append(f"--partition={options.partition}")
    lines += options.extra
    text = options.template.read_text() if options.template else DEFAULT_TEMPLATE
    try:
        return Template(text).substitute(OPTIONS="\n".join(f"#SBATCH {shlex.quote(x)}" for x in lines),
                                         COMMAND=command)
    except (KeyError, ValueError) as exc:
        raise GradeError(f"--slurm-template {options.template}: it may name only $OPTIONS and $COMMAND "
                         f"(write $$ for a $), not {exc}") from None


def submit(script_path: Path, shards: list[int]) -> str:
    """``sbatch`` the array of ``shards``; the job's id."""
    proc = _run(["sbatch", "--parsable", f"--array={','.join(map(str, shards))}", str(script_path)])
    if proc.returncode != 0:
        raise GradeError(f"--slurm: sbatch refused the job: {one_line(proc.stderr.strip() or proc.stdout.strip())} "
                         "(see --slurm-partition, --slurm-time, --slurm-mem, --slurm-arg)")
    return proc.stdout.strip().split(";")[0]


def queued(job_ids: list[str]) -> dict[str, str]:
    """The tasks of ``job_ids`` still in the queue -> their state (``JOB_TASK`` -> ``RUNNING``...)."""
    if not job_ids:
        return {}
    proc = _run(["squeue", "-h", "-r", "-t", "all", "-j", ",".join(job_ids), "-o", "%i %T"])
    if proc.returncode != 0:
        if "Invalid job id" in proc.stderr:  # every job ended long ago: Slurm forgot them
            return {}
        raise GradeError(f"--slurm: squeue failed: {one_line(proc.stderr.strip())}")
    tasks = {}
    for line in proc.stdout.splitlines():
        task, _, state = line.strip().partition(" ")
        if state in ACTIVE:
            tasks[task] = state
    return tasks


class Job:
    """``OUT/.grade/slurm``: the class's shards, the jobs submitted for them, and each shard's records."""

    def __init__(self, submissions: Path, out: Path, settings: Settings, options: SlurmOptions):
        self.submissions, self.out, self.options = submissions, out, options
        self.dir = out / SLURM_DIR
        self.state_file = self.dir / "job.json"
        course = settings.profile_object()
        self.fingerprint = settings.fingerprint(Suite(course_profile=course.origin).sha256)
        self.possible = settings.rubric_object().total
        found = discover(submissions, course.adapter, ignores_case(out))
        if not found:
            raise nothing_to_grade(submissions)
        self.entries: dict[int, list[Entry]] = {}
        for e in found:
            self.entries.setdefault(shard_of(e.student, options.tasks), []).append(e)
        self.state = {"fingerprint": self.fingerprint, "tasks": options.tasks, "class": str(submissions), "jobs": []}

    def shard_dir(self, k: int) -> Path:
        return self.dir / "shards" / str(k)

    def load(self) -> None:
        old = json.loads(self.state_file.read_text())
        if old.get("fingerprint") != self.fingerprint or old.get("tasks") != self.options.tasks:
            raise GradeError(f"{self.out} was graded on Slurm with other settings (tests, rubric, limits, suite or "
                             "--slurm-tasks); resume with the same ones, or choose an empty folder")
        self.state = old

    def save(self) -> None:
        atomic_write(self.state_file, json.dumps(self.state, indent=1, sort_keys=True) + "\n")

    def graded(self, k: int) -> set[str]:
        """The students of shard ``k`` whose record verifies and is of their current submission."""
        part = Output(self.shard_dir(k))
        if not (part.out / STATE_DIR / "config.json").is_file():
            return set()
        part.load_records()
        return {e.student for e in self.entries[k]
                if e.student in part.records and part.records[e.student].submission_sha256 == submission_hash(e)}

    def done_count(self) -> int:
        """How many students have a record (cheap: no hash, for the progress bar)."""
        return sum((self.shard_dir(k) / "students" / e.student / "record.json").is_file()
                   for k, es in self.entries.items() for e in es)

    def minutes(self, settings: Settings) -> int:
        """A task's time when none is given: every submission of the largest shard at its wall limit, plus the setup."""
        largest = max(len(es) for es in self.entries.values())
        return math.ceil((largest * (settings.limits.wall_seconds + 30) + 300) / 60)

    def give_up(self, k: int, why: str) -> None:
        """Shard ``k``'s students without a record become ``grader-error`` rows saying ``why`` (signed in the shard)."""
        part = Output(self.shard_dir(k))
        config = part.out / STATE_DIR / "config.json"
        if not config.is_file():
            part.write(config, json.dumps({"fingerprint": self.fingerprint, "shard": [k, self.options.tasks]},
                                          indent=1, sort_keys=True) + "\n")
        have = self.graded(k)
        for e in self.entries[k]:
            if e.student in have:
                continue
            record = Record(e.student, "grader-error", 0.0, self.possible, {}, why,
                            file_name(str(e.target or e.copy_root or e.student)), submission_hash(e))
            part.write_derived(record)
            part.write(part.student_dir(e.student) / "record.json", part.signed(record))


def grade_on_slurm(submissions: Path, out: Path, settings: Settings, grade_args: list[str], options: SlurmOptions,
                   *, resume: bool = False, progress: bool = True) -> dict[str, Record]:
    """Grade the class through a Slurm job array into ``out``; returns the merged records.
    ``grade_args``: the settings as ``tools.grade`` arguments, passed to every task."""
    out, submissions = out.resolve(), submissions.resolve()
    if out == submissions or submissions in out.parents:
        raise GradeError("--out must not be inside the submissions folder")
    for command in ("sbatch", "squeue"):
        if shutil.which(command) is None:
            _run([command])  # the one-line error naming it
    job = Job(submissions, out, settings, options)
    if out.exists() and any(out.iterdir()):
        if not resume:
            raise GradeError(f"{out} is not empty: pass --resume to continue that grading, or choose an empty folder")
        if not job.state_file.is_file():
            raise GradeError(f"{out} holds no Slurm grading of this tool (no {job.state_file}); grade it again "
                             "without --slurm, or choose an empty folder")
        job.load()
    (job.dir / "logs").mkdir(parents=True, exist_ok=True)
    command = task_command(submissions, out, options.tasks, grade_args)
    script_path = job.dir / "task.sh"
    atomic_write(script_path, script(command, out, options, job.minutes(settings)))
    job.save()
    _follow(job, script_path, progress)
    return _merge(job)


def _follow(job: Job, script_path: Path, progress: bool) -> None:
    """Submit what is left, wait for it, and again, until every shard is graded or given up."""
    bar = _bar(sum(len(es) for es in job.entries.values()), progress)
    try:
        while True:
            ids = [j["id"] for j in job.state["jobs"]]
            tasks = queued(ids)
            if bar is not None:
                bar.n = job.done_count()
                states = sorted({s.lower() for s in tasks.values()})
                bar.set_postfix_str(", ".join(f"{sum(v.lower() == s for v in tasks.values())} {s}" for s in states),
                                    refresh=False)
                bar.refresh()
            if tasks:
                time.sleep(job.options.poll)
                continue
            if not _submit_left(job, script_path):
                return
    except KeyboardInterrupt:
        ids = ", ".join(j["id"] for j in job.state["jobs"]) or "none"
        print(f"\nstopped waiting; the Slurm job(s) {ids} keep running. Re-attach with the same command and --resume "
              f"(or cancel them: scancel {ids.replace(', ', ' ')})", file=sys.stderr)
        raise
    finally:
        if bar is not None:
            bar.close()


def _submit_left(job: Job, script_path: Path) -> bool:
    """With none of the job's tasks in the queue: submit the shards not yet graded (a shard whose last task
    graded no one counts a stall; after ``retries`` + 1 stalls it is given up). False: nothing is left."""
    now = {k: len(job.graded(k)) for k in job.entries}
    left = [k for k in sorted(job.entries) if now[k] < len(job.entries[k])]
    last, stalls = job.state.setdefault("last", {}), job.state.setdefault("stalls", {})
    resubmit = []
    for k in left:
        if str(k) in last:
            stalls[str(k)] = stalls.get(str(k), 0) + 1 if now[k] <= last[str(k)] else 0
        if stalls.get(str(k), 0) > job.options.retries:
            tried = [j["id"] for j in job.state["jobs"] if k in j["shards"]]
            job.give_up(k, f"the Slurm tasks grading shard {k}/{job.options.tasks} ended {stalls[str(k)]} times in a "
                           f"row without grading anyone (jobs {', '.join(tried)}; their logs are in {job.dir / 'logs'})")
            print(f"warning: shard {k}/{job.options.tasks} given up after {stalls[str(k)]} failed tasks: its students "
                  "are grader-error rows", file=sys.stderr)
        else:
            resubmit.append(k)
    if not resubmit:
        job.save()
        return False
    job_id = submit(script_path, resubmit)
    again = " again" if job.state["jobs"] else ""
    job.state["jobs"].append({"id": job_id, "shards": resubmit})
    job.state["last"] = {str(k): now[k] for k in resubmit}
    job.save()
    print(f"submitted{again} Slurm job {job_id}: {len(resubmit)} task(s), shard(s) "
          f"{', '.join(f'{k}/{job.options.tasks}' for k in resubmit)} (logs: {file_name(str(job.dir / 'logs'))})",
          file=sys.stderr, flush=True)
    return True


def _merge(job: Job) -> dict[str, Record]:
    """The shards merged into ``OUT`` (what an earlier merge wrote there is made again)."""
    for p in job.out.iterdir():
        if p.name == STATE_DIR:
            for q in p.iterdir():
                if q.name != SLURM_DIR.name:
                    shutil.rmtree(q) if q.is_dir() else q.unlink()
        else:
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    parts = [job.shard_dir(k) for k in sorted(job.entries)]
    return merge(parts, job.out, keep=SLURM_DIR)


def tiers(job_dir: Path) -> list[str]:
    """The sandbox lines the tasks' logs end with (each task says the tier its children ran in)."""
    lines = set()
    for log in sorted((job_dir / "logs").glob("*.out")):
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith(("sandbox:", "--no-sandbox:")):
                lines.add(line.strip())
    return sorted(lines)


def _bar(total: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="submission", desc="grading on Slurm", dynamic_ncols=True)


__all__ = ["SlurmOptions", "grade_on_slurm", "queued", "script", "submit", "task_command", "tiers"]
