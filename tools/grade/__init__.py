"""Grade a whole class: every submission in its own process, with limits, resume, shards, merge.

    python -m tools.grade SUBMISSIONS_DIR --out OUT_DIR [--jobs N] [--resume] [--shard K/N]
                          [--rubric FILE] [--coverage] [--tests PATH ...] [limits]
    python -m tools.grade merge OUT_DIR [OUT_DIR ...] --out MERGED_DIR
    python -m tools.grade single SUBMISSION --results-json FILE [settings as above]

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
claimed pass of a re-checked component on hidden inputs in a second child (:mod:`transformer_spec.recheck`),
and gives a component whose claim the re-checks contradict 0 points and the status ``tampering``.

The modules, in the order of a grading: :mod:`.settings` (limits, settings, constants),
:mod:`.submissions` (one entry per student), :mod:`.children` (a child under limits, with its
report channel), :mod:`.suite` (the suite snapshot, the pytest command, the skeleton),
:mod:`.decision` (one submission: the child's run, the parent's decision, the hidden re-check),
:mod:`.record`, :mod:`.feedback` (``feedback.md``, ``results.json``), :mod:`.output` (the output
folder), :mod:`.batch` (``grade_class``, ``merge``) and :mod:`.cli`.
"""

from __future__ import annotations

from transformer_spec.files import atomic_write
from transformer_spec.results_file import format_points

from .batch import grade_class, merge
from .cli import build_merge_parser, build_parser, main
from .feedback import feedback_md, results_json
from .record import Record
from .settings import GradeError, Limits, Settings
from .single import grade_single
from .submissions import discover, shard_of

__all__ = [
    "GradeError", "Limits", "Record", "Settings", "atomic_write", "build_merge_parser", "build_parser",
    "discover", "feedback_md", "format_points", "grade_class", "grade_single", "main", "merge", "results_json", "shard_of",
]
