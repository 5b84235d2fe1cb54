"""The ``pytest11`` entry point of an installed transformer-spec: loads the suite's plugins
(:data:`transformer_spec.layout.PLUGINS`) for a run of the suite, so the installed suite needs no
conftest.py, and for no other run.

pytest loads every installed ``pytest11`` entry point in every run of the environment: the suite's
plugins there would install the forbidden-API guard, load the suite's rubric and settings, and end
the process early in a course's own test runs (a CS336 student's ``pytest`` beside their installed
grader). So the plugins are registered only when the run is the suite's (:func:`suite_run`): it
names a submission (``--impl``, or ``$TRANSFORMER_IMPL``), or its root folder or one of the paths
it collects lies in the installed suite (``transformer-spec check`` passes both). Registered in
``pytest_load_initial_conftests``, before the command line is parsed in full, their options and
``pytest_configure`` hooks take part as if they had been loaded at start.

In a clone the root ``conftest.py`` loads them instead, as it always did, so a clone's runs do
not change with its editable install; a run with ``PYTEST_DISABLE_PLUGIN_AUTOLOAD`` (the class
grader's children) loads them from the conftest.py of its copy of the suite.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from transformer_spec.layout import IN_CLONE, PLUGINS, ROOT

IMPL_ENV = "TRANSFORMER_IMPL"  # loader.ENV_VAR (not imported: this module loads in every pytest run, torch-free)


def _inside_suite(path: str | os.PathLike | None) -> bool:
    if not path:
        return False
    try:
        where = Path(str(path).split("::")[0]).expanduser()
        return where.exists() and where.resolve().is_relative_to(ROOT)  # an option's value is no path
    except (OSError, ValueError):
        return False


def suite_run(args: Sequence[str], rootdir: str | os.PathLike | None = None, environ=os.environ) -> bool:
    """Whether a pytest run with the command-line ``args`` (and ``--rootdir``) is a run of the suite."""
    if environ.get(IMPL_ENV):
        return True
    for arg in args:
        if arg == "--impl" or arg.startswith("--impl="):
            return True
    return _inside_suite(rootdir) or any(_inside_suite(a) for a in args if not a.startswith("-"))


#: the suite's options that take a value (registered by :data:`PLUGINS`; tests/test_pytest_plugins.py checks the
#: list against them): before they are registered, pytest's first look at the command line reads
#: ``--impl PATH`` as an unknown flag followed by a test path
VALUE_OPTIONS = ("--impl", "--track", "--profile", "--torch-threads", "--rubric", "--grade-json", "--time-limit")


def option_values(args: Sequence[str]) -> list[str]:
    """The values given to :data:`VALUE_OPTIONS` as separate arguments in ``args`` (``--impl PATH``)."""
    return [value for flag, value in zip(args, args[1:], strict=False) if flag in VALUE_OPTIONS]


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """Register the suite's plugins for a run of the suite (see the module docstring), and keep pytest from
    taking the submission for a test path.

    pytest loads the ``conftest.py`` files of every test path it is given, and of its ``test*``
    folders, before the command line is parsed in full; ``--impl path/to/repository``, read before
    the suite's options exist, makes the repository one (its ``tests/conftest.py`` ran before the
    suite, as the student's code, and a CS336 one written for Python 3.12 stopped the run). The
    values of the suite's options are taken out of that first reading's paths here, before
    pytest's own hook loads the initial conftests."""
    namespace = early_config.known_args_namespace
    values = set(option_values(args))
    paths = getattr(namespace, "file_or_dir", None)
    if values and isinstance(paths, list):
        paths[:] = [p for p in paths if p not in values]
    if IN_CLONE:
        return
    if suite_run(args, getattr(namespace, "rootdir", None)):
        for name in PLUGINS:
            early_config.pluginmanager.import_plugin(name)
