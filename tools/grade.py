"""Grade a whole class: every submission in its own process, with limits, resume, shards, merge.

    python -m tools.grade SUBMISSIONS_DIR --out OUT_DIR [--jobs N] [--resume] [--shard K/N]
                          [--rubric FILE] [--coverage] [--tests PATH ...] [limits]
    python -m tools.grade merge OUT_DIR [OUT_DIR ...] --out MERGED_DIR

``SUBMISSIONS_DIR`` holds one entry per student: ``alice.py``, a package folder ``bob/``
(with ``__init__.py``), or a folder ``carol/`` holding one package or one ``.py`` file. The
outputs (``OUT_DIR``): ``gradebook.csv`` (one row per student: status, total, points per
component, detail), and per student ``students/<id>/results.json`` (Gradescope's format),
``feedback.md`` (what the student reads), ``log.txt`` (the start and end of the child's output)
and ``record.json`` (the grade as the tool decided it; written last, it marks the student done).

How a grade is decided (``docs/class_grading.md``): the submission is copied with a pristine copy
of the suite into a private temporary folder and graded by ``python -I -m pytest`` run from
there with the project's own configuration (a ``conftest.py``, ``pytest.ini``, ``pyproject.toml``
or plugin in the submission is never loaded; plugins are not auto-loaded). The child reports over
an authenticated inherited pipe (:mod:`transformer_spec.isolation`), never over its output. The
parent scores from its own list of the tests (collected once from the reference), re-checks every
claimed pass of a probed component on hidden inputs in a second child (:mod:`transformer_spec.probes`),
and gives a component whose claim the probes contradict 0 points and the status ``tampering``.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

from transformer_spec import isolation, probes
from transformer_spec.contract import COMPONENTS
from transformer_spec.files import atomic_write

REPO = Path(__file__).resolve().parent.parent
SUITE = ("conftest.py", "pyproject.toml", "spec_tests", "properties")
DEFAULT_TESTS = ("spec_tests", "properties")
STATUSES = ("ok", "no-submission", "import-error", "forbidden-api", "timeout", "memory-limit", "output-limit",
            "interrupted", "crashed", "tampering", "grader-error")
STATE_DIR = ".grade"
RECORD = "record.json"
MAX_TEST_OUTPUT = 4000
MAX_SUBMISSION_BYTES = 50 * 1024 * 1024
MAX_COVERAGE_BYTES = 20 * 1024 * 1024
LOG_KEEP = 32 * 1024

# Runs first in every child: limits, then exec. resource limits and the parent-death signal are
# set here (not in a preexec_fn, which is unsafe in the parent's threads).
LAUNCHER = """\
import ctypes, os, resource, signal, sys
mem, fsize, parent = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
if mem > 0:
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
if fsize > 0:
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
except Exception:
    pass
if os.getppid() != parent:
    os._exit(70)
