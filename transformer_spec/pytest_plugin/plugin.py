"""The pytest plugin: chooses the implementation under test and hands it to the tests.

Loaded by the repository's root ``conftest.py``. Options:

* ``--impl TARGET``: the implementation under test (module name, ``.py`` file or package
  folder); default ``$TRANSFORMER_IMPL`` or ``reference``.
* ``--torch-threads N``: torch's intra-op threads for the run (default 1: the suite's tensors
  are small, and one thread is faster for them and identical between machines).
* ``--profile NAME``: the course API the submission is written against (:mod:`.profiles`; default
  ``$TRANSFORMER_SPEC_PROFILE`` or ``contract``, the contract's own names). A profile implies its
  track; tests that need what it cannot express are left out (``needs`` marker).

Fixtures: ``impl`` (the :class:`~transformer_spec.submission.loader.Submission` under test). Every test
reaches the submission through it; the grading plugin and the diagnosis reach it, its files
and the forbidden-API guard through :func:`under_test`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from transformer_spec import files, profiles
from transformer_spec.contract import tracks
from transformer_spec.guard import forbidden
from transformer_spec.submission import loader


class UnderTest:
    """The implementation under test of one run: its target, the submission (imported once, on
    first use), the files that hold its code, and the forbidden-API guard watching it."""

    def __init__(self, target: str, profile: profiles.Profile | None = None):
        self.target = target
        self.profile = profile
        self.guard: forbidden.Guard | None = None
        #: what the guard put in place, as installed (kept here, not on the guard the submission can reach)
        self.seal: forbidden.Seal | None = None
        self._submission: loader.Submission | None = None
        self._paths: dict[str, list[Path]] = {}

    @property
    def submission(self) -> loader.Submission:
        """The submission, imported on first use (never raises: see :func:`loader.load`)."""
        if self._submission is None:
            self._submission = loader.load(self.target, require_contract=True, profile=self.profile)
            if self.guard is not None and self.seal is not None:  # removed by the import: put back
                self.seal = self.guard.restore(self.seal)
        return self._submission

    @property
    def imported(self) -> loader.Submission | None:
        """The submission if it was imported already, else None (nothing is imported)."""
        return self._submission

    def files(self) -> list[Path]:
        """The submission's own files and folders: found on disk before the import, from the
        loaded module after it."""
        sub = self._submission
        key = sub.origin if sub is not None and sub.module is not None else ""
        if key not in self._paths:
            self._paths[key] = files.submission_paths(self.target, key or None)
        return self._paths[key]

    def paths(self) -> list[str]:
        """:meth:`files` as resolved strings (what tracebacks are compared with)."""
        return [str(p.resolve()) for p in self.files()]


_UNDER_TEST = pytest.StashKey[UnderTest]()


def under_test(config: pytest.Config) -> UnderTest:
    """The implementation under test of this run (one object, created on first use)."""
    if _UNDER_TEST not in config.stash:
        config.stash[_UNDER_TEST] = UnderTest(loader.resolve_target(config.getoption("--impl")), profile(config))
    return config.stash[_UNDER_TEST]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("transformer-spec")
    group.addoption(
        "--impl", action="store", default=None, metavar="TARGET",
        help="implementation under test: an importable module name, a .py file or a package folder "
             f"(default: ${loader.ENV_VAR} or '{loader.DEFAULT_TARGET}')",
    )
    group.addoption(
        "--track", action="store", default=None, metavar="NAME",
        help=f"the track to grade: {', '.join(tracks.names())} (default: ${tracks.ENV_VAR} or "
             f"'{tracks.DEFAULT}'); '{tracks.ALL}' runs every track's tests and grades none (the project's own runs)",
    )
    group.addoption(
        "--profile", action="store", default=None, metavar="NAME",
        help=f"the course API the submission is written against: {', '.join(profiles.names())} (default: "
             f"${profiles.ENV_VAR} or '{profiles.DEFAULT}', the contract's own names); a profile implies its track",
    )
    group.addoption(
        "--torch-threads", action="store", type=int, default=1, metavar="N",
        help="torch.set_num_threads(N) for the run (default 1)",
    )


_TRACK = pytest.StashKey[str]()


_PROFILE = pytest.StashKey[profiles.Profile]()


def profile(config: pytest.Config) -> profiles.Profile:
    """The profile of this run, resolved once (``--profile``, else ``$TRANSFORMER_SPEC_PROFILE``, else
    the contract's own names)."""
    if _PROFILE not in config.stash:
        try:
            config.stash[_PROFILE] = profiles.get(config.getoption("--profile", default=None))
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
        profiles.use(config.stash[_PROFILE])
    return config.stash[_PROFILE]


def track(config: pytest.Config) -> str:
    """The track of this run, resolved once (``--track``, else the profile's track, else
    ``$TRANSFORMER_SPEC_TRACK``, else classic) and made the process's own until the run ends
    (:func:`tracks.use`)."""
    if _TRACK not in config.stash:
        chosen, implied = config.getoption("--track"), profile(config).track
        if implied and chosen not in (None, implied):
            raise pytest.UsageError(f"--profile {profile(config).name} grades the {implied} track; "
                                    f"leave out --track {chosen} (or give --track {implied})")
        chosen = chosen or implied or None
        try:
            tracks.use(chosen if chosen is not None else tracks.from_environment())  # not an outer run's
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
        config.stash[_TRACK] = tracks.chosen()
    return config.stash[_TRACK]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "component(name): the contract component a test grades")
    config.addinivalue_line("markers", "track(*names): the tracks a test runs in, narrower than its component's "
                                       "(transformer_spec/contract/tracks.py)")
    config.addinivalue_line("markers", "needs(*capabilities): what of the contract's API the test uses that a "
                                       "course profile may lack (transformer_spec/profiles/__init__.py)")
    track(config)
    import torch

    threads = config.getoption("--torch-threads")
    if threads is not None:
        if threads < 1:
            raise pytest.UsageError(f"--torch-threads must be at least 1, got {threads}")
        torch.set_num_threads(threads)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Give the process back its track and profile (a run inside another, ``pytest.main`` in a test,
    must not change the outer run's)."""
    if _TRACK in config.stash:
        tracks.done()
    if _PROFILE in config.stash:
        profiles.done()


def notebook_notes(config: pytest.Config) -> list[str]:
    """What the grader skipped of a notebook submission (its IPython lines), one line each; none
    for any other submission, or before it is imported."""
    sub = under_test(config).imported
    notes = getattr(sub.module, "__notebook_notes__", []) if sub is not None else []
    return [f"note: {n} (not Python; the grader runs the notebook's code cells as a module)" for n in notes]


def pytest_report_header(config: pytest.Config) -> list[str]:
    sub = under_test(config).submission
    if sub.error:
        return [f"implementation under test: {sub.target} -- CANNOT BE GRADED (why: below)"]
    return [f"implementation under test: {sub.target} ({sub.origin})", *(f"  {n}" for n in notebook_notes(config))]


@pytest.fixture(scope="session")
def impl(pytestconfig: pytest.Config) -> loader.Submission:
    """The implementation under test. ``impl.MultiHeadAttention`` is the submission's class."""
    return under_test(pytestconfig).submission


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]):
    """Drop the tests of other tracks before anything else sees the collection: the grading plugin
    shares a track's points among its own tests only, so a classic submission is never charged for
    a modern test (and the other way round)."""
    chosen = track(config)
    keep, others = [], []
    for item in items:
        (keep if tracks.keeps(chosen, _component(item), _narrowed(item)) else others).append(item)
    if others:  # pytest's own lines count them ("183 deselected"); the summary says why
        config.hook.pytest_deselected(items=others)
        config.stash[_OTHER_TRACKS] = len(others)
    left_out: dict[str, int] = {}
    for item in keep:
        profiles.check_capabilities(_needs(item), item.nodeid)
    if profile(config).lacks:
        applicable = []
        for item in keep:
            lacked = profile(config).applies_to(_needs(item))
            for capability in lacked:
                left_out[capability] = left_out.get(capability, 0) + 1
            if not lacked:
                applicable.append(item)
        config.stash[_NOT_APPLICABLE] = (len(keep) - len(applicable), left_out)
        keep = applicable
    if len(keep) != len(items):
        items[:] = keep
    yield


