"""The grading plugin: points per component, the score table, Gradescope's ``results.json``.

Loaded by the repository's root ``conftest.py`` next to :mod:`transformer_spec.plugin`.
Every test with a ``component`` marker is graded; the others (``tests/``) are not.

Options:

* ``--rubric FILE``: the rubric (TOML; default ``transformer_spec/rubric.toml``).
* ``--grade-json PATH``: write Gradescope's ``results.json`` to ``PATH`` (implies ``--grading``).
  The file is written at collection (every test "not run"), and again at the end; so it exists
  after an interruption, a crash of the run or an unimportable submission (then every test
  scores 0 with the reason).
* ``--grading``: deterministic grading: hypothesis profile ``grading`` (unless
  ``--hypothesis-profile`` is given), fixed torch/random seeds before each graded test, and the
  run's time limit.
* ``--time-limit SECONDS``: stop starting new tests after this long (default 420 s when grading,
  none otherwise); tests not run score 0 with "not run". With pytest-timeout's per-test limit
  (``timeout = 120`` in pyproject.toml) the whole run takes at most ``time-limit + 120`` s.
* ``--cov-submission [HTMLDIR]``: coverage (pytest-cov) of the submission's own file or package
  only, in the terminal and as HTML in ``HTMLDIR`` (default ``htmlcov-submission``).

Marker ``hidden``: the test's result is shown to students only after publishing
(Gradescope ``after_published``).

What a student reads (:mod:`transformer_spec.failures`): a failing test's message (expected, got,
where, a property's smallest example, then the command that re-runs it) is its ``results.json``
output and, in the terminal, its whole report (``--tb=long`` or ``-vv`` keeps pytest's traceback);
a submission that cannot be graded at all (not importable, or no contract name) runs no test and
is described once, with the fix; each component's diagnosis is stated once (``extra_data``).

Scoring rules (``docs/grading.md``): a test earns its points when it passed (all of a property's
examples), used no forbidden API, and used no contract name that is still a stub (raised
``NotImplementedError`` in this run).
"""

from __future__ import annotations

import ast
import inspect
import json
import random
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from . import failures, forbidden, loader
from .contract import BY_NAME, COMPONENTS
from .files import atomic_write, relative
from .rubric import (  # noqa: F401 - the rubric's API, also reached as grading.X
    DEFAULT_RUBRIC,
    POINT_DECIMALS,
    Rubric,
    RubricError,
    assign_points,
    check_rubric_against,
    component_of_item,
    load_rubric,
    matches,
    parse_rubric,
    round_within,
)

DEFAULT_TIME_LIMIT = 420.0
GRADING_PROFILE = "grading"
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
HIDDEN_VISIBILITY = "after_published"

_STATE = pytest.StashKey["GradingState"]()


# --------------------------------------------------------------------------------------------
# Per-test results
# --------------------------------------------------------------------------------------------
@dataclass
class Result:
    nodeid: str
    component: str
    points: float
    hidden: bool
    outcome: str = "not run"  # "passed", "failed", "skipped", "not run"
    output: str = ""
    uses: set[str] = field(default_factory=set)  # contract names the test used
    stub_raised: bool = False
    duration: float = 0.0
    number: str = ""
    score: float = 0.0  # the fields below are set by score_results
    status: str = "failed"
    final: str = ""
    kind: failures.Kind | None = None  # what kind of failure ``output`` describes (failed tests)


