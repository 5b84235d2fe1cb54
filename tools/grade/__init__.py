"""Grade a whole class: every submission in its own process, with limits, resume, shards, merge.

    python -m tools.grade SUBMISSIONS_DIR --out OUT_DIR [--jobs N] [--resume] [--shard K/N]
                          [--rubric FILE] [--coverage] [--tests PATH ...] [limits]
    python -m tools.grade merge OUT_DIR [OUT_DIR ...] --out MERGED_DIR

``SUBMISSIONS_DIR`` holds one entry per student: ``alice.py``, a package folder ``bob/``
(with ``__init__.py``), or a folder ``carol/`` holding one package or one ``.py`` file. The
outputs (``OUT_DIR``): ``gradebook.csv`` (one row per student: status, total, points per
component, detail), and per student ``students/<id>/results.json`` (Gradescope's format),
``feedback.md`` (what the student reads), ``log.txt`` (the start and end of the child's output)
and ``record.json`` (the grade as the tool decided it; written last, it marks the student done).

How a grade is decided (``docs/class_grading.md``): the submission is copied with a pristine copy
of the suite into a private temporary folder and graded by ``python -I -m pytest`` run from
there with the project's own configuration (a ``conftest.py``, ``pytest.ini``, ``pyproject.toml``
or plugin in the submission is never loaded; plugins are not auto-loaded). The child reports over
an authenticated inherited pipe (:mod:`transformer_spec.isolation`), never over its output. The
parent scores from its own list of the tests (collected once from the reference), re-checks every
claimed pass of a probed component on hidden inputs in a second child (:mod:`transformer_spec.probes`),
and gives a component whose claim the probes contradict 0 points and the status ``tampering``.

The modules, in the order of a grading: :mod:`.settings` (limits, settings, constants),
:mod:`.submissions` (one entry per student), :mod:`.children` (a child under limits, with its
report channel), :mod:`.suite` (the suite snapshot, the pytest command, the skeleton),
:mod:`.decision` (one submission: the child's run, the parent's decision, the hidden re-check),
:mod:`.record`, :mod:`.feedback` (``feedback.md``, ``results.json``), :mod:`.output` (the output
folder), :mod:`.batch` (``grade_class``, ``merge``) and :mod:`.cli`.
"""

from __future__ import annotations

from transformer_spec.files import atomic_write

from .batch import grade_class, merge
from .children import LAUNCHER, ChildRun, child_env, kill_all, run_child, stop_new_children
from .cli import build_merge_parser, build_parser, main
from .decision import decide, empty_record, grade_entry, run_probes
from .feedback import FULL_MESSAGES, STATUS_TEXT, component_table, feedback_md, results_json
from .output import Output, remove_temp_files
from .record import Record, first_line, format_number
from .settings import (
    DEFAULT_TESTS,
    LOG_KEEP,
    MAX_COVERAGE_BYTES,
    MAX_SUBMISSION_BYTES,
    MAX_TEST_OUTPUT,
    RECORD,
    REPO,
    STATE_DIR,
    STATUSES,
    SUITE,
    GradeError,
    Limits,
    Settings,
    read_toml,
)
from .submissions import Entry, copy_submission, discover, shard_of, submission_hash
from .suite import Context, Suite, collect_skeleton, new_sandbox, pytest_cmd

__all__ = [
    "DEFAULT_TESTS", "FULL_MESSAGES", "LAUNCHER", "LOG_KEEP", "MAX_COVERAGE_BYTES", "MAX_SUBMISSION_BYTES",
    "MAX_TEST_OUTPUT", "RECORD", "REPO", "STATE_DIR", "STATUSES", "STATUS_TEXT", "SUITE",
    "ChildRun", "Context", "Entry", "GradeError", "Limits", "Output", "Record", "Settings", "Suite",
    "atomic_write", "build_merge_parser", "build_parser", "child_env", "collect_skeleton", "component_table",
    "copy_submission", "decide", "discover", "empty_record", "feedback_md", "first_line", "format_number",
    "grade_class", "grade_entry", "kill_all", "main", "merge", "new_sandbox", "pytest_cmd", "read_toml",
    "remove_temp_files", "results_json", "run_child", "run_probes", "shard_of", "stop_new_children",
    "submission_hash",
]
