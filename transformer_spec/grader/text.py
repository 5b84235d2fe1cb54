"""A student's text and names are data: made safe once, then written so no reader runs or mistakes them.

Everything in a grade that a submission controls (its file names, the messages of its exceptions,
what it prints) reaches the instructor's spreadsheet, browser, Markdown renderer and terminal.
:func:`safe` runs once on every string of a :class:`~transformer_spec.grader.record.Record` (its
``__post_init__``), so every writer gets text that

* always encodes as UTF-8: a lone surrogate (an exception message holding ``"\\udce9"``, or a file
  name with a byte that is not UTF-8, which Python carries as a surrogate) is written as its escape
  (``\\udce9``; a file name's byte as ``\\xe9``);
* holds no control character but newline and tab: terminal escapes (``ESC``), carriage returns,
  ``DEL``, the C1 controls and the bidirectional overrides are shown as escapes, never sent.

Each output then escapes for its own reader: :func:`csv_cell` (OWASP's advice against formula
injection: a leading ``'`` before ``= + - @``, tab and carriage return), :func:`md_text`,
:func:`md_code` and :func:`md_block` (Markdown and its raw HTML), :func:`one_line` (ids and terminal lines), and
matplotlib gets ``parse_math=False`` (``transformer_spec/grader/report.py``). ``report.html`` escapes with
:func:`html.escape`. :func:`safe` is idempotent: a record read back is made safe again unchanged.
"""

from __future__ import annotations

import os
import re

#: control characters shown as escapes: C0 but tab and newline, DEL, C1, and the bidirectional
#: embeddings, overrides and isolates (a name that reads backwards in a terminal or a table)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_SURROGATE = re.compile("[\ud800-\udfff]")
#: what a spreadsheet reads as the start of a formula (OWASP, "CSV Injection")
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _escape(match: re.Match) -> str:
    c = ord(match.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def safe(text: str) -> str:
    """``text`` with every lone surrogate and control character (but ``\\n`` and ``\\t``) escaped;
    ``\\r\\n`` becomes ``\\n``."""
    if not isinstance(text, str):
        return text
    text = _SURROGATE.sub(_escape, text.replace("\r\n", "\n"))
    return _CONTROL.sub(_escape, text)


def file_name(name: str) -> str:
    """A file name (as ``os.listdir`` gives it) as safe text: a byte that is not UTF-8 as ``\\xNN``."""
    try:
        name = os.fsencode(name).decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that is not a byte (not from the file system)
        pass
    return one_line(name)


def one_line(text: str) -> str:
    """:func:`safe`, with newlines and tabs escaped too (ids, terminal lines, table cells)."""
    return safe(text).replace("\n", "\\n").replace("\t", "\\t")


def safe_data(value):
    """:func:`safe` on every string in ``value`` (dicts, lists, tuples; keys too)."""
    if isinstance(value, str):
        return safe(value)
    if isinstance(value, dict):
        return {safe_data(k): safe_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(safe_data(v) for v in value)
    return value


def csv_cell(text: str) -> str:
    """A text cell of the gradebook: a leading ``'`` where a spreadsheet would start a formula."""
    return "'" + text if text.startswith(_FORMULA) else text


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-=.!|~])")
_HTML = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def md_text(text: str) -> str:
    """Markdown text shown as it is, line by line: every character Markdown would read is
    backslash-escaped, and HTML's ``< > &`` are entities (no tag, no link, no heading, no fence)."""
    lines = safe(text).split("\n")
    return "\n".join(re.sub("[<>&]", lambda m: _HTML[m.group()], _MD_SPECIAL.sub(r"\\\1", line.replace("\t", " ")))
                     for line in lines)


def md_code(text: str) -> str:
    """``text`` as one inline code span (literal: no markup, no HTML), its backtick fence longer
    than any run inside it."""
    text = one_line(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_block(text: str, info: str = "text") -> list[str]:
    """``text`` as a fenced code block whose fence no line of ``text`` can close (CommonMark: a
    fence ends only at a line of at least as many backticks); inside it nothing is markup."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + info, safe(text), fence]


#: the policy written first in every page of a coverage report (``--coverage``,
#: :mod:`transformer_spec.grader.coverage_pages`): the grader writes those pages itself with every piece of the
#: student's text escaped, and the policy is a second wall: no script runs, nothing is fetched or posted
COVERAGE_POLICY = (b'<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
                   b"style-src 'unsafe-inline'; img-src data:; form-action 'none'; base-uri 'none'\">\n")