@dataclass
class GradingState:
    rubric: Rubric
    grading: bool
    grade_json: Path | None
    time_limit: float | None
    start: float = field(default_factory=time.monotonic)
    results: dict[str, Result] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    stubs: set[str] = field(default_factory=set)
    guard: forbidden.Guard | None = None
    current: Result | None = None
    interrupted: str | None = None
    stopped_for_time: bool = False
    collected: bool = False
    last_write: float = 0.0
    diagnoses: dict[str, str] = field(default_factory=dict)  # component -> diagnosis (transformer_spec/diagnose.py)
    examples: failures.Examples = field(default_factory=failures.Examples)  # the running property's failing calls
    timeouts: dict[str, tuple[float, float]] = field(default_factory=dict)  # node id -> (limit, timer start)
    ungraded_passed: int = 0  # tests without points (no component, or dropped) that passed


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("transformer-spec grading")
    group.addoption("--rubric", action="store", default=None, metavar="FILE",
                    help="the rubric (TOML): points per component and test, dropped and hidden tests, "
                         "forbidden APIs (default: transformer_spec/rubric.toml)")
    group.addoption("--grade-json", action="store", default=None, metavar="PATH",
                    help="write Gradescope's results.json to PATH (implies --grading)")
    group.addoption("--grading", action="store_true", default=False,
                    help="deterministic grading: hypothesis profile 'grading', fixed seeds, a time limit")
    group.addoption("--time-limit", action="store", type=float, default=None, metavar="SECONDS",
                    help=f"start no new test after SECONDS (default {DEFAULT_TIME_LIMIT:g} with --grading, "
                         "else none); the run then takes at most SECONDS + the per-test timeout")
    group.addoption("--cov-submission", action="store", nargs="?", const="htmlcov-submission", default=None,
                    metavar="HTMLDIR",
                    help="coverage of the submission's own file or package (terminal, and HTML in HTMLDIR, "
                         "default htmlcov-submission); needs pytest-cov")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "hidden: students see this test's result only after grades are published "
                   "(Gradescope visibility after_published)"
    )
    if hasattr(config, "workerinput"):  # pragma: no cover - xdist workers report to the controller
        return
    try:
        rubric = load_rubric(config.getoption("--rubric"))
    except RubricError as exc:
        raise pytest.UsageError(str(exc)) from None
    grade_json = config.getoption("--grade-json")
    grading = bool(config.getoption("--grading") or grade_json)
    time_limit = config.getoption("--time-limit")
    if time_limit is None and grading:
        time_limit = DEFAULT_TIME_LIMIT
    if time_limit is not None and time_limit <= 0:
        raise pytest.UsageError(f"--time-limit must be positive, got {time_limit:g}")
    state = GradingState(rubric, grading, Path(grade_json).resolve() if grade_json else None, time_limit)
    config.stash[_STATE] = state
    if grading:
        _choose_grading_profile(config)
    target = loader.resolve_target(config.getoption("--impl"))
    state.guard = forbidden.Guard(rubric.forbidden, paths=_paths_of(config, target)).install()
    if config.getoption("--cov-submission"):
        _start_submission_coverage(config, target, config.getoption("--cov-submission"))


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None and state.guard is not None:
        state.guard.uninstall()
        state.guard = None


def _paths_of(config: pytest.Config, target: str):
    """The submission's files, read lazily: by the loaded module once it is imported."""
    from .plugin import _SUBMISSION

    cache: dict[str, list[Path]] = {}

    def paths() -> list[Path]:
        sub = config.stash.get(_SUBMISSION, None)
        key = sub.origin if sub is not None and sub.module is not None else ""
        if key not in cache:
            cache[key] = forbidden.submission_paths(target, key or None)
        return cache[key]

    return paths


def _choose_grading_profile(config: pytest.Config) -> None:
    """``--hypothesis-profile=grading`` unless the user chose a profile."""
    if getattr(config.option, "hypothesis_profile", None):
        return
    try:
        import transformer_spec.hypothesis_profiles  # noqa: F401 - registers the profiles
    except ModuleNotFoundError:
        pass
    from hypothesis import settings
    from hypothesis.errors import InvalidArgument

    try:
        settings.get_profile(GRADING_PROFILE)
    except InvalidArgument:  # the profiles module is absent: a derandomised stand-in
        settings.register_profile(GRADING_PROFILE, derandomize=True, database=None, deadline=None,
                                  print_blob=False)
    config.option.hypothesis_profile = GRADING_PROFILE


