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

from .layout import IN_CLONE, PLUGINS, ROOT

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


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """Register the suite's plugins for a run of the suite (see the module docstring)."""
    if IN_CLONE:
        return
    if suite_run(args, getattr(early_config.known_args_namespace, "rootdir", None)):
        for name in PLUGINS:
            early_config.pluginmanager.import_plugin(name)