os.execv(sys.argv[4], sys.argv[4:])
"""


class GradeError(Exception):
    """A usage error of the tool; the message says what to do."""


# --------------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------------
@dataclass
class Limits:
    time_limit: float = 420.0  # pytest: start no new test after this many seconds
    test_timeout: float = 60.0  # pytest-timeout, per test
    wall: float | None = None  # the whole child; default time_limit + test_timeout + 60
    memory_mb: int = 4096  # RLIMIT_AS of each child
    threads: int = 1
    max_output_mb: float = 20.0  # the child's stdout+stderr; more ends the run ("output-limit")
    probe_seconds: float = 120.0

    @property
    def wall_seconds(self) -> float:
        return self.wall if self.wall is not None else self.time_limit + self.test_timeout + 60.0


@dataclass
class Settings:
    tests: list[str]
    rubric: str | None  # the rubric's text (None: the default)
    limits: Limits
    coverage: bool = False
    probes: bool = True

    def fingerprint(self, suite_hash: str) -> dict:
        """What must be equal for two outputs to be resumed or merged together."""
        data = {"tests": self.tests, "rubric_sha256": _sha(self.rubric.encode()) if self.rubric else "default",
                "limits": asdict(self.limits), "coverage": self.coverage, "probes": self.probes,
                "suite_sha256": suite_hash}
        return data


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------------------------
# Atomic files
# --------------------------------------------------------------------------------------------
def remove_temp_files(out: Path) -> None:
    """Left-overs of an interrupted ``atomic_write`` (the real files are whole or absent)."""
    for tmp in out.rglob(".*.tmp"):
        try:
            tmp.unlink()
        except OSError:
            pass


# --------------------------------------------------------------------------------------------
# Submissions
# --------------------------------------------------------------------------------------------
@dataclass
class Entry:
    student: str
    target: Path | None  # the .py file or package folder to grade
    copy_root: Path | None  # what is copied into the sandbox (the student's folder, or the file)
    problem: str = ""


def _candidates(folder: Path) -> tuple[list[Path], list[Path]]:
    pkgs = sorted(p for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").is_file()
                  and not p.name.startswith((".", "__")))
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix == ".py"
                   and p.name not in ("conftest.py", "setup.py") and not p.name.startswith(("test_", ".")))
    return pkgs, files


def discover(submissions: Path) -> list[Entry]:
    """One entry per student, sorted by id."""
    if not submissions.is_dir():
        raise GradeError(f"{submissions} is not a folder of submissions")
    entries = []
    for p in sorted(submissions.iterdir()):
        if p.name.startswith((".", "__")):
            continue
        if p.is_file() and p.suffix == ".py":
            entries.append(Entry(p.stem, p, p))
        elif p.is_dir() and (p / "__init__.py").is_file():
            entries.append(Entry(p.name, p, p))
        elif p.is_dir():
            pkgs, files = _candidates(p)
            if len(pkgs) == 1:
                entries.append(Entry(p.name, pkgs[0], p))
            elif not pkgs and len(files) == 1:
                entries.append(Entry(p.name, files[0], p))
            else:
                what = (f"{len(pkgs)} packages" if pkgs else f"{len(files)} .py files")
                entries.append(Entry(p.name, None, None,
                                     f"the folder holds {what}; expected exactly one package folder or one .py file"))
    return entries


def shard_of(student: str, n: int) -> int:
    """The 1-based shard a student belongs to among ``n`` (a hash of the id: stable as the class grows)."""
    return int(hashlib.sha256(student.encode()).hexdigest(), 16) % n + 1


def _copy_submission(entry: Entry, dest: Path) -> Path:
    """Copy the submission into ``dest``; returns the path of the copied target."""
    src = entry.copy_root
    assert src is not None and entry.target is not None
    total = 0

    def count(path: Path) -> None:
        nonlocal total
        total += path.stat().st_size if path.is_file() and not path.is_symlink() else 0
        if total > MAX_SUBMISSION_BYTES:
            raise GradeError(f"the submission is larger than {MAX_SUBMISSION_BYTES // 2**20} MB")

    if src.is_file():
        count(src)
        shutil.copy2(src, dest / src.name)
        return dest / src.name
    for path in src.rglob("*"):
        count(path)
    root = dest / src.name
    shutil.copytree(src, root, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    return root / entry.target.relative_to(src) if entry.target != src else root


def submission_hash(entry: Entry) -> str:
    h = hashlib.sha256()
    src = entry.copy_root
    if src is None:
        return "none"
    paths = [src] if src.is_file() else sorted(p for p in src.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for p in paths:
        h.update(str(p.relative_to(src.parent)).encode() + b"\0")
        h.update(p.read_bytes() if not p.is_symlink() else os.readlink(p).encode())
        h.update(b"\0")
    return h.hexdigest()


# --------------------------------------------------------------------------------------------
# Children
# --------------------------------------------------------------------------------------------
@dataclass
class ChildRun:
    messages: list[dict] = field(default_factory=list)
    forged: str | None = None
    returncode: int | None = None
    timed_out: bool = False
    output_limit: bool = False
    output_bytes: int = 0
    head: bytes = b""
    tail: bytes = b""
    seconds: float = 0.0

    def log(self) -> str:
        text = self.head.decode(errors="replace")
        if self.output_bytes > len(self.head):
            skipped = self.output_bytes - len(self.head) - len(self.tail)
            if skipped > 0:
                text += f"\n... [{skipped} bytes not kept] ...\n"
            text += self.tail.decode(errors="replace")
        return text


_LIVE: set[subprocess.Popen] = set()
_LIVE_LOCK = threading.Lock()
_STOPPING = threading.Event()


def _kill_all() -> None:
    with _LIVE_LOCK:
        procs = list(_LIVE)
    for proc in procs:
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_child(cmd: list[str], *, cwd: Path, env: dict, limits: Limits, extra: dict, wall: float) -> ChildRun:
    """Run ``cmd`` under the limits with a fresh report channel; collect its verified messages."""
    key = secrets.token_bytes(isolation.KEY_BYTES)
    rep_r, key_r, rep_w, channel = isolation.make_pipes(key, extra)
    env = dict(env, **{isolation.ENV_VAR: channel})
    mem = int(limits.memory_mb) * 2**20 if limits.memory_mb else 0
    fsize = 512 * 2**20
    full = [sys.executable, "-I", "-c", LAUNCHER, str(mem), str(fsize), str(os.getpid()), *cmd]
    run = ChildRun()
    reader = isolation.Reader(key)
    start = time.monotonic()
    try:
        with _LIVE_LOCK:
            if _STOPPING.is_set():
                raise GradeError("the batch is stopping")
            proc = subprocess.Popen(full, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, pass_fds=(key_r, rep_w), start_new_session=True)
            _LIVE.add(proc)
    except BaseException:
        os.close(rep_r)
        raise
    finally:
        os.close(key_r)
        os.close(rep_w)
    max_output = int(limits.max_output_mb * 2**20)
    sel = selectors.DefaultSelector()
    out_fd = proc.stdout.fileno()
    sel.register(out_fd, selectors.EVENT_READ, "out")
    sel.register(rep_r, selectors.EVENT_READ, "report")
    deadline = start + wall
    exited_at = None
    try:
        while sel.get_map():
            now = time.monotonic()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
                _kill_group(proc)  # whatever the submission left running
            if exited_at is not None and now - exited_at > 3.0:
                break  # something else holds the pipes open: stop listening
            if exited_at is None and now > deadline:
                run.timed_out = True
                _kill_group(proc)
                proc.wait()
                continue
            for sk, _ in sel.select(timeout=0.2):
                try:
                    data = os.read(sk.fd, 1 << 16)
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(sk.fd)
                    if sk.data == "report":
                        reader.finish()
                    continue
                if sk.data == "report":
                    run.messages.extend(reader.feed(data))
                    if reader.forged:
                        run.forged = reader.forged
                        sel.unregister(sk.fd)
                else:
                    if len(run.head) < LOG_KEEP:
                        run.head += data[:LOG_KEEP - len(run.head)]
                    run.tail = (run.tail + data)[-LOG_KEEP:]
                    run.output_bytes += len(data)
                    if run.output_bytes > max_output and not run.output_limit:
                        run.output_limit = True
                        _kill_group(proc)
    finally:
        sel.close()
        _kill_group(proc)
        proc.wait()
        with _LIVE_LOCK:
            _LIVE.discard(proc)
        proc.stdout.close()
        os.close(rep_r)
    run.returncode = proc.returncode
    run.seconds = time.monotonic() - start
    return run


def child_env(work: Path, threads: int) -> dict:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work), "TMPDIR": str(work / "tmp"),
           "LANG": "C.UTF-8", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "MPLBACKEND": "Agg",
           "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "PYTHONHASHSEED": "0",
           "PYTHONDONTWRITEBYTECODE": "1"}
    return env


# --------------------------------------------------------------------------------------------
# The suite snapshot and the list of tests (the skeleton)
# --------------------------------------------------------------------------------------------
class Suite:
    """The suite's files, read once into memory at the start (a submission that edits the
    repository cannot change what later submissions are graded with)."""

    def __init__(self, root: Path = REPO):
        self.files: dict[str, bytes] = {}
        for name in SUITE:
            p = root / name
            paths = [p] if p.is_file() else sorted(q for q in p.rglob("*") if q.is_file() and "__pycache__" not in q.parts)
            for q in paths:
                self.files[str(q.relative_to(root))] = q.read_bytes()
        h = hashlib.sha256()
        for k in sorted(self.files):
            h.update(k.encode() + b"\0" + self.files[k] + b"\0")
        self.sha256 = h.hexdigest()

    def write(self, dest: Path) -> None:
        for rel, data in self.files.items():
            p = dest / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)


@dataclass
class Context:
    settings: Settings
    suite: Suite
    tmp_root: Path
    skeleton: list[dict] = field(default_factory=list)  # results.json "tests" of a run that ran nothing
    seed: int = 0
    expected: dict = field(default_factory=dict)  # probe name -> reference arrays


def _pytest_cmd(ctx: Context, sandbox: Path, impl: str, collect_only: bool = False) -> list[str]:
    s, lim = ctx.settings, ctx.settings.limits
    suite = sandbox / "suite"
    cmd = [sys.executable, "-I", "-m", "pytest", *(str(suite / t) for t in s.tests), "-c", str(suite / "pyproject.toml"),
           "--rootdir", str(suite), "--confcutdir", str(suite), "-p", "no:cacheprovider",
           "-p", "pytest_timeout", "-p", "_hypothesis_pytestplugin", "-p", "transformer_spec.isolation",
           "-s", "-q", "--tb=no", "--no-header", "-o", "console_output_style=classic",
           "--basetemp", str(sandbox / "work" / "pytest"), "--impl", impl, "--grading",
           "--time-limit", f"{lim.time_limit:g}", "--timeout", f"{lim.test_timeout:g}",
           "--torch-threads", str(lim.threads)]
    if s.rubric is not None:
        cmd += ["--rubric", str(sandbox / "rubric.toml")]
    if s.coverage and not collect_only:
        cmd += ["-p", "pytest_cov.plugin", "--cov-submission", str(sandbox / "work" / "htmlcov")]
    if collect_only:
        cmd.append("--collect-only")
    return cmd


def _new_sandbox(ctx: Context, name: str) -> Path:
    sandbox = Path(tempfile.mkdtemp(prefix=f"{_safe(name)}-", dir=ctx.tmp_root))
    ctx.suite.write(sandbox / "suite")
    if ctx.settings.rubric is not None:
        (sandbox / "rubric.toml").write_text(ctx.settings.rubric)
    (sandbox / "sub").mkdir()
    (sandbox / "work" / "tmp").mkdir(parents=True)
    return sandbox


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:40] or "x"


def collect_skeleton(ctx: Context) -> None:
    """The graded tests, their numbers and points, from a run on the reference that runs nothing."""
    sandbox = _new_sandbox(ctx, "skeleton")
    try:
        run = run_child(_pytest_cmd(ctx, sandbox, "reference", collect_only=True), cwd=sandbox / "work",
                        env=child_env(sandbox / "work", ctx.settings.limits.threads), limits=ctx.settings.limits,
                        extra={}, wall=600)
    finally:
        shutil.rmtree(sandbox, ignore_errors=True)
    finals = [m for m in run.messages if m.get("final")]
    if not finals or not finals[-1]["results"]["tests"]:
        raise GradeError("could not collect the suite's tests (a usage error in --tests or --rubric?):\n"
                         + run.log()[-3000:])
    skeleton = [{k: t[k] for k in ("name", "number", "max_score", "tags", "visibility")}
                for t in finals[-1]["results"]["tests"]]
    # The exact points (results.json rounds them), from the rubric as the plugin shares them.
    from transformer_spec import grading

    rubric = grading.parse_rubric(_toml(ctx.settings.rubric)) if ctx.settings.rubric else grading.load_rubric()
    points, _ = grading.assign_points(rubric, {t["name"].split("] ", 1)[1]: t["tags"][0] for t in skeleton})
    for t in skeleton:
        t["max_score"] = points[t["name"].split("] ", 1)[1]]
    ctx.skeleton = skeleton


# --------------------------------------------------------------------------------------------
# Grading one submission
# --------------------------------------------------------------------------------------------
@dataclass
class Record:
    student: str
    status: str
    total: float
    possible: float
    components: dict[str, float]
    detail: str
    submission: str
    submission_sha256: str
    tests: list[dict] = field(default_factory=list)
    tampered: dict[str, str] = field(default_factory=dict)
    diagnoses: dict[str, str] = field(default_factory=dict)  # component -> the diagnosis of its failures

    def row(self, comps: list[str]) -> list[str]:
        return [self.student, self.status, _num(self.total), _num(self.possible),
                *(_num(self.components.get(c, 0.0)) for c in comps), self.detail]


def _num(x: float) -> str:
    return f"{round(x, 2):g}"


def _first_line(text: str, n: int = 200) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line[:n]


def grade_entry(entry: Entry, ctx: Context) -> tuple[Record, ChildRun | None, Path | None]:
    """Grade one submission; returns its record, the pytest child's run and the coverage folder."""
    subhash = submission_hash(entry)
    if entry.target is None:
        return _empty_record(entry, ctx, "no-submission", entry.problem, subhash), None, None
    sandbox = _new_sandbox(ctx, entry.student)
    try:
        try:
            target = _copy_submission(entry, sandbox / "sub")
        except (GradeError, OSError) as exc:
            return _empty_record(entry, ctx, "no-submission", f"cannot copy the submission: {exc}", subhash), None, None
        lim = ctx.settings.limits
        work = sandbox / "work"
        run = run_child(_pytest_cmd(ctx, sandbox, str(target)), cwd=work, env=child_env(work, lim.threads),
                        limits=lim, extra={}, wall=lim.wall_seconds)
        record = decide(entry, ctx, run, subhash, target, sandbox)
        cov = None
        if ctx.settings.coverage and (work / "htmlcov").is_dir():
            cov = sandbox / "coverage"
            _copy_capped(work / "htmlcov", cov)
        return record, run, cov
    finally:
        if not ctx.settings.coverage:
            shutil.rmtree(sandbox, ignore_errors=True)