def _start_submission_coverage(config: pytest.Config, target: str, htmldir: str) -> None:
    try:
        from pytest_cov.plugin import CovPlugin
    except ImportError:
        raise pytest.UsageError("--cov-submission needs pytest-cov: pip install pytest-cov") from None
    if config.pluginmanager.hasplugin("_cov"):
        raise pytest.UsageError("--cov-submission measures the submission itself; do not combine it with --cov")
    paths = forbidden.submission_paths(target)
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
    opt.cov_report = {"term-missing": None, "html": htmldir}
    config.pluginmanager.register(CovPlugin(opt, config.pluginmanager), "_cov")


# --------------------------------------------------------------------------------------------
# Collection: points per test
# --------------------------------------------------------------------------------------------
def _state(config: pytest.Config) -> GradingState | None:
    return config.stash.get(_STATE, None)


@pytest.hookimpl(hookwrapper=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]):
    state = _state(config)
    if state is not None:
        # Before deselection (-k, -m): points depend on the collected tests, not the selection.
        try:
            components = {item.nodeid: component_of_item(item) for item in items}
            check_rubric_against(state.rubric, components, Path(str(config.rootpath)))
            graded = {n: c for n, c in components.items() if c is not None}
            points, dropped = assign_points(state.rubric, graded)
        except RubricError as exc:
            raise pytest.UsageError(str(exc)) from None
        state.dropped = dropped
        state.all_points = points  # type: ignore[attr-defined]
    yield
    if state is None:
        return
    points = state.all_points  # type: ignore[attr-defined]
    counters: dict[str, int] = {}
    for item in items:
        if item.nodeid not in points:
            continue
        comp = components[item.nodeid]
        hidden = item.get_closest_marker("hidden") is not None or any(
            h == comp or matches(h, item.nodeid) for h in state.rubric.hidden
        )
        counters[comp] = counters.get(comp, 0) + 1
        state.results[item.nodeid] = Result(
            item.nodeid, comp, points[item.nodeid], hidden,
            number=f"{COMPONENTS.index(comp) + 1}.{counters[comp]}",
        )


