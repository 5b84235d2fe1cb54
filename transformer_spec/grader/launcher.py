"""The launcher: the first program of every grading child (inside bubblewrap in the bwrap tiers).

It sets the child's limits, drops to the child's own uid, sets no-new-privileges and execs the
command. It is set here, not in a ``preexec_fn`` (unsafe in the parent's threads); the sandbox
(:mod:`.sandbox`, probing a tier) and the children (:mod:`.children`) both start it.
"""

from __future__ import annotations

NPROC = 256  # processes and threads of one child's uid

# Runs first in every child (inside bubblewrap in the bwrap tiers): limits, the child's own uid,
# no-new-privileges, then exec. Set here, not in a preexec_fn (unsafe in the parent's threads).
LAUNCHER = """\
import ctypes, os, resource, signal, sys
tier, uid, mem, fsize, parent, nproc = sys.argv[1], *(int(a) for a in sys.argv[2:7])
libc = ctypes.CDLL(None, use_errno=True)
if mem > 0:
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
if fsize > 0:
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
if not tier.startswith("bwrap"):  # bubblewrap's --die-with-parent does this in its tiers
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(70)
if uid >= 0:
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid:
        os._exit(71)
    libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: /proc/self is the uid's again (for the uid map)
libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
if tier == "bwrap" and libc.unshare(0x10000000) == 0:  # a user namespace of its own
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{uid} {uid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
os.execv(sys.argv[7], sys.argv[7:])
"""


def launcher_args(tier: str, uid: int | None, mem: int, fsize: int, parent: int) -> list[str]:
    """LAUNCHER's arguments before the command."""
    return [tier, str(-1 if uid is None else uid), str(mem), str(fsize), str(parent), str(NPROC)]


#: the messages a child may send: the run report, and the re-check child's answers (and the stubs it found)
