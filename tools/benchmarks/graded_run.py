"""The graded run of one submission, timed in a fresh process.

``bench_suite`` times it against a bare ``python -c "import torch"`` (target <= 5x, issue 47; <= 8x before);
``bench_xdist`` times it with ``pytest -n auto`` against the same run in one process;
``profile_suite`` is a cProfile listing of it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from ..cli import ToolError
from .timing import Row, side_by_side

#: The repository: the graded run starts here, where its conftest.py is.
ROOT = Path(__file__).resolve().parents[2]


def suite_command(impl_target: str, extra: Sequence[str] = ()) -> list[str]:
    """The graded run: the whole specification, one submission, the ``grading`` profile if it exists."""
    cmd = [sys.executable, "-m", "pytest", "spec_tests", "properties", "--impl", impl_target,
           "-q", "-p", "no:cacheprovider"]
    if grading_profile_exists():
        cmd.append("--hypothesis-profile=grading")
    return cmd + list(extra)


def grading_profile_exists() -> bool:
    try:
        from transformer_spec.pytest_plugin import hypothesis_profiles
    except ImportError:
        return False
    return "grading" in getattr(hypothesis_profiles, "PROFILES", ())


#: the floor no run that uses torch can beat
IMPORT_TORCH = [sys.executable, "-c", "import torch"]


def run_to_end(cmd: Sequence[str], cwd: Path = ROOT, ok: tuple[int, ...] = (0, 1)) -> None:
    """Run ``cmd`` (its output captured); a ToolError with its last lines for an exit code not in
    ``ok``. The default accepts pytest's 1 (some tests failed: still a complete graded run, and
    it took real time), not a crash in collection, which would make the ratio lie."""
    proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode not in ok:
        tail = proc.stdout.strip().splitlines()[-3:]
        raise ToolError(f"`{' '.join(cmd)}` exited with {proc.returncode}: {' / '.join(tail)}")


def bench_xdist(impl_target: str, repeats: int, workers: str = "auto", cwd: Path = ROOT) -> Row:
    """The graded run with pytest-xdist (``-n workers``) against the same run in one process."""
    try:
        import xdist  # noqa: F401
    except ImportError:
        raise ToolError("the xdist row needs pytest-xdist: pip install pytest-xdist") from None
    parallel = suite_command(impl_target, ["-n", workers])
    serial = suite_command(impl_target)
    ours, base = side_by_side(lambda: run_to_end(parallel, cwd), lambda: run_to_end(serial, cwd), repeats, warmup=0)
    row = Row(f"graded run with pytest-xdist `-n {workers}` vs in one process", ours, base, speedup=True)
    if row.ratio < 1:
        row.note = "below 1x: here the workers' start-up (torch, hypothesis) costs more than they save"
    return row


def bench_suite(impl_target: str, repeats: int, cwd: Path = ROOT, extra: Sequence[str] = (),
                name: str = "graded run") -> Row:
    cmd = suite_command(impl_target, extra)
    ours, base = side_by_side(lambda: run_to_end(cmd, cwd), lambda: run_to_end(IMPORT_TORCH, cwd), repeats, warmup=0)
    return Row(f"{name} (spec_tests + properties) vs `python -c 'import torch'`", ours, base,
               target="<= 5x", limit=5.0)


def profile_suite(impl_target: str, top: int = 25) -> str:
    """cProfile of the graded run in this process (cumulative time, the top ``top`` entries)."""
    cmd = [sys.executable, "-c",
           "import cProfile, pstats, sys, pytest;"
           "p = cProfile.Profile(); p.enable();"
           f"pytest.main({suite_command(impl_target)[3:]!r});"
           f"p.disable(); pstats.Stats(p).sort_stats('cumulative').print_stats({top})"]
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc.stdout[proc.stdout.find("Ordered by"):] if "Ordered by" in proc.stdout else proc.stdout
