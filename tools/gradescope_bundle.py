"""The Gradescope autograder bundle: ``python -m tools.release --gradescope OUT.zip [settings]``.

The zip holds, at its top level, Gradescope's two scripts and a copy of this project (what
``pip install -e .`` and ``python -m tools.grade single`` need; not ``tests/``, ``.git``, caches
or build outputs). Gradescope extracts it to ``/autograder/source``, runs ``setup.sh`` once as
root when it builds the image, copies ``run_autograder`` to ``/autograder/run_autograder`` and
runs it for every submission with ``/autograder`` as the working folder:

* ``setup.sh`` installs bubblewrap with apt-get, makes a virtual environment
  (:data:`VENV`) and installs the pinned torch (CPU build) and this project through
  ``constraints.txt``.
* ``run_autograder`` grades ``$AUTOGRADER_ROOT/submission`` (default root ``/autograder``) with
  ``python -m tools.grade single`` from ``$AUTOGRADER_ROOT/source`` and the settings the bundle
  was built with, into ``$AUTOGRADER_ROOT/results/results.json``. The interpreter is ``$PYTHON``,
  else the virtual environment's, else ``python3`` from ``PATH``. Whatever happens, it leaves a
  valid ``results.json``: when the grader writes none (it could not start, or stopped with an
  error), a score of 0 whose ``output`` says why.

The submission folder is passed as it is, so the single grader's rule decides what is graded:
the folder itself when it holds an ``__init__.py`` (a package's files uploaded), else its one
package folder, else its one ``.py`` file (``test_*.py``, ``conftest.py`` and ``setup.py`` do not
count); anything else is graded 0 with the reason.
"""

from __future__ import annotations

import argparse
import io
import shlex
import stat
import zipfile
from pathlib import Path

from .grading_options import add_settings_arguments, settings_arguments, settings_of
from transformer_spec import layout
from transformer_spec.files import atomic_write
from transformer_spec.grader.settings import REPO, GradeError

# What the bundle copies of this project: the package's sources, the suite, the install files.
INCLUDE = ("pyproject.toml", "setup.py", "constraints.txt", "README.md", "conftest.py", "transformer_spec", "reference",
           "spec_tests", "properties", "tools", "docs/contract.md")
