"""Tests of ``tools.grade`` (a whole class): the adversarial corpus, resume after ``kill -9``, shards.

The corpus (``tests/adversarial/``) is graded once (module fixture) on the oracle tests only with
short limits; the resume and shard tests grade four of its members again and must reproduce
their gradebook rows exactly. The long run on the full suite (a class of >= 20 mixed
submissions, as in ``docs/class_grading.md``) runs only with ``TRANSFORMER_SPEC_SLOW=1``.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from tests.adversarial.corpus import build
from tests.test_grading import GRADESCOPE_SCHEMA
from tests.tools_helpers import NO_CHROMIUM, assert_renders_in_chromium
from tools import grade

#: the slow set (conftest.py: run with --slow): grades the sample class corpus in sandboxed children
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
ORACLE = "spec_tests/test_torch_oracle.py"
FAST = ["--tests", ORACLE, "--time-limit", "20", "--test-timeout", "6", "--wall", "60",
        "--memory-mb", "2500", "--max-output-mb", "5", "--no-progress"]
MINI = ["buggy", "correct", "syntax_error", "system_exit"]


def fast_settings() -> grade.Settings:
    return grade.Settings([ORACLE], None, grade.Limits(time_limit=20, test_timeout=6, wall=60, memory_mb=2500,
                                                       max_output_mb=5))


def rows(path: Path) -> dict[str, dict]:
    """The gradebook by id (an id a spreadsheet would read as a formula is written with a leading ')."""
    with open(path, newline="") as f:
        return {_unquoted(r["student"]): r for r in csv.DictReader(f)}


def _unquoted(cell: str) -> str:
    return cell[1:] if cell[:1] == "'" and cell[1:2] in ("=", "+", "-", "@", "\t", "\r") and cell[1:2] else cell


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    expect = build(root / "submissions")
    out = root / "out"
    start = time.monotonic()
    records = grade.grade_class(root / "submissions", out, fast_settings(), jobs=2, progress=False)
    return root, expect, records, rows(out / "gradebook.csv"), time.monotonic() - start


def test_the_corpus_is_a_mixed_class(corpus):
    _, expect, records, book, _ = corpus
    assert len(expect) >= 20
    assert set(book) == set(expect) == set(records) == set(STUDENTS), "every submission gets exactly one row"


STUDENTS = ["correct", "buggy", "syntax_error", "import_loop", "forward_loop", "memory_bomb", "exit_at_import",
            "os_exit_forward", "keyboard_interrupt", "system_exit", "print_100mb", "forged_files", "conftest_all_pass",
            "patch_allclose", "patch_harness", "edit_tests", "delete_tests", "delegate_reference", "delegate_torch",
            "equal_to_anything", "alt_module", "alt_notebook",
            # names and messages that attack the outputs (tests/adversarial/names.py), by the ids they must get
            "text_surrogate_forward", "text_surrogate_import", "text_fence", "=2+5", "caf\\xe9", "a$^$b",
            "bob\\x0d0,0,0\\x0dmallory", "\\x1b]0;owned\\x07\\x1b[2Keve", "carol.py", "carol", "café",
            "cafe\\u0301.py", "UPPER.PY", "bob.py.txt", ".x.py", "__x.py", "dangling.py", "link_to_carol.py", "fifo"]


@pytest.mark.parametrize("student", STUDENTS)
def test_each_submission_gets_the_grade_it_earned(corpus, student):
    _, expect, records, book, _ = corpus
    e, r = expect[student], records[student]
    statuses = e.status if isinstance(e.status, tuple) else (e.status,)
    context = f"{student}: status {r.status!r} ({r.detail}), points {r.components}"
    assert r.status in statuses, context
    correct, buggy = records["correct"], records["buggy"]
    assert correct.total == correct.possible > 0, "the reference must score full points"
    if e.points == "full":
        assert r.total == r.possible, context
    elif e.points == "zero":
        assert r.total == 0, context
    elif e.points == "buggy":
        assert r.components == buggy.components, context
    elif e.points == "at_most_buggy":
        assert all(r.components[c] <= buggy.components[c] for c in r.components), context
    else:
        assert 0 < r.total < r.possible, context
    full = {c: sum(t["max_score"] for t in r.tests if t["tags"][0] == c) for c in r.components}
    for c in e.zero:
        assert r.components[c] == 0, f"{context}: {c} should score 0"
    for c in e.full:
        assert r.components[c] == pytest.approx(full[c], abs=0.01), f"{context}: {c} should score full points"
    assert book[student]["status"] == r.status and float(book[student]["total"]) == r.total


def test_a_notebook_gets_the_grade_of_the_same_code_as_a_py_file(corpus):
    _, _, records, _, _ = corpus
    module, notebook = records["alt_module"], records["alt_notebook"]
    assert notebook.status == module.status == "ok", (notebook.detail, module.detail)
    assert notebook.total == module.total == module.possible and notebook.components == module.components
    assert [(t["name"], t["score"]) for t in notebook.tests] == [(t["name"], t["score"]) for t in module.tests]


def test_the_class_report_shows_scores_components_mistakes_and_statuses(corpus, tmp_path):
    """The class holds a notebook (alt_notebook); its report.html, read and shown in Chromium."""
    root, _, records, _, _ = corpus
    if not NO_CHROMIUM:
        assert_renders_in_chromium(root / "out" / "report.html", 4, tmp_path / "report.png", (1200, 3000))
    page = (root / "out" / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 4, "the four figures, inline"
    for section in ("Scores", "Components", "Students x components", "Most common mistakes", "Not graded normally"):
        assert f"<h2>{section}</h2>" in page, section
    assert records["buggy"].mistakes.get("attention") == ["no_scaling"], records["buggy"].mistakes
    assert "<code>no_scaling</code>" in page and "buggy" in page.split("<code>no_scaling</code>")[1].split("</tr>")[0]
    not_ok = page.split("<h2>Not graded normally</h2>")[1]
    for student, r in records.items():
        assert (f"<td>{student}</td><td>{r.status}</td>" in not_ok) == (r.status != "ok"), student


def test_student_text_reaches_every_output_as_plain_text(corpus):
    """Issue 26: names and messages that once stopped the batch, split a gradebook row, ran as a
    formula, closed feedback.md's code block or sent terminal escapes are data in every output."""
    from markdown_it import MarkdownIt

    root, expect, records, _, _ = corpus
    out = root / "out"
    raw = (out / "gradebook.csv").read_bytes().decode("utf-8")
    assert "\r" not in raw and "\x1b" not in raw
    cells = list(csv.reader(raw.splitlines()))
    assert len(cells) == 1 + len(expect), "one row per entry, none split"
    assert not [c for row in cells[1:] for c in row if c[:1] in ("=", "+", "-", "@", "\t")], "no formula"
    render = MarkdownIt("commonmark", {"html": True}).render
    for student, r in records.items():
        for text in (r.student, r.detail, r.submission, *(t["output"] for t in r.tests)):
            assert not any(ord(c) < 32 and c not in "\n\t" or 0x7f <= ord(c) < 0xa0 for c in text), (student, text[:80])
        folder = out / "students" / r.student
        json.loads((folder / "results.json").read_bytes().decode("utf-8"))
        page = render((folder / "feedback.md").read_text())
        assert "<script" not in page and "<img" not in page and page.count("<strong>Score:") == 1, student
    fence = (out / "students" / "text_fence" / "feedback.md").read_text()
    assert "<script>alert(1)</script>" in fence, "the message itself is shown, in its block"
    report = (out / "report.html").read_text()
    assert "<script>alert" not in report and "\x1b" not in report


def test_buggy_honest_submissions_are_never_called_tampering(corpus):
    _, _, records, _, _ = corpus
    for s in ("correct", "buggy", "system_exit", "forward_loop", "keyboard_interrupt", "conftest_all_pass"):
        assert not records[s].tampered, f"{s}: {records[s].tampered}"


def test_forged_files_are_gone_and_outputs_are_the_graders(corpus):
    root, _, records, book, _ = corpus
    out = root / "out"
    assert not (out / "students" / "intruder.txt").exists(), "a file planted in the output folder was left"
    assert not (out / "results.json").exists()
    assert set(book) == set(records), "the planted gradebook row must not survive"
    for student, r in records.items():
        d = out / "students" / student
        assert sorted(p.name for p in d.iterdir()) == ["feedback.md", "log.txt", "record.json", "results.json"]
        data = json.loads((d / "results.json").read_text())
        jsonschema.validate(data, GRADESCOPE_SCHEMA)
        assert data["score"] == pytest.approx(r.total, abs=0.01), student
        assert f"{grade.format_points(r.total)} / {grade.format_points(r.possible)}" in (d / "feedback.md").read_text()
    assert not list(out.rglob("*.tmp")), "no temporary file may be left"


def test_feedback_explains_a_failure_and_tampering(corpus):
    root, _, _, _, _ = corpus
    buggy = (root / "out" / "students" / "buggy" / "feedback.md").read_text()
    assert "scaled_dot_product_attention" in buggy and "Reproduce: pytest --impl buggy" in buggy
    assert "/tmp/" not in buggy.split("Reproduce")[0], "messages name the student's own files, not the sandbox"
    hacked = (root / "out" / "students" / "patch_harness" / "feedback.md").read_text()
    assert "tampering" in hacked and "hidden re-check" in hacked


def _mini(root: Path, name: str) -> Path:
    """Four members of the corpus in a class folder of their own."""
    folder = root / name
    folder.mkdir()
    for s in MINI:
        src = root / "submissions" / s
        if src.is_dir():
            shutil.copytree(src, folder / s)
        else:
            shutil.copy2(root / "submissions" / f"{s}.py", folder / f"{s}.py")
    return folder


def test_two_shards_merged_equal_the_unsharded_run(corpus):
    root, _, _, book, _ = corpus
    folder = _mini(root, "mini_shards")
    shards = [grade.shard_of(s, 2) for s in MINI]
    assert set(shards) == {1, 2}, "the mini class must be split between both shards"
    for k in (1, 2):
        assert grade.main([str(folder), "--out", str(root / f"shard{k}"), "--shard", f"{k}/2", "--jobs", "2",
                           *FAST]) == 0
    assert grade.main(["merge", str(root / "shard1"), str(root / "shard2"), "--out", str(root / "merged")]) == 0
    merged = rows(root / "merged" / "gradebook.csv")
    assert merged == {s: book[s] for s in MINI}
    with pytest.raises(grade.GradeError, match="both"):
        grade.merge([root / "shard1", root / "shard1"], root / "merged_twice")


def test_resume_after_kill_9_regrades_nothing_finished(corpus):
    root, _, _, book, _ = corpus
    folder = _mini(root, "mini_resume")
    out = root / "resume_out"
    cmd = [sys.executable, "-m", "tools.grade", str(folder), "--out", str(out), "--jobs", "1", *FAST]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(out.glob("students/*/record.json")):
        time.sleep(0.2)
    note = list((out / ".grade").glob("tmp-root-*.txt"))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = {p.parent.name: p.stat().st_mtime_ns for p in out.glob("students/*/record.json")}
    assert 1 <= len(finished) < len(MINI), f"kill -9 came too late or too early: {sorted(finished)}"
    # The children died with the parent (PR_SET_PDEATHSIG), and nothing is half-written.
    tmp_root = note[0].read_text().strip() if note else None
    time.sleep(1.0)
    if tmp_root:
        alive = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_has(p, tmp_root)]
        assert not alive, "a grading child outlived its killed parent"
    for p in out.rglob("*.json"):
        if not p.name.startswith("."):
            json.loads(p.read_text())
    assert grade.main([str(folder), "--out", str(out), "--jobs", "1", "--resume", *FAST]) == 0
    for student, mtime in finished.items():
        assert (out / "students" / student / "record.json").stat().st_mtime_ns == mtime, f"{student} was regraded"
    assert rows(out / "gradebook.csv") == {s: book[s] for s in MINI}
    assert not list(out.rglob("*.tmp"))
    if tmp_root:
        assert not Path(tmp_root).exists(), "the killed run's sandboxes are removed on resume"


def _cmdline_has(proc: Path, text: str) -> bool:
    try:
        return text.encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False


def test_an_empty_class_folder_is_an_error(tmp_path, capsys):
    (tmp_path / "subs" / ".hidden").mkdir(parents=True)  # nothing a student handed in
    assert grade.main([str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "nothing to grade" in err and "subs" in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists(), "an empty class left an output folder"


def test_usage_errors(tmp_path, capsys):
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "alice.py").write_text("")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "something").write_text("x")
    assert grade.main([str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    assert "is not empty" in capsys.readouterr().err
    assert grade.main([str(tmp_path / "subs"), "--out", str(tmp_path / "o2"), "--tests", "tests"]) == 2
    with pytest.raises(SystemExit):
        grade.main([str(tmp_path / "subs"), "--out", str(tmp_path / "o3"), "--shard", "3/2"])


def test_discovery_and_shards_are_deterministic(tmp_path):
    subs = tmp_path / "subs"
    (subs / "pkg").mkdir(parents=True)
    (subs / "pkg" / "__init__.py").write_text("")
    (subs / "alice.py").write_text("")
    (subs / "bob" / "my_transformer").mkdir(parents=True)
    (subs / "bob" / "my_transformer" / "__init__.py").write_text("")
    (subs / "bob" / "conftest.py").write_text("")
    (subs / "carol").mkdir()
    (subs / "carol" / "a.py").write_text("")
    (subs / "carol" / "b.py").write_text("")
    (subs / ".hidden.py").write_text("")
    entries = {e.student: e for e in grade.discover(subs)}
    assert sorted(entries) == [".hidden.py", "alice", "bob", "carol", "pkg"], "a hidden .py file gets a row"
    assert entries[".hidden.py"].target is None and "hidden" in entries[".hidden.py"].problem
    assert entries["bob"].target == subs / "bob" / "my_transformer"
    assert entries["carol"].target is None and "2 .py or .ipynb files" in entries["carol"].problem
    ids = [f"s{i}" for i in range(200)]
    parts = [{s for s in ids if grade.shard_of(s, 3) == k} for k in (1, 2, 3)]
    assert set().union(*parts) == set(ids) and sum(map(len, parts)) == len(ids)
    assert all(40 < len(p) < 95 for p in parts), [len(p) for p in parts]


def test_atomic_write_leaves_whole_files_only(tmp_path):
    target = tmp_path / "a" / "f.json"
    grade.atomic_write(target, "1")
    grade.atomic_write(target, "2")
    assert target.read_text() == "2" and sorted(p.name for p in target.parent.iterdir()) == ["f.json"]


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_write_gives_the_mode_of_the_umask(tmp_path, umask, mode):
    """Gradebooks, records and checkpoints get the usual mode, not mkstemp's 0600."""
    old = os.umask(umask)
    try:
        written = grade.atomic_write(tmp_path / f"f{umask:o}.csv", "x")
    finally:
        os.umask(old)
    assert written.stat().st_mode & 0o777 == mode, f"mode {written.stat().st_mode & 0o777:o} under umask {umask:o}"


@pytest.mark.skipif(not os.environ.get("TRANSFORMER_SPEC_SLOW"), reason="the full-suite class run takes minutes; "
                                                                       "set TRANSFORMER_SPEC_SLOW=1")
def test_full_suite_class_run(corpus, tmp_path):
    root, expect, _, _, _ = corpus
    out = tmp_path / "full"
    assert grade.main([str(root / "submissions"), "--out", str(out), "--no-progress"]) == 0
    book = rows(out / "gradebook.csv")
    assert float(book["correct"]["total"]) == float(book["correct"]["possible"]) == 100
    assert 0 < float(book["buggy"]["total"]) < 100
    for s in ("syntax_error", "exit_at_import", "delegate_reference", "print_100mb"):
        assert float(book[s]["total"]) == 0, s


def test_feedback_states_each_components_diagnosis_once_then_its_failing_tests():
    diagnosis = "Diagnosis for 'attention': on fixed probe inputs your code behaves exactly like this known mistake"
    tests = [{"name": f"[attention] t.py::test_{i}", "number": f"1.{i}", "score": 0.0, "max_score": 1.0,
              "status": "failed", "output": f"wrong value {i}\nsecond line {i}\nReproduce: pytest t.py::test_{i}",
              "tags": ["attention"], "visibility": "visible"} for i in range(50)]
    tests.append({"name": "[masks] m.py::test_ok", "number": "2.1", "score": 2.0, "max_score": 2.0,
                  "status": "passed", "output": "", "tags": ["masks"], "visibility": "visible"})
    record = grade.Record("alice", "ok", 2.0, 52.0, {"attention": 0.0, "masks": 2.0}, "", "alice.py", "", tests,
                          diagnoses={"attention": diagnosis})
    text = grade.feedback_md(record)
    assert text.count(diagnosis) == 1
    assert "## attention: 0.00 / 50.00 points (0 of 50 tests passed)" in text and "## masks" not in text
    assert [f"second line {i}" in text for i in range(5)] == [True, True, True, False, False], "3 in full"
    assert all(f"- `[attention] t.py::test_{i}`: wrong value {i}" in text for i in range(3, 50))
    assert grade.results_json(record)["output"].count(diagnosis) == 1
    unimportable = grade.Record("bob", "import-error", 0.0, 52.0, {}, "SyntaxError (at bob.py:1)", "bob.py", "",
                                [dict(t, output="SyntaxError (at bob.py:1)") for t in tests])
    assert grade.feedback_md(unimportable).count("SyntaxError") == 1


def test_the_class_graders_points_add_up_to_the_rubrics_exactly(corpus):
    from transformer_spec.scoring import rubric

    root, _, records, _, _ = corpus
    data = json.loads((root / "out" / "students" / "correct" / "results.json").read_text())
    components = rubric.load_rubric().components
    for comp in {t["tags"][0] for t in data["tests"]}:
        assert round(sum(t["max_score"] for t in data["tests"] if t["tags"] == [comp]), 9) == components[comp], comp
    assert round(sum(t["max_score"] for t in data["tests"]), 9) == data["score"] == records["correct"].possible