def _copy_capped(src: Path, dest: Path) -> None:
    total = 0
    for p in sorted(src.rglob("*")):
        if p.is_symlink() or not p.is_file():
            continue
        total += p.stat().st_size
        if total > MAX_COVERAGE_BYTES:
            break
        q = dest / p.relative_to(src)
        q.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, q)


def _empty_record(entry: Entry, ctx: Context, status: str, detail: str, subhash: str) -> Record:
    tests = [dict(t, score=0.0, status="failed", output=f"not graded: {detail}") for t in ctx.skeleton]
    return _finish(entry, ctx, status, detail, subhash, tests, {})


def _finish(entry: Entry, ctx: Context, status: str, detail: str, subhash: str, tests: list[dict],
            tampered: dict[str, str], diagnoses: dict[str, str] | None = None) -> Record:
    comps: dict[str, float] = {}
    for t in tests:
        comps[t["tags"][0]] = comps.get(t["tags"][0], 0.0) + t["score"]
    possible = sum(t["max_score"] for t in ctx.skeleton)
    total = sum(t["score"] for t in tests)
    where = str(entry.target or entry.copy_root or entry.student)
    return Record(entry.student, status, round(total, 2), round(possible, 2), {c: round(v, 2) for c, v in comps.items()},
                  detail, where, subhash, tests, tampered, dict(diagnoses or {}))


