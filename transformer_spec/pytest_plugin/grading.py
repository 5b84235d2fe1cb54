"""The grading plugin: points per component, the score table, Gradescope's ``results.json``.

Loaded next to :mod:`transformer_spec.pytest_plugin.plugin`. Every test with a ``component`` marker is graded (but an
optional component's the rubric gives no points); the hooks are thin: the rubric, the scoring rules, failure
messages, stubs, the file and the diagnosis are plain functions of their own modules.

Options (registered in :func:`pytest_addoption`, resolved once in :func:`pytest_configure`):

* ``--rubric FILE``: the rubric (TOML; default ``transformer_spec/rubric.toml``).
* ``--grade-json PATH``: write Gradescope's ``results.json`` to ``PATH`` (implies ``--grading``), at
  collection (every test "not run") and at the end: it exists after an interruption, a crash or an
  unimportable submission. Not tamper-resistant: the submission runs in this process (``tools.grade``).
* ``--grading``: the run's time limit; with it, and whenever ``--impl`` names a submission, the grader's
  examples and seeds (hypothesis profile ``grading``, :func:`hypothesis_profiles.deterministic`).
* ``--time-limit SECONDS``: start no new test after this long (default 420 s when grading, none
  otherwise); with pytest-timeout's per-test limit the run takes at most ``time-limit + 120`` s.
* ``--cov-submission [HTMLDIR]``: coverage of the submission's own code (:mod:`~transformer_spec.submission.coverage`).

Marker ``hidden``: shown to students only after publishing. Hook ``pytest_transformer_spec_report``
(:mod:`transformer_spec.pytest_plugin.hookspecs`): snapshots of the run.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from transformer_spec.contract import registry, tracks
from transformer_spec.contract.names import by_name
from transformer_spec.diagnosis import diagnose
from transformer_spec.files import relative
from transformer_spec.guard import forbidden
from transformer_spec.profiles import calls as course_calls
from transformer_spec.pytest_plugin import failures, hypothesis_profiles, run_report, stubs
from transformer_spec.scoring import rubric
from transformer_spec.pytest_plugin.plugin import profile as plugin_profile
from transformer_spec.pytest_plugin.plugin import track as plugin_track
from transformer_spec.pytest_plugin.plugin import under_test
from transformer_spec.pytest_plugin.run import RUN, GradingRun, grading_run  # noqa: F401 (grading_run: the plugin's API)
from transformer_spec.results import outcomes, results_file
from transformer_spec.results.outcomes import Outcome
from transformer_spec.submission import coverage as submission_coverage
from transformer_spec.submission import loader

DEFAULT_TIME_LIMIT = 420.0
def pytest_addhooks(pluginmanager) -> None:
    from transformer_spec.pytest_plugin import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("transformer-spec grading")
    group.addoption("--rubric", action="store", default=None, metavar="FILE",
                    help="the rubric (TOML): points per component and test, dropped and hidden tests, "
                         "forbidden APIs (default: transformer_spec/rubric.toml)")
    group.addoption("--grade-json", action="store", default=None, metavar="PATH",
                    help="write Gradescope's results.json to PATH (implies --grading; not tamper-resistant)")
    group.addoption("--grading", action="store_true", default=False,
                    help="deterministic grading: hypothesis profile 'grading', fixed seeds, a time limit")
    group.addoption("--time-limit", action="store", type=float, default=None, metavar="SECONDS",
                    help=f"start no new test after SECONDS (default {DEFAULT_TIME_LIMIT:g} with --grading, "
                         "else none); the run then takes at most SECONDS + the per-test timeout")
    group.addoption("--cov-submission", action="store", nargs="?", const="htmlcov-submission", default=None,
                    metavar="HTMLDIR",
                    help="coverage of the submission's own file or package (terminal, and HTML in HTMLDIR, "
                         "default htmlcov-submission); needs pytest-cov")


def grading_requested(config: pytest.Config) -> bool:
    """``--grading`` or ``--grade-json`` (read by the hypothesis profiles too)."""
    return bool(config.getoption("--grading", default=False) or config.getoption("--grade-json", default=None))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Resolve the settings once and install the forbidden-API guard before any test module
    (or the submission) is imported."""
    config.addinivalue_line("markers", "hidden: students see this test's result only after grades are published "
                                       "(Gradescope visibility after_published)")
    if hasattr(config, "workerinput"):  # pragma: no cover - xdist workers report to the controller
        return
    if plugin_track(config) == tracks.ALL:  # every track's tests, graded by none (the project's own runs)
        if grading_requested(config):
            raise pytest.UsageError(f"--track {tracks.ALL} grades nothing: choose one of {', '.join(tracks.names())}")
        return
    try:
        chosen = rubric.load_rubric(config.getoption("--rubric") or plugin_profile(config).rubric)
    except rubric.RubricError as exc:
        raise pytest.UsageError(str(exc)) from None
    grade_json = config.getoption("--grade-json")
    grading = hypothesis_profiles.deterministic(config)  # the grader's seeds: a student's run gives its grade
    time_limit = config.getoption("--time-limit")
    if time_limit is None and grading_requested(config):
        time_limit = DEFAULT_TIME_LIMIT
    if time_limit is not None and time_limit <= 0:
        raise pytest.UsageError(f"--time-limit must be positive, got {time_limit:g}")
    config.stash[RUN] = GradingRun(chosen, grading, Path(grade_json).resolve() if grade_json else None, time_limit)
    target = under_test(config)
    target.guard = forbidden.Guard(chosen.forbidden, paths=target.files).install()
    target.seal = target.guard.seal
    if config.getoption("--cov-submission"):
        submission_coverage.start(config, target.target, config.getoption("--cov-submission"))


