"""``python -m tools.grade single``: one submission graded exactly as the class grader grades it."""

from __future__ import annotations

import json
import shutil

import jsonschema

from tests.test_grading import GRADESCOPE_SCHEMA
from tools import grade
from transformer_spec.patching import REFERENCE_DIR, write_patched_reference
from transformer_spec.pitfalls import by_name

ORACLE = "spec_tests/test_torch_oracle.py"
LIMITS = ["--tests", ORACLE, "--time-limit", "60", "--test-timeout", "20", "--wall", "150", "--memory-mb", "2500",
          "--no-progress"]


def _scores(results: dict) -> dict[str, tuple[float, str]]:
    return {t["name"]: (t["score"], t["status"]) for t in results["tests"]}


def test_single_gives_the_class_graders_grade(tmp_path, capsys):
    folder = tmp_path / "class"
    shutil.copytree(REFERENCE_DIR, folder / "correct", ignore=shutil.ignore_patterns("__pycache__"))
    write_patched_reference(folder, by_name()["no_scaling"].patches, "unscaled")
    assert grade.main([str(folder), "--out", str(tmp_path / "out"), "--jobs", "2", *LIMITS]) == 0
    for student, total in (("correct", "54"), ("unscaled", None)):
        out = tmp_path / f"{student}.json"
        assert grade.main(["single", str(folder / student), "--results-json", str(out), *LIMITS]) == 0
        printed = capsys.readouterr().out
        single = json.loads(out.read_text())
        jsonschema.validate(single, GRADESCOPE_SCHEMA)
        batch = json.loads((tmp_path / "out" / "students" / student / "results.json").read_text())
        assert _scores(single) == _scores(batch), student
        assert single["score"] == batch["score"] and f"{student}: ok," in printed
        if total:
            assert f"{total} / {total}" in printed
    assert single["score"] < 54, "the unscaled attention loses points"


def test_single_says_what_is_wrong_with_its_arguments(tmp_path, capsys):
    assert grade.main(["single", str(tmp_path / "missing.py"), "--results-json", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "missing.py: no such file or folder" in err and err.count("\n") == 1
    sub = tmp_path / "sub"
    sub.mkdir()
    assert grade.main(["single", str(sub), "--results-json", str(sub / "r.json")]) == 2
    assert "--results-json must not be inside the submission" in capsys.readouterr().err
