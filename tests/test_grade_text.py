"""A student's text and names are data (``transformer_spec/grader/text.py``, issue 26): every output writes them
so that no reader runs or mistakes them, and every entry of a class folder gets one row of its own.

The whole path (a class holding such names and messages, graded beside honest students) is
``tests/test_grade_class.py``'s corpus (``tests/adversarial/corpus.py``, the ``text_*`` members)."""

from __future__ import annotations

import csv
import io
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
import unicodedata

import pytest
from markdown_it import MarkdownIt

from tests.tools_helpers import NO_CHROMIUM, chromium_dom
from transformer_spec.grader import coverage_pages, text
from transformer_spec.grader.feedback import feedback_md
from transformer_spec.grader.output import Output
from transformer_spec.grader.record import Record
from transformer_spec.grader.settings import REPO
from transformer_spec.grader.submissions import discover


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



FORMULAS = ["=2+5", "+1+1", "-1+2", "@SUM(1+1)", "=HYPERLINK(\"http://x\",\"ok\")", "=1+1;x"]


@pytest.mark.skipif(shutil.which("ssconvert") is None, reason="needs Gnumeric's ssconvert (CI installs it)")
def test_a_spreadsheet_shows_the_gradebook_as_text(tmp_path):
    """A real spreadsheet (Gnumeric) opens the gradebook and evaluates nothing: every id and detail
    reads back as the text it was. The control, the same cells written plainly, is evaluated."""
    out = Output(tmp_path)
    out.records = {v: _record(v, detail=v) for v in FORMULAS}
    book = tmp_path / "gradebook.csv"
    book.write_text(out.gradebook(["attention"]))
    control = tmp_path / "control.csv"
    with open(control, "w", newline="") as f:
        csv.writer(f).writerows([["student", "detail"], *([v, v] for v in FORMULAS)])

    def evaluated(path):
        shown = path.with_name(path.stem + "-shown.csv")
        subprocess.run(["ssconvert", str(path), str(shown)], capture_output=True, timeout=120, check=True)
        with open(shown, newline="") as f:
            return list(csv.DictReader(f))

    shown = [r["student"] for r in evaluated(control)]
    assert shown[0] == "7" and shown[4] == "ok", f"the control: plain cells are formulas ({shown})"
    rows = evaluated(book)
    assert sorted(r["student"] for r in rows) == sorted(FORMULAS)
    assert all(r["detail"] == r["student"] for r in rows), rows

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


#: source text that would be markup if a page took it as HTML: a script, and a redirect to a page
#: of the attacker's (``ARRIVED`` there)
HOSTILE_SOURCE = ("x = 1  # </pre><script>document.body.setAttribute('data-ran', '1')</script>\n"
                  "y = 2  # <meta http-equiv=\"refresh\" content=\"0;url=target.html\">\n"
                  "def f():\n    return 3\n")


def _coverage_report(**entries) -> bytes:
    return json.dumps({"meta": {}, "files": entries}).encode()


def test_coverage_pages_show_only_the_submissions_files_and_valid_lines(tmp_path):
    """The child's JSON report is data: a name outside the grader's copy of the submission (absolute,
    ``..``, or a link out of it), a file that is not ``.py``, and line numbers that are not lines of the
    file are dropped; what remains is the source the grader copied, with the lines that ran."""
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "mine.py").write_text(HOSTILE_SOURCE)
    (sub / "notes.txt").write_text("secret")
    (tmp_path / "outside.py").write_text("instructor = 'secret'\n")
    (sub / "link.py").symlink_to(tmp_path / "outside.py")
    report = json.dumps({"files": {
        str(sub / "mine.py"): {"executed_lines": [1, 2, 99, "3", True, -1], "missing_lines": [4, 2]},
        str(tmp_path / "outside.py"): {"executed_lines": [1]}, "../outside.py": {"executed_lines": [1]},
        str(sub / "link.py"): {"executed_lines": [1]}, str(sub / "notes.txt"): {"executed_lines": [1]},
        "/etc/passwd": {"executed_lines": [1]}, 7: [], str(sub / "mine.py") + "\x00": {}}}).encode()
    files = coverage_pages.read(report, sub)
    assert [(f.name, f.executed, f.missing) for f in files] == [("mine.py", {1, 2}, {4})]
    pages = coverage_pages.pages("=evil<b>", files)
    assert set(pages) == {"index.html", "file1.html"}
    for page in pages.values():
        assert page.startswith(b"<!doctype html>\n" + text.COVERAGE_POLICY)
        assert b"secret" not in page and b"<script>" not in page and b"<meta http-equiv=\"refresh" not in page
    assert b"67 %" in pages["index.html"] and b"=evil&lt;b&gt;" in pages["index.html"]
    assert coverage_pages.read(b"not json", sub) == [] and coverage_pages.read(b"[1]", sub) == []
    assert b"No file of the submission was measured" in coverage_pages.pages("a", [])["index.html"]