def pytest_unconfigure(config: pytest.Config) -> None:
    target = under_test(config)
    if target.guard is not None:
        target.guard.uninstall()
        target.guard = target.seal = None


# --------------------------------------------------------------------------------------------
# Collection: points per test
# --------------------------------------------------------------------------------------------
@pytest.hookimpl(hookwrapper=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]):
    """Points are shared out before deselection (-k, -m): they depend on the collected tests,
    not on the selection."""
    run = grading_run(config)
    if run is not None:
        try:
            run.left_out = rubric.leave_out_optional(run.rubric, items)
            run.components = {item.nodeid: rubric.component_of_item(item) for item in items}
            rubric.check_rubric_against(run.rubric, run.components, Path(str(config.rootpath)))
            graded = {n: c for n, c in run.components.items() if c is not None}
            run.points, _ = rubric.assign_points(run.rubric, graded)
        except rubric.RubricError as exc:
            raise pytest.UsageError(str(exc)) from None
    yield
    if run is None:
        return
    order = {c: i for i, c in enumerate(registry.names())}
    counters: dict[str, int] = {}
    for item in items:
        if item.nodeid not in run.points:
            continue
        comp = run.components[item.nodeid]
        hidden = item.get_closest_marker("hidden") is not None or any(
            h == comp or rubric.matches(h, item.nodeid) for h in run.rubric.hidden)
        counters[comp] = counters.get(comp, 0) + 1
        run.results[item.nodeid] = Outcome(item.nodeid, comp, run.points[item.nodeid], hidden,
                                           number=f"{order[comp] + 1}.{counters[comp]}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtestloop(session: pytest.Session):
    """A submission that cannot be graded at all (not importable, or no contract name) fails
    every graded test without running it: said once, at the top, with the fix."""
    run = grading_run(session.config)
    needed = run is not None and not session.config.option.collectonly and session.items
    sub = under_test(session.config).submission if needed else None  # imported here, not by the first test
    graded = [] if sub is None or sub.error is None \
        else [i for i in session.items if i.nodeid in run.results or "impl" in getattr(i, "fixturenames", ())]
    if sub is not None and sub.error is None:
        sub.watchers.append(lambda name: _record_use(run, name))
        run.stubs |= stubs.static_stubs(sub, under_test(session.config).paths())
    if graded:
        skipped = {i.nodeid for i in graded}
        for nodeid in skipped & set(run.results):
            run.results[nodeid].ran = "failed"
        session.items[:] = [i for i in session.items if i.nodeid not in skipped]
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_sep("=", "the submission cannot be graded: no test was run", red=True, bold=True)
            for line in run_report.cannot_be_graded(sub, len(graded)):
                tr.write_line(line)
    yield
    if graded:
        session.testsfailed += len(graded)  # exit code 1: a grade of 0 is a failure


def _record_use(run: GradingRun, name: str) -> None:
    if run.current is not None and name in by_name():
        run.current.uses.add(name)


def pytest_collection_finish(session: pytest.Session) -> None:
    run = grading_run(session.config)
    if run is not None:
        run.collected = True
        guard = under_test(session.config).guard
        if guard is not None:  # the suite's own packages are imported now: out of the submission's reach
            guard.protect_suite()
        _publish(session.config, run, final=False)


# --------------------------------------------------------------------------------------------
# Running: seeds, time limit, forbidden uses, names used
# --------------------------------------------------------------------------------------------
@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    run = grading_run(item.config)
    if run is None:
        return
    run.current, run.call_mark = run.results.get(item.nodeid), course_calls.mark()
    guard = under_test(item.config).guard
    if guard is not None:
        guard.for_test(graded=run.current is not None)
    if run.current is not None and run.grading:
        random.seed(0)
        import numpy
        import torch

        # The CPU generator alone: torch.manual_seed also queues the seed, with a formatted stack, for each
        # accelerator not yet initialised (CUDA, XPU, MTIA), ~2 ms a test (python -m cProfile on a graded run).
        torch.default_generator.manual_seed(0)
        if torch.cuda.is_initialized():
            torch.cuda.manual_seed_all(0)
        numpy.random.seed(0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Wrap a property's inner test (hypothesis's documented hook): it records each failing
    call's arguments (the last one is the shrunk example) and stops at the first stub."""
    handle = getattr(getattr(item, "obj", None), "hypothesis", None)
    inner = getattr(handle, "inner_test", None)
    run = grading_run(item.config)
    if handle is None or inner is None or run is None:
        yield
        return
    handle.inner_test = failures.wrap_inner_test(inner, getattr(item, "fixturenames", ()), run.examples)
    try:
        yield
    finally:
        handle.inner_test = inner


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings) -> None:
    """pytest-timeout's limit for this test (it then sets the timer itself): a failure at that
    limit is a timeout, not a wrong answer."""
    run = grading_run(item.config)
    if run is not None:
        run.timeouts[item.nodeid] = (float(settings.timeout), time.monotonic())


