"""Grading one submission: the pytest child, then the parent decides the grade from the verified
report, its own list of tests and the hidden re-check (:mod:`transformer_spec.probes`)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from transformer_spec import probes
from transformer_spec.contract import COMPONENTS

from .children import ChildRun, child_env, run_child
from .record import Record, first_line
from .settings import MAX_COVERAGE_BYTES, MAX_TEST_OUTPUT, GradeError, read_toml
from .submissions import Entry, copy_submission, submission_hash
from .suite import Context, new_sandbox, pytest_cmd


def grade_entry(entry: Entry, ctx: Context) -> tuple[Record, ChildRun | None, Path | None]:
    """Grade one submission; returns its record, the pytest child's run and the coverage folder."""
    subhash = submission_hash(entry)
    if entry.target is None:
        return empty_record(entry, ctx, "no-submission", entry.problem, subhash), None, None
    sandbox = new_sandbox(ctx, entry.student)
    try:
        try:
            target = copy_submission(entry, sandbox / "sub")
        except (GradeError, OSError) as exc:
            return empty_record(entry, ctx, "no-submission", f"cannot copy the submission: {exc}", subhash), None, None
        lim = ctx.settings.limits
        work = sandbox / "work"
        run = run_child(pytest_cmd(ctx, sandbox, str(target)), cwd=work, env=child_env(work, lim.threads),
                        limits=lim, extra={}, wall=lim.wall_seconds)
        record = decide(entry, ctx, run, subhash, target, sandbox)
        cov = None
        if ctx.settings.coverage and (work / "htmlcov").is_dir():
            cov = sandbox / "coverage"
            _copy_capped(work / "htmlcov", cov)
        return record, run, cov
    finally:
        if not ctx.settings.coverage:
            shutil.rmtree(sandbox, ignore_errors=True)


def _copy_capped(src: Path, dest: Path) -> None:
    total = 0
    for p in sorted(src.rglob("*")):
        if p.is_symlink() or not p.is_file():
            continue
        total += p.stat().st_size
        if total > MAX_COVERAGE_BYTES:
            break
        q = dest / p.relative_to(src)
        q.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, q)


def empty_record(entry: Entry, ctx: Context, status: str, detail: str, subhash: str) -> Record:
    tests = [dict(t, score=0.0, status="failed", output=f"not graded: {detail}") for t in ctx.skeleton]
    return _finish(entry, ctx, status, detail, subhash, tests, {})


def _finish(entry: Entry, ctx: Context, status: str, detail: str, subhash: str, tests: list[dict],
            tampered: dict[str, str], diagnoses: dict[str, str] | None = None) -> Record:
    comps: dict[str, float] = {}
    for t in tests:
        comps[t["tags"][0]] = comps.get(t["tags"][0], 0.0) + t["score"]
    possible = sum(t["max_score"] for t in ctx.skeleton)
    total = sum(t["score"] for t in tests)
    where = str(entry.target or entry.copy_root or entry.student)
    return Record(entry.student, status, round(total, 2), round(possible, 2), {c: round(v, 2) for c, v in comps.items()},
                  detail, where, subhash, tests, tampered, dict(diagnoses or {}))


def decide(entry: Entry, ctx: Context, run: ChildRun, subhash: str, target: Path, sandbox: Path) -> Record:
    """The grade, from the verified report, the parent's list of tests and the probes."""
    if run.forged:
        return empty_record(entry, ctx, "tampering", f"the grading child sent {run.forged}", subhash)
    reports = [m for m in run.messages if m.get("kind") == "pytest"]
    last = reports[-1] if reports else None
    final = bool(last and last.get("final"))
    claimed: dict[str, dict] = {}
    if last is not None:
        for t in last["results"].get("tests", []):
            if isinstance(t, dict) and isinstance(t.get("name"), str):
                claimed[t["name"]] = t
    names = {t["name"] for t in ctx.skeleton}
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
    elif not final:
        ended = f"the grading process ended abruptly (exit code {run.returncode}) while the tests ran"
    else:
        ended = ""
    tests = []
    for t in ctx.skeleton:
        c = claimed.get(t["name"])
        passed = bool(c and c.get("status") == "passed" and _positive(c.get("score")))
        output = _clean(str(c.get("output", "")), sandbox)[:MAX_TEST_OUTPUT] if c else ""
        if not passed and ended and (not c or output.startswith("not run")):
            output = f"not run: {ended}"
        tests.append(dict(t, score=t["max_score"] if passed else 0.0, status="passed" if passed else "failed",
                          output="" if passed else output))
    # The probes: every claimed anchor is re-checked outside the child.
    tampered = run_probes(entry, ctx, target, sandbox, {t["name"].split("] ", 1)[-1] for t in tests
                                                        if t["status"] == "passed"})
    for t in tests:
        comp = t["tags"][0]
        if comp in tampered:
            t.update(score=0.0, status="failed",
                     output=f"0 points: the grader's hidden re-check of '{comp}' contradicts the passes reported "
                            f"from inside the submission's process ({tampered[comp]})")
    status, detail = _status(run, last, final, tampered)
    detail = _clean(detail, sandbox)
    return _finish(entry, ctx, status, detail, subhash, tests, tampered, _diagnoses(last, sandbox, tampered))