def decide(entry: Entry, ctx: Context, run: ChildRun, subhash: str, target: Path, sandbox: Path) -> Record:
    """The grade, from the verified report, the parent's list of tests and the probes."""
    if run.forged:
        return _empty_record(entry, ctx, "tampering", f"the grading child sent {run.forged}", subhash)
    reports = [m for m in run.messages if m.get("kind") == "pytest"]
    last = reports[-1] if reports else None
    final = bool(last and last.get("final"))
    claimed: dict[str, dict] = {}
    if last is not None:
        for t in last["results"].get("tests", []):
            if isinstance(t, dict) and isinstance(t.get("name"), str):
                claimed[t["name"]] = t
    names = {t["name"] for t in ctx.skeleton}
    missing = [n for n in names if n not in claimed]
    extra = [n for n in claimed if n not in names]
    if last is not None and (missing or extra):
        which = missing[:1] or extra[:1]
        return _empty_record(entry, ctx, "tampering",
                             f"the report does not match the suite: {len(missing)} test(s) missing, {len(extra)} "
                             f"unknown (e.g. {which[0]}); were test files changed?", subhash)
    # Why the run ended, for tests that did not run.
    if run.timed_out:
        ended = f"the run was stopped after the wall-clock limit of {ctx.settings.limits.wall_seconds:g} s"
    elif run.output_limit:
        ended = f"the run was stopped after printing more than {ctx.settings.limits.max_output_mb:g} MB"
    elif not final:
        ended = f"the grading process ended abruptly (exit code {run.returncode}) while the tests ran"
    else:
        ended = ""
    tests = []
    for t in ctx.skeleton:
        c = claimed.get(t["name"])
        passed = bool(c and c.get("status") == "passed" and _positive(c.get("score")))
        output = _clean(str(c.get("output", "")), sandbox)[:MAX_TEST_OUTPUT] if c else ""
        if not passed and ended and (not c or output.startswith("not run")):
            output = f"not run: {ended}"
        tests.append(dict(t, score=t["max_score"] if passed else 0.0, status="passed" if passed else "failed",
                          output="" if passed else output))
    # The probes: every claimed anchor is re-checked outside the child.
    tampered = run_probes(entry, ctx, target, sandbox, {t["name"].split("] ", 1)[-1] for t in tests
                                                        if t["status"] == "passed"})
    for t in tests:
        comp = t["tags"][0]
        if comp in tampered:
            t.update(score=0.0, status="failed",
                     output=f"0 points: the grader's hidden re-check of '{comp}' contradicts the passes reported "
                            f"from inside the submission's process ({tampered[comp]})")
    status, detail = _status(run, last, final, tampered)
    detail = _clean(detail, sandbox)
    return _finish(entry, ctx, status, detail, subhash, tests, tampered, _diagnoses(last, sandbox, tampered))


def _diagnoses(last: dict | None, sandbox: Path, tampered: dict[str, str]) -> dict[str, str]:
    """The child's diagnosis per component (``extra_data``), as text only; none where tampered."""
    extra = ((last or {}).get("results") or {}).get("extra_data")
    found = extra.get("diagnoses") if isinstance(extra, dict) else None
    if not isinstance(found, dict):
        return {}
    return {c: _clean(str(d), sandbox)[:MAX_TEST_OUTPUT] for c, d in found.items()
            if c in COMPONENTS and isinstance(d, str) and c not in tampered}


def _clean(text: str, sandbox: Path) -> str:
    """Messages name the submission's files relative to its own folder, not the sandbox."""
    return text.replace(str(sandbox / "sub") + os.sep, "").replace(str(sandbox), "<sandbox>")


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0


def _kinds(results: dict) -> list[tuple[str | None, str]]:
    """``(kind, output)`` of each reported test: the plugin's typed failure kind (``extra_data``)."""
    out = []
    for t in results.get("tests", []):
        if isinstance(t, dict):
            extra = t.get("extra_data")
            kind = extra.get("kind") if isinstance(extra, dict) else None
            out.append((kind if isinstance(kind, str) else None, str(t.get("output", ""))))
    return out