def pytest_runtest_teardown(item: pytest.Item, nextitem) -> None:
    run = grading_run(item.config)
    if run is None or run.time_limit is None or nextitem is None:
        return
    if time.monotonic() - run.start > run.time_limit:
        run.stopped_for_time = True
        item.session.shouldstop = f"the run's time limit of {run.time_limit:g} s was reached"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Turn each phase's report into the test's outcome, where it happens: its kind of failure,
    the message a student reads (also in the terminal), the stubs it reached."""
    report: pytest.TestReport = (yield).get_result()
    run = grading_run(item.config)
    if run is None:
        return
    target = under_test(item.config)
    paths = target.paths()
    result = run.results.get(item.nodeid)
    if target.guard is not None and target.seal is not None:  # removed from inside: a use of this test
        target.seal = target.guard.check_seal(target.seal, f"during this test's {call.when}")
    uses = list(target.guard.uses) if target.guard is not None else []
    if call.when == "call" and uses and not report.failed:
        report.outcome = "failed"
        report.longrepr = uses[0].message
    exc = None
    if call.excinfo is not None and not call.excinfo.errisinstance(pytest.skip.Exception):
        exc = failures.leaf_exception(call.excinfo.value)
        tb = failures.submission_frame(exc, paths) if isinstance(exc, NotImplementedError) else None
        if tb is not None:
            report.longrepr = failures.describe_not_implemented(exc, paths)
            if report.failed:
                code = tb.tb_frame.f_code
                name = failures.contract_name_of(getattr(code, "co_qualname", code.co_name)) or code.co_name
                run.stub_where.setdefault(name, failures.where(tb))
                _count_as_not_implemented(item, run, name)
    if result is None:  # a test the rubric gives no points: counted, and a failure in the short form
        if report.passed and call.when == "call":
            run.ungraded_passed += 1
        elif report.failed and item.nodeid not in run.ungraded_failed:
            run.ungraded_failed.add(item.nodeid)
            if not failures.developer_view(item.config) and item.get_closest_marker("component") is not None:
                # a test of the suite the rubric leaves out; the project's own tests keep pytest's traceback
                failure = failures.describe(item, call, report, paths, uses[0].message if uses else None,
                                            failures.timed_out(item, call, run.timeouts), run.examples, set(),
                                            course_calls.since(run.call_mark))
                report.longrepr = f"(not graded: the rubric gives this test no points)\n{failure.text}"
        if call.when == "teardown":
            run.examples.clear()
        return
    result.duration += report.duration
    if report.failed and isinstance(exc, ImportError) and result.ran != "failed":  # outcomes.common_import_failure
        run.import_failures[item.nodeid] = (loader.describe_import_failure(target.target, exc),
                                            loader.how_to_fix(target.target, exc))
    if report.failed:
        stubbed = sorted(set(result.uses) & run.stubs)
        if stubbed:  # it scores 0 whatever else is wrong: counted with the stub, its message kept in results.json
            _count_as_not_implemented(item, run, stubbed[0])
        if result.ran != "failed":
            failure = failures.describe(item, call, report, paths, uses[0].message if uses else None,
                                        failures.timed_out(item, call, run.timeouts), run.examples, result.uses,
                                        course_calls.since(run.call_mark))
            result.message, result.failure, result.example = failure.text, failure.kind, failure.example
            if not failures.developer_view(item.config):
                # The terminal shows what results.json says: expected/got/where, then the command.
                report.longrepr = failure.text
        result.ran = "failed"
    elif report.skipped and result.ran != "failed":
        result.ran = "skipped"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        result.message = f"skipped: {reason.removeprefix('Skipped: ')}"
    elif report.passed and call.when == "call" and result.ran == "not run":
        result.ran = "passed"
    if isinstance(exc, NotImplementedError):
        run.stubs |= stubs.stubs_raised(exc, result.uses, paths)
    if call.when == "teardown":
        run.current = None
        run.examples.clear()
        _publish(item.config, run, final=False, write=time.monotonic() - run.last_write > 5.0)


def _count_as_not_implemented(item: pytest.Item, run: GradingRun, name: str) -> None:
    if not failures.developer_view(item.config):
        run.not_implemented.setdefault(item.nodeid, name)


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):
    """A test that failed because the submission says a name is not implemented yet is counted apart
    (``N``, "not implemented") and left out of the failures' sections, which would repeat the same
    line for every test that needs the name: the summary names each unimplemented name once
    (:func:`pytest_terminal_summary`). It still fails (the exit status and the grade are the same)."""
    run = grading_run(config)
    if run is not None and report.failed and report.nodeid in run.not_implemented:
        return NOT_IMPLEMENTED, "N", "NOT IMPLEMENTED"
    return None


NOT_IMPLEMENTED = "not implemented"


# --------------------------------------------------------------------------------------------
# The end: diagnosis, results.json, the terminal's table
# --------------------------------------------------------------------------------------------
def _publish(config: pytest.Config, run: GradingRun, final: bool, write: bool = True) -> None:
    """Settle, tell the report hook, and rewrite --grade-json's file (``write``): only what is read."""
    listening, writing = config.hook.pytest_transformer_spec_report.get_hookimpls(), run.grade_json and write
    end = run.settle(config) if listening or writing else None
    if listening:
        report = outcomes.child_report(run.results.values(), end, final=final, diagnoses=run.diagnoses, mistakes=run.mistakes)
        config.hook.pytest_transformer_spec_report(config=config, report=report)
    if writing:
        results_file.write(run.grade_json, run_report.results_json(config, run, final))
        run.last_write = time.monotonic()


