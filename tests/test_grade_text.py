"""A student's text and names are data (``tools/grade/text.py``, issue 26): every output writes them
so that no reader runs or mistakes them, and every entry of a class folder gets one row of its own.

The whole path (a class holding such names and messages, graded beside honest students) is
``tests/test_grade_class.py``'s corpus (``tests/adversarial/corpus.py``, the ``text_*`` members)."""

from __future__ import annotations

import csv
import io
import os
import socket
import unicodedata

import pytest
from markdown_it import MarkdownIt

from tests.tools_helpers import NO_CHROMIUM, chromium_dom
from tools.grade import text
from tools.grade.feedback import feedback_md
from tools.grade.output import Output
from tools.grade.record import Record
from tools.grade.submissions import discover


def _record(student="alice", detail="", output="wrong value", diagnoses=None) -> Record:
    tests = [{"name": "[attention] t.py::test_a", "number": "1.1", "score": 0.0, "max_score": 1.0, "status": "failed",
              "output": output, "tags": ["attention"], "visibility": "visible"}]
    return Record(student, "ok", 0.0, 1.0, {"attention": 0.0}, detail, f"{student}.py", "h", tests,
                  diagnoses=diagnoses or {})


def test_lone_surrogates_and_control_characters_are_shown_not_sent():
    s = text.safe("caf\udce9 \x1b]0;owned\x07 a\r\nb\rc\x7f \u202eevil\tok")
    assert s == "caf\\udce9 \\x1b]0;owned\\x07 a\nb\\x0dc\\x7f \\u202eevil\tok"
    s.encode("utf-8")  # always writable
    assert text.safe(s) == s, "idempotent: a record read back is unchanged"
    assert text.file_name(os.fsdecode(b"caf\xe9.py")) == "caf\\xe9.py", "a byte that is not UTF-8"
    assert text.one_line("a\nb\tc") == "a\\nb\\tc"


def test_a_record_holds_only_safe_text_everywhere():
    r = _record("caf\udce9\x1b[2K", "boom \udce9", "raised \udce9\x1b[31m")
    assert r.student == "caf\\udce9\\x1b[2K" and r.detail == "boom \\udce9"
    assert r.tests[0]["output"] == "raised \\udce9\\x1b[31m"
    for part in (r.student, r.detail, *map(str, r.tests[0].values())):
        part.encode("utf-8")


@pytest.mark.parametrize("value", ["=2+5", "+1", "-1+2", "@SUM(A1)", "\tx", "=HYPERLINK(\"http://x\",\"ok\")"])
def test_the_gradebook_never_starts_a_formula(tmp_path, value):
    out = Output(tmp_path)
    out.records = {"s": _record(value, detail=value)}
    rows = list(csv.reader(io.StringIO(out.gradebook(["attention"]))))
    assert rows[1][0] == "'" + text.safe(value) and rows[1][-1].startswith("'")


def test_a_carriage_return_in_a_name_cannot_split_a_row(tmp_path):
    out = Output(tmp_path)
    out.records = {n: _record(n) for n in ("bob\r0,0,0\rmallory", "alice")}
    book = out.gradebook(["attention"])
    assert "\r" not in book and len(list(csv.reader(io.StringIO(book)))) == 3


def _rendered(md: str) -> str:
    """``md`` as a CommonMark renderer with raw HTML on (as GitHub's) shows it."""
    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(md)


def test_feedback_shows_a_message_with_fences_and_html_as_text():
    evil = "x\n```\n</code></pre><script>alert(1)</script>\n**Score: 100 / 100**\n````\n<img src=x onerror=alert(2)>"
    md = feedback_md(_record("<b>eve</b> [x](javascript:alert(3))", detail=evil, output=evil,
                             diagnoses={"attention": "# <img src=y>\n```\n<script>alert(4)</script>"}))
    page = _rendered(md)
    for tag in ("<script", "<img", "<b>", "<a ", "javascript:alert(3)\""):
        assert tag not in page, (tag, page)
    assert "<strong>Score: 100 / 100</strong>" not in page and page.count("<strong>Score:") == 1
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 2, "the message itself is shown, as text, twice"
    assert "<h1>Feedback for &lt;b&gt;eve&lt;/b&gt; [x](javascript:alert(3))</h1>" in page