def _status(run: ChildRun, last: dict | None, final: bool, tampered: dict[str, str]) -> tuple[str, str]:
    import_error = (last or {}).get("import_error")
    results = (last or {}).get("results") or {}
    kinds = _kinds(results)
    run_data = results.get("extra_data") if isinstance(results.get("extra_data"), dict) else {}
    if tampered:
        comps = ", ".join(sorted(tampered))
        return "tampering", f"claimed passes contradicted by the hidden re-check in: {comps}"
    if import_error:
        text = _first_line(import_error, 300)
        if "MemoryError" in import_error or any(w in import_error for w in ("allocate memory", "not enough memory")):
            return "memory-limit", text
        if "forbidden API" in import_error:
            return "forbidden-api", text
        if "Timeout (>" in import_error:
            return "timeout", "importing the submission did not finish in time (an endless loop at import?)"
        return "import-error", text
    if run.timed_out:
        return "timeout", "stopped at the wall-clock limit (an endless loop at import or in C code?)"
    if run.output_limit:
        return "output-limit", f"printed more than the output limit ({run.output_bytes} bytes seen)"
    if (last or {}).get("memory_error"):
        return "memory-limit", "a test ran out of memory (the memory limit of each submission)"
    if last is None:
        return "crashed", f"the grading process ended before reporting anything (exit code {run.returncode})"
    if not final:
        return "crashed", f"the grading process ended abruptly (exit code {run.returncode}) while the tests ran"
    if run_data.get("interrupted"):
        return "interrupted", "the submission interrupted the run (KeyboardInterrupt?); tests not run score 0"
    timeouts = sum(1 for kind, _ in kinds if kind == "timeout")
    stopped = bool(run_data.get("stopped_for_time"))
    if timeouts or stopped:
        return "timeout", f"{timeouts} test(s) timed out" + ("; the run's time limit was reached" if stopped else "")
    forbidden_lines = [o for kind, o in kinds if kind == "forbidden"]
    if forbidden_lines:
        return "forbidden-api", _first_line(forbidden_lines[0])
    return "ok", ""


def run_probes(entry: Entry, ctx: Context, target: Path, sandbox: Path, passed_ids: set[str]) -> dict[str, str]:
    """Components whose claimed passes the probes contradict -> why."""
    if not ctx.settings.probes:
        return {}
    wanted = [p for p in probes.PROBES if any(a in passed_ids for a in p.anchors) and p.name in ctx.expected]
    if not wanted:
        return {}
    lim = ctx.settings.limits
    work = sandbox / "probe-work"
    (work / "tmp").mkdir(parents=True, exist_ok=True)
    run = run_child([sys.executable, "-I", "-m", "transformer_spec.probes", "--impl", str(target)],
                    cwd=work, env=child_env(work, lim.threads), limits=lim,
                    extra={"seed": ctx.seed, "probes": [p.name for p in wanted], "threads": lim.threads,
                           "forbidden": _forbidden_list(ctx), "per_probe_seconds": min(30.0, lim.probe_seconds)},
                    wall=lim.probe_seconds)
    got: dict[str, dict] = {}
    for m in run.messages:
        if m.get("kind") == "probe" and isinstance(m.get("probe"), str):
            got[m["probe"]] = m
    tampered: dict[str, str] = {}
    for p in wanted:
        if run.forged:
            why = f"the probe process sent {run.forged}"
        else:
            m = got.get(p.name)
            if m is None:
                why = "the submission's process ended before answering"
            elif "error" in m:
                why = str(m["error"])[:300]
            else:
                try:
                    why = probes.compare(probes.decode_arrays(m.get("arrays")), ctx.expected[p.name])
                except (ValueError, KeyError, TypeError) as exc:
                    why = f"unreadable answer ({exc})"
        if why and p.component not in tampered:
            tampered[p.component] = f"probe {p.name}: {why}"
    return tampered


def _forbidden_list(ctx: Context) -> list[str]:
    from transformer_spec import grading

    if ctx.settings.rubric is None:
        return list(grading.load_rubric().forbidden)
    return list(grading.parse_rubric(_toml(ctx.settings.rubric)).forbidden)


def _toml(text: str) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib.loads(text)


# --------------------------------------------------------------------------------------------
# What the student reads, and Gradescope's file
# --------------------------------------------------------------------------------------------
STATUS_TEXT = {
    "ok": "graded normally",
    "no-submission": "nothing gradable was found",
    "import-error": "the submission could not be imported, so every test scores 0",
    "forbidden-api": "the submission used an API the assignment forbids; the affected components score 0",
    "timeout": "some code did not finish in time; tests that did not finish score 0",
    "memory-limit": "the submission ran out of memory; tests that could not finish score 0",
    "output-limit": "the submission printed too much; the run was stopped and tests not run score 0",
    "interrupted": "the submission interrupted the test run; tests not run score 0",
    "crashed": "the submission ended the test process; tests not run score 0",
    "tampering": "results reported from inside the submission's process were contradicted by the grader's "
                 "own re-check; those components score 0",
}


def component_table(record: Record, skeleton: list[dict]) -> list[tuple[str, float, float, int, int]]:
    rows = []
    for comp in COMPONENTS:
        ts = [t for t in record.tests if t["tags"][0] == comp]
        if ts:
            rows.append((comp, sum(t["score"] for t in ts), sum(t["max_score"] for t in ts),
                         sum(1 for t in ts if t["status"] == "passed"), len(ts)))
    return rows


