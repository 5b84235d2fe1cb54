"""Grade an attack class as an instructor would, and watch what the class leaves behind.

:func:`grade` runs ``python -m tools.grade SUBMISSIONS --out OUT`` (which calls
``tools.grade.grade_class``) in a process of its own, started in ``root``: an attack that kills
or stops the grader must not take the test down, and the grader's command line names the class
and output folders as in a real run (what the attacks look for). While it runs, the grader's
temp root (``OUT/.grade/tmp-root-PID.txt``) and its peak memory (``VmHWM``) are recorded.

A process *of the class* is one whose command line, working folder or environment names the
test's folder or the grader's temp root (the children get ``HOME``/``TMPDIR`` inside it): nothing
else on the machine is ever looked at twice or signalled.

``python -m tests.adversarial.run DEST [STUDENT ...] [--grader-arg=--no-sandbox]``: build the attack class (only these
hostile students, with the honest ones and the baselines), grade it, print the table.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ORACLE = "spec_tests/test_torch_oracle.py"
# Looser than tests/test_grade_class.py's limits: on a shared, loaded machine an honest test may
# take seconds, and a timeout would hide what an attack did.
FAST = ["--tests", ORACLE, "--time-limit", "30", "--test-timeout", "10", "--wall", "90", "--memory-mb", "1500",
        "--max-output-mb", "5", "--no-progress"]
HOSTILE_FILES = "ts-hostile-"


@dataclass
class GraderRun:
    returncode: int | None
    timed_out: bool
    seconds: float
    tmp_roots: list[str]
    peak_mb: float
    alive_at_exit: list[tuple[int, str]] = field(default_factory=list)
    alive_later: list[tuple[int, str]] = field(default_factory=list)
    output: str = ""


def tree_hash(folder: Path) -> dict[str, str]:
    """Every file (and symlink) under ``folder`` -> a hash of its content (or its link): the class
    grader's own check of the class folder."""
    from transformer_spec.grader.batch import folder_hashes

    return folder_hashes(folder)


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(1 << 20)
    except OSError:
        return b""


def class_processes(markers: list[str]) -> list[tuple[int, str]]:
    """(pid, command line) of the processes of the class (see the module's docstring)."""
    marks = [m.encode() for m in markers if m]
    mine = _ancestors()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in mine:
            continue
        base = f"/proc/{name}"
        cmd = _read(f"{base}/cmdline")
        try:
            cwd = os.readlink(f"{base}/cwd").encode()
        except OSError:
            cwd = b""
        env = _read(f"{base}/environ")
        if any(m in cmd or cwd.startswith(m) or m in env for m in marks):
            found.append((int(name), cmd.replace(b"\0", b" ").decode(errors="replace")[:300]))
    return found


def _ancestors() -> set[int]:
    """This process and its ancestors (whose command lines may name the test's folder)."""
    pid, seen = os.getpid(), set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        stat = _read(f"/proc/{pid}/stat").decode(errors="replace")
        try:
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (IndexError, ValueError):
            break
    return seen


def kill_class(markers: list[str]) -> None:
    """SIGKILL every process of the class (after a SIGCONT, in case one was stopped)."""
    for _ in range(3):
        for pid, _cmd in class_processes(markers):
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
        time.sleep(0.2)


def _peak_mb(pid: int) -> float:
    for line in _read(f"/proc/{pid}/status").decode(errors="replace").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def grade(subs: Path, out: Path, root: Path, *, jobs: int = 2, timeout: float = 330.0,
          later: float = 6.0, extra: tuple[str, ...] = ()) -> GraderRun:
    """Grade ``subs`` into ``out`` (a grader process started in ``root``); ``later``: seconds to
    wait after the grader exits, for processes still running and files still changing;
    ``extra``: more options of ``tools.grade`` (e.g. ``--no-sandbox``)."""
    cmd = [sys.executable, "-m", "tools.grade", str(subs), "--out", str(out), "--jobs", str(jobs), *FAST, *extra]
    return _watch(cmd, root, lambda pid: [out / ".grade" / f"tmp-root-{pid}.txt"], timeout, later)


def grade_single(submission: Path, results: Path, root: Path, *, timeout: float = 300.0,
                 later: float = 6.0) -> GraderRun:
    """``python -m tools.grade single SUBMISSION --results-json RESULTS`` (Gradescope's path)."""
    cmd = [sys.executable, "-m", "tools.grade", "single", str(submission), "--results-json", str(results), *FAST]
    return _watch(cmd, root, lambda pid: list(Path(tempfile.gettempdir()).glob(
        f"transformer-spec-single-*/out/.grade/tmp-root-{pid}.txt")), timeout, later)


