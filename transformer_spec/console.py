"""``transformer-spec``: the console script of an installed transformer-spec.

    transformer-spec check my_transformer.py            # the suite on a submission (spec_tests + properties)
    transformer-spec check my_transformer.py "spec_tests/test_snapshots.py::test_minigpt_logits_snapshot"
    transformer-spec grade single SUBMISSION --results-json results.json   # sandboxed, re-checked
    transformer-spec grade CLASS --out DIR              # a class
    transformer-spec train | sample | scaling | release | bench ...

``check`` runs pytest on the installed suite, with the settings a clone's ``pyproject.toml``
gives it (:data:`transformer_spec.layout.PYTEST_INI`); test paths starting with ``spec_tests/``
or ``properties/`` (as a failure's "Reproduce:" line prints them) are the installed suite's, and
any other argument goes to pytest as it is. The other commands are the ``tools`` of a clone
(``python -m tools.grade ...``): same options, same ``--help``.
"""

from __future__ import annotations

import importlib
import os
import sys

from transformer_spec import layout

#: command -> module under the tools package (its ``main(argv)``)
TOOLS = {"grade": "grade.cli", "train": "train", "sample": "sample", "scaling": "scaling",
         "release": "release", "bench": "bench"}
SUITE_DIRS = ("spec_tests", "properties")
USAGE = ("usage: transformer-spec {check,%s} ...\n"
         "  transformer-spec check SUBMISSION [TEST ...] [PYTEST OPTION ...]\n"
         "  transformer-spec COMMAND --help" % ",".join(TOOLS))


def check_command(argv: list[str]) -> list[str]:
    """The pytest command of ``transformer-spec check argv``."""
    if not argv or argv[0].startswith("-"):
        raise SystemExit("transformer-spec check: give the submission first (a .py file, a notebook, a package "
                         "folder or a module name), e.g. transformer-spec check my_transformer.py")
    target, rest = argv[0], argv[1:]
    tests, options = [], []
    for arg in rest:
        if arg.split("::")[0].split("/")[0] in SUITE_DIRS and not arg.startswith("-"):
            tests.append(str(layout.ROOT / arg))
        else:
            options.append(arg)
    ini = []
    for key, value in layout.PYTEST_INI.items():
        if key == "addopts":
            ini += list(value)
        else:
            ini += ["-o", f"{key}={str(value).lower() if isinstance(value, bool) else value}"]
    return [sys.executable, "-m", "pytest", *(tests or [str(layout.ROOT / d) for d in SUITE_DIRS]),
            "--rootdir", str(layout.ROOT), "-p", "no:cacheprovider", *ini, f"--impl={target}", *options]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE + "\n\n" + __doc__.strip().split("\n\n")[0])
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "check":
        cmd = check_command(rest)
        sys.stdout.flush()
        os.execv(cmd[0], cmd)  # pytest is then the program (transformer_spec.guard.fast_exit applies)
    if command not in TOOLS:
        print(f"transformer-spec: unknown command {command!r}\n{USAGE}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"{layout.TOOLS_MODULE}.{TOOLS[command]}")
    sys.argv = [f"transformer-spec {command}", *rest]
    return module.main(rest)


if __name__ == "__main__":
    sys.exit(main())
