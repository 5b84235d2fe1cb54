"""The child processes: started under limits with a fresh signed report channel, watched, killed."""

from __future__ import annotations

import os
import secrets
import selectors
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from transformer_spec.grader import isolation
from transformer_spec.grader.launcher import LAUNCHER, launcher_args
from transformer_spec.grader.sandbox import Jail, tree_rss, uid_rss
from transformer_spec.grader.settings import LOG_KEEP, GradeError, Limits
from transformer_spec.results import outcomes

#: how often the memory of a child's processes together is measured, in seconds
WATCH_SECONDS = 0.5

KINDS = frozenset({outcomes.REPORT, "recheck", "recheck-done", "recheck-import-error", "stubs"})
MAX_MESSAGES = 256


@dataclass
class ChildRun:
    messages: list[dict] = field(default_factory=list)
    forged: str | None = None
    returncode: int | None = None
    timed_out: bool = False
    output_limit: bool = False
    memory_limit: bool = False  # its processes together held more than the limit (by uid, or its process tree)
    output_bytes: int = 0
    head: bytes = b""
    tail: bytes = b""
    seconds: float = 0.0

    def add(self, messages) -> None:
        """Keep the latest message of each kind (and, for re-checks, of each name and mode), of the kinds the
        grader reads only: a run report is a whole snapshot of the run, so the parent holds one
        however often the child reports, and a child cannot grow the parent's memory."""
        for m in messages:
            kind = m.get("kind")
            if kind not in KINDS:
                continue
            same = (lambda old: old.get("kind") == kind and old.get("name") == m.get("name")
                    and old.get("mode") == m.get("mode"))
            kept = [old for old in self.messages if not same(old)]
            if len(kept) < MAX_MESSAGES:
                self.messages = [*kept, m]

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



def stop_new_children() -> None:
    """From now on ``run_child`` starts nothing (the batch is stopping)."""
    _STOPPING.set()


def kill_all() -> None:
    with _LIVE_LOCK:
        procs = list(_LIVE)
    for proc in procs:
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_child(cmd: list[str], *, cwd: Path, env: dict, limits: Limits, extra: dict, wall: float,
              jail: Jail | None = None) -> ChildRun:
    """Run ``cmd`` under the limits with a fresh report channel, in ``jail`` (None: the grader's
    own trusted runs, e.g. collecting the suite on the reference); collect its verified messages."""
    key = secrets.token_bytes(isolation.KEY_BYTES)
    rep_r, key_r, rep_w, channel = isolation.make_pipes(key, extra)
    env = dict(env, **{isolation.ENV_VAR: channel})
    mem = int(limits.memory_mb) * 2**20 if limits.memory_mb else 0
    fsize = 512 * 2**20
    tier = jail.sandbox.tier if jail is not None else "none"
    launcher = [sys.executable, "-I", "-c", LAUNCHER,
                *launcher_args(tier, jail.uid if jail is not None else None, mem, fsize, os.getpid()), *cmd]
    full = jail.wrap(launcher, cwd) if jail is not None else launcher
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
    # Each process has its own address-space limit; the child's processes together are watched here
    # (by its uid in the tiers that give it one, else as the process tree below it), so starting more
    # interpreters gains nothing.
    watch = jail is not None and mem > 0
    held = (lambda: uid_rss(jail.uid)) if jail is not None and jail.uid is not None else (lambda: tree_rss(proc.pid))
    next_watch = start + WATCH_SECONDS
    try:
        while sel.get_map():
            now = time.monotonic()
            if watch and exited_at is None and now >= next_watch:
                next_watch = now + WATCH_SECONDS
                if held() > mem:
                    run.memory_limit = True
                    _kill_group(proc)
                    jail.reap()
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
                    run.add(reader.feed(data))
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
        if jail is not None:
            jail.reap()  # whatever escaped the process group (a new session, a double fork)
    run.returncode = proc.returncode
    run.seconds = time.monotonic() - start
    return run


def child_env(work: Path, threads: int) -> dict:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work), "TMPDIR": str(work / "tmp"),
           "LANG": "C.UTF-8", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "MPLBACKEND": "Agg",
           "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "PYTHONHASHSEED": "0",
           "PYTHONDONTWRITEBYTECODE": "1", "USER": "student", "LOGNAME": "student"}
    return env
