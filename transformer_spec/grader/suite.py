"""The suite snapshot, the pytest command and sandbox of a child, and the list of tests (the skeleton)."""

from __future__ import annotations

import hashlib
import shutil
import sys
import tempfile
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from transformer_spec import layout
from transformer_spec.diagnosis import catalogue as diagnosis_catalogue
from transformer_spec.diagnosis import diagnose
from transformer_spec.grader.children import child_env, run_child
from transformer_spec.grader.sandbox import Sandbox, View
from transformer_spec.grader.settings import REPO, SUITE, GradeError, Settings
from transformer_spec.scoring import rubric
from transformer_spec.results import outcomes, results_file

_MADE_OUTSIDE_A_CLONE = {"conftest.py": layout.suite_conftest, "pyproject.toml": layout.suite_ini}


class Suite:
    """The suite's files, read once into memory at the start (a submission that edits the
    repository cannot change what later submissions are graded with)."""

    #: the folder of a sandbox that holds a profile of one's own (``--profile FILE``): both children see it
    COURSE_PROFILE = "course_profile"

    def __init__(self, root: Path = REPO, course_profile: str | None = None):
        self.files: dict[str, bytes] = {}
        #: a profile of one's own, (its file's name, its bytes), read once as the suite is
        self.course_profile = (Path(course_profile).name, Path(course_profile).read_bytes()) if course_profile else None
        for name in SUITE:
            p = root / name
            if name in _MADE_OUTSIDE_A_CLONE and not p.exists():  # an installed wheel has no root files
                self.files[name] = _MADE_OUTSIDE_A_CLONE[name]().encode()
                continue
            paths = [p] if p.is_file() else sorted(q for q in p.rglob("*") if q.is_file() and "__pycache__" not in q.parts)
            for q in paths:
                self.files[str(q.relative_to(root))] = q.read_bytes()
        h = hashlib.sha256()
        for k in sorted(self.files):
            h.update(k.encode() + b"\0" + self.files[k] + b"\0")
        if self.course_profile:
            h.update(b"course profile\0" + self.course_profile[0].encode() + b"\0" + self.course_profile[1])
        self.sha256 = h.hexdigest()

    def write(self, dest: Path) -> None:
        for rel, data in self.files.items():
            p = dest / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)


@dataclass
class Setup:
    """What deciding a grade needs and a child does not: the skeleton (results.json "tests" of a
    run that ran nothing) and the re-checks' expected outputs (re-check name -> reference arrays), on
    the secret seed and on their anchors' own inputs (the public replays)."""

    skeleton: list[dict] = field(default_factory=list)
    expected: dict = field(default_factory=dict)
    expected_public: dict = field(default_factory=dict)


@dataclass
class Context:
    settings: Settings
    suite: Suite
    tmp_root: Path
    rubric: rubric.Rubric | None = None  # parsed once from settings.rubric
    seed: int = 0
    sandbox: Sandbox = field(default_factory=lambda: Sandbox("none"))
    diagnosis_table: Path | None = None  # the catalogue's features, computed by the parent
    # The Setup, or the future of one: it is made while the first children already run.
    setup: Setup | Future = field(default_factory=Setup)

    def ready(self) -> Setup:
        """The setup, once made (waiting for it if needed; its error if it failed)."""
        return self.setup.result() if isinstance(self.setup, Future) else self.setup

    @property
    def skeleton(self) -> list[dict]:
        return self.ready().skeleton

    @property
    def expected(self) -> dict:
        return self.ready().expected

    @property
    def expected_public(self) -> dict:
        return self.ready().expected_public

    def env(self, work: Path) -> dict:
        """The environment of a child working in ``work``."""
        env = child_env(work, self.settings.limits.threads)
        if self.diagnosis_table is not None:
            env[diagnosis_catalogue.TABLE_VAR] = str(self.diagnosis_table)
        if not self.settings.diagnose:
            env[diagnose.NO_DIAGNOSE_ENV] = "1"
        return env

    def view(self, sandbox: Path, work: Path, *readonly: Path, writable: tuple[Path, ...] = ()) -> View:
        """What a child of the student in ``sandbox`` sees: ``readonly``, the parent's shared files, ``work``."""
        shared = (self.diagnosis_table,) if self.diagnosis_table is not None else ()
        rubric_file = (sandbox / "rubric.toml",) if (sandbox / "rubric.toml").exists() else ()
        course = (sandbox / Suite.COURSE_PROFILE,) if self.suite.course_profile else ()
        return View(readonly=(*readonly, *rubric_file, *course, *shared), work=work, writable=writable)

    def profile_arg(self, sandbox: Path) -> str:
        """``--profile`` of a child of ``sandbox``: the profile's name, or its file's copy in the sandbox."""
        if self.suite.course_profile:
            return str(sandbox / Suite.COURSE_PROFILE / self.suite.course_profile[0])
        return self.settings.profile


