"""The output folder: records, gradebook, integrity (atomic writes, a sweep that puts back
anything this tool did not write, and records signed with a key no child sees).

Each ``record.json`` carries an HMAC-SHA256 (``mac``) under the folder's key,
``OUT/.grade/key`` (mode 0600, made by the first run; children never see the output folder).
``--resume`` and ``merge`` take a record only when its MAC verifies (else the student is graded
again, or the merge refuses), and write each student's ``results.json`` and ``feedback.md`` anew
from the verified record."""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
import os
import secrets
from dataclasses import asdict
from pathlib import Path

from transformer_spec.files import atomic_write
from transformer_spec.grader.children import ChildRun
from transformer_spec.grader.feedback import feedback_md, results_json
from transformer_spec.grader.record import Record
from transformer_spec.grader.settings import RECORD, STATE_DIR

KEY_FILE = "key"


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
        self.rejected: list[str] = []  # records whose MAC did not verify (load_records)
        self._key: bytes | None = None

    def key(self) -> bytes:
        """The folder's record key (made, mode 0600, on first use)."""
        if self._key is None:
            path = self.out / STATE_DIR / KEY_FILE
            if path.is_file():
                self._key = bytes.fromhex(path.read_text().strip())
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                self._key = secrets.token_bytes(32)
                with os.fdopen(fd, "w") as f:
                    f.write(self._key.hex() + "\n")
                self.written[path] = path.read_bytes()
                self._stat[path] = _stat(path)
        return self._key

    def _mac(self, data: dict) -> str:
        body = json.dumps({k: v for k, v in data.items() if k != "mac"}, sort_keys=True, separators=(",", ":"))
        return hmac.new(self.key(), body.encode(), hashlib.sha256).hexdigest()

    def signed(self, record: Record) -> str:
        """``record.json``'s text: the record and its MAC."""
        data = asdict(record)
        data["mac"] = self._mac(data)
        return json.dumps(data, indent=1, sort_keys=True) + "\n"

    def write_derived(self, record: Record) -> None:
        """The student's ``results.json`` and ``feedback.md``, from the record alone."""
        d = self.student_dir(record.student)
        self.write(d / "results.json", json.dumps(results_json(record, record.seconds), indent=2) + "\n")
        self.write(d / "feedback.md", feedback_md(record))

    def write(self, path: Path, data: bytes | str) -> None:
        # backslashreplace: text from a child (its log) may hold a lone surrogate; records are safe already
        data = data.encode("utf-8", "backslashreplace") if isinstance(data, str) else data
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
        self.write_derived(record)
        self.write(d / "log.txt", run.log() if run is not None else "")
        if cov is not None and cov.is_dir():  # pages the grader wrote (coverage_pages), not the child
            for p in sorted(cov.glob("*.html")):
                self.write(d / "coverage" / p.name, p.read_bytes())
        self.write(d / RECORD, self.signed(record))
        self.records[record.student] = record

    def load_records(self) -> None:
        """The records whose MAC verifies under this folder's key (others are ``rejected``)."""
        for p in sorted((self.out / "students").glob(f"*/{RECORD}")):
            try:
                data = json.loads(p.read_text())
                mac = data.pop("mac")
                if not hmac.compare_digest(str(mac), self._mac(data)):
                    raise ValueError("wrong MAC")
                record = Record(**data)
                if record.student != p.parent.name:
                    raise ValueError("a record of another student")
                self.records[record.student] = record
            except (ValueError, TypeError, KeyError, AttributeError):
                self.rejected.append(p.parent.name)  # unreadable or altered: graded again

    def gradebook(self, skeleton_components: list[str]) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["student", "status", "total", "possible", *skeleton_components, "detail"])
        for student in sorted(self.records):
            w.writerow(self.records[student].row(skeleton_components))
        return buf.getvalue()
