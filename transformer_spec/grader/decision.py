"""Grading one submission: the pytest child, then the parent decides the grade from the verified
report (:mod:`transformer_spec.results.outcomes`), its own list of tests and the hidden re-checks
(:mod:`transformer_spec.grader.rechecks`). The status derives from the tests' outcome kinds."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from transformer_spec.contract import registry
from transformer_spec.diagnosis.profiles import every_pitfall
from transformer_spec.grader import absent, coverage_pages, rechecks
from transformer_spec.grader.children import ChildRun, run_child
from transformer_spec.grader.record import Record, first_line
from transformer_spec.grader.sandbox import Jail
from transformer_spec.grader.settings import MAX_COVERAGE_BYTES, MAX_TEST_OUTPUT, GradeError
from transformer_spec.grader.submissions import Entry, copy_submission, submission_hash
from transformer_spec.grader.suite import Context, new_sandbox, pytest_cmd
from transformer_spec.grader.text import file_name
from transformer_spec.results import outcomes
from transformer_spec.results.outcomes import Kind
from transformer_spec.results.results_file import nodeid_of
from transformer_spec.submission import coverage as submission_coverage


def grade_entry(entry: Entry, ctx: Context) -> tuple[Record, ChildRun | None, Path | None]:
    """Grade one submission; returns its record, the pytest child's run and the coverage folder.
    A run that crashed (the report stream cut, the process gone) is graded once more, in a fresh
    sandbox: a crash caused by the host (a kill, a full machine) must not cost the student."""
    subhash = submission_hash(entry)
    if entry.target is None:
        return empty_record(entry, ctx, "no-submission", entry.problem, subhash), None, None
    record, run, cov = _grade_once(entry, ctx, subhash)
    if record.status == "crashed":
        if cov is not None:
            shutil.rmtree(cov.parent, ignore_errors=True)
        record, run, cov = _grade_once(entry, ctx, subhash)
        record.detail = f"{record.detail} (graded twice; both runs crashed)" if record.status == "crashed" \
            else record.detail
    return record, run, cov


def _grade_once(entry: Entry, ctx: Context, subhash: str) -> tuple[Record, ChildRun | None, Path | None]:
    sandbox = new_sandbox(ctx, entry.student)
    try:
        try:
            target = copy_submission(entry, sandbox / "sub")
        except (GradeError, OSError) as exc:
            return empty_record(entry, ctx, "no-submission", f"cannot copy the submission: {exc}", subhash), None, None
        lim = ctx.settings.limits
        work = sandbox / "work"
        covdir = (sandbox / "coverage-out",) if ctx.settings.coverage else ()
        with ctx.sandbox.jail() as jail:
            view = ctx.view(sandbox, work, sandbox / "suite", sandbox / "sub", writable=covdir)
            run = run_child(pytest_cmd(ctx, sandbox, str(target)), cwd=work, env=ctx.env(work),
                            limits=lim, extra={}, wall=lim.wall_seconds, jail=jail.seeing(view))
            record = decide(entry, ctx, run, subhash, target, sandbox, jail)
        record.seconds = round(run.seconds, 2)
        cov = None
        if covdir:
            cov = sandbox / "coverage"
            _coverage_pages(record.student, covdir[0] / "htmlcov" / submission_coverage.JSON_NAME, sandbox / "sub", cov)
        return record, run, cov
    finally:
        if not ctx.settings.coverage:
            shutil.rmtree(sandbox, ignore_errors=True)


def _coverage_pages(student: str, report: Path, sub: Path, dest: Path) -> None:
    """The pages of the student's coverage report, written by the grader from the child's JSON report
    (at most ``MAX_COVERAGE_BYTES`` of it; none, or a link, measures nothing) into ``dest``."""
    data = b""
    if report.is_file() and not report.is_symlink() and report.stat().st_size <= MAX_COVERAGE_BYTES:
        data = report.read_bytes()
    dest.mkdir(parents=True, exist_ok=True)
    for name, page in coverage_pages.pages(student, coverage_pages.read(data, sub)).items():
        (dest / name).write_bytes(page)


def not_run(tests: list[dict], why: str) -> list[dict]:
    """``tests`` as not run, for the one reason ``why``: 0 points each."""
    return [dict(t, score=0.0, status="failed", output=f"not graded: {why}", kind=Kind.NOT_RUN.value) for t in tests]


def empty_record(entry: Entry, ctx: Context, status: str, detail: str, subhash: str) -> Record:
    return _finish(entry, ctx, status, detail, subhash, not_run(ctx.skeleton, detail), {})


def _finish(entry: Entry, ctx: Context, status: str, detail: str, subhash: str, tests: list[dict],
            tampered: dict[str, str], diagnoses: dict[str, str] | None = None,
            mistakes: dict[str, list[str]] | None = None) -> Record:
    comps: dict[str, float] = {}
    for t in tests:
        comps[t["tags"][0]] = comps.get(t["tags"][0], 0.0) + t["score"]
    possible = sum(t["max_score"] for t in ctx.skeleton)
    total = sum(t["score"] for t in tests)
    where = file_name(str(entry.target or entry.copy_root or entry.student))  # a path need not be UTF-8
    if entry.note:
        detail = f"{detail} ({entry.note})" if detail else entry.note
    return Record(entry.student, status, round(total, 2), round(possible, 2), {c: round(v, 2) for c, v in comps.items()},
                  detail, where, subhash, tests, tampered, dict(diagnoses or {}), ctx.sandbox.tier,
                  mistakes=dict(mistakes or {}), profile=ctx.settings.profile)


def decide(entry: Entry, ctx: Context, run: ChildRun, subhash: str, target: Path, sandbox: Path, jail: Jail) -> Record:
    """The grade, from the verified report, the parent's list of tests and the hidden re-checks."""
    if run.forged:
        return empty_record(entry, ctx, "tampering", f"the grading child sent {run.forged}", subhash)
    reports = [m for m in run.messages if m.get("kind") == outcomes.REPORT]
    try:
        last = outcomes.read_report(reports[-1], MAX_TEST_OUTPUT) if reports else None
    except outcomes.MalformedReport as exc:
        return empty_record(entry, ctx, "tampering", f"the grading child sent a malformed report ({exc})", subhash)
    claimed = last.tests if last is not None else {}
    names = {nodeid_of(t) for t in ctx.skeleton}
    missing = [n for n in names if n not in claimed]
    extra = [n for n in claimed if n not in names]
    if last is not None and (missing or extra):
        which = missing[:1] or extra[:1]
        return empty_record(entry, ctx, "tampering",
                            f"the report does not match the suite: {len(missing)} test(s) missing, {len(extra)} "
                            f"unknown (e.g. {which[0]}); were test files changed?", subhash)
    # Why the run ended, for tests that did not run.
    if run.timed_out:
        ended = f"the run was stopped after the wall-clock limit of {ctx.settings.limits.wall_seconds:g} s"
    elif run.output_limit:
        ended = f"the run was stopped after printing more than {ctx.settings.limits.max_output_mb:g} MB"
    elif run.memory_limit:
        ended = (f"the run was stopped: the submission's processes together held more than the memory limit "
                 f"of {ctx.settings.limits.memory_mb:g} MB")
    elif last is None or not last.final:
        ended = f"the grading process ended abruptly (exit code {run.returncode}) while the tests ran"
    else:
        ended = ""
    tests = []
    for t in ctx.skeleton:
        c = claimed.get(nodeid_of(t))
        kind = c.kind if c is not None else Kind.NOT_RUN
        output = _clean(c.message, sandbox) if c is not None else ""
        if kind == Kind.NOT_RUN and ended:
            output = f"not run: {ended}"
        passed = kind == Kind.PASSED
        tests.append(dict(t, score=t["max_score"] if passed else 0.0, status="passed" if passed else "failed",
                          output="" if passed else output, kind=kind.value))
    passed = {nodeid_of(t): t["tags"][0] for t in tests if t["status"] == "passed"}
    course = ctx.settings.profile_object()
    nameless = {c: "whose names the submission's files do not define"
                for c in absent.absent_components(sandbox / "sub", course)}
    nameless |= {c: "whose code the submission's files define only as stubs (raising NotImplementedError)"
                 for c in absent.stub_components(sandbox / "sub", course) if c not in nameless}
    # where the files hide what they bind (vars(), exec, setattr), the code as loaded shows its stubs (issue 45)
    unread = bool(set(passed.values()) - set(nameless)) and not absent.stubs_read_for_sure(sandbox / "sub")
    verdicts = rechecks.run_rechecks(ctx, target, sandbox, passed, jail, stubs=unread)
    nameless |= {c: "whose code, as the submission loads it, is only stubs (raising NotImplementedError)"
                 for c in absent.components_of_stubs(verdicts.stub_names or (), course) if c not in nameless}
    tampered = apply_verdicts(tests, verdicts, nameless)
    status, detail = status_of(run, last, tampered)
    if status == "ok" and verdicts.forbidden:
        status, detail = "forbidden-api", f"a forbidden API, {next(iter(verdicts.forbidden.values()))}"
    if status == "ok":
        detail = not_implemented(tests, ctx.settings.profile_object())
    diagnoses = {} if last is None else {c: _clean(d, sandbox) for c, d in last.diagnoses.items()
                                         if c in registry.names() and c not in tampered}
    known = set(every_pitfall())  # the registry's and the course profiles' own
    mistakes = {} if last is None else {c: [n for n in names if n in known] for c, names in last.mistakes.items()
                                        if c in diagnoses}
    return _finish(entry, ctx, status, _clean(detail, sandbox), subhash, tests, tampered, diagnoses,
                   {c: names for c, names in mistakes.items() if names})


