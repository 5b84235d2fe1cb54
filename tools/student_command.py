"""Whether the grade a student checks is the grade they get (issue 44): the README's student command on
every row of a kill matrix, against the class grader's total for it.

    python -m tools.mutants --json matrix.json                # the class grader's totals, a row each
    python -m tools.student_command matrix.json               # the student's command on each row
    python -m tools.student_command matrix.json --every 3     # every third row (and the two correct ones)

Each row is written again as the kill matrix writes it (``tools.mutants.write_row``: a patched copy of the
reference, the independent implementation or, under a course profile, a course repository), and graded by
``python -m pytest spec_tests properties --impl ROW`` (with the matrix's ``--track`` and ``--profile``), the
command the README gives a student, whose default examples and seeds are the grader's. Its total must be
the row's ``class_total`` (to the gradebook's two decimals). Exit status 1 when one differs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from transformer_spec.catalogue import of_profile as catalogue_of
from transformer_spec import layout, profiles
from transformer_spec.catalogue.variations import CATALOGUE as VARIATIONS
from transformer_spec.contract import registry, tracks

from . import mutants
from .cli import Parser, run_main


def _item(name: str, course: str):
    """The kill matrix's row ``name``: a correct implementation's name, a pitfall or a variation."""
    if name in mutants.CORRECT:
        return name
    catalogue = catalogue_of(profiles.get(course))
    known = {p.name: p for p in [*registry.pitfalls(), *VARIATIONS, *getattr(catalogue, "PITFALLS", ()),
                                 *getattr(catalogue, "VARIATIONS", ())]}
    return known[name]


def _target(dest: Path, course: str) -> Path:
    """What ``--impl`` names for a row written into ``dest``: the repository under a course profile with an
    adapter file; else the one file or package folder in it."""
    if profiles.get(course).adapter is not None:
        return dest
    files = [p for p in dest.iterdir() if p.suffix == ".py"]
    return files[0] if files else next(p for p in dest.iterdir() if p.is_dir())


def student_total(row: str, track: str, course: str, folder: Path) -> float | None:
    """The total the student's command gives the row ``row`` (None: it wrote no report)."""
    mutants.write_row(_item(row, course), folder, track, course)
    report = folder / f"{row.strip('()')}.json"
    cmd = [sys.executable, "-m", "pytest", "spec_tests", "properties", "-q", "-p", "no:cacheprovider",
           "--impl", str(_target(folder / row, course)), "--grade-json", str(report)]
    cmd += ["--track", track] if track != tracks.DEFAULT and course == profiles.DEFAULT else []
    cmd += ["--profile", course] if course != profiles.DEFAULT else []
    subprocess.run(cmd, cwd=layout.ROOT, capture_output=True, timeout=1800)
    return float(json.loads(report.read_text())["score"]) if report.is_file() else None


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m tools.student_command", description=__doc__.split("\n\n")[0])
    parser.add_argument("matrix", type=Path, help="a kill matrix's JSON (python -m tools.mutants --json FILE)")
    parser.add_argument("--every", type=int, default=1, metavar="N",
                        help="check every N-th row only, and the two correct implementations (default 1: every row)")
    parser.add_argument("--jobs", "-j", type=int, default=2, help="rows checked at a time (default 2)")
    args = parser.parse_args(argv)
    try:
        matrix = json.loads(args.matrix.read_text())
        rows, track, course = matrix["rows"], matrix["track"], matrix["profile"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        parser.error(f"{args.matrix}: not a kill matrix's JSON written by python -m tools.mutants --json "
                     f"({type(exc).__name__}: {exc}); write one first")
    if args.every < 1:
        parser.error("--every must be 1 or more")
    chosen = [r for i, r in enumerate(rows) if r["status"] == "ok" and (r["name"] in mutants.CORRECT or i % args.every == 0)]
    if not chosen:
        parser.error(f"{args.matrix}: no row graded with status ok: nothing to check")
    with tempfile.TemporaryDirectory(prefix="student-command-") as tmp:
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            mine = list(pool.map(lambda r: student_total(r["name"], track, course, Path(tmp)), chosen))
    differ = [(r["name"], m, r["class_total"]) for r, m in zip(chosen, mine) if m is None or abs(m - r["class_total"]) > 0.005]
    for name, m, theirs in differ:
        print(f"DIFFERS {name}: the student's command {m}, the class grader {theirs}")
    print(f"{len(chosen) - len(differ)} / {len(chosen)} rows: the student's command gives the class grader's total "
          f"({track} track" + (f", profile {course}" if course != profiles.DEFAULT else "") + ")")
    return 1 if differ else 0


if __name__ == "__main__":
    run_main(main)
