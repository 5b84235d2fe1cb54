"""README's claims about what the commands print, each tied to the test that checks it (issue 48).

A claim edited out of the README, or a test renamed or removed, fails here: the README and the tests
that keep it true change together. Whitespace in the README (line breaks) does not matter.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: (what the README says, the test that checks it: file::function)
CLAIMS = [
    ("it scores 0 in under 45 lines: pytest counts the tests that fail on a starter-kit stub as \"not implemented\"",
     "tests/test_new_user.py::test_the_starter_kit_run_is_one_line_per_unimplemented_name"),
    ("The end of the run shows your points per component.",
     "tests/test_grading.py::test_synthetic_scores_hidden_tests_stubs_and_skips"),
    ("every failure ends with the command that re-runs just that test (`--tb=long` brings back pytest's full traceback)",
     "tests/test_grading.py::test_a_terminal_failure_is_short_and_ends_with_its_rerun_command"),
    ("A name you have not written fails only its own tests, with \"`X` is not defined by the submission\"",
     "tests/test_loader.py::test_partial_submission_is_graded_name_by_name"),
    ("runs no test: the run says why once at the top, with the fix, and exits 1",
     "tests/test_grading.py::test_a_submission_that_cannot_be_graded_says_so_once_with_the_fix"),
    ("the summary counts tests that pass but score 0 because they use such a stub",
     "tests/test_grading.py::test_passes_that_earn_nothing_are_explained"),
    ("A test the rubric does not grade fails in the same short form, marked \"(not graded)\", and the summary counts such tests",
     "tests/test_new_user.py::test_a_failing_test_the_rubric_does_not_grade_is_short_and_says_so"),
    ("the other track's tests are deselected, and the summary says how to run them",
     "tests/test_new_user.py::test_other_tracks_tests_are_counted_with_the_option_that_runs_them"),
    ("Both print points per component and write `results.json`",
     "tests/test_new_user.py::test_single_prints_the_component_table"),
    ("`python -m tools.mutants` grades every mistake and prints the kill matrix (mistake × component)",
     "tests/test_pitfalls.py::test_kill_matrix_verdicts"),  # and .ci/run's three matrix stages, which print it
    ("`python -m tools.bench` prints ratios", "tests/test_bench.py::test_main_prints_a_table"),
]


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize("claim, test", CLAIMS, ids=[t.split("::")[1] for _, t in CLAIMS])
def test_the_claim_is_in_the_readme_and_its_test_exists(claim, test):
    assert _flat(claim) in _flat((ROOT / "README.md").read_text()), f"README no longer says: {claim}"
    path, name = test.split("::")
    functions = {n.name for n in ast.walk(ast.parse((ROOT / path).read_text())) if isinstance(n, ast.FunctionDef)}
    assert name in functions, f"{test} does not exist: the claim {claim!r} has no test"