def not_implemented(tests: list[dict], profile) -> str:
    """The detail of an ``ok`` row whose components are not all written yet: the names of each component
    every test of which reached a stub (``NotImplementedError``), as the student wrote them (the contract's,
    or the course profile's functions: ``run_get_batch``); '' when there is none."""
    kinds: dict[str, set[str]] = {}
    for t in tests:
        kinds.setdefault(t["tags"][0], set()).add(t["kind"])
    stubbed = [c for c, k in kinds.items() if k == {Kind.STUB.value}]
    if not stubbed:
        return ""
    names = []
    for c in stubbed:
        own = profile.functions.get(c) if profile.functions else None
        names += own or [n.name for n in registry.get(c).names if "." not in n.name][:1] or [c]
    return f"not implemented yet (raises NotImplementedError): {', '.join(names)}"


HIDDEN_MESSAGE = "0 points: passes the public test, not the hidden re-check on other inputs ({why})"
REFUTED_MESSAGE = "0 points: reported passed from inside the submission's process, but it cannot have passed ({why})"
FORBIDDEN_MESSAGE = ("0 points: the grader re-ran this test's own inputs and the submission used a forbidden API "
                     "({why})")
UNCONFIRMED_MESSAGE = ("0 points: not confirmed; the report from inside the submission's process was proved false "
                       "(see the status), so a pass counts only where the grader's own re-check confirms it")


