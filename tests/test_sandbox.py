"""The sandbox of a grading child (``transformer_spec/grader/sandbox.py``), attacked from inside.

Each test starts one child the way the class grader does (``children.run_child`` in a
:class:`~transformer_spec.grader.sandbox.Jail`) with code that tries to get out, and checks from outside what
it reached. The tiers this host cannot provide are run inside a container that gives them
(:func:`in_container`): the ``uid`` tier on a host whose Python other uids can run, the
``bwrap-user`` tier with the grader run as an ordinary user.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from transformer_spec.grader import sandbox
from transformer_spec.grader.children import run_child
from transformer_spec.grader.settings import REPO, Limits

#: the slow set (conftest.py: run with --slow): starts sandboxed children and attacks them from inside
pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.geteuid() != 0 or shutil.which("bwrap") is None,
                                reason="needs root and bubblewrap (apt-get install bubblewrap)")]

#: Tries everything a hostile submission would; prints what it got as one JSON line.
ATTACK = textwrap.dedent('''
    import json, os, socket, subprocess, sys
    got = {"uid": os.getuid()}
    def attempt(name, fn):
        try:
            got[name] = fn()
        except Exception as exc:
            got[name] = "refused: " + type(exc).__name__
    parent = int(sys.argv[1])
    attempt("read_reference", lambda: open(sys.argv[2] + "/reference/attention.py").read()[:10])
    attempt("list_tools", lambda: os.listdir(sys.argv[2] + "/tools")[:3])
    attempt("write_outside", lambda: open(sys.argv[3] + "/forged.txt", "w").write("x"))
    attempt("write_readonly_copy", lambda: open(sys.argv[4] + "/x.py", "w").write("x"))
    attempt("signal_parent", lambda: os.kill(parent, 0) or "signalled")
    attempt("connect", lambda: socket.create_connection(("127.0.0.1", int(sys.argv[5])), timeout=2) and "connected")
    attempt("fill_work", lambda: open("big", "wb").write(b"x" * (600 * 2**20)))
    attempt("write_work", lambda: open("tmp/small", "w").write("ok"))
    attempt("see_processes", lambda: sorted(int(p) for p in os.listdir("/proc") if p.isdigit())[-1])
    escapee = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    got["escapee"] = escapee.pid
    print(json.dumps(got), flush=True)
''')


def _processes_of(uid: int) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if p.stat().st_uid == uid and (p / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    out.append(int(p.name))  # alive (a zombie killed already only waits for its parent)
            except (OSError, IndexError):
                pass
    return out


def run_attack(tier: str, tmp_path: Path) -> tuple[dict, int | None]:
    box = sandbox.Sandbox(tier)
    outside = tmp_path / "outside"
    outside.mkdir()
    copy = tmp_path / "sandbox" / "sub"
    copy.mkdir(parents=True)
    (copy / "mine.py").write_text("x = 1\n")
    work = tmp_path / "sandbox" / "work"
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        with box.jail() as jail:
            view = sandbox.View(readonly=(copy,), work=work)
            run = run_child([sys.executable, "-I", "-c", ATTACK, str(os.getpid()), str(REPO), str(outside), str(copy),
                             str(port)], cwd=work, env={"PATH": os.environ["PATH"], "HOME": str(work)},
                            limits=Limits(memory_mb=0), extra={}, wall=60, jail=jail.seeing(view))
            uid = jail.uid
            left = _processes_of(uid) if uid is not None else []
    finally:
        server.close()
    lines = [line for line in run.log().splitlines() if line.startswith("{")]
    assert lines, f"the child printed no result:\n{run.log()}"
    assert not left, f"processes of the child's uid {uid} alive after it ended: {left}"
    assert not (outside / "forged.txt").exists()
    return json.loads(lines[-1]), uid


def test_bwrap_tier_confines_the_child(tmp_path):
    got, uid = run_attack("bwrap", tmp_path)
    assert got["uid"] == uid and uid >= sandbox.UID_BASE, got
    for name in ("read_reference", "list_tools", "write_outside", "write_readonly_copy", "signal_parent", "connect",
                 "fill_work"):
        assert str(got[name]).startswith("refused"), (name, got)
    assert got["write_work"] == 2
    assert got["see_processes"] < 20, "the child sees the host's processes (no PID namespace?)"


def test_the_pool_gives_each_running_child_its_own_uid():
    box = sandbox.Sandbox("bwrap")
    with box.jail() as a, box.jail() as b:
        assert a.uid != b.uid and {a.uid, b.uid} <= set(range(sandbox.UID_BASE, sandbox.UID_BASE + sandbox.UID_COUNT))


def test_auto_picks_bwrap_here_and_refusal_says_how_to_install(monkeypatch):
    assert sandbox.choose("auto").tier == "bwrap"
    monkeypatch.setattr(sandbox, "_CHOSEN", {})
    monkeypatch.setattr(sandbox, "probe", lambda tier: "not here")
    with pytest.raises(sandbox.GradeError, match="apt-get install bubblewrap.*--no-sandbox"):
        sandbox.choose("auto")
    assert sandbox.choose("none").tier == "none"


# --------------------------------------------------------------------------------------------
# The other tiers, in a container that provides them
# --------------------------------------------------------------------------------------------
def in_container(args: list[str], scratch: Path, as_uid: int | None = None, **kw) -> subprocess.CompletedProcess:
    """Run ``args`` (python code of this test) as root, or as ``as_uid``, in a mount namespace where
    every folder on the way to Python is world-readable (as on a grading platform's image), with
    ``scratch`` at ``/scratch``."""
    box = ["bwrap", "--dev-bind", "/", "/", "--tmpfs", "/root", "--bind", str(scratch), "/scratch"]
    for p in Path.home().iterdir():  # /root's contents, under a /root others may pass through
        box += ["--bind", str(p), str(p)]
    if as_uid is not None:
        box += ["setpriv", f"--reuid={as_uid}", f"--regid={as_uid}", "--clear-groups"]
    return subprocess.run([*box, *args], capture_output=True, text=True, timeout=300, **kw)


CONTAINED = textwrap.dedent('''
    import json, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from tests import test_sandbox
    from transformer_spec.grader import sandbox
    print("PROBE", sandbox.probe(sys.argv[2]))
    got, uid = test_sandbox.run_attack(sys.argv[2], Path(sys.argv[3]))
    print("RESULT", json.dumps({"got": got, "uid": uid}))
''')


@pytest.mark.parametrize("tier, as_uid", [("uid", None), ("bwrap-user", 61999)])
def test_fallback_tiers_confine_the_child(tier, as_uid, tmp_path):
    work = tmp_path / "t"
    work.mkdir()
    if as_uid is not None:
        os.chown(work, as_uid, as_uid)
    env = dict(os.environ, TRANSFORMER_SPEC_UID_BASE="61500")
    done = in_container([sys.executable, "-I", "-c", CONTAINED, str(REPO), tier, "/scratch"], work, as_uid, env=env)
    out = done.stdout + done.stderr
    assert "PROBE None" in out, out[-3000:]
    result = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("RESULT"))[7:])
    got = result["got"]
    for name in ("write_outside", "write_readonly_copy", "signal_parent"):
        assert str(got[name]).startswith("refused"), (name, got)
    if tier == "uid":
        assert got["uid"] == result["uid"] and result["uid"] >= 61500
    else:
        for name in ("read_reference", "list_tools", "connect", "fill_work"):
            assert str(got[name]).startswith("refused"), (name, got)


#: More interpreters, each well under its own address-space limit, holding ``sys.argv[1]`` MiB each;
#: the child waits until each holds it (a fixed sleep could end first on a loaded machine), then
#: for ten of the watch's periods.
HOGS = textwrap.dedent('''
    import subprocess, sys, time
    code = ("b = bytearray(%s << 20)\\nb[::4096] = b'x' * len(b[::4096])\\nprint('held', flush=True)\\n"
            "import time\\ntime.sleep(30)" % sys.argv[1])
    hogs = [subprocess.Popen([sys.executable, "-c", code], start_new_session=True, stdout=subprocess.PIPE)
            for _ in range(int(sys.argv[2]))]
    assert all(h.stdout.readline() == b"held\\n" for h in hogs), "a hog could not hold its memory"
    time.sleep(5)
    print("SURVIVED")
''')


@pytest.mark.parametrize("hogs, stopped", [(3, True), (1, False)])
def test_bwrap_user_tier_watches_the_childs_processes_together(hogs, stopped, tmp_path):
    """Issue 26: in ``bwrap-user`` the children keep the grader's uid, so the watch sums the child's
    process tree (daemons re-parented inside its PID namespace included): three interpreters of 300
    MiB under a 700 MiB limit are stopped, one is not."""
    work = tmp_path / "work"
    with sandbox.Sandbox("bwrap-user").jail() as jail:
        assert jail.uid is None
        run = run_child([sys.executable, "-I", "-c", HOGS, "300", str(hogs)], cwd=work,
                        env={"PATH": os.environ["PATH"], "HOME": str(work)}, limits=Limits(memory_mb=700),
                        extra={}, wall=60, jail=jail.seeing(sandbox.View(readonly=(), work=work)))
    assert run.memory_limit is stopped, run.log()
    assert ("SURVIVED" in run.log()) is not stopped, run.log()


def test_tree_rss_counts_the_grandchildren():
    code = ("import subprocess, sys\nc = 'b = bytearray(100 << 20)\\nb[::4096] = bytes(len(b[::4096]))\\n"
            "import time\\ntime.sleep(20)'\np = [subprocess.Popen([sys.executable, '-c', c]) for _ in range(2)]\n"
            "import time\ntime.sleep(20)\n")
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        import time
        deadline = time.monotonic() + 15
        while sandbox.tree_rss(proc.pid) < 200 << 20 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sandbox.tree_rss(proc.pid) >= 200 << 20
    finally:
        subprocess.run(["pkill", "-KILL", "-P", str(proc.pid)])
        proc.kill()
        proc.wait()


def test_the_uid_tier_says_which_folder_other_users_cannot_enter():
    """Issue 27: where Python lives in a home folder other uids cannot enter (pyenv in /root, conda in
    a 0750 home), the uid tier said only ``PermissionError: [Errno 13]``; it now names the folder and
    what to do."""
    import tempfile

    top = Path(tempfile.mkdtemp(dir="/tmp"))  # pytest's own temp folders are closed to other users
    home = top / "home"
    (home / "py" / "bin").mkdir(parents=True)
    python = home / "py" / "bin" / "python"
    python.write_text("")
    os.chmod(top, 0o755)
    os.chmod(home, 0o750)
    assert sandbox.closed_to_others([python]) == (home, "drwxr-x---")
    os.chmod(home, 0o755)
    os.chmod(python, 0o600)
    assert sandbox.closed_to_others([python]) == (python, "-rw-------")
    os.chmod(python, 0o644)
    assert sandbox.closed_to_others([python]) is None
    shutil.rmtree(top)
    closed = sandbox.closed_to_others(sandbox.needed_by_a_child())
    problem = sandbox.probe("uid")
    if closed is None:  # this host's Python is open to every user: the tier's own probe decides
        assert problem is None or "cannot enter" not in problem
    else:
        assert str(closed[0]) in problem and "chmod o+" in problem and "venv" in problem, problem