def pytest_cmd(ctx: Context, sandbox: Path, impl: str, collect_only: bool = False) -> list[str]:
    s, lim = ctx.settings, ctx.settings.limits
    suite = sandbox / "suite"
    cmd = [sys.executable, "-I", "-m", "pytest", *(str(suite / t) for t in s.tests), "-c", str(suite / "pyproject.toml"),
           "--rootdir", str(suite), "--confcutdir", str(suite), "-p", "no:cacheprovider",
           "-p", "pytest_timeout", "-p", "_hypothesis_pytestplugin", "-p", "transformer_spec.grader.isolation",
           "-s", "-q", "--tb=no", "--no-header", "-o", "console_output_style=classic",
           "--basetemp", str(sandbox / "work" / "pytest"), f"--impl={impl}", "--grading",
           "--time-limit", f"{lim.time_limit:g}", "--timeout", f"{lim.test_timeout:g}",
           "--torch-threads", str(lim.threads), "--track", s.track, "--profile", ctx.profile_arg(sandbox)]
    if s.rubric is not None:
        cmd += ["--rubric", str(sandbox / "rubric.toml")]
    if s.hypothesis_profile is not None:
        cmd += ["--hypothesis-profile", s.hypothesis_profile]
    if s.coverage and not collect_only:
        cmd += ["-p", "pytest_cov.plugin", "--cov-submission", str(sandbox / "coverage-out" / "htmlcov")]
    if collect_only:
        cmd.append("--collect-only")
    return cmd


def new_sandbox(ctx: Context, name: str) -> Path:
    sandbox = Path(tempfile.mkdtemp(prefix=f"{_safe(name)}-", dir=ctx.tmp_root))
    ctx.suite.write(sandbox / "suite")
    if ctx.settings.rubric is not None:
        (sandbox / "rubric.toml").write_text(ctx.settings.rubric)
    if ctx.suite.course_profile:
        name, data = ctx.suite.course_profile
        (sandbox / Suite.COURSE_PROFILE).mkdir()
        (sandbox / Suite.COURSE_PROFILE / name).write_bytes(data)
    (sandbox / "sub").mkdir()
    (sandbox / "work" / "tmp").mkdir(parents=True)
    return sandbox


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:40] or "x"


def collect_skeleton(ctx: Context) -> list[dict]:
    """The graded tests, their numbers and points, from a run on the reference that runs nothing."""
    sandbox = new_sandbox(ctx, "skeleton")
    try:
        run = run_child(pytest_cmd(ctx, sandbox, "reference", collect_only=True), cwd=sandbox / "work",
                        env=child_env(sandbox / "work", ctx.settings.limits.threads), limits=ctx.settings.limits,
                        extra={}, wall=600)
    finally:
        shutil.rmtree(sandbox, ignore_errors=True)
    finals = [m for m in run.messages if m.get("kind") == outcomes.REPORT and m.get("final")]
    report = outcomes.read_report(finals[-1]) if finals else None
    if report is None or not report.tests:
        raise GradeError("could not collect the suite's tests (a usage error in --tests or --rubric?):\n"
                         + run.log()[-3000:])
    # The points, from the rubric as the plugin shares them (the parent's own computation).
    points, _ = rubric.assign_points(ctx.rubric, {t.nodeid: t.component for t in report.tests.values()})
    return [results_file.test_entry(t.nodeid, t.component, t.number, points[t.nodeid], 0.0, False, "",
                                     t.hidden) for t in report.tests.values()]
