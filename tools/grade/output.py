"""The output folder: records, gradebook, integrity (atomic writes, and a sweep that puts back
anything this tool did not write)."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from pathlib import Path

from transformer_spec.files import atomic_write

from .children import ChildRun
from .feedback import feedback_md, results_json
from .record import Record
from .settings import RECORD


def remove_temp_files(out: Path) -> None:
    """Left-overs of an interrupted ``atomic_write`` (the real files are whole or absent)."""
    for tmp in out.rglob(".*.tmp"):
        try:
            tmp.unlink()
        except OSError:
            pass


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

    def save(self, record: Record, run: ChildRun | None, cov: Path | None) -> None:
        d = self.student_dir(record.student)
        seconds = run.seconds if run is not None else 0.0
        self.write(d / "results.json", json.dumps(results_json(record, seconds), indent=2) + "\n")
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
