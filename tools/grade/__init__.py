"""Grade a whole class: every submission in its own process, with limits, resume, shards, merge.

    python -m tools.grade SUBMISSIONS_DIR --out OUT_DIR [--jobs N] [--resume] [--shard K/N]
                          [--rubric FILE] [--coverage] [--tests PATH ...] [limits]
    python -m tools.grade merge OUT_DIR [OUT_DIR ...] --out MERGED_DIR
    python -m tools.grade single SUBMISSION --results-json FILE [settings as above]

The command line only (:mod:`.cli`); the engine, and how a grade is decided, is
:mod:`transformer_spec.grader` (docs/class_grading.md). Re-exported here: what scripts call.
"""

from __future__ import annotations

from transformer_spec.files import atomic_write
from transformer_spec.grader.batch import grade_class, merge
from transformer_spec.grader.feedback import feedback_md, results_json
from transformer_spec.grader.record import Record
from transformer_spec.grader.settings import GradeError, Limits, Settings
from transformer_spec.grader.single import grade_single
from transformer_spec.grader.submissions import discover, shard_of
from transformer_spec.results.results_file import format_points

from .cli import build_merge_parser, build_parser, main

__all__ = [
    "GradeError", "Limits", "Record", "Settings", "atomic_write", "build_merge_parser", "build_parser",
    "discover", "feedback_md", "format_points", "grade_class", "grade_single", "main", "merge", "results_json", "shard_of",
]
