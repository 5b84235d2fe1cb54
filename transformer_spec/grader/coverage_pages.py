"""``--coverage``: the pages of a submission's coverage report, written by the grader itself.

The grading child measures coverage (``--cov-submission``) and leaves coverage's JSON report in
its writable folder. That file is the child's, so it is data, never markup: the parent reads only
which lines of which files ran, keeps the files that are the submission's own (inside the copy the
grader made of it, ``.py`` files only) and the line numbers those files have, and writes every
page from its own template with the source text escaped. No byte of HTML written in the sandbox
reaches the instructor's browser, so a page can neither run a script nor redirect the browser
(``<meta http-equiv="refresh">``, which no Content-Security-Policy forbids); the policy is still
the first thing of every page.
"""

from __future__ import annotations

import html
import json
import os
from dataclasses import dataclass
from pathlib import Path

from transformer_spec.grader.text import COVERAGE_POLICY, safe

#: the most of one source file the grader reads to show it
MAX_SOURCE_BYTES = 2 * 1024 * 1024

STYLE = ("body{font-family:sans-serif;margin:1.5em} table{border-collapse:collapse} "
         "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right} td.name,th.name{text-align:left} "
         "pre{margin:0} .run{background:#dfd} .mis{background:#fdd} .n{color:#888;user-select:none}")


@dataclass
class FileCoverage:
    name: str  # the file's path inside the submission, as text
    lines: list[str]
    executed: set[int]
    missing: set[int]

    @property
    def statements(self) -> int:
        return len(self.executed) + len(self.missing)

    @property
    def percent(self) -> float:
        return 100.0 * len(self.executed) / self.statements if self.statements else 100.0


def _line_numbers(value, count: int) -> set[int]:
    """The valid line numbers of an untrusted list: ints from 1 to ``count``; anything else is dropped."""
    if not isinstance(value, list):
        return set()
    return {n for n in value if type(n) is int and 1 <= n <= count}


def read(report: bytes, sub: Path) -> list[FileCoverage]:
    """The files of ``sub`` (the grader's copy of the submission) that the child's JSON ``report``
    names, each with the lines that ran and the lines that did not. Names outside ``sub``, files
    that are not ``.py`` files of it, and malformed entries are ignored."""
    try:
        data = json.loads(report)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return []
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        return []
    root = os.path.realpath(sub)
    out: dict[str, FileCoverage] = {}
    for key, entry in files.items():
        if not isinstance(key, str) or not isinstance(entry, dict) or "\x00" in key:
            continue
        path = os.path.realpath(os.path.join(root, key))  # an absolute key stays as it is
        if not path.startswith(root + os.sep) or not path.endswith(".py") or not os.path.isfile(path):
            continue
        rel = os.path.relpath(path, root)
        if rel in out or os.path.getsize(path) > MAX_SOURCE_BYTES:
            continue
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
        executed = _line_numbers(entry.get("executed_lines"), len(lines))
        missing = _line_numbers(entry.get("missing_lines"), len(lines)) - executed
        out[rel] = FileCoverage(safe(rel), lines, executed, missing)
    return [out[k] for k in sorted(out)]


def _page(title: str, body: str) -> bytes:
    return (b"<!doctype html>\n" + COVERAGE_POLICY + (
        f'<html><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>{STYLE}</style></head>'
        f"<body>{body}</body></html>\n").encode("utf-8"))


def pages(student: str, files: list[FileCoverage]) -> dict[str, bytes]:
    """``index.html`` (a table of the files) and one page per file (``file1.html``, ...), every
    piece of the student's text escaped."""
    title = f"coverage of {student}"
    rows = []
    out = {}
    for i, fc in enumerate(files, 1):
        name = f"file{i}.html"
        rows.append(f'<tr><td class="name"><a href="{name}">{html.escape(fc.name)}</a></td><td>{fc.statements}</td>'
                    f"<td>{len(fc.missing)}</td><td>{fc.percent:.0f} %</td></tr>")
        text = []
        for n, line in enumerate(fc.lines, 1):
            cls = "run" if n in fc.executed else "mis" if n in fc.missing else ""
            text.append(f'<pre class="{cls}"><span class="n">{n:>5} </span>{html.escape(safe(line))}</pre>')
        out[name] = _page(f"{title}: {fc.name}", f'<h1>{html.escape(fc.name)}</h1><p><a href="index.html">all files</a>'
                          f" &middot; {len(fc.executed)} of {fc.statements} statements ran ({fc.percent:.0f} %); "
                          f'<span class="mis">not run</span></p>' + "".join(text))
    statements = sum(fc.statements for fc in files)
    ran = sum(len(fc.executed) for fc in files)
    total = f"{100.0 * ran / statements:.0f} %" if statements else "no statements measured"
    table = ('<table><tr><th class="name">file</th><th>statements</th><th>not run</th><th>coverage</th></tr>'
             + "".join(rows) + "</table>") if rows else "<p>No file of the submission was measured.</p>"
    out["index.html"] = _page(title, f"<h1>{html.escape(title)}</h1><p>total: {total}</p>{table}")
    return out