def results_json(record: Record, ctx_skeleton: list[dict], seconds: float = 0.0) -> dict:
    rows = component_table(record, ctx_skeleton)
    lines = [f"transformer-spec: {record.student} scored {_num(record.total)} / {_num(record.possible)}",
             f"status: {record.status} ({STATUS_TEXT.get(record.status, '')})"]
    if record.detail:
        lines.append(record.detail)
    lines += ["", f"{'component':<12} {'points':>17}   {'tests passed':>12}"]
    lines += [f"{c:<12} {f'{e:.2f} / {p:.2f}':>17}   {f'{n} / {m}':>12}" for c, e, p, n, m in rows]
    if record.diagnoses:
        lines += ["", *(record.diagnoses[c] for c in COMPONENTS if c in record.diagnoses)]
    hidden = any(t["visibility"] != "visible" for t in record.tests)
    if hidden:
        lines += ["", "Some tests are hidden until grades are published; the total is shown then."]
    tests = [{"name": t["name"], "number": t["number"], "score": round(t["score"], 4),
              "max_score": round(t["max_score"], 4), "status": t["status"], "output": t["output"],
              "output_format": "text", "tags": t["tags"], "visibility": t["visibility"]} for t in record.tests]
    return {"score": round(record.total, 4), "execution_time": round(seconds, 2), "output": "\n".join(lines) + "\n",
            "output_format": "text", "test_output_format": "text", "stdout_visibility": "hidden",
            "extra_data": {"diagnoses": dict(record.diagnoses)}, "tests": tests}


#: failing tests of a component shown with their whole message in feedback.md (the rest: one line each)
FULL_MESSAGES = 3
#: statuses whose every test fails for the one reason in ``detail``: no list of tests
_ONE_REASON = ("no-submission", "import-error")


def _one_line(text: str, n: int = 160) -> str:
    line = _first_line(text, n + 1)
    return line if len(line) <= n else line[:n - 3] + "..."


def feedback_md(record: Record) -> str:
    """What the student reads: the score, then per component its points, its diagnosis (once),
    and its failing tests (the first few with their whole message)."""
    rows = component_table(record, record.tests)
    out = [f"# Feedback for {record.student}", "",
           f"**Score: {_num(record.total)} / {_num(record.possible)}** (status: `{record.status}`: "
           f"{STATUS_TEXT.get(record.status, '')})", ""]
    if record.detail:
        out += [f"> {record.detail}", ""]
    out += ["| component | points | tests passed |", "|---|---:|---:|"]
    out += [f"| {c} | {e:.2f} / {p:.2f} | {n} / {m} |" for c, e, p, n, m in rows]
    hidden = sum(1 for t in record.tests if t["visibility"] != "visible")
    if record.status in _ONE_REASON:
        out += ["", "Every test scores 0 for the reason above; fix it and submit again."]
    else:
        for comp, earned, possible, passed, total in rows:
            failed = [t for t in record.tests if t["tags"][0] == comp and t["status"] != "passed"
                      and t["visibility"] == "visible"]
            if not failed:
                continue
            out += ["", f"## {comp}: {earned:.2f} / {possible:.2f} points ({passed} of {total} tests passed)", ""]
            if comp in record.diagnoses:
                out += [record.diagnoses[comp], ""]
            out += [f"{len(failed)} test(s) did not pass:", ""]
            for t in failed[:FULL_MESSAGES]:
                out += [f"### {t['name']}", "", "```text", (t["output"] or "failed").strip()[:MAX_TEST_OUTPUT], "```", ""]
            if failed[FULL_MESSAGES:]:
                out += ["The others (the first line of each message; the whole message is in results.json):", ""]
                out += [f"- `{t['name']}`: {_one_line(t['output'] or 'failed')}" for t in failed[FULL_MESSAGES:]]
    if hidden:
        out += ["", f"{hidden} hidden test(s) are shown after the grades are published."]
    out += ["", "Re-run a test yourself with the command in its message "
                "(`pytest --impl path/to/your_submission \"<test id>\"`)."]
    return "\n".join(out).rstrip() + "\n"


# --------------------------------------------------------------------------------------------
# Output folder: records, gradebook, integrity
# --------------------------------------------------------------------------------------------
def _stat(path: Path) -> tuple:
    try:
        st = path.stat()
    except OSError:
        return ()
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class Output:
    """``OUT_DIR``: writes atomically, remembers what it wrote, and puts back anything else."""

    def __init__(self, out: Path):
        self.out = out
        self.written: dict[Path, bytes] = {}
        self._stat: dict[Path, tuple] = {}
        self.records: dict[str, Record] = {}

    def write(self, path: Path, data: bytes | str) -> None:
        data = data.encode() if isinstance(data, str) else data
        atomic_write(path, data)
        self.written[path] = data
        self._stat[path] = _stat(path)

    def adopt_existing(self) -> None:
        """On --resume: what a previous run wrote is kept as it is."""
        for p in self.out.rglob("*"):
            if p.is_file():
                self.written[p] = p.read_bytes()
                self._stat[p] = _stat(p)

    def sweep(self, protect: set[Path] = frozenset()) -> list[str]:  # type: ignore[assignment]
        """Remove files this tool did not write and restore the ones that changed (a submission
        that found the output folder cannot leave forged files in it). Returns what was fixed."""
        fixed = []
        for p in sorted(self.out.rglob("*")):
            if p.is_dir() or any(p == q or q in p.parents for q in protect):
                continue
            if p not in self.written:
                if p.name.endswith(".tmp"):
                    continue  # an atomic write in progress in another thread
                p.unlink(missing_ok=True)
                fixed.append(f"removed {p}")
        for p, data in self.written.items():
            if _stat(p) != self._stat.get(p):
                atomic_write(p, data)
                self._stat[p] = _stat(p)
                fixed.append(f"restored {p}")
        return fixed

    def student_dir(self, student: str) -> Path:
        return self.out / "students" / student

    def save(self, record: Record, run: ChildRun | None, cov: Path | None, skeleton: list[dict]) -> None:
        d = self.student_dir(record.student)
        seconds = run.seconds if run is not None else 0.0
        self.write(d / "results.json", json.dumps(results_json(record, skeleton, seconds), indent=2) + "\n")
        self.write(d / "feedback.md", feedback_md(record))
        self.write(d / "log.txt", run.log() if run is not None else "")
        if cov is not None and cov.is_dir():
            for p in sorted(cov.rglob("*")):
                if p.is_file():
                    self.write(d / "coverage" / p.relative_to(cov), p.read_bytes())
        self.write(d / RECORD, json.dumps(asdict(record), indent=1, sort_keys=True) + "\n")
        self.records[record.student] = record

    def load_records(self) -> None:
        for p in sorted((self.out / "students").glob(f"*/{RECORD}")):
            try:
                data = json.loads(p.read_text())
                self.records[data["student"]] = Record(**data)
            except (ValueError, TypeError, KeyError):
                continue  # unreadable: graded again

    def gradebook(self, skeleton_components: list[str]) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["student", "status", "total", "possible", *skeleton_components, "detail"])
        for student in sorted(self.records):
            w.writerow(self.records[student].row(skeleton_components))
        return buf.getvalue()


