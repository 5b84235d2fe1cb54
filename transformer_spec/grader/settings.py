"""What a grading is run with: its limits, the suite's layout, the tool's constants and its usage error."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path

from transformer_spec import layout

REPO = layout.ROOT  # the folder of spec_tests/ and properties/: the repository's root in a clone
SUITE = ("conftest.py", "pyproject.toml", "spec_tests", "properties")
DEFAULT_TESTS = ("spec_tests", "properties")
STATE_DIR = ".grade"
RECORD = "record.json"
MAX_TEST_OUTPUT = 4000
MAX_SUBMISSION_BYTES = 50 * 1024 * 1024
MAX_COVERAGE_BYTES = 20 * 1024 * 1024
LOG_KEEP = 32 * 1024


class GradeError(Exception):
    """A usage error of the tool; the message says what to do."""


@dataclass
class Limits:
    time_limit: float = 420.0  # pytest: start no new test after this many seconds
    test_timeout: float = 60.0  # pytest-timeout, per test
    wall: float | None = None  # the whole child; default time_limit + test_timeout + 60
    memory_mb: int = 4096  # RLIMIT_AS of each child
    threads: int = 1
    max_output_mb: float = 20.0  # the child's stdout+stderr; more ends the run ("output-limit")
    recheck_seconds: float = 120.0  # the hidden re-check's child

    @property
    def wall_seconds(self) -> float:
        return self.wall if self.wall is not None else self.time_limit + self.test_timeout + 60.0


@dataclass
class Settings:
    tests: list[str]
    rubric: str | None  # the rubric's text (None: the default)
    limits: Limits
    coverage: bool = False
    rechecks: bool = True  # the hidden re-check of claimed passes
    sandbox: str = "auto"  # the tier asked for (transformer_spec/grader/sandbox.py); "none" is --no-sandbox
    hypothesis_profile: str | None = None  # None: the plugin's "grading" (tools.mutants: "mutation")
    diagnose: bool = True  # name the catalogue's mistakes in the feedback (the kill matrix needs no names)
    track: str = "classic"  # the track graded (transformer_spec/contract/tracks.py): its tests and default rubric
    profile: str = "contract"  # the course API graded (transformer_spec/profiles): its adapter and default rubric

    def rubric_object(self):
        """The rubric, parsed (the default one when no text was given)."""
        from transformer_spec.scoring import rubric

        if self.rubric:
            return rubric.rubric_from_text(self.rubric, "--rubric", self.track)
        return rubric.load_rubric(self.profile_object().rubric, track=self.track)

    def profile_object(self):
        """The profile graded (:mod:`transformer_spec.profiles`)."""
        from transformer_spec import profiles

        return profiles.get(self.profile)

    def fingerprint(self, suite_hash: str) -> dict:
        """What must be equal for two outputs to be resumed or merged together."""
        data = {"tests": self.tests, "rubric_sha256": _sha(self.rubric.encode()) if self.rubric else "default",
                "limits": asdict(self.limits), "coverage": self.coverage, "rechecks": self.rechecks,
                "suite_sha256": suite_hash, "hypothesis_profile": self.hypothesis_profile, "diagnose": self.diagnose,
                "track": self.track, "profile": self.profile}
        return data


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()



def profile_and_track(profile: str | None, track: str | None):
    """The profile and the track asked for (``--profile``, ``--track``): a profile implies its track, and
    refuses another."""
    from transformer_spec import profiles
    from transformer_spec.contract import tracks

    chosen = profiles.get(profile or profiles.DEFAULT)
    if chosen.track and track not in (None, chosen.track):
        raise GradeError(f"--profile {chosen.name} grades the {chosen.track} track; leave out --track {track} "
                         f"(or give --track {chosen.track})")
    return chosen, chosen.track or track or tracks.DEFAULT


def checked(tests: list[str], rubric: Path | None, limits: Limits, *, coverage: bool, rechecks: bool, sandbox: str,
            track: str | None, profile: str | None, bundle: bool = False) -> Settings:
    """The settings of a grading, checked: a bad rubric, test path or profile is a :class:`GradeError` naming
    the option. ``bundle``: for a platform's files, which carry a shipped profile only (a profile of one's
    own is refused)."""
    from transformer_spec import profiles
    from transformer_spec.scoring import rubric as rubrics

    chosen, track = profile_and_track(profile, track)
    if bundle and chosen.origin:
        raise GradeError(f"--profile {profile}: the platforms' files take a shipped profile "
                         f"({', '.join(profiles.names())}); grade with a profile of one's own by `python -m tools.grade`")
    text = None
    if rubric is None and chosen.origin and chosen.rubric is not None:
        rubric = Path(chosen.rubric)  # a profile file's rubric lies outside the sandbox: it goes in as text
    if rubric is not None:
        try:
            rubrics.load_rubric(rubric, track)
        except rubrics.RubricError as exc:
            raise GradeError(str(exc)) from None
        text = Path(rubric).read_text()
    for t in tests:
        if not (REPO / t).exists() or not any(t == s or t.startswith(s + "/") for s in SUITE):
            raise GradeError(f"--tests {t}: not a file or folder of the suite (paths relative to {REPO}, "
                             "under spec_tests/ or properties/)")
    return Settings(list(tests), text, limits, coverage, rechecks, sandbox, track=track,
                    profile=chosen.origin or chosen.name)