SKIP_DIRS = {"__pycache__", ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache", "build", "dist"}
SKIP_SUFFIXES = (".pyc", ".pyo", ".egg-info", ".tmp")
RUBRIC_NAME = "autograder_rubric.toml"  # the --rubric given to the build, at the bundle's top level
VENV = "/opt/transformer-spec/venv"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
EXECUTABLE = 0o755
REGULAR = 0o644


class BundleError(Exception):
    """A bad argument or an unusable project copy; the message names the argument."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The grading settings the bundle is built with (those of ``python -m tools.grade single``)."""
    add_settings_arguments(parser, coverage=False)


def differs_from_defaults(args: argparse.Namespace) -> list[str]:
    """The settings options given in ``args`` (the kit mode refuses them)."""
    given = settings_arguments(args)
    flags = [a for a in given if a.startswith("--")]
    return flags + (["--rubric"] if args.rubric is not None else [])


def require_clone() -> None:
    """The platforms' files copy a clone (pyproject.toml, constraints.txt, conftest.py, ...)."""
    if not layout.IN_CLONE:
        raise BundleError("the bundle copies a clone's files (pyproject.toml, constraints.txt, conftest.py, ...), "
                          "which an installed wheel does not have: build it from a clone of transformer-spec")


def project_files(root: Path = REPO, exclude: Path | None = None) -> list[tuple[str, Path]]:
    """(path in the bundle, file) for every file of :data:`INCLUDE`, sorted."""
    if root == REPO:
        require_clone()
    files = []
    for name in INCLUDE:
        p = root / name
        if not p.exists():
            raise BundleError(f"{p}: missing from the project; the bundle needs it")
        paths = [p] if p.is_file() else sorted(p.rglob("*"))
        for q in paths:
            rel = q.relative_to(root)
            if (not q.is_file() or q.is_symlink() or any(part in SKIP_DIRS or part.endswith(SKIP_SUFFIXES)
                                                          for part in rel.parts)
                    or (exclude is not None and q.resolve() == exclude)):
                continue
            files.append((rel.as_posix(), q))
    return sorted(files)


def pinned_torch(constraints: Path = REPO / "constraints.txt") -> str:
    """The torch version ``constraints.txt`` pins."""
    for line in constraints.read_text().splitlines():
        name, sep, version = line.split("#")[0].strip().partition("==")
        if sep and name.strip().lower() == "torch":
            return version.strip()
    raise BundleError(f"{constraints} pins no torch version (a line torch==X)")


def setup_sh(torch_version: str) -> str:
    return f"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (written by
# `python -m tools.release --gradescope`; rebuild the bundle rather than edit it).
set -euo pipefail
SOURCE="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
VENV="${{TRANSFORMER_SPEC_VENV:-{VENV}}}"
# PyTorch's CPU build: PyPI's Linux wheel of torch is a multi-GB CUDA build. TORCH_INDEX_URL=""
# takes torch from pip's default index alone (where that index has a CPU wheel).
TORCH_INDEX_URL="${{TORCH_INDEX_URL-{TORCH_CPU_INDEX}}}"

# bubblewrap: the single grader's sandbox (bwrap); python3-venv and pip for the environment below.
# TRANSFORMER_SPEC_APT=0 skips apt-get (trying the bundle on a machine that has them: docs/grading.md).
if [ "${{TRANSFORMER_SPEC_APT:-1}}" != 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends bubblewrap python3 python3-venv python3-pip
fi
command -v bwrap

PY="${{SETUP_PYTHON:-python3}}"
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "setup.sh: $("$PY" --version 2>&1) is too old: constraints.txt's versions need Python 3.11 or newer" \\
         "(choose a newer base image, or set SETUP_PYTHON to a newer interpreter)" >&2
    exit 1
fi
"$PY" -m venv "$VENV"
cd "$SOURCE"
"$VENV/bin/python" -m pip install -c constraints.txt "torch=={torch_version}" \\
    ${{TORCH_INDEX_URL:+--extra-index-url "$TORCH_INDEX_URL"}}
"$VENV/bin/python" -m pip install -c constraints.txt -e ".[dev]"
"$VENV/bin/python" -c "import torch, transformer_spec, tools.grade; print('autograder ready: torch', torch.__version__)"
"""


#: The scripts' choice of interpreter: $PYTHON, else the image's environment, else python3.
CHOOSE_PYTHON = f"""if [ -z "${{PYTHON:-}}" ]; then
    if [ -x "{VENV}/bin/python" ]; then PYTHON="{VENV}/bin/python"; else PYTHON=python3; fi
fi"""


def run_autograder(grade_args: list[str], rubric: bool = False) -> str:
    """The script; ``grade_args`` are passed to ``tools.grade single``, and ``--rubric`` names the
    bundle's copy of the rubric when ``rubric``."""
    extra = "".join(f" {shlex.quote(a)}" for a in grade_args)
    if rubric:
        extra += f' --rubric "$SOURCE/{RUBRIC_NAME}"'
    return f"""#!/usr/bin/env bash
# Gradescope runs this for every submission (written by `python -m tools.release --gradescope`;
# rebuild the bundle rather than edit it).
#   AUTOGRADER_ROOT  (default /autograder): submission/, source/ and results/results.json under it
#   PYTHON           the interpreter (default: setup.sh's environment {VENV}, else python3)
# The submission folder is graded by tools.grade single's rule: the folder itself if it holds an
# __init__.py, else its one package folder, else its one .py file. It always leaves a valid
# results.json: when the grader writes none, a score of 0 saying why.
set -u
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
SOURCE="$ROOT/source"
RESULTS="$ROOT/results/results.json"
{CHOOSE_PYTHON}
mkdir -p "$ROOT/results"
rm -f "$RESULTS"
LOG="$(mktemp)"
status=0
(cd "$SOURCE" && exec "$PYTHON" -m tools.grade single "$ROOT/submission" --results-json "$RESULTS" \\
    --no-progress{extra}) 2>"$LOG" || status=$?
cat "$LOG"  # the grader's messages, in Gradescope's stdout log
if ! "$PYTHON" -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(not isinstance(d, dict) or "score" not in d)' \\
        "$RESULTS" 2>/dev/null; then
    reason="$(grep -v '^[[:space:]]*$' "$LOG" | tail -n 1 | cut -c 1-400)"
    message="The autograder could not grade this submission (exit status $status): ${{reason:-no message}}. \\
Nothing was scored; ask your instructor to look at the autograder's log."
    "$PYTHON" -c 'import json, sys; print(json.dumps({{"score": 0.0, "execution_time": float(sys.argv[3]),
"output": sys.argv[2], "stdout_visibility": "hidden", "tests": []}}))' "$RESULTS" "$message" "$SECONDS" \\
        >"$RESULTS" 2>/dev/null \\
    || printf '%s\\n' '{{"score": 0.0, "execution_time": 0, "output": "The autograder could not grade this submission; ask your instructor to look at the autograder log.", "tests": []}}' >"$RESULTS"
fi
rm -f "$LOG"
exit 0  # a low grade is a grade, not an autograder error; results.json says what happened
"""


def _check_out(out: Path, force: bool) -> Path:
    if out.suffix.lower() != ".zip":
        raise BundleError(f"--gradescope {out}: the bundle's name must end in .zip (Gradescope uploads a zip)")
    if out.is_dir():
        raise BundleError(f"--gradescope {out}: is a folder; give the path of the .zip file to write")
    if out.exists() and not force:
        raise BundleError(f"--gradescope {out}: already exists; remove it or pass --force to overwrite it")
    return out.resolve()


def _add(zf: zipfile.ZipFile, name: str, data: bytes, mode: int) -> None:
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.external_attr = (stat.S_IFREG | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)


def build(out: Path, args: argparse.Namespace, force: bool = False) -> list[str]:
    """Write the bundle to ``out`` with the settings of ``args``; returns the zip's names."""
    require_clone()
    out = _check_out(Path(out), force)
    try:
        settings_of(args, bundle=True)  # a bad rubric or test path fails now, not on Gradescope
    except GradeError as exc:
        raise BundleError(str(exc)) from None
    grade_args = settings_arguments(args)
    entries: list[tuple[str, bytes, int]] = []
    if args.rubric is not None:
        entries.append((RUBRIC_NAME, Path(args.rubric).read_bytes(), REGULAR))
    entries.append(("setup.sh", setup_sh(pinned_torch()).encode(), EXECUTABLE))
    entries.append(("run_autograder", run_autograder(grade_args, args.rubric is not None).encode(), EXECUTABLE))
    top = {name for name, _, _ in entries}
    for name, path in project_files(exclude=out):
        if name in top:
            raise BundleError(f"{path}: the project holds a file the bundle writes itself ({name})")
        entries.append((name, path.read_bytes(), EXECUTABLE if path.stat().st_mode & 0o111 else REGULAR))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data, mode in entries:
            _add(zf, name, data, mode)
    atomic_write(out, buf.getvalue())
    return [name for name, _, _ in entries]