def _watch(cmd: list[str], root: Path, notes, timeout: float, later: float) -> GraderRun:
    """Run the grader ``cmd`` in ``root``; ``notes(pid)``: where it notes its temp root."""
    log = root / "grader-output.txt"
    start = time.monotonic()
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, cwd=root, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    roots: list[str] = []
    peak, timed_out = 0.0, False
    while proc.poll() is None:
        if time.monotonic() - start > timeout:
            timed_out = True
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except OSError:
                    pass
            proc.wait()
            break
        for note in notes(proc.pid) if not roots else ():
            text = note.read_text().strip() if note.is_file() else ""
            if text:
                roots.append(text)
        peak = max(peak, _peak_mb(proc.pid))
        time.sleep(0.2)
    seconds = time.monotonic() - start
    markers = [str(root), *roots]
    run = GraderRun(proc.returncode, timed_out, seconds, roots, peak, alive_at_exit=class_processes(markers))
    time.sleep(later)
    run.alive_later = class_processes(markers)
    run.output = log.read_text(errors="replace")[-4000:]
    return run


def records(out: Path) -> dict:
    """The records the output folder holds, by student (``tools.grade.Record``; fields the
    record class does not know, such as an integrity code, are left out)."""
    from dataclasses import fields

    from tools.grade import Record

    names = {f.name for f in fields(Record)}
    got = {}
    for p in sorted((out / "students").glob("*/record.json")):
        try:
            data = json.loads(p.read_text())
            got[data["student"]] = Record(**{k: v for k, v in data.items() if k in names})
        except (ValueError, TypeError, KeyError):
            continue
    return got


def hostile_files(tmp_roots: list[str]) -> list[Path]:
    """Files the attacks leave beside the grader's temp root (named after it)."""
    found = []
    for r in tmp_roots:
        found += Path(r).parent.glob(f"{HOSTILE_FILES}{Path(r).name}*")
    return found


def main(argv: list[str] | None = None) -> int:
    import argparse

    from .attack_corpus import build_attacks
    from .expect import problems

    parser = argparse.ArgumentParser(prog="python -m tests.adversarial.run")
    parser.add_argument("dest", type=Path)
    parser.add_argument("students", nargs="*")
    parser.add_argument("--timeout", type=float, default=330.0, help="seconds before the grader is killed")
    parser.add_argument("--grader-arg", action="append", default=[], help="an option passed on to tools.grade")
    parser.add_argument("--single", action="store_true",
                        help="then grade every student alone with tools.grade single and compare (exit 1 on a difference)")
    args = parser.parse_args(argv)
    dest = args.dest.resolve()
    expect = build_attacks(dest / "subs", set(args.students) or None)
    before = tree_hash(dest / "subs")
    run = None
    try:
        run = grade(dest / "subs", dest / "out", dest, extra=tuple(args.grader_arg), timeout=args.timeout)
        got = records(dest / "out")
    finally:
        kill_class([str(dest), *(run.tmp_roots if run is not None else [])])
    print(f"grader exit {run.returncode}, timed out {run.timed_out}, {run.seconds:.0f} s, peak {run.peak_mb:.0f} MB, "
          f"alive at exit {len(run.alive_at_exit)}, {len(run.alive_later)} later")
    for s, e in sorted(expect.items()):
        r = got.get(s)
        what = "MISSING" if r is None else f"{r.status:14s} {r.total:6.2f}/{r.possible:g} {r.components}"
        bad = problems(s, e, got, "base_buggy")
        print(f"{'OK ' if not bad else 'BAD'} {s:34s} {what}")
        for line in bad:
            print("      ", line[:400])
    after = tree_hash(dest / "subs")
    print("class folder changed:", sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k)))
    print("alive at exit:", run.alive_at_exit[:8])
    for r in run.tmp_roots:
        print("tmp root left:", r, os.path.exists(r))
    for p in hostile_files(run.tmp_roots):
        print("hostile file left:", p, p.stat().st_size)
        p.unlink()
    return compare_single(dest, got) if args.single else 0


def compare_single(dest: Path, got: dict) -> int:
    """Every student of the class graded alone (``tools.grade single``): the same total and status?"""
    differ = 0
    for s in sorted(got):
        sub = next((p for p in (dest / "subs").iterdir() if p.name in (s, f"{s}.py")), None)
        alone = dest / "single" / s
        alone.mkdir(parents=True, exist_ok=True)
        run = None
        try:
            run = grade_single(sub, alone / "results.json", alone)
        finally:
            kill_class([str(alone), *(run.tmp_roots if run is not None else [])])
        try:
            data = json.loads((alone / "results.json").read_text())
            mine = (round(data["score"], 2), data["extra_data"]["status"])
        except (OSError, ValueError, KeyError):
            mine = ("no results.json", run.returncode)
        theirs = (round(got[s].total, 2), got[s].status)
        differ += mine != theirs
        print(f"{'same' if mine == theirs else 'DIFF'} {s:34s} class {theirs}  single {mine}", flush=True)
    print(f"{differ} of {len(got)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