def apply_verdicts(tests: list[dict], v: rechecks.Verdicts, nameless: dict[str, str] | set[str] = frozenset()
                   ) -> dict[str, str]:
    """The claimed passes of ``tests`` that count, by the re-checks' verdicts ``v`` and the components
    no test of which an honest child reports passed (``nameless``: component -> why, :mod:`transformer_spec.grader.absent`:
    its names undefined, or defined only as stubs); returns the proof of tampering by component (empty: none).

    Without proof every claimed pass counts but one whose own hidden twin fails (a hidden test
    that failed, neutral): so an honest submission gets what pytest gives it. With proof (a claim
    refuted on its own inputs, a pass of a component with no names, or a forged stream) nothing
    the child says counts unless checked:
    a re-checked pass counts when confirmed, another when its component has a confirmed pass and
    no failed or refuted one."""
    comp_of = {nodeid_of(t): t["tags"][0] for t in tests}
    refuted = {**v.forbidden, **v.refuted}
    why_nameless = nameless if isinstance(nameless, dict) else {c: "whose names the submission's files do not define"
                                                                 for c in nameless}
    for t in tests:
        if t["status"] == "passed" and t["tags"][0] in why_nameless:
            refuted.setdefault(nodeid_of(t), f"passes reported for '{t['tags'][0]}', {why_nameless[t['tags'][0]]}")
    proof = v.proof or next(iter(refuted.values()), "")
    tampered: dict[str, str] = {}
    if v.forged:
        tampered = {comp_of[n]: proof for n in v.twinned}
    for n, why in refuted.items():
        if n not in v.forbidden:  # a forbidden use is proved too, and named by its own status
            tampered.setdefault(comp_of[n], why)
    backed = {comp_of[n] for n in v.confirmed} - {comp_of[n] for n in (*v.hidden, *refuted)}
    for t in tests:
        n = nodeid_of(t)
        if t["status"] != "passed":
            continue
        if n in v.forbidden and n not in v.refuted:
            kind, output = Kind.FORBIDDEN, FORBIDDEN_MESSAGE.format(why=v.forbidden[n])
        elif n in refuted:
            kind, output = Kind.CONTRADICTED, REFUTED_MESSAGE.format(why=refuted[n])
        elif n in v.hidden:
            kind, output = Kind.HIDDEN, HIDDEN_MESSAGE.format(why=v.hidden[n])
        elif proof and not (n in v.confirmed or (n not in v.twinned and t["tags"][0] in backed)):
            kind, output = Kind.CONTRADICTED, UNCONFIRMED_MESSAGE
        else:
            continue
        t.update(score=0.0, status="failed", kind=kind.value, output=output)
    return tampered