_NOT_APPLICABLE = pytest.StashKey[tuple[int, dict[str, int]]]()
_OTHER_TRACKS = pytest.StashKey[int]()


def other_tracks(config: pytest.Config) -> str | None:
    """One line: how many collected tests belong to the other tracks, and the option that runs them."""
    count = config.stash.get(_OTHER_TRACKS, 0)
    if not count or track(config) == tracks.ALL:
        return None
    others = [t for t in tracks.names() if t != track(config)]
    return (f"{count} collected test(s) belong to the {' and '.join(others)} track, not the {track(config)} track "
            f"graded here: run them with " + " or ".join(f"--track {t}" for t in others))


def not_applicable(config: pytest.Config) -> str | None:
    """One line: how many tests the profile left out, and for what (None: none were)."""
    count, by_capability = config.stash.get(_NOT_APPLICABLE, (0, {}))
    if not count:
        return None
    why = "; ".join(f"{n} need {c}" for c, n in sorted(by_capability.items(), key=lambda kv: -kv[1]))
    return (f"{count} test(s) not applicable under profile {profile(config).name} (no points either way): "
            f"its API cannot express what they check ({why})")


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    for line in (other_tracks(config), not_applicable(config)):
        if line:
            terminalreporter.write_line(line)


def _needs(item: pytest.Item) -> tuple[str, ...]:
    return tuple(n for m in item.iter_markers("needs") for n in m.args)


def _component(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("component")
    return marker.args[0] if marker is not None and marker.args else None


def _narrowed(item: pytest.Item) -> tuple[str, ...]:
    marker = item.get_closest_marker("track")
    return tuple(marker.args) if marker is not None else ()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and call.excinfo.errisinstance(loader.SubmissionError):
        # The submission is at fault, not the test: one line says what is missing or broken.
        report.longrepr = str(call.excinfo.value)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """The tests are over: the forbidden-API guard is disarmed for the diagnosis that follows
    (:mod:`transformer_spec.pytest_plugin.grading`), which loads the reference itself."""
    guard = under_test(session.config).guard
    if guard is not None:
        guard.armed = False