@pytest.mark.slow
@pytest.mark.skipif(NO_CHROMIUM, reason="needs Chromium (CI installs it)")
def test_a_coverage_page_shows_hostile_source_as_text_in_a_browser(tmp_path):
    """A page the grader wrote from a source holding a script and a redirect shows both as text:
    no script runs and the browser stays on the page (the same source as raw HTML does both)."""
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "mine.py").write_text(HOSTILE_SOURCE)
    (tmp_path / "target.html").write_text("<p>ARRIVED</p>")
    files = coverage_pages.read(_coverage_report(**{str(sub / "mine.py"): {"executed_lines": [1, 2]}}), sub)
    page = tmp_path / "page.html"
    page.write_bytes(coverage_pages.pages("alice", files)["file1.html"])
    raw = tmp_path / "raw.html"
    raw.write_text("<!doctype html><body><pre>" + HOSTILE_SOURCE + "</pre>")
    control = chromium_dom(raw)
    assert "ARRIVED" in control, "the control: the raw source redirects the browser"
    dom = chromium_dom(page)
    assert "ARRIVED" not in dom and 'data-ran="1"' not in dom, dom[-2000:]
    assert "&lt;script&gt;" in dom and "def f():" in dom


#: writes a page of its own into the folder the child's coverage report goes to
COVERAGE_PAGE_WRITER = """
import sys as _ts_sys, os as _ts_os
if "--cov-submission" in _ts_sys.argv:
    _ts_dir = _ts_sys.argv[_ts_sys.argv.index("--cov-submission") + 1]
    _ts_os.makedirs(_ts_dir, exist_ok=True)
    for _ts_name in ("evil.html", "index.html"):
        with open(_ts_os.path.join(_ts_dir, _ts_name), "w") as _ts_f:
            _ts_f.write('<meta http-equiv="refresh" content="0;url=https://example.invalid/">EVIL')
"""


@pytest.mark.slow
def test_the_class_graders_coverage_pages_are_its_own(tmp_path):
    """``tools.grade --coverage`` end to end: the student's pages are the grader's (written from the
    child's JSON report), whatever the submission leaves in its coverage folder, and they show its
    files with the lines that ran."""
    from tests.adversarial.corpus import patched_package
    from tests.test_grade_class import fast_settings
    from tools import grade

    patched_package(tmp_path / "class", "alice", append=COVERAGE_PAGE_WRITER)
    settings = fast_settings()
    settings.coverage = True
    record = grade.grade_class(tmp_path / "class", tmp_path / "out", settings, jobs=1, progress=False, class_report=False)["alice"]
    assert record.status == "ok" and record.total == record.possible, record.detail
    cov = tmp_path / "out" / "students" / "alice" / "coverage"
    names = sorted(p.name for p in cov.iterdir())
    assert "index.html" in names and "evil.html" not in names and all(n.endswith(".html") for n in names)
    index = (cov / "index.html").read_text()
    assert "EVIL" not in index and "coverage of alice" in index and "attention.py" in index, index
    page = next(p for p in cov.glob("file*.html") if "attention.py</h1>" in p.read_text()).read_text()
    assert 'class="run"' in page and "scaled_dot_product_attention" in page


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", "-L", "ts-grade-text", *args], capture_output=True, text=True, timeout=30).stdout


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (CI installs it)")
def test_a_terminal_shows_hostile_ids_as_text(tmp_path):
    """``tools.grade`` in a real terminal (tmux): ids holding a window-title sequence and an "erase the
    line, print a green ALL OK" sequence reach the progress bar and the summary as escapes; the
    window title is untouched. The control prints the same name raw and the title changes."""
    folder = tmp_path / "class"
    folder.mkdir()
    title, erase = "a\x1b]2;owned\x07.py", "b\x1b[2K\x1b[1G\x1b[32mALL OK\x1b[0m.py"
    for name in (title, erase):
        (folder / name).write_text("def f(:\n")
    command = (f"{shlex.quote(sys.executable)} -m tools.grade {shlex.quote(str(folder))} --out {shlex.quote(str(tmp_path / 'out'))} "
               "--tests spec_tests/test_torch_oracle.py --time-limit 20 --test-timeout 6 --wall 60; echo EXIT=$?")
    _tmux("kill-server")
    try:
        _tmux("new-session", "-d", "-s", "g", "-x", "200", "-y", "40", "-c", str(REPO), "bash --norc --noprofile")
        _tmux("send-keys", "-t", "g", "clear; " + command, "Enter")
        deadline = time.monotonic() + 120
        while "EXIT=" not in (screen := _tmux("capture-pane", "-p", "-t", "g")).replace("echo EXIT=", "") \
                and time.monotonic() < deadline:
            time.sleep(0.5)
        assert "EXIT=0" in screen, screen
        assert _tmux("display", "-p", "-t", "g", "#{pane_title}").strip() != "owned"
        # the bar shows the last one graded, as an escape; nothing green or erased stands alone
        assert "a\\x1b]2;owned\\x07" in screen or "b\\x1b[2K\\x1b[1G\\x1b[32mALL OK" in screen, screen
        assert "ALL OK" not in screen.replace("\\x1b[32mALL OK", ""), screen
        (tmp_path / "raw.txt").write_text(title)
        _tmux("send-keys", "-t", "g", f"cat {shlex.quote(str(tmp_path / 'raw.txt'))}", "Enter")
        deadline = time.monotonic() + 10
        while _tmux("display", "-p", "-t", "g", "#{pane_title}").strip() != "owned" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _tmux("display", "-p", "-t", "g", "#{pane_title}").strip() == "owned", "the control: a raw name sets the title"
    finally:
        _tmux("kill-server")
