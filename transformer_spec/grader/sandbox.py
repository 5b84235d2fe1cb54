"""The sandbox of a grading child: the strongest tier this host allows, chosen once.

A child that runs student code (the pytest run, the hidden re-checks) starts inside one of these
tiers, strongest first:

* ``bwrap`` (the grader runs as root, bubblewrap works): new PID, network, IPC, UTS and mount
  namespaces; the child sees a read-only view of the system, of Python and its packages and of its
  own copy of the suite and the submission, and one writable place, a size-capped tmpfs (its work
  folder, home and temp folder). It does not see other sandboxes, the class folder, the output
  folder, ``reference/`` or ``tools/``. Inside, the launcher drops to a uid of its own (one per
  running child, from a pool locked across processes), caps the processes of that uid, sets
  no-new-privileges and enters a user namespace of its own. Everything in the PID namespace dies
  with the child (``--die-with-parent``; its PID 1 is bubblewrap's).
* ``bwrap-user`` (not root, bubblewrap works): the same view and namespaces (user included), as
  the grader's own user; no separate uid, so no process-count limit of its own.
* ``uid`` (root, no namespaces: some containers forbid them): the child runs as a uid of its own
  under the same limits; file permissions keep it out of other children's folders and read-only
  everywhere else. It can still see the host's processes and read what the host leaves
  world-readable (the grader warns when the class folder is).
* ``none``: only with ``--no-sandbox``; the submission runs as the grader's user and can reach
  everything that user can.

``describe()`` is the line the reports print. Tests: ``tests/test_sandbox.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import os
import shutil
import site
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from transformer_spec import layout
from transformer_spec.grader.settings import GradeError
from transformer_spec.grader.launcher import LAUNCHER, launcher_args

TIERS = ("bwrap", "bwrap-user", "uid", "none")
UID_BASE = int(os.environ.get("TRANSFORMER_SPEC_UID_BASE", "61000"))
UID_COUNT = 256
LOCK_DIR = Path("/run/transformer-spec-uids")
WORK_BYTES = 512 * 2**20  # the child's writable tmpfs
INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap), or pass --no-sandbox"
WHAT_NONE_LOSES = ("--no-sandbox: the submission runs as you, with your files, network and processes "
                   "in reach; use it only for code you trust")


@dataclass(frozen=True)
class View:
    """What one child sees: read-only paths, its writable tmpfs and writable binds."""

    readonly: tuple[Path, ...]
    work: Path  # a size-capped tmpfs in the bwrap tiers, a folder of the child's uid otherwise
    writable: tuple[Path, ...] = ()  # bound read-write (the coverage folder)


class Slot:
    """A uid of the pool, held (a lock file under ``/run``) while a child of this process uses it."""

    def __init__(self, uid: int | None, lock=None):
        self.uid = uid
        self._lock = lock

    def release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None


@dataclass(frozen=True)
class Jail:
    """One student's children: the tier, the student's uid and what the next child sees."""

    sandbox: Sandbox
    uid: int | None
    view: View | None = None

    def seeing(self, view: View) -> Jail:
        """This jail for a child that sees ``view`` (its permissions set now)."""
        self.sandbox.prepare(view, self.uid)
        return dataclasses.replace(self, view=view)

    def wrap(self, launcher: list[str], cwd: Path) -> list[str]:
        assert self.view is not None, "Jail.seeing(view) first"
        return self.sandbox.wrap(launcher, self.view, cwd)

    def reap(self) -> None:
        if self.uid is not None:
            reap(self.uid)


class Sandbox:
    """The chosen tier and how a child command is wrapped in it."""

    def __init__(self, tier: str, why: str = ""):
        if tier not in TIERS:
            raise GradeError(f"--sandbox {tier!r}: choose one of {', '.join(TIERS)}")
        self.tier = tier
        self.why = why  # why stronger tiers were not used
        self._lock = threading.Lock()

    def describe(self) -> str:
        text = {"bwrap": "bubblewrap namespaces and a uid of its own per child",
                "bwrap-user": "bubblewrap namespaces (as the grader's user)",
                "uid": "a uid of its own per child (no namespaces on this host)",
                "none": "none (--no-sandbox)"}[self.tier]
        return f"sandbox: {text}" + (f"; {self.why}" if self.why else "")

    # ---- uids ---------------------------------------------------------------------------------
    def acquire(self) -> Slot:
        """A free uid of the pool for one child (None in the tiers that keep the grader's uid)."""
        if self.tier not in ("bwrap", "uid"):
            return Slot(None)
        LOCK_DIR.mkdir(mode=0o700, exist_ok=True)
        with self._lock:
            for uid in range(UID_BASE, UID_BASE + UID_COUNT):
                f = open(LOCK_DIR / f"{uid}.lock", "w")
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    f.close()
                    continue
                reap(uid)  # whatever an earlier child of this uid left running
                return Slot(uid, f)
        raise GradeError(f"all {UID_COUNT} sandbox uids from {UID_BASE} are in use")

    @contextlib.contextmanager
    def jail(self):
        """A :class:`Jail` (a uid of the pool held) for one student's children."""
        slot = self.acquire()  # reaps what an earlier holder of the uid left
        try:
            yield Jail(self, slot.uid)  # run_child reaps after each of its children
        finally:
            slot.release()

    # ---- files --------------------------------------------------------------------------------
    def prepare(self, view: View, uid: int | None) -> None:
        """Permissions: the child reads its view and writes only its work folder (and ``writable``)."""
        for root in view.readonly:
            _readable(root)
        for p in (view.work, *view.writable):
            p.mkdir(parents=True, exist_ok=True)
            if uid is not None:
                for q in (p, *p.rglob("*")):
                    os.chown(q, uid, uid, follow_symlinks=False)
        if self.tier == "uid":
            # The sandbox folder itself: traverse only (its entries cannot be renamed or listed).
            parents = {p.parent for p in (*view.readonly, view.work, *view.writable)}
            for p in parents:
                os.chmod(p, 0o711)

    # ---- the command --------------------------------------------------------------------------
    def wrap(self, launcher: list[str], view: View, cwd: Path) -> list[str]:
        """The command that starts ``launcher`` (python -I -c LAUNCHER ...) in this tier."""
        if self.tier not in ("bwrap", "bwrap-user"):
            return launcher
        return [*bwrap_args(view, cwd, user_namespace=self.tier == "bwrap-user"), *launcher]


def _readable(root: Path) -> None:
    """Files other uids can read (a copy made with the student's own modes may be 0600)."""
    if not root.exists():
        return
    for p in (root, *(root.rglob("*") if root.is_dir() else ())):
        if p.is_symlink():
            continue
        os.chmod(p, 0o755 if p.is_dir() else 0o644)


@functools.cache
def system_paths() -> tuple[Path, ...]:
    """What every child needs to read: the system, Python, its packages and this package."""
    import transformer_spec

    paths = [Path(p) for p in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")]
    paths += [Path(sys.base_prefix), Path(sys.prefix), *map(Path, site.getsitepackages())]
    paths.append(Path(transformer_spec.__file__).resolve().parent)  # an editable install's source
    out: list[Path] = []
    for p in paths:
        if p.exists() and not any(p == q or q in p.parents for q in out):
            out = [q for q in out if p not in q.parents] + [p]
    return tuple(out)


@functools.cache
def hidden_paths() -> tuple[Path, ...]:
    """Folders inside the bound paths that no child may see (``reference`` and ``tools`` of a
    non-editable install: ``transformer_spec/reference`` and ``transformer_spec/tools`` of the wheel)."""
    import importlib.util

    out = []
    for name in (layout.REFERENCE_MODULE, layout.TOOLS_MODULE):
        spec = importlib.util.find_spec(name)
        for loc in (spec.submodule_search_locations or []) if spec else []:
            out.append(Path(loc).resolve())
    return tuple(out)


def bwrap_args(view: View, cwd: Path, user_namespace: bool) -> list[str]:
    args = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session"]
    if user_namespace:
        args.append("--unshare-user")
    made: set[Path] = {Path("/")}

    def parents(dest: Path) -> None:
        # bubblewrap makes missing parents mode 0700: make them 0755 first, so the child's uid passes
        for anc in reversed(dest.parents):
            if anc not in made:
                made.add(anc)
                args.extend(["--perms", "0755", "--dir", str(anc)])
        made.add(dest)

    # /tmp first: Python or this package may live under it (a venv in /tmp), bound on top
    args.extend(["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"])
    made |= {Path("/proc"), Path("/dev"), Path("/tmp")}
    for p in system_paths():
        parents(p)
        args.extend(["--ro-bind", str(p), str(p)])
    for p in hidden_paths():
        if any(q in p.parents for q in system_paths()):
            args.extend(["--tmpfs", str(p)])
    for p in view.readonly:
        parents(p)
        args.extend(["--ro-bind", str(p), str(p)])
    parents(view.work)
    args.extend(["--perms", "0777", "--size", str(WORK_BYTES), "--tmpfs", str(view.work),
                 "--perms", "0777", "--dir", str(view.work / "tmp")])
    for p in view.writable:
        parents(p)
        args.extend(["--bind", str(p), str(p)])
    args.extend(["--chdir", str(cwd)])
    return args


def uid_rss(uid: int) -> int:
    """The resident memory, in bytes, of every process of ``uid`` together (``/proc``): what the
    address-space limit of each process cannot bound when a submission starts more of them."""
    total = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            lines = status.read_text().splitlines()
        except OSError:
            continue  # gone meanwhile
        fields = dict(line.split(":", 1) for line in lines if ":" in line)
        if fields.get("Uid", "").split()[:1] == [str(uid)] and "VmRSS" in fields:
            total += int(fields["VmRSS"].split()[0]) * 1024
    return total


def tree_rss(pid: int) -> int:
    """The resident memory, in bytes, of ``pid`` and every process below it together (``/proc``):
    the watch of the tiers that keep the grader's uid (``bwrap-user``), where the uid's total would
    count the grader itself. In a PID namespace an orphan is re-parented to the namespace's first
    process, which is below ``pid``, so a daemon the submission starts is still counted."""
    parent_of: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent_of[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    children: dict[int, list[int]] = {}
    for child, parent in parent_of.items():
        children.setdefault(parent, []).append(child)
    total, todo, page = 0, [pid], os.sysconf("SC_PAGE_SIZE")
    while todo:
        p = todo.pop()
        todo.extend(children.get(p, ()))
        try:
            total += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
    return total


def reap(uid: int) -> None:
    """SIGKILL every process of ``uid`` (run as that uid, so it reaches nothing else)."""
    if os.geteuid() != 0:
        return
    subprocess.run([sys.executable, "-I", "-c",
                    "import os, signal, sys\nu = int(sys.argv[1])\nos.setgroups([]); os.setgid(u); os.setuid(u)\n"
                    "try:\n    os.kill(-1, signal.SIGKILL)\nexcept ProcessLookupError:\n    pass\n", str(uid)],
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)


# --------------------------------------------------------------------------------------------
# Choosing the tier
# --------------------------------------------------------------------------------------------
_CHOSEN: dict[str, Sandbox] = {}


def choose(requested: str = "auto") -> Sandbox:
    """The sandbox for ``--sandbox REQUESTED`` (``auto``: the strongest that works here); raises
    GradeError with one line when the requested tier (or, for auto, every tier) does not work."""
    if requested == "none":
        return Sandbox("none")
    if requested in _CHOSEN:
        return _CHOSEN[requested]
    wanted = [t for t in TIERS[:-1] if requested in ("auto", t)]
    if not wanted:
        raise GradeError(f"--sandbox {requested!r}: choose auto, {', '.join(TIERS)}")
    failures = []
    for tier in wanted:
        problem = probe(tier)
        if problem is None:
            box = Sandbox(tier, "; ".join(failures) if requested == "auto" else "")
            _CHOSEN[requested] = box
            return box
        failures.append(f"{tier}: {problem}")
    if requested == "auto":
        raise GradeError(f"no sandbox works on this host ({'; '.join(failures)}): {INSTALL_HINT}")
    raise GradeError(f"--sandbox {requested}: {failures[0]}")


def closed_to_others(paths) -> tuple[Path, str] | None:
    """The first folder on the way to one of ``paths`` that a user who is neither its owner nor in
    its group cannot enter (or a file such a user cannot read), with its mode; None when all are
    open. The ``uid`` tier's children run as such users and need Python, torch and this package."""
    import stat

    for path in paths:
        path = Path(path).resolve()
        for folder in [*reversed(path.parents), path]:
            try:
                mode = folder.stat().st_mode
            except OSError:
                break
            need = stat.S_IXOTH if stat.S_ISDIR(mode) else stat.S_IROTH
            if not mode & need:
                return folder, stat.filemode(mode)
    return None


def needed_by_a_child() -> list[Path]:
    """What a grading child must read: the interpreter, its standard library, torch and this project."""
    import importlib.util

    import transformer_spec

    torch_spec = importlib.util.find_spec("torch")
    paths = [Path(sys.executable), Path(os.__file__), Path(transformer_spec.__file__)]
    if torch_spec is not None and torch_spec.origin:
        paths.append(Path(torch_spec.origin))
    return paths


def probe(tier: str) -> str | None:
    """None when ``tier`` works here (a child in it imports this package and reads torch); else why not."""
    root = os.geteuid() == 0
    if tier in ("bwrap", "uid") and not root:
        return "needs root (to give each child a uid of its own)"
    if tier == "bwrap-user" and root:
        return "the grader runs as root (the bwrap tier applies)"
    if tier.startswith("bwrap") and shutil.which("bwrap") is None:
        return "bwrap is not installed"
    closed = closed_to_others(needed_by_a_child()) if tier == "uid" else None
    if closed is not None:
        folder, mode = closed
        return (f"its children run as other users, who cannot {'enter' if folder.is_dir() else 'read'} {folder} "
                f"({mode}), on the way to this Python ({sys.executable}), torch or this project: grade with a "
                f"Python installed for every user (a system Python, or a virtual environment outside home "
                f"folders: python3 -m venv /opt/grader), keep the project outside home folders too, or let other "
                f"users {'enter' if folder.is_dir() else 'read'} it (chmod o+{'x' if folder.is_dir() else 'r'} {folder})")
    import tempfile

    with tempfile.TemporaryDirectory(prefix="transformer-spec-probe-") as tmp, Sandbox(tier).jail() as jail:
        os.chmod(tmp, 0o755)
        view = View(readonly=(), work=Path(tmp) / "work")
        jail = jail.seeing(view)
        # Reading torch's files (not importing it: that is ~2.5 s) shows the child can load it.
        code = ("import glob, importlib.util, os, transformer_spec.grader.isolation; "
                "d = os.path.dirname(importlib.util.find_spec('torch').origin); "
                "[open(f, 'rb').close() for f in [d + '/__init__.py', *glob.glob(d + '/_C*.so')]]; print('ok')")
        cmd = jail.wrap([sys.executable, "-I", "-c", LAUNCHER, *launcher_args(tier, jail.uid, 0, 0, os.getpid()),
                         sys.executable, "-I", "-c", code], view.work)
        try:
            done = subprocess.run(cmd, cwd=view.work, stdin=subprocess.DEVNULL, capture_output=True, timeout=120,
                                  env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(view.work)})
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"cannot start a child ({exc})"
        finally:
            jail.reap()
    if done.returncode != 0 or b"ok" not in done.stdout:
        last = (done.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        return f"a child in it failed ({last[:200]})"
    return None
