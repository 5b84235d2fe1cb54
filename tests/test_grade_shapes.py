"""No shape of a class folder stops a class, and a submission's own text is never a command (issue 45): the
grader walks and copies without recursion and within limits (transformer_spec/grader/tree.py), reads nothing over the size
limit, leaves special files out, keeps an id that is the student's own, and quotes every re-run line."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from transformer_spec.grader import tree
from transformer_spec.grader.batch import folder_hashes
from transformer_spec.grader.settings import MAX_SUBMISSION_BYTES, GradeError
from transformer_spec.grader.submissions import Entry, copy_submission, discover, submission_hash
from transformer_spec.pytest_plugin.failures import shell_test_id, shell_word


def _deep(root: Path, depth: int) -> Path:
    """A folder nested ``depth`` levels below ``root``, made without recursion (``os.makedirs`` of a path that
    long would pass PATH_MAX)."""
    here = root
    for _ in range(depth):
        here.mkdir()
        os.chdir(here)
        here = Path("d")
    here.mkdir()
    (here / "x.py").write_text("x = 1\n")
    os.chdir(root.parent)
    return root


def _remove_deep(root: Path, depth: int) -> None:
    """Remove what :func:`_deep` made, bottom up without recursion: pytest's own clean-up of old temporary
    folders recurses and would stop a later run with a RecursionError."""
    bottom = root / "/".join(["d"] * depth)
    (bottom / "x.py").unlink()
    for level in range(depth, -1, -1):
        here = root / "/".join(["d"] * level) if level else root
        for child in here.iterdir():
            if child.name != "d":
                child.unlink()
        here.rmdir()


def test_a_folder_nested_1200_levels_is_refused_with_a_reason_not_a_recursion_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    student = tmp_path / "class" / "deep"
    student.parent.mkdir()
    _deep(student, 1200)
    try:
        _check_deep(student, tmp_path)
    finally:
        _remove_deep(student, 1200)


def _check_deep(student: Path, tmp_path: Path) -> None:
    (student / "__init__.py").write_text("x = 1\n")
    found = tree.scan(student)
    assert found.problem == f"its folders are nested deeper than {tree.MAX_DEPTH} levels"
    hashes = folder_hashes(student.parent)  # the class's fingerprint: no RecursionError
    assert set(hashes) == {"deep"}
    (entry,) = discover(student.parent)
    with pytest.raises(GradeError, match="nested deeper than 64 levels"):
        copy_submission(entry, tmp_path / "dest")
    assert submission_hash(entry).startswith("unread-")


def test_a_sparse_file_of_10_gib_is_never_read(tmp_path):
    student = tmp_path / "class" / "sparse"
    student.mkdir(parents=True)
    (student / "__init__.py").write_text("x = 1\n")
    with open(student / "weights.bin", "wb") as f:
        f.truncate(10 * 2**30)  # 10 GiB that take no disk
    start = time.monotonic()
    (entry,) = discover(student.parent)
    folder_hashes(student.parent)
    digest = submission_hash(entry)
    with pytest.raises(GradeError, match=f"larger than {MAX_SUBMISSION_BYTES // 2**20} MB"):
        copy_submission(entry, tmp_path / "dest")
    assert time.monotonic() - start < 5, "the file was read"
    assert digest.startswith("unread-")


def test_special_files_are_left_out_of_the_copy_with_a_note(tmp_path):
    student = tmp_path / "class" / "fifo"
    student.mkdir(parents=True)
    (student / "__init__.py").write_text("x = 1\n")
    os.mkfifo(student / "pipe")
    (entry,) = discover(student.parent)
    copied = copy_submission(entry, tmp_path / "dest")
    assert (copied / "__init__.py").is_file() and not (copied / "pipe").exists()
    assert "special files (FIFOs, sockets, devices) left out of the copy: pipe" in entry.note
    assert str(tmp_path) not in entry.note


def test_many_files_are_walked_without_recursion_and_counted(tmp_path, monkeypatch):
    monkeypatch.setattr(tree, "MAX_ENTRIES", 500)
    student = tmp_path / "many"
    student.mkdir()
    for i in range(600):
        (student / f"f{i}.txt").write_text("")
    assert tree.scan(student).problem == "it holds more than 500 files and folders"


def test_an_id_that_is_the_students_own_name_is_kept(tmp_path):
    """``Honest_OK`` beside a classmate's ``honest_ok``: both keep their ids where names differ by case (the output
    disk keeps them apart), and where the disk ignores case only the colliding entry is renamed."""
    for name in ("Honest_OK", "honest_ok"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("x = 1\n")
    assert [e.student for e in discover(tmp_path)] == ["Honest_OK", "honest_ok"]
    ids = {e.student: e.note for e in discover(tmp_path, casefold=True)}
    assert "honest_ok" in ids and not ids["honest_ok"]
    assert "Honest_OK~2" in ids and "which keeps it" in ids["Honest_OK~2"]


@pytest.mark.parametrize("name", ["$(id)", "r;id;#", "a b", "`id`"])
def test_a_rerun_line_quotes_a_students_name(name):
    import shlex

    assert shlex.split(f"pytest --impl {shell_word(name)}")[-1] == name
    assert shlex.split(shell_test_id("spec_tests/x.py::test[a$(id)]")) == ["spec_tests/x.py::test[a$(id)]"]
    assert shell_test_id("spec_tests/x.py::test[float32]") == '"spec_tests/x.py::test[float32]"'
