"""``python -m tools.grade single SUBMISSION --results-json FILE``: one submission, graded exactly as
the class grader grades a student (its own child process, limits, the signed report, the parent
deciding, the hidden re-checks), with Gradescope's ``results.json`` written to ``FILE``.

This is the tamper-resistant way to grade on a platform that runs one submission at a time
(Gradescope's ``run_autograder``): plain ``pytest --grade-json`` runs the submission in the
process that writes the file.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from transformer_spec.files import atomic_write
from transformer_spec.grader.batch import grade_class
from transformer_spec.grader.record import Record
from transformer_spec.grader.settings import GradeError, Settings


def grade_single(submission: Path, results_json: Path, settings: Settings, progress: bool = False) -> Record:
    """Grade ``submission`` (a ``.py`` file, a package folder, or a folder holding one) and write
    its ``results.json`` to ``results_json``; returns the record the class grader decided."""
    submission = Path(submission).expanduser().resolve()
    if not submission.exists():
        raise GradeError(f"{submission}: no such file or folder; give the submission's .py file, notebook or package folder")
    results_json = Path(results_json).resolve()
    if results_json == submission or submission in results_json.parents:
        raise GradeError("--results-json must not be inside the submission")
    with tempfile.TemporaryDirectory(prefix="transformer-spec-single-") as tmp:
        # Graded where it lies, as one entry of its folder: copied into its sandbox within the class's limits
        # (size, depth, count, special files: transformer_spec/grader/tree.py), never copied whole before (a 2 GiB sparse
        # file became 2 GB of real disk)
        records = grade_class(submission.parent, Path(tmp) / "out", settings, jobs=1, progress=progress,
                              class_report=False, only=submission)
        (record,) = records.values()  # the class holds this one entry (its id is made safe text)
        data = json.loads((Path(tmp) / "out" / "students" / record.student / "results.json").read_text())
    atomic_write(results_json, json.dumps(data, indent=2) + "\n")
    return record
