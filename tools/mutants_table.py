"""The kill matrix as text and as JSON: a row per graded copy, a column per component (``python -m tools.mutants``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from transformer_spec.contract import tracks

if TYPE_CHECKING:
    from tools.mutants_rows import Row


def format_matrix(rows: list[Row], track: str = tracks.DEFAULT) -> list[str]:
    """Rows: correct code, variations, pitfalls; columns: ``track``'s components; a cell is the number of
    failing tests ([n] = the pitfall's own component; a variation's own component is not bracketed, as every
    cell of its row must be ".")."""
    width = max(len(r.name) for r in rows)
    short = {c.name: c.label for c in tracks.components(track)}
    head = f"{'row':<{width}}  {'own':<5}" + "".join(f"{label:>6}" for label in short.values()) + "   kept  verdict"
    lines = [head, "-" * len(head)]
    for r in rows:
        cells = ""
        for c in short:
            n = len(r.failed.get(c, []))
            cell = "." if n == 0 else str(n)
            if c == r.component and not r.must_pass:
                cell = f"[{cell}]"
            cells += f"{cell:>6}"
        own = (short.get(r.component, "-") if r.component else "-") + ("~" if r.must_pass and r.component else "")
        kept = "" if r.kept is None else f"{r.kept:.0%}"
        lines.append(f"{r.name:<{width}}  {own:<5}{cells}  {kept:>5}  {r.verdict}")
    return lines


def print_row(row: Row) -> None:
    print(f"  {row.verdict:<8} {row.name} ({row.seconds:.1f} s" + (f", graded in {row.group}" if row.group else "") + ")"
          + (f": {row.error}" if row.error else ""), flush=True)


def matrix_json(rows: list[Row], seconds: float, jobs: int, track: str, profile: str) -> str:
    """The matrix as ``--json`` writes it: the run's settings and time, and every row's verdict and failures."""
    return json.dumps({
        "seconds": round(seconds, 1), "jobs": jobs, "track": track, "profile": profile,
        "rows": [{"name": r.name, "component": r.component, "must_pass": r.must_pass,
                  "verdict": r.verdict, "error": r.error, "status": r.status,
                  "class_total": r.class_total, "differs": r.differs, "unreadable": r.unreadable,
                  "seconds": round(r.seconds, 1), "total": r.total, "failed": r.failed, "kept": r.kept,
                  "group": r.group}
                 for r in rows],
    }, indent=2) + "\n"