def _submission(config: pytest.Config) -> loader.Submission | None:
    from .plugin import _SUBMISSION

    return config.stash.get(_SUBMISSION, None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtestloop(session: pytest.Session):
    """A submission that cannot be graded at all (not importable, or no contract name) fails
    every graded test without running it: said once, at the top, with the fix."""
    from .plugin import get_submission

    state = _state(session.config)
    needed = state is not None and not session.config.option.collectonly and session.items
    sub = get_submission(session.config) if needed else None  # imported here, not by the first test
    graded = [] if sub is None or sub.error is None \
        else [i for i in session.items if i.nodeid in state.results or "impl" in getattr(i, "fixturenames", ())]
    if graded:
        skipped = {i.nodeid for i in graded}
        for nodeid in skipped & set(state.results):
            r = state.results[nodeid]
            r.outcome, r.kind = "failed", failures.Kind.IMPORT
            r.output = f"{sub.error}\nFix: {sub.fix}" if sub.fix else sub.error
        session.items[:] = [i for i in session.items if i.nodeid not in skipped]
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_sep("=", "the submission cannot be graded: no test was run", red=True, bold=True)
            tr.write_line(sub.error)
            if sub.fix:
                tr.write_line(f"Fix: {sub.fix}")
            tr.write_line(f"None of the {len(graded)} tests that use the submission ran; every graded test scores 0.")
    yield
    if graded:
        session.testsfailed += len(graded)  # exit code 1: a grade of 0 is a failure


def pytest_collection_finish(session: pytest.Session) -> None:
    state = _state(session.config)
    if state is None:
        return
    state.collected = True
    _write_json(session.config, state, final=False)


# --------------------------------------------------------------------------------------------
# Running: seeds, time limit, forbidden uses, names used
# --------------------------------------------------------------------------------------------
def _track_names(config: pytest.Config) -> None:
    """Record which contract names each test uses (through ``impl.get`` / ``impl.X``)."""
    from .plugin import get_submission

    sub = get_submission(config)
    if "get" in vars(sub):
        return
    original = sub.get

    def get(name: str):
        state = _state(config)
        if state is not None and state.current is not None and name in BY_NAME:
            state.current.uses.add(name)
        return original(name)

    sub.get = get
    state = _state(config)
    if state is not None and sub.error is None:
        state.stubs |= static_stubs(sub, state.guard.paths() if state.guard is not None else [])


def _always_raises_not_implemented(func) -> bool:
    """Whether ``func``'s body reaches ``raise NotImplementedError`` unconditionally (a stub)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return False
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not defs:
        return False
    for stmt in defs[0].body:
        if isinstance(stmt, ast.Return):
            return False
        if isinstance(stmt, ast.Raise) and stmt.exc is not None:
            exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
            return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


def static_stubs(sub: loader.Submission, paths: list[str]) -> set[str]:
    """Contract names whose own code is a stub: the function, or a method of the class (or of a
    base class the submission wrote), unconditionally raises NotImplementedError. A method that
    is itself a contract name (``MiniGPT.generate``) counts for that name only."""

    def own(obj) -> bool:
        filename = getattr(getattr(obj, "__code__", None), "co_filename", None)
        if filename is None:
            module = sys.modules.get(getattr(obj, "__module__", ""), None)
            filename = getattr(module, "__file__", None)
        return bool(filename) and any(str(filename).startswith(p) for p in paths)

    stubs = set()
    for entry in BY_NAME.values():
        try:
            obj = loader.Submission.get(sub, entry.name)
        except loader.SubmissionError:
            continue
        if isinstance(obj, type):
            funcs = [
                value for klass in obj.__mro__ if own(klass)
                for attr, value in vars(klass).items()
                if inspect.isfunction(value) and f"{entry.name}.{attr}" not in BY_NAME
            ]
        else:
            funcs = [obj] if inspect.isfunction(obj) and own(obj) else []
        if any(_always_raises_not_implemented(f) for f in funcs):
            stubs.add(entry.name)
    return stubs


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    state = _state(item.config)
    if state is None:
        return
    result = state.results.get(item.nodeid)
    state.current = result
    if state.guard is not None:
        state.guard.uses.clear()
    if result is None:
        return
    _track_names(item.config)
    if state.grading:
        random.seed(0)
        import torch

        torch.manual_seed(0)
        try:
            import numpy

            numpy.random.seed(0)
        except ImportError:  # pragma: no cover
            pass


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    handle = getattr(getattr(item, "obj", None), "hypothesis", None)
    inner = getattr(handle, "inner_test", None)
    state = _state(item.config)
    if handle is None or inner is None or state is None:
        yield
        return
    # hypothesis's documented hook for wrapping the inner test: records each failing call's
    # arguments (the last one is the shrunk example) and stops at the first stub.
    handle.inner_test = failures.wrap_inner_test(inner, getattr(item, "fixturenames", ()), state.examples)
    try:
        yield
    finally:
        handle.inner_test = inner


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings) -> None:
    """pytest-timeout's limit for this test (it then sets the timer itself)."""
    state = _state(item.config)
    if state is not None:
        state.timeouts[item.nodeid] = (float(settings.timeout), time.monotonic())


def _timed_out(item: pytest.Item, call: pytest.CallInfo, state: GradingState) -> float | None:
    """pytest-timeout's limit when it is what stopped ``call`` (it fails the test when it fires)."""
    limit, started = state.timeouts.get(item.nodeid, (None, 0.0))
    if limit is None or limit <= 0 or call.excinfo is None:
        return None
    # The timer runs from the start of setup (or of the call): a Failed that came at its limit.
    if call.excinfo.errisinstance(pytest.fail.Exception) and time.monotonic() - started >= 0.95 * limit:
        return limit
    return None


def pytest_runtest_teardown(item: pytest.Item, nextitem) -> None:
    state = _state(item.config)
    if state is None or state.time_limit is None or nextitem is None:
        return
    if time.monotonic() - state.start > state.time_limit:
        state.stopped_for_time = True
        item.session.shouldstop = f"the run's time limit of {state.time_limit:g} s was reached"


def _paths(state: GradingState) -> list[str]:
    return state.guard.paths() if state.guard is not None else []


def _developer_view(config: pytest.Config) -> bool:
    """``-vv`` or an explicit ``--tb`` keeps pytest's own tracebacks in the terminal."""
    return config.getoption("verbose") >= 2 or config.getoption("tbstyle") not in ("auto", None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    state = _state(item.config)
    if state is None:
        return
    result = state.results.get(item.nodeid)
    uses = list(state.guard.uses) if state.guard is not None else []
    if call.when == "call" and uses and not report.failed:
        report.outcome = "failed"
        report.longrepr = uses[0].message
    if call.excinfo is not None and not call.excinfo.errisinstance(pytest.skip.Exception):
        exc = failures.leaf_exception(call.excinfo.value)
        if isinstance(exc, NotImplementedError) and failures.submission_frame(exc, _paths(state)) is not None:
            report.longrepr = failures.describe_not_implemented(exc, _paths(state))
    if result is None:
        if report.passed and call.when == "call":
            state.ungraded_passed += 1
        return
    result.duration += report.duration
    if report.failed:
        if result.outcome != "failed":
            failure = failures.describe(item, call, report, _paths(state), uses[0].message if uses else None,
                                        _timed_out(item, call, state), state.examples, result.uses)
            result.output, result.kind = failure.text, failure.kind
            if not _developer_view(item.config):
                # The terminal shows what results.json says: expected/got/where, then the command.
                report.longrepr = failure.text
        result.outcome = "failed"
    elif report.skipped and result.outcome != "failed":
        result.outcome = "skipped"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        result.output = f"skipped: {reason.removeprefix('Skipped: ')}"
    elif report.passed and call.when == "call" and result.outcome == "not run":
        result.outcome = "passed"
    if call.excinfo is not None:
        exc = failures.leaf_exception(call.excinfo.value)
        if isinstance(exc, NotImplementedError):
            result.stub_raised = True
            _mark_stubs(state, result, exc)
    if call.when == "teardown":
        state.current = None
        state.examples.clear()
        if state.grade_json is not None and time.monotonic() - state.last_write > 5.0:
            _write_json(item.config, state, final=False)


def _mark_stubs(state: GradingState, result: Result, exc: BaseException) -> None:
    """A contract name whose code raised NotImplementedError is a stub, and so is every name the
    test used through it (``MiniGPT`` when its ``SinusoidalPositionEncoding`` is a stub), but not
    the class of a stubbed method (``MiniGPT`` when only ``MiniGPT.generate`` is a stub)."""
    tb = failures.submission_frame(exc, _paths(state))
    raised_in = None
    if tb is not None:
        code = tb.tb_frame.f_code
        raised_in = failures.contract_name_of(getattr(code, "co_qualname", code.co_name))
    if raised_in is not None:
        state.stubs.add(raised_in)
    for name in result.uses:
        if raised_in is None or not (raised_in == name or raised_in.startswith(name + ".")):
            state.stubs.add(name)
        elif raised_in == name:
            state.stubs.add(name)



# --------------------------------------------------------------------------------------------
# Scores, table and results.json
# --------------------------------------------------------------------------------------------
def _submission_error(config: pytest.Config) -> str | None:
    sub = _submission(config)
    if sub is None or sub.error is None:
        return None
    return f"{sub.error}\nFix: {sub.fix}" if sub.fix else sub.error


def score_results(config: pytest.Config, state: GradingState) -> None:
    """Fill in every result's ``score``, ``status`` and ``final`` output (idempotent)."""
    error = _submission_error(config)
    not_run = (
        f"not run: {state.interrupted}" if state.interrupted
        else f"not run: the run's time limit of {state.time_limit:g} s was reached" if state.stopped_for_time
        else "not run"
    )
    # A forbidden API fails its whole component ("fails the affected component"): a test of
    # that component that passed without reaching the forbidden call earns nothing either.
    forbidden_in: dict[str, str] = {}
    for r in state.results.values():
        if r.kind == failures.Kind.FORBIDDEN and r.component not in forbidden_in:
            forbidden_in[r.component] = r.output.splitlines()[0]
    for r in state.results.values():
        r.score, r.status, r.final = 0.0, "failed", r.output
        if error is not None:
            r.final = error if r.outcome != "not run" else f"{not_run}; {error}"
        elif r.outcome == "not run":
            r.final = not_run
        elif r.outcome == "passed":
            stubs = sorted(r.uses & state.stubs)
            if stubs:
                names = ", ".join(f"`{s}`" for s in stubs)
                verb = "is" if len(stubs) == 1 else "are"
                r.final = (
                    f"passed, but {names} {verb} not implemented yet (raises NotImplementedError): "
                    f"no points for tests that use {'it' if len(stubs) == 1 else 'them'} until then"
                )
            elif r.component in forbidden_in:
                r.final = (f"passed, but the component '{r.component}' scores 0: another of its tests "
                           f"found {forbidden_in[r.component]}")
            else:
                r.score, r.status, r.final = r.points, "passed", ""


def _fmt(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".") if x != int(x) else f"{int(x)}"


def score_table(state: GradingState) -> tuple[list[str], float, float]:
    """Lines of the per-component table, the points earned and the points possible."""
    rows = []
    earned_total = possible_total = 0.0
    for comp in COMPONENTS:
        rs = [r for r in state.results.values() if r.component == comp]
        if not rs:
            continue
        earned = sum(r.score for r in rs)
        possible = sum(r.points for r in rs)
        passed = sum(1 for r in rs if r.status == "passed")
        earned_total += earned
        possible_total += possible
        rows.append((comp, f"{earned:.2f} / {possible:.2f}", f"{passed} / {len(rs)}"))
    lines = [f"{'component':<12} {'points':>17}   {'tests passed':>12}"]
    lines += [f"{c:<12} {p:>17}   {t:>12}" for c, p, t in rows]
    passed_all = sum(1 for r in state.results.values() if r.status == "passed")
    lines.append(f"{'total':<12} {f'{earned_total:.2f} / {possible_total:.2f}':>17}   "
                 f"{f'{passed_all} / {len(state.results)}':>12}")
    return lines, earned_total, possible_total


def _notes(config: pytest.Config, state: GradingState, terminal: bool = False) -> list[str]:
    notes = []
    error = _submission_error(config)
    if error and terminal:
        notes.append("The submission cannot be graded, so every test scores 0 (why, and the fix: at the top).")
    elif error:
        notes.append(f"The submission cannot be graded, so every test scores 0: {error}")
    if state.interrupted:
        notes.append(f"The run was interrupted ({state.interrupted}); tests not run score 0.")
    if state.stopped_for_time:
        notes.append(f"The run's time limit of {state.time_limit:g} s was reached; tests not run score 0.")
    graded_components = {r.component for r in state.results.values()}
    missing = [c for c in state.rubric.components if c not in graded_components and state.rubric.components[c]]
    if missing and state.results:
        notes.append("No tests of component(s) " + ", ".join(missing) + " in this run: their points are not graded.")
    if state.stubs:
        notes.append("Not implemented yet (raised NotImplementedError): " + ", ".join(sorted(state.stubs)) + ".")
    notes.extend(_passes_without_points(state))
    forbidden_hits = sorted({r.output.splitlines()[0] for r in state.results.values()
                             if r.kind == failures.Kind.FORBIDDEN})
    notes.extend(forbidden_hits[:5])
    notes.extend(state.diagnoses.values())
    if any(r.hidden for r in state.results.values()):
        notes.append("Some tests are hidden until grades are published; the total is shown then.")
    return notes


def _passes_without_points(state: GradingState) -> list[str]:
    """Why pytest's "N passed" can sit under a low score: passes that earn nothing."""
    zero = [r for r in state.results.values() if r.outcome == "passed" and r.status != "passed"]
    stub = sum(1 for r in zero if r.uses & state.stubs)
    lines = []
    if zero:
        parts = [f"{stub} use a name that is not implemented yet"] if stub else []
        if len(zero) > stub:
            parts.append(f"{len(zero) - stub} are in a component that used a forbidden API")
        lines.append(f"{len(zero)} test(s) passed but score 0: {'; '.join(parts)} (each test's message says which).")
    if state.ungraded_passed:
        lines.append(f"{state.ungraded_passed} passed test(s) are not graded (no component, or dropped by the rubric).")
    return lines


def results_json(config: pytest.Config, state: GradingState, final: bool = True) -> dict:
    """Gradescope's results.json as a dict (see docs/grading.md)."""
    score_results(config, state)
    lines, earned, possible = score_table(state)
    sub_target = loader.resolve_target(config.getoption("--impl"))
    header = f"transformer-spec: {sub_target} scored {_fmt(round(earned, 2))} / {_fmt(round(possible, 2))}"
    if not final:
        header += " (the run has not finished; this file is rewritten at its end)"
    output = "\n".join([header, "", *lines, "", *_notes(config, state)]).rstrip() + "\n"
    tests = []
    for r in state.results.values():
        text = r.final
        if r.status == "failed" and r.component in state.diagnoses and r.kind in failures.DIAGNOSED:
            text += f"\n\n(See the diagnosis for '{r.component}' above: it is given once for the whole component.)"
        tests.append({
            "name": f"[{r.component}] {r.nodeid}",
            "number": r.number,
            "score": round(r.score, 4),
            "max_score": round(r.points, 4),
            "status": r.status,
            "output": text,
            "output_format": "text",
            "tags": [r.component],
            "visibility": HIDDEN_VISIBILITY if r.hidden else "visible",
            "extra_data": {"kind": r.kind.value if r.kind is not None and r.outcome == "failed" else None},
        })
    return {
        "score": round(earned, 4),
        "execution_time": round(time.monotonic() - state.start, 2),
        "output": output,
        "output_format": "text",
        "test_output_format": "text",
        "stdout_visibility": "hidden",
        "extra_data": {"diagnoses": {c: d for c, d in state.diagnoses.items() if c in COMPONENTS},
                       "interrupted": bool(state.interrupted), "stopped_for_time": state.stopped_for_time},
        "tests": tests,
    }


def _write_json(config: pytest.Config, state: GradingState, final: bool) -> None:
    if state.grade_json is None:
        return
    data = results_json(config, state, final)
    atomic_write(state.grade_json, json.dumps(data, indent=2) + "\n")
    state.last_write = time.monotonic()


def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    state = _state(session.config)
    if state is None:
        return
    if exitstatus == pytest.ExitCode.INTERRUPTED and not state.stopped_for_time:
        reason = session.shouldstop or session.shouldfail
        state.interrupted = "the run was interrupted" + (f" ({reason})" if isinstance(reason, str) else "")
        if not state.collected:
            state.interrupted += " before all tests were collected"
    if not state.interrupted:  # name known mistakes in the failed components' feedback
        from . import diagnose

        state.diagnoses = diagnose.annotate(session.config, state)
    _write_json(session.config, state, final=True)


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    state = _state(config)
    if state is None or not state.results:
        return
    score_results(config, state)
    lines, earned, possible = score_table(state)
    target = loader.resolve_target(config.getoption("--impl"))
    tr = terminalreporter
    tr.write_sep("=", f"score of {target}: {_fmt(round(earned, 2))} / {_fmt(round(possible, 2))}")
    for line in lines:
        tr.write_line(line)
    for note in _notes(config, state, terminal=True):
        tr.write_line(note)
    if state.grade_json is not None:
        tr.write_line(f"results.json: {relative(str(state.grade_json))}")
