"""The class grader, timed: one submission graded in isolation, and a realistic class.

``bench_single`` times ``python -m tools.grade single`` (sandbox, limits and re-checks included)
on one correct submission against a bare ``python -c "import torch"`` (target <= 8x, issue 47; <= 12x before).

``bench_class`` grades a class folder made of the pitfall catalogue's mistakes (one each, as a
student would hand it in: a package folder) and the allowed variations, with ``tools.grade``'s
defaults (``--jobs`` = the number of cores), and reports submissions a minute (target >= 4 on an
idle machine, so the row notes the load average). ``sample`` takes every k-th of the catalogue
(pitfalls and variations alike) for a shorter run; the full class is the default.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ..cli import ToolError
from .graded_run import IMPORT_TORCH, ROOT, run_to_end
from .timing import Row, side_by_side


def _graded(cmd: list[str]) -> None:
    run_to_end(cmd, ok=(0,))  # the graders exit 0 whatever the grades


def _floor_seconds(repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run_to_end(IMPORT_TORCH, ok=(0,))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def submission_copy(impl_target: str, dest: Path) -> Path:
    """``--impl`` as a student would hand it in: the reference (or a package folder) copied to
    ``dest/my_transformer``, or a single file copied to ``dest/my_transformer.py``."""
    source = ROOT / "reference" if impl_target == "reference" else Path(impl_target)
    if source.is_dir():
        return Path(shutil.copytree(source, dest / "my_transformer", ignore=shutil.ignore_patterns("__pycache__")))
    if source.is_file():
        return Path(shutil.copy(source, dest / "my_transformer.py"))
    raise ToolError(f"--impl {impl_target!r}: the grader rows need a file or a folder (or 'reference')")


def bench_single(impl_target: str, repeats: int) -> Row:
    """``tools.grade single`` on one submission, fresh output each time, against ``import torch``."""
    with tempfile.TemporaryDirectory(prefix="bench-single-") as tmp:
        sub = submission_copy(impl_target, Path(tmp))
        out = Path(tmp) / "results.json"
        cmd = [sys.executable, "-m", "tools.grade", "single", str(sub), "--results-json", str(out), "--no-progress"]
        ours, base = side_by_side(lambda: _graded(cmd), lambda: run_to_end(IMPORT_TORCH, ok=(0,)), repeats, warmup=0)
    return Row("one submission graded in isolation (`tools.grade single`: sandbox, limits, re-checks) "
               "vs `python -c 'import torch'`", ours, base, target="<= 8x", limit=8.0)


def write_class(dest: Path, sample: int = 1) -> list[str]:
    """The class folder: every ``sample``-th pitfall and allowed variation as a student's package
    folder ``dest/<name>/my_transformer``; returns the students' names."""
    from transformer_spec.catalogue.patching import write_patched_reference
    from transformer_spec.catalogue.pitfalls import catalogue
    from transformer_spec.catalogue.variations import CATALOGUE

    members = [*catalogue(), *CATALOGUE][::max(1, sample)]
    for m in members:
        write_patched_reference(dest / m.name, m.patches, "my_transformer")
    return [m.name for m in members]


def bench_class(repeats: int = 1, sample: int = 1) -> Row:
    """A class of pitfalls and allowed variations graded by ``tools.grade`` with its defaults;
    ``ours`` is the wall time per submission, ``baseline`` the torch import (timed around it)."""
    with tempfile.TemporaryDirectory(prefix="bench-class-") as tmp:
        students = write_class(Path(tmp) / "class", sample)
        load = os.getloadavg()[0]
        floor_before = _floor_seconds(3)
        per_submission = []
        for i in range(repeats):
            out = Path(tmp) / f"out{i}"
            cmd = [sys.executable, "-m", "tools.grade", str(Path(tmp) / "class"), "--out", str(out), "--no-progress"]
            start = time.perf_counter()
            _graded(cmd)
            per_submission.append((time.perf_counter() - start) / len(students))
        floor = (floor_before + _floor_seconds(3)) / 2
        load = max(load, os.getloadavg()[0])
    ours = sorted(per_submission)[len(per_submission) // 2]
    row = Row(f"a class of {len(students)} (pitfalls and allowed variations), `tools.grade` defaults: "
              "seconds a submission vs `python -c 'import torch'`", ours, floor,
              target=">= 4 a minute (<= 15 s a submission)", absolute_limit=15.0)
    row.note = (f"{60 / ours:.2f} submissions a minute ({len(students)} in {ours * len(students) / 60:.1f} min, "
                f"{os.cpu_count()} cores, load average up to {load:.1f})")
    return row
