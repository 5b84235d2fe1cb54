"""The suite's hypothesis profiles, registered in one place, and the choice among them.

Loaded as a pytest plugin by the root ``conftest.py``. Select a profile with
``--hypothesis-profile NAME`` (hypothesis's own option); without it the suite loads ``grading``
for a graded run (``--grading`` or ``--grade-json``) and for a run of a submission (``--impl`` naming
anything but the reference: a student's own check gives the grade the grader gives), and ``dev``
otherwise (the project's own runs of the reference). This module alone
decides (:func:`chosen_profile`), from options parsed before any plugin is configured, so the
choice does not depend on the order in which plugins are configured.

* ``dev`` (the project's own runs, also under CI): few examples per property, so ``properties/`` stays
  fast; random examples, failures remembered in the local ``.hypothesis/`` database and replayed
  first on the next run.
* ``grading``: derandomised (a re-run gives the same examples and the same
  result) and without an example database, so nothing from earlier runs leaks into a grade.
  Same number of examples as ``dev``; no ``explain`` phase (its output depends on timing).
* ``thorough``: many more examples (500 per property, over twelve times ``dev``), for checking
  an implementation (or the suite) in depth; takes minutes.
* ``mutation``: for running the whole suite once per broken copy of the reference
  (mutmut; ``python -m tools.mutants --hypothesis-profile mutation``): few examples, derandomised, no example database and
  no shrinking (``phases=[explicit, generate]``), so a killed mutant costs no time to shrink.
* ``no-shrink``: ``grading``'s examples without its ``shrink`` phase, so each test passes or fails
  exactly as under ``grading`` (a test fails as soon as one of its examples fails; shrinking only
  makes that example smaller) and a failing property costs nothing more. For rows whose verdict
  needs only each test's pass or fail: the kill matrix's placeholder rows (``tools.mutants
  --placeholders``), which fail most properties.

All five have no deadline: torch's first call takes ~350 ms, over hypothesis's 200 ms
default, and timings on a shared machine vary. The ``too_slow`` health check is off for the
same reason (it measures time).

Why the explicit default: hypothesis loads its built-in ``ci`` profile by itself when the
``CI`` environment variable is set (``hypothesis._settings.is_in_ci``), which would make a CI
run differ from a local one. :func:`pytest_configure` therefore loads ``dev`` whenever no
``--hypothesis-profile`` is given, CI or not.
"""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.errors import InvalidArgument

DEFAULT_PROFILE = "dev"
GRADING_PROFILE = "grading"
#: examples per property in ``dev`` and ``grading``; properties that are expensive per example
#: take a fraction of it (see ``properties/strategies.py:budget``).
DEV_EXAMPLES = 15
THOROUGH_EXAMPLES = 500
MUTATION_EXAMPLES = 10

# Every profile derives from hypothesis's built-in "default", never from whatever profile is
# active at import time (that is "ci" when $CI is set, which is derandomised and has no database).
_COMMON = dict(parent=settings.get_profile("default"), deadline=None,
               suppress_health_check=[HealthCheck.too_slow], print_blob=True)

settings.register_profile("dev", max_examples=DEV_EXAMPLES, **_COMMON)
# No `explain` phase when grading: its "# or any other generated value" comments depend on how
# far it got in its time budget, so two gradings of one submission could print different text.
settings.register_profile("grading", max_examples=DEV_EXAMPLES, derandomize=True, database=None,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
                          **_COMMON)
settings.register_profile("thorough", max_examples=THOROUGH_EXAMPLES, **_COMMON)
settings.register_profile("mutation", max_examples=MUTATION_EXAMPLES, derandomize=True, database=None,
                          phases=[Phase.explicit, Phase.generate], **_COMMON)

#: grading's examples and each test's pass or fail, without shrinking the failing examples
NO_SHRINK_PROFILE = "no-shrink"
settings.register_profile(NO_SHRINK_PROFILE, parent=settings.get_profile(GRADING_PROFILE),
                          phases=[p for p in settings.get_profile(GRADING_PROFILE).phases if p != Phase.shrink])

PROFILES = ("dev", "grading", "thorough", "mutation", NO_SHRINK_PROFILE)


def names_a_submission(config: pytest.Config) -> bool:
    """Whether the run's implementation is a submission (``--impl``, else ``$TRANSFORMER_IMPL``, naming
    anything but the reference): a student checking their code, who must see the grade the grader gives."""
    target = config.getoption("--impl", default=None) or os.environ.get("TRANSFORMER_IMPL")
    return bool(target) and target != "reference"


def deterministic(config: pytest.Config) -> bool:
    """A graded run (``--grading``, ``--grade-json``) or a run of a submission (:func:`names_a_submission`):
    the grader's examples and seeds, so a student's own run gives the grade the grader gives."""
    graded = config.getoption("--grading", default=False) or config.getoption("--grade-json", default=None)
    return bool(graded) or names_a_submission(config)


def chosen_profile(config: pytest.Config) -> str:
    """The profile of this run: ``--hypothesis-profile`` if given, else ``grading`` for a graded run or a
    run of a submission (:func:`deterministic`), else :data:`DEFAULT_PROFILE` (the project's own runs
    of the reference)."""
    explicit = config.getoption("--hypothesis-profile", default=None)
    if explicit:
        return explicit
    return GRADING_PROFILE if deterministic(config) else DEFAULT_PROFILE


def _registered(name: str) -> bool:
    """Whether hypothesis knows the profile ``name`` (ours, its own ``default`` and ``ci``, or one a
    conftest registered)."""
    try:
        settings.get_profile(name)
    except InvalidArgument:
        return False
    return True


#: profiles whose failures nobody edits into the test files (see :func:`pytest_configure`)
NO_PATCH_FILES = (GRADING_PROFILE, "mutation", NO_SHRINK_PROFILE)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Load the run's profile (before hypothesis's own plugin, which would stop an unknown one with an
    INTERNALERROR of 24 lines: here it is a usage error naming the profiles that exist)."""
    profile = chosen_profile(config)
    if not _registered(profile):
        raise pytest.UsageError(f"--hypothesis-profile {profile}: no such profile; choose one of "
                                f"{', '.join(PROFILES)} (see transformer_spec/pytest_plugin/hypothesis_profiles.py)")
    # hypothesis's own plugin loads the profile named by --hypothesis-profile; loading the same
    # one here again is harmless, whichever of the two hooks runs first. Without the option,
    # this replaces the built-in "default" (or "ci" when $CI is set) by "grading" or "dev".
    settings.load_profile(profile)
    if profile in NO_PATCH_FILES:
        # For each failing property hypothesis writes a patch adding @example(...) lines to the
        # test file, when libcst can be imported (mutmut brings it). Nobody applies those in a
        # graded run or the kill matrix, and the import and the patches cost ~1-2 s of a wrong
        # submission's run: an unimportable libcst (Python's own import mechanism: a None entry
        # in sys.modules raises ImportError) makes hypothesis skip them, until the run ends.
        if "libcst" not in sys.modules:
            sys.modules["libcst"] = None
            config.add_cleanup(lambda: sys.modules.pop("libcst", None))


def pytest_report_header(config: pytest.Config) -> str:
    s = settings.default
    return (
        f"hypothesis profile: {settings.get_current_profile_name()} (max_examples={s.max_examples}, "
        f"derandomize={s.derandomize}, database={'none' if s.database is None else 'local'}); "
        f"choose with --hypothesis-profile {{{','.join(PROFILES)}}}"
    )
