"""Where the project's parts are: in a clone, or in an installed wheel.

In a clone (and its editable install) ``reference/``, ``tools/``, ``spec_tests/`` and
``properties/`` sit beside ``transformer_spec/`` at the repository's root, and are imported as
``reference``, ``tools``, ... The wheel (``python -m build``) carries the same folders *inside*
the ``transformer_spec`` package (``transformer_spec.reference``, ``transformer_spec.tools``, ...),
so that installing it adds no generic top-level names to site-packages (the mapping is in
``setup.py``). Code that needs one of those parts by name or by path asks this module.

The user-facing name of the reference stays ``reference`` either way (``--impl reference``,
the default): :func:`module_name` maps it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent

#: The parts the wheel maps into the package (folder name = module name in a clone).
PARTS = ("reference", "tools", "spec_tests", "properties")

#: True in a clone (or its editable install), False in an installed wheel. Decided by what is
#: inside the package, never by what is beside it: a sandboxed grading child sees neither the
#: clone's reference/ nor its spec_tests/, and in the wheel the sandbox hides
#: transformer_spec/reference and transformer_spec/tools behind empty folders.
IN_CLONE = not any((PACKAGE_DIR / part).is_dir() for part in PARTS)
#: The folder that holds ``reference/``, ``tools/``, ``spec_tests/`` and ``properties/``.
ROOT = PACKAGE_DIR.parent if IN_CLONE else PACKAGE_DIR
#: Dotted prefix of those parts' modules: "" in a clone, "transformer_spec." in the wheel.
PREFIX = "" if IN_CLONE else "transformer_spec."

REFERENCE_DIR = ROOT / "reference"
REFERENCE_MODULE = PREFIX + "reference"
TOOLS_MODULE = PREFIX + "tools"

#: The pytest plugins of a run of the suite, in order (the root conftest.py, the wheel's pytest11
#: entry point and the class grader's copy of the suite all load this list).
PLUGINS = ("transformer_spec.pytest_plugin.plugin", "transformer_spec.pytest_plugin.hypothesis_profiles", "transformer_spec.guard.fast_exit",
           "transformer_spec.pytest_plugin.grading", "transformer_spec.guard.exits")

#: pytest's settings for the suite ([tool.pytest.ini_options] of pyproject.toml in a clone;
#: tests/test_wheel.py checks that the two agree).
PYTEST_INI = {
    "addopts": ["--strict-markers", "--strict-config", "-ra"],
    "timeout": 120,
    "timeout_method": "signal",
    "xfail_strict": True,
}


def module_name(target: str) -> str:
    """``reference`` -> the reference's module name here; anything else unchanged."""
    return REFERENCE_MODULE if target == "reference" else target


def suite_conftest() -> str:
    """The conftest.py of a copy of the suite outside a clone."""
    return f'"""Loads the transformer-spec pytest plugins."""\n\npytest_plugins = {list(PLUGINS)!r}\n'


def suite_ini() -> str:
    """The pyproject.toml (pytest's settings only) of a copy of the suite outside a clone."""
    def toml(value) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(toml(v) for v in value) + "]"
        return repr(value).replace("'", '"')

    body = "\n".join(f"{k} = {toml(v)}" for k, v in PYTEST_INI.items())
    return textwrap.dedent("""\
        # pytest's settings for the suite (written by transformer_spec.layout.suite_ini)
        [tool.pytest.ini_options]
        """) + body + "\n"