def _components(skeleton: list[dict]) -> list[str]:
    present = {t["tags"][0] for t in skeleton}
    return [c for c in COMPONENTS if c in present]


# --------------------------------------------------------------------------------------------
# The batch
# --------------------------------------------------------------------------------------------
def grade_class(submissions: Path, out: Path, settings: Settings, *, jobs: int | None = None,
                resume: bool = False, shard: tuple[int, int] = (1, 1), progress: bool = True) -> dict[str, Record]:
    """Grade every submission of ``submissions`` (this shard's part) into ``out``; returns the records."""
    out = out.resolve()
    submissions = submissions.resolve()
    if out == submissions or submissions in out.parents:
        raise GradeError("--out must not be inside the submissions folder")
    entries = [e for e in discover(submissions) if shard[1] == 1 or shard_of(e.student, shard[1]) == shard[0]]
    suite = Suite()
    config = {"fingerprint": settings.fingerprint(suite.sha256), "shard": list(shard)}
    state = out / STATE_DIR
    output = Output(out)
    if out.exists() and any(out.iterdir()):
        old = state / "config.json"
        if not resume:
            raise GradeError(f"{out} is not empty: pass --resume to continue that grading, or choose an empty folder")
        if not old.is_file():
            raise GradeError(f"{out} holds no grading of this tool (no {old}); choose an empty folder")
        if json.loads(old.read_text()) != config:
            raise GradeError(f"{out} was graded with other settings (tests, rubric, limits, suite or shard); "
                             "resume with the same ones, or choose an empty folder")
        remove_temp_files(out)
        output.adopt_existing()
        output.load_records()
        _remove_old_tmp_roots(state)
    out.mkdir(parents=True, exist_ok=True)
    output.write(state / "config.json", json.dumps(config, indent=1, sort_keys=True) + "\n")
    tmp_root = Path(tempfile.mkdtemp(prefix="transformer-spec-grade-"))
    output.write(state / f"tmp-root-{os.getpid()}.txt", str(tmp_root))
    try:
        ctx = Context(settings, suite, tmp_root, seed=secrets.randbelow(2**31 - 1000))
        collect_skeleton(ctx)
        if settings.probes:
            ctx.expected = probes.expected_outputs(ctx.seed)
        comps = _components(ctx.skeleton)
        todo = []
        for e in entries:
            rec = output.records.get(e.student)
            if rec is not None and rec.submission_sha256 == submission_hash(e):
                continue
            todo.append(e)
        # Students no longer in the folder (or in another shard) are not in this gradebook.
        keep = {e.student for e in entries}
        output.records = {s: r for s, r in output.records.items() if s in keep}
        output.write(out / "gradebook.csv", output.gradebook(comps))
        jobs = jobs or os.cpu_count() or 1
        bar = _progress(len(entries), len(entries) - len(todo), progress)
        pool = ThreadPoolExecutor(max_workers=jobs)
        try:
            pending = {pool.submit(_grade_safely, e, ctx) for e in todo}
            while pending:
                done, pending = wait(pending, timeout=2.0, return_when=FIRST_COMPLETED)
                output.sweep(protect={tmp_root})  # also while children run: nothing forged stays
                for fut in done:
                    _saved(fut, output, out, comps, bar)

        except BaseException:
            # Ctrl-C (or any error): nothing more is started, the running children are ended,
            # and nothing half-written is left (every file is replaced atomically).
            _STOPPING.set()
            pool.shutdown(wait=False, cancel_futures=True)
            _kill_all()
            pool.shutdown(wait=True)
            raise
        pool.shutdown(wait=True)
        if bar is not None:
            bar.close()
        output.sweep(protect={tmp_root})
        return output.records
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
        (state / f"tmp-root-{os.getpid()}.txt").unlink(missing_ok=True)


def _saved(fut, output: Output, out: Path, comps: list[str], bar) -> None:
    record, run, cov = fut.result()
    output.save(record, run, cov, record.tests)
    if cov is not None:
        shutil.rmtree(cov.parent, ignore_errors=True)
    output.write(out / "gradebook.csv", output.gradebook(comps))
    if bar is not None:
        bar.set_postfix_str(f"{record.student}: {record.status} {_num(record.total)}", refresh=False)
        bar.update(1)


def _remove_old_tmp_roots(state: Path) -> None:
    """Sandboxes of a run that was killed (their path was noted in OUT/.grade)."""
    for note in state.glob("tmp-root-*.txt"):
        root = Path(note.read_text().strip())
        if root.name.startswith("transformer-spec-grade-") and root.parent == Path(tempfile.gettempdir()):
            shutil.rmtree(root, ignore_errors=True)
        note.unlink(missing_ok=True)