def _diagnoses(last: dict | None, sandbox: Path, tampered: dict[str, str]) -> dict[str, str]:
    """The child's diagnosis per component (``extra_data``), as text only; none where tampered."""
    extra = ((last or {}).get("results") or {}).get("extra_data")
    found = extra.get("diagnoses") if isinstance(extra, dict) else None
    if not isinstance(found, dict):
        return {}
    return {c: _clean(str(d), sandbox)[:MAX_TEST_OUTPUT] for c, d in found.items()
            if c in COMPONENTS and isinstance(d, str) and c not in tampered}


def _clean(text: str, sandbox: Path) -> str:
    """Messages name the submission's files relative to its own folder, not the sandbox."""
    return text.replace(str(sandbox / "sub") + os.sep, "").replace(str(sandbox), "<sandbox>")


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0


def _kinds(results: dict) -> list[tuple[str | None, str]]:
    """``(kind, output)`` of each reported test: the plugin's typed failure kind (``extra_data``)."""
    out = []
    for t in results.get("tests", []):
        if isinstance(t, dict):
            extra = t.get("extra_data")
            kind = extra.get("kind") if isinstance(extra, dict) else None
            out.append((kind if isinstance(kind, str) else None, str(t.get("output", ""))))
    return out


def _status(run: ChildRun, last: dict | None, final: bool, tampered: dict[str, str]) -> tuple[str, str]:
    import_error = (last or {}).get("import_error")
    results = (last or {}).get("results") or {}
    kinds = _kinds(results)
    run_data = results.get("extra_data") if isinstance(results.get("extra_data"), dict) else {}
    if tampered:
        comps = ", ".join(sorted(tampered))
        return "tampering", f"claimed passes contradicted by the hidden re-check in: {comps}"
    if import_error:
        text = first_line(import_error, 300)
        if "MemoryError" in import_error or any(w in import_error for w in ("allocate memory", "not enough memory")):
            return "memory-limit", text
        if "forbidden API" in import_error:
            return "forbidden-api", text
        if "Timeout (>" in import_error:
            return "timeout", "importing the submission did not finish in time (an endless loop at import?)"
        return "import-error", text
    if run.timed_out:
        return "timeout", "stopped at the wall-clock limit (an endless loop at import or in C code?)"
    if run.output_limit:
        return "output-limit", f"printed more than the output limit ({run.output_bytes} bytes seen)"
    if (last or {}).get("memory_error"):
        return "memory-limit", "a test ran out of memory (the memory limit of each submission)"
    if last is None:
        return "crashed", f"the grading process ended before reporting anything (exit code {run.returncode})"
    if not final:
        return "crashed", f"the grading process ended abruptly (exit code {run.returncode}) while the tests ran"
    if run_data.get("interrupted"):
        return "interrupted", "the submission interrupted the run (KeyboardInterrupt?); tests not run score 0"
    timeouts = sum(1 for kind, _ in kinds if kind == "timeout")
    stopped = bool(run_data.get("stopped_for_time"))
    if timeouts or stopped:
        return "timeout", f"{timeouts} test(s) timed out" + ("; the run's time limit was reached" if stopped else "")
    forbidden_lines = [o for kind, o in kinds if kind == "forbidden"]
    if forbidden_lines:
        return "forbidden-api", first_line(forbidden_lines[0])
    return "ok", ""


def run_probes(entry: Entry, ctx: Context, target: Path, sandbox: Path, passed_ids: set[str]) -> dict[str, str]:
    """Components whose claimed passes the probes contradict -> why."""
    if not ctx.settings.probes:
        return {}
    wanted = [p for p in probes.PROBES if any(a in passed_ids for a in p.anchors) and p.name in ctx.expected]
    if not wanted:
        return {}
    lim = ctx.settings.limits
    work = sandbox / "probe-work"
    (work / "tmp").mkdir(parents=True, exist_ok=True)
    run = run_child([sys.executable, "-I", "-m", "transformer_spec.probes", "--impl", str(target)],
                    cwd=work, env=child_env(work, lim.threads), limits=lim,
                    extra={"seed": ctx.seed, "probes": [p.name for p in wanted], "threads": lim.threads,
                           "forbidden": _forbidden_list(ctx), "per_probe_seconds": min(30.0, lim.probe_seconds)},
                    wall=lim.probe_seconds)
    got: dict[str, dict] = {}
    for m in run.messages:
        if m.get("kind") == "probe" and isinstance(m.get("probe"), str):
            got[m["probe"]] = m
    tampered: dict[str, str] = {}
    for p in wanted:
        if run.forged:
            why = f"the probe process sent {run.forged}"
        else:
            m = got.get(p.name)
            if m is None:
                why = "the submission's process ended before answering"
            elif "error" in m:
                why = str(m["error"])[:300]
            else:
                try:
                    why = probes.compare(probes.decode_arrays(m.get("arrays")), ctx.expected[p.name])
                except (ValueError, KeyError, TypeError) as exc:
                    why = f"unreadable answer ({exc})"
        if why and p.component not in tampered:
            tampered[p.component] = f"probe {p.name}: {why}"
    return tampered


def _forbidden_list(ctx: Context) -> list[str]:
    from transformer_spec import grading

    if ctx.settings.rubric is None:
        return list(grading.load_rubric().forbidden)
    return list(grading.parse_rubric(read_toml(ctx.settings.rubric)).forbidden)
