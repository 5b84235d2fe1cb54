"""``--cov-submission``: coverage (pytest-cov) of the submission's own file or package only."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from transformer_spec import files

#: the machine-readable report written beside the HTML pages (the class grader renders its own
#: pages from it: transformer_spec/grader/coverage_pages.py)
JSON_NAME = "coverage.json"


def start(config: pytest.Config, target: str, htmldir: str) -> None:
    """Register pytest-cov measuring the submission's code only (terminal report, HTML, and coverage's
    JSON report as ``HTMLDIR/coverage.json``)."""
    try:
        from pytest_cov.plugin import CovPlugin
    except ImportError:
        raise pytest.UsageError("--cov-submission needs pytest-cov: pip install pytest-cov") from None
    if config.pluginmanager.hasplugin("_cov"):
        raise pytest.UsageError("--cov-submission measures the submission itself; do not combine it with --cov")
    paths = files.submission_paths(target)
    if not paths:
        raise pytest.UsageError(f"--cov-submission: cannot find the submission {target!r} on disk")
    own = paths[0]
    rc = Path(tempfile.mkdtemp(prefix="cov-submission-")) / "coveragerc"
    measured = f"source = {own}" if own.is_dir() else f"include = {own}"
    rc.write_text(
        "[run]\nbranch = true\n" + measured + "\n"
        f"data_file = {rc.parent / '.coverage'}\n"
        f"[report]\nshow_missing = true\n" + ("" if own.is_dir() else f"include = {own}\n") +
        f"[html]\ndirectory = {htmldir}\ntitle = coverage of the submission {target}\n"
    )
    opt = config.option
    opt.cov_source = [True]
    opt.cov_config = str(rc)
    opt.cov_report = {"term-missing": None, "html": htmldir, "json": str(Path(htmldir) / JSON_NAME)}
    config.pluginmanager.register(CovPlugin(opt, config.pluginmanager), "_cov")