def _grade_safely(entry: Entry, ctx: Context):
    try:
        return grade_entry(entry, ctx)
    except Exception as exc:  # noqa: BLE001 - a bug of the tool must not stop the batch
        rec = _empty_record(entry, ctx, "grader-error", f"{type(exc).__name__}: {exc}", "none")
        return rec, None, None


def _progress(total: int, done: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=done, unit="submission", desc="grading", dynamic_ncols=True)


def merge(outs: list[Path], dest: Path) -> dict[str, Record]:
    """Combine the outputs of shards (same settings) into ``dest``."""
    configs, records = [], {}
    sources: dict[str, Path] = {}
    for o in outs:
        cfg = o / STATE_DIR / "config.json"
        if not cfg.is_file():
            raise GradeError(f"{o} is not an output of tools.grade (no {cfg})")
        configs.append(json.loads(cfg.read_text()))
        part = Output(o)
        part.load_records()
        for s, r in part.records.items():
            if s in records:
                raise GradeError(f"student {s!r} is in both {sources[s]} and {o}: merge the outputs of distinct shards")
            records[s], sources[s] = r, o
    prints = {json.dumps(c["fingerprint"], sort_keys=True) for c in configs}
    if len(prints) != 1:
        raise GradeError("the outputs were graded with different settings (tests, rubric, limits or suite)")
    dest = dest.resolve()
    if dest.exists() and any(dest.iterdir()):
        raise GradeError(f"{dest} is not empty")
    output = Output(dest)
    for s, src in sources.items():
        sd = src / "students" / s
        for p in sorted(sd.rglob("*")):
            if p.is_file():
                output.write(dest / "students" / s / p.relative_to(sd), p.read_bytes())
    output.records = records
    output.write(dest / STATE_DIR / "config.json",
                 json.dumps({"fingerprint": configs[0]["fingerprint"], "merged": [str(o) for o in outs]},
                            indent=1, sort_keys=True) + "\n")
    comps = sorted({c for r in records.values() for t in r.tests for c in t["tags"]}, key=COMPONENTS.index)
    output.write(dest / "gradebook.csv", output.gradebook(comps))
    return records


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------
def _shard(text: str) -> tuple[int, int]:
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard takes K/N (e.g. 2/8), got {text!r}") from None
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"--shard K/N needs 1 <= K <= N, got {text!r}")
    return k, n


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tools.grade",
        description="Grade a folder of submissions (one per student), each in its own process; "
                    "`python -m tools.grade merge OUT_DIR... --out DIR` combines shards.")
    p.add_argument("submissions", type=Path, help="folder with one .py file, package folder or folder per student")
    p.add_argument("--out", type=Path, required=True, help="output folder (gradebook.csv, students/<id>/...)")
    p.add_argument("--jobs", type=int, default=None, help="submissions graded at once (default: the number of cores)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted grading in --out; finished "
                                                         "students are not graded again")
    p.add_argument("--shard", type=_shard, default=(1, 1), metavar="K/N",
                   help="grade only the K-th of N deterministic slices of the class (1 <= K <= N)")
    p.add_argument("--rubric", type=Path, default=None, help="rubric TOML (default transformer_spec/rubric.toml)")
    p.add_argument("--coverage", action="store_true", help="HTML coverage of each submission in students/<id>/coverage/")
    p.add_argument("--tests", nargs="+", default=list(DEFAULT_TESTS), metavar="PATH",
                   help="test files or folders of the suite to grade with (default: spec_tests properties)")
    p.add_argument("--time-limit", type=float, default=420.0, help="per submission: start no new test after "
                                                                   "this many seconds (default 420)")
    p.add_argument("--test-timeout", type=float, default=60.0, help="per test, seconds (default 60)")
    p.add_argument("--wall", type=float, default=None, help="per submission, seconds, then the process is killed "
                                                           "(default time-limit + test-timeout + 60)")
    p.add_argument("--memory-mb", type=int, default=4096, help="address-space limit per process (default 4096; 0: none)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per submission (default 1)")
    p.add_argument("--max-output-mb", type=float, default=20.0, help="output a submission may print (default 20)")
    p.add_argument("--no-probes", action="store_true", help="trust the child's report (no hidden re-check)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def build_merge_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tools.grade merge",
                                description="Combine the outputs of several shards into one gradebook.")
    p.add_argument("outs", type=Path, nargs="+", help="output folders of `python -m tools.grade ... --shard K/N`")
    p.add_argument("--out", type=Path, required=True, help="the merged output folder (new or empty)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["merge"]:
            args = build_merge_parser().parse_args(argv[1:])
            records = merge(args.outs, args.out)
            print(f"merged {len(records)} students into {args.out / 'gradebook.csv'}")
            return 0
        args = build_parser().parse_args(argv)
        rubric = None
        if args.rubric is not None:
            from transformer_spec import grading

            try:
                grading.load_rubric(args.rubric)
            except grading.RubricError as exc:
                raise GradeError(str(exc)) from None
            rubric = args.rubric.read_text()
        for t in args.tests:
            if not (REPO / t).exists() or not any(t == s or t.startswith(s + "/") for s in SUITE):
                raise GradeError(f"--tests {t}: not a file or folder of the suite (paths relative to {REPO}, "
                                 "under spec_tests/ or properties/)")
        limits = Limits(args.time_limit, args.test_timeout, args.wall, args.memory_mb, args.threads, args.max_output_mb)
        settings = Settings(list(args.tests), rubric, limits, args.coverage, not args.no_probes)
        start = time.monotonic()
        records = grade_class(args.submissions, args.out, settings, jobs=args.jobs, resume=args.resume,
                              shard=args.shard, progress=not args.no_progress)
    except GradeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    counts: dict[str, int] = {}
    for r in records.values():
        counts[r.status] = counts.get(r.status, 0) + 1
    minutes = (time.monotonic() - start) / 60
    print(f"graded {len(records)} submissions in {minutes:.1f} min: "
          + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    print(f"gradebook: {args.out / 'gradebook.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