def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    """Publish the final outcomes before the diagnosis runs the submission again (it may hang or
    exit there), then name known mistakes in the failed components and publish again."""
    run = grading_run(session.config)
    if run is not None:
        if exitstatus == pytest.ExitCode.INTERRUPTED and not run.stopped_for_time:
            reason = session.shouldstop or session.shouldfail
            run.interrupted = "the run was interrupted" + (f" ({reason})" if isinstance(reason, str) else "")
            if not run.collected:
                run.interrupted += " before all tests were collected"
        _publish(session.config, run, final=True)
        sub = under_test(session.config).imported
        if not run.interrupted and sub is not None:  # under a course profile: through its API (diagnose.annotate)
            run.settle(session.config)  # the diagnosis reads the settled kinds, file or not
            found = diagnose.annotate(sub, run.results.values(), plugin_profile(session.config))
            run.diagnoses, run.mistakes = found.messages, found.mistakes
            if run.diagnoses:
                _publish(session.config, run, final=True)


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    run = grading_run(config)
    if run is None or not run.results or config.option.collectonly:  # --co: nothing ran, so no score
        return
    run.settle(config)
    title, lines = run_report.score_lines(config, run)
    tr = terminalreporter
    tr.write_sep("=", title)
    for line in run_report.not_implemented(run):
        tr.write_line(line)
    for line in lines + run_report.notes(config, run, terminal=True):
        tr.write_line(line)
    if run.grade_json is not None:
        tr.write_line(f"results.json: {relative(str(run.grade_json))}")

