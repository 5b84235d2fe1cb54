"""The grader rows of ``tools.bench`` (tools/benchmarks/class_grading.py): their class folder,
the submission copy and the rate target. The timings themselves are run by ``python -m tools.bench``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.benchmarks import class_grading, timing
from tools.cli import ToolError
from transformer_spec.catalogue.pitfalls import catalogue
from transformer_spec.catalogue.variations import CATALOGUE


def test_a_rate_row_is_met_by_its_seconds_not_its_ratio():
    fast = timing.Row("class", ours=14.0, baseline=2.0, target=">= 4 a minute", absolute_limit=15.0)
    slow = timing.Row("class", ours=16.0, baseline=8.0, target=">= 4 a minute", absolute_limit=15.0)
    assert (fast.met, slow.met) == ("yes", "NO")  # 7x and 2x: the ratio does not decide


def test_the_class_holds_every_kth_pitfall_and_variation_as_a_students_package(tmp_path):
    students = class_grading.write_class(tmp_path, sample=10)
    members = [*catalogue(), *CATALOGUE][::10]
    assert students == [m.name for m in members]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(students)
    for name in students:
        assert (tmp_path / name / "my_transformer" / "__init__.py").is_file()
    first = members[0]  # its patch is in its copy
    file, _old, new = first.patches[0]
    assert new in (tmp_path / first.name / "my_transformer" / file).read_text()


def test_the_submission_copy_is_what_a_student_hands_in(tmp_path):
    pkg = class_grading.submission_copy("reference", tmp_path)
    assert pkg == tmp_path / "my_transformer" and (pkg / "attention.py").is_file()
    assert not (pkg / "__pycache__").exists()
    single = tmp_path / "mine.py"
    single.write_text("x = 1\n")
    (tmp_path / "b").mkdir()
    assert class_grading.submission_copy(str(single), tmp_path / "b") == tmp_path / "b" / "my_transformer.py"
    with pytest.raises(ToolError, match="--impl"):
        class_grading.submission_copy(str(tmp_path / "missing.py"), tmp_path / "b")
