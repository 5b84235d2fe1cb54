"""What one graded pytest run says at its end: the score line, the table, the notes, ``results.json``.

Plain functions of the run (:class:`transformer_spec.pytest_plugin.run.GradingRun`, already settled), called
by the grading plugin's hooks; the file itself is written by :mod:`transformer_spec.results.results_file`.
"""

from __future__ import annotations

import time

import pytest

from transformer_spec.contract import registry
from transformer_spec.scoring import rubric
from transformer_spec.pytest_plugin.plugin import notebook_notes, under_test
from transformer_spec.pytest_plugin.run import GradingRun
from transformer_spec.results import results_file
from transformer_spec.results.outcomes import DIAGNOSED, Kind


def _submission_error(config: pytest.Config) -> str | None:
    sub = under_test(config).imported
    if sub is None or sub.error is None:
        return None
    return f"{sub.error}\nFix: {sub.fix}" if sub.fix else sub.error


def cannot_be_graded(sub, tests: int) -> list[str]:
    """What the terminal says, once, about a submission that cannot be graded at all."""
    return [sub.error, *([f"Fix: {sub.fix}"] if sub.fix else []),
            f"None of the {tests} tests that use the submission ran; every graded test scores 0."]


def entries(run: GradingRun) -> list[dict]:
    """The run's tests as :func:`results_file.test_entry` rows (a diagnosed failure points at its diagnosis)."""
    out = []
    for r in run.results.values():
        text = r.final
        if r.kind != Kind.PASSED and r.component in run.diagnoses and r.kind in DIAGNOSED:
            text += f"\n\n(See the diagnosis for '{r.component}' above: it is given once for the whole component.)"
        out.append(results_file.test_entry(r.nodeid, r.component, r.number, r.points, r.score,
                                           r.kind == Kind.PASSED, text, r.hidden, r.kind.value))
    return out


def score_lines(config: pytest.Config, run: GradingRun) -> tuple[str, list[str]]:
    """``(title, table lines)``: "<target> scored X / Y" and the points per component."""
    rows = results_file.component_rows(entries(run))
    earned, possible = sum(r.earned for r in rows), sum(r.possible for r in rows)
    target = under_test(config).target
    title = f"score of {target}: {results_file.format_points(earned)} / {results_file.format_points(possible)}"
    return title, results_file.table_lines(rows)


def notes(config: pytest.Config, run: GradingRun, terminal: bool = False) -> list[str]:
    """Why the score is what it is, beyond the table: the run's end, stubs, forbidden APIs, diagnoses."""
    out = []
    error = run.end(config).submission_error  # an import error, or one every test failed on (outcomes)
    if error and terminal and _submission_error(config):
        out.append("The submission cannot be graded, so every test scores 0 (why, and the fix: at the top).")
    elif error:
        out.append(f"The submission cannot be graded, so every test scores 0: {error}")
    if run.interrupted:
        out.append(f"The run was interrupted ({run.interrupted}); tests not run score 0.")
    if run.stopped_for_time:
        out.append(f"The run's time limit of {run.time_limit:g} s was reached; tests not run score 0.")
    graded_components = {r.component for r in run.results.values()}
    missing = [c for c in run.rubric.components if c not in graded_components and run.rubric.components[c]]
    if missing and run.results:
        out.append("No tests of component(s) " + ", ".join(missing) + " in this run: their points are not graded.")
    out.extend(filter(None, [rubric.optional_note(run.left_out)]))
    if run.stubs:
        out.append("Not implemented yet (raised NotImplementedError): " + ", ".join(stub_names(config, run)) + ".")
    out.extend(_passes_without_points(run))
    forbidden_hits = sorted({r.message.splitlines()[0] for r in run.results.values() if r.failure == Kind.FORBIDDEN})
    out.extend(forbidden_hits[:5])
    out.extend(run.diagnoses.values())
    if any(r.hidden for r in run.results.values()):
        out.append("Some tests are hidden until grades are published; the total is shown then.")
    return out + notebook_notes(config)


def stub_names(config: pytest.Config, run: GradingRun) -> list[str]:
    """The names not implemented yet, as the student wrote them: the contract's, or under a course profile
    the course's functions of their components (``run_rope``, not ``RotaryPositionEmbedding``)."""
    from transformer_spec.contract.names import by_name
    from transformer_spec.pytest_plugin.plugin import profile

    functions = profile(config).functions
    if not functions:
        return sorted(run.stubs)
    names = by_name()
    return sorted({f for s in run.stubs for f in functions.get(names[s].component if s in names else "", (s,))})


def not_implemented(run: GradingRun) -> list[str]:
    """One line per name the submission does not implement yet, with the tests that need it (they are
    counted as "not implemented" in pytest's last line, not printed one by one)."""
    if not run.not_implemented:
        return []
    counts: dict[str, int] = {}
    for stub in run.not_implemented.values():
        counts[stub] = counts.get(stub, 0) + 1
    where = run.stub_where
    return ([f"{len(run.not_implemented)} test(s) failed on a name that is not implemented yet (pytest counts them as "
             "'not implemented'):"]
            + [f"  {n:4d} need {stub}" + (f" (raises at {where[stub]})" if stub in where else "")
               for stub, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))])


def _passes_without_points(run: GradingRun) -> list[str]:
    """Why pytest's "N passed" can sit under a low score: passes that earn nothing."""
    zero = [r for r in run.results.values() if r.ran == "passed" and r.kind != Kind.PASSED]
    stub = sum(1 for r in zero if r.kind == Kind.STUB)
    lines = []
    if zero:
        parts = [f"{stub} use a name that is not implemented yet"] if stub else []
        if len(zero) > stub:
            parts.append(f"{len(zero) - stub} are in a component that used a forbidden API")
        lines.append(f"{len(zero)} test(s) passed but score 0: {'; '.join(parts)} (each test's message says which).")
    if run.ungraded_passed:
        lines.append(f"{run.ungraded_passed} passed test(s) are not graded (no component, or dropped by the rubric).")
    if run.ungraded_failed:
        lines.append(f"{len(run.ungraded_failed)} failed test(s) are not graded (no component, or dropped by the "
                     "rubric): pytest counts them, the score does not.")
    return lines


def results_json(config: pytest.Config, run: GradingRun, final: bool = True) -> dict:
    """Gradescope's results.json of the run (see docs/grading.md)."""
    tests = entries(run)
    rows = results_file.component_rows(tests)
    earned, possible = sum(r.earned for r in rows), sum(r.possible for r in rows)
    header = (f"transformer-spec: {under_test(config).target} scored {results_file.format_points(earned)} / "
              f"{results_file.format_points(possible)}")
    if not final:
        header += " (the run has not finished; this file is rewritten at its end)"
    output = "\n".join([header, "", *results_file.table_lines(rows), "", *notes(config, run)]).rstrip() + "\n"
    extra = {"diagnoses": {c: d for c, d in run.diagnoses.items() if c in registry.names()},
             "interrupted": bool(run.interrupted), "stopped_for_time": run.stopped_for_time}
    return results_file.results_json(tests, output, time.monotonic() - run.start, extra)