def test_markdown_code_spans_and_text_escape_what_markdown_reads():
    assert text.md_code("a`b") == "``a`b``" and text.md_code("`x") == "`` `x ``"
    assert text.md_text("[x](javascript:y) *a* <i>") == "\\[x\\]\\(javascript:y\\) \\*a\\* &lt;i&gt;"


def _names(folder) -> dict[str, str]:
    return {e.student: e.problem for e in discover(folder)}


def test_every_entry_of_the_class_folder_gets_a_row_of_its_own(tmp_path):
    (tmp_path / "alice.py").write_text("x = 1\n")
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / "sub.py").write_text("x = 1\n")
    (tmp_path / "alice.ipynb").write_text("{}")
    (tmp_path / "UPPER.PY").write_text("x = 1\n")
    (tmp_path / "bob.py.txt").write_text("x = 1\n")
    (tmp_path / ".x.py").write_text("x = 1\n")
    (tmp_path / "__x.py").write_text("x = 1\n")
    (tmp_path / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    (tmp_path / "link_to_alice.py").symlink_to(tmp_path / "alice.py")
    os.mkfifo(tmp_path / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    (tmp_path / ".DS_Store").write_text("")
    (tmp_path / "__MACOSX").mkdir()
    (tmp_path / unicodedata.normalize("NFC", "café.py")).write_text("x = 1\n")
    (tmp_path / unicodedata.normalize("NFD", "café.py")).write_text("x = 1\n")
    (tmp_path / ".vscode").mkdir()  # an editor's: hidden, not handed in
    names = _names(tmp_path)
    sock.close()
    assert len(names) == len(os.listdir(tmp_path)) - 3, "one row per entry but the OS's own files and hidden folders"
    assert {"alice", "alice.py", "alice.ipynb"} <= set(names), "three entries, three ids"
    assert not names["alice"] and not names["alice.py"] and not names["alice.ipynb"], "all three graded"
    assert "rename it" in names["UPPER.PY"] and "rename it" in names["bob.py.txt"]
    assert "hidden or special" in names[".x.py"] and "hidden or special" in names["__x.py"]
    assert "symbolic link" in names["dangling.py"] and "symbolic link" in names["link_to_alice.py"]
    assert "not a regular file" in names["fifo"] and "not a regular file" in names["sock"]
    cafes = [n for n in names if n.startswith("caf")]
    assert len(cafes) == 2 and len({unicodedata.normalize("NFC", n) for n in cafes}) == 2, cafes


def test_an_id_made_unique_says_so(tmp_path):
    (tmp_path / "alice.py").write_text("x = 1\n")
    (tmp_path / "alice.ipynb").write_text("{}")
    notes = {e.student: e.note for e in discover(tmp_path)}
    assert set(notes) == {"alice.py", "alice.ipynb"} and all("would share the id 'alice'" in n for n in notes.values())


HOSTILE_PAGE = (b"<html><head><script>document.title='ran'</script></head><body><p>42 %</p>"
                b"<script>document.body.setAttribute('data-ran', '1')</script></body></html>")


def test_a_coverage_report_keeps_its_pages_and_drops_the_rest():
    assert text.coverage_file("index.html", b"<p>x</p>").startswith(text.COVERAGE_POLICY)
    assert text.coverage_file("a.html", b"<!DOCTYPE html>\n<p>").startswith(b"<!DOCTYPE html>" + text.COVERAGE_POLICY)
    assert text.coverage_file("style.css", b"p{}") == b"p{}"
    assert text.coverage_file("run.sh", b"rm -rf ~") is None and text.coverage_file("Makefile", b"x") is None


@pytest.mark.skipif(NO_CHROMIUM, reason="needs Chromium (CI installs it)")
def test_no_script_of_a_coverage_page_runs_in_a_browser(tmp_path):
    """``--coverage`` copies pages the child wrote: with the policy first, their scripts do not run
    (the same page without it shows they would)."""
    plain, kept = tmp_path / "plain.html", tmp_path / "kept.html"
    plain.write_bytes(HOSTILE_PAGE)
    kept.write_bytes(text.coverage_file("kept.html", b"<!doctype html>" + HOSTILE_PAGE))
    assert 'data-ran="1"' in chromium_dom(plain), "the control: a script runs without the policy"
    dom = chromium_dom(kept)
    assert 'data-ran="1"' not in dom and "<title>ran</title>" not in dom and "42 %" in dom