def _clean(text: str, sandbox: Path) -> str:
    """Messages name the submission's files relative to its own folder, not the sandbox."""
    return text.replace(str(sandbox / "sub") + os.sep, "").replace(str(sandbox), "<sandbox>")


#: the status of a submission that could not be imported, by the kind of the import error
_IMPORT_STATUS = {Kind.MEMORY: "memory-limit", Kind.FORBIDDEN: "forbidden-api", Kind.TIMEOUT: "timeout"}


def status_of(run: ChildRun, report: outcomes.Report | None, tampered: dict[str, str]) -> tuple[str, str]:
    """The submission's status and a one-line detail, from the run and the tests' outcome kinds."""
    if tampered:
        why = next(iter(tampered.values()))
        return "tampering", (f"the report from inside the submission's process is false ({why}); passes count only "
                             f"where the grader's own re-check confirms them")
    if report is not None and report.submission_error:
        status = _IMPORT_STATUS.get(report.submission_error_kind, "import-error")
        return status, first_line(report.submission_error, 300)
    if run.timed_out:
        return "timeout", "stopped at the wall-clock limit (an endless loop at import or in C code?)"
    if run.output_limit:
        return "output-limit", f"printed more than the output limit ({run.output_bytes} bytes seen)"
    if run.memory_limit:
        return "memory-limit", "its processes together held more than the memory limit (started more interpreters?)"
    tests = list(report.tests.values()) if report is not None else []
    if any(t.kind == Kind.MEMORY for t in tests):
        return "memory-limit", "a test ran out of memory (the memory limit of each submission)"
    if report is None:
        return "crashed", f"the grading process ended before reporting anything (exit code {run.returncode})"
    if not report.final:
        return "crashed", f"the grading process ended abruptly (exit code {run.returncode}) while the tests ran"
    if report.interrupted:
        return "interrupted", "the submission interrupted the run (KeyboardInterrupt?); tests not run score 0"
    timeouts = sum(1 for t in tests if t.kind == Kind.TIMEOUT)
    if timeouts or report.stopped_for_time:
        return "timeout", f"{timeouts} test(s) timed out" + ("; the run's time limit was reached"
                                                             if report.stopped_for_time else "")
    forbidden = [t for t in tests if t.failure == Kind.FORBIDDEN]
    if forbidden:
        return "forbidden-api", first_line(forbidden[0].message)
    return "ok", ""
