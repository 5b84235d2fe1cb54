"""Write the student starter kit: the reference with every solution region replaced by a stub.

    python -m tools.release --out DIR [--name my_transformer] [--track classic|modern] [--force]
    python -m tools.release --gradescope OUT.zip [--force] [--rubric FILE] [--tests PATH...] [limits]
    python -m tools.release --prairielearn DIR [--image NAME] [--force] [settings]
    python -m tools.release --github-classroom DIR --grader-repo OWNER/NAME [--grader-ref REF] [--name N] [settings]

The other forms write a grading platform's files: the Gradescope autograder bundle
(:mod:`tools.gradescope_bundle`), PrairieLearn's external grader (:mod:`tools.prairielearn`), and a
GitHub Classroom template repository (the kit and its autograding workflow, :mod:`tools.classroom`).

Every region of ``reference/`` between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` (nbgrader's
convention) becomes, at the region's indentation::

    # YOUR CODE HERE
    raise NotImplementedError("MultiHeadAttention.forward is not implemented yet")

Signatures, docstrings and the argument validation outside the regions are kept. The kit is
``DIR/<name>/`` (a package a student edits and tests with ``pytest --impl DIR/<name>``), the
contract (``DIR/contract.md``) and ``DIR/README.md``. It holds the modules of one track
(``--track``, default classic): those that define the track's names (:func:`transformer_spec.contract.names.of_track`)
and the modules they import, with an ``__init__.py`` that exports exactly those names, so a
modern-track student writes no classic class. The kit is checked before this returns: it must
import, and no solution line may remain.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

from transformer_spec import profiles
from transformer_spec.contract import names as contract
from transformer_spec.contract import tracks
from .cli import Parser, ToolError, check_target, run_main

REPO = Path(__file__).resolve().parent.parent
REFERENCE_DIR = REPO / "reference"
CONTRACT = REPO / "docs" / "contract.md"
BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
STUB_COMMENT = "# YOUR CODE HERE (see the docstring above and the contract)"


class ReleaseError(Exception):
    """The reference's solution markers are malformed, or the kit failed its checks."""


def _enclosing_function(tree: ast.AST, lineno: int) -> str:
    """The qualified name of the innermost function containing line ``lineno``."""
    best: list[str] = []

    def visit(node: ast.AST, prefix: list[str]) -> None:
        nonlocal best
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if child.lineno <= lineno <= (child.end_lineno or child.lineno):
                    path = prefix + [child.name]
                    if not isinstance(child, ast.ClassDef):
                        best = path
                    visit(child, path)

    visit(tree, [])
    return ".".join(best)


def strip_solutions(source: str, filename: str = "<source>") -> tuple[str, list[str]]:
    """``source`` with every solution region stubbed, and the stubbed functions' names."""
    tree = ast.parse(source, filename)
    lines = source.splitlines(keepends=True)
    out: list[str] = []
    stubbed: list[str] = []
    begin: int | None = None
    for i, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped == BEGIN:
            if begin is not None:
                raise ReleaseError(f"{filename}:{i}: {BEGIN} inside another solution region (opened at line {begin})")
            begin = i
            indent = line[: len(line) - len(line.lstrip())]
            name = _enclosing_function(tree, i)
            if not name:
                raise ReleaseError(f"{filename}:{i}: a solution region outside any function")
            stubbed.append(name)
            out.append(f"{indent}{STUB_COMMENT}\n")
            out.append(f'{indent}raise NotImplementedError("{name} is not implemented yet")\n')
        elif stripped == END:
            if begin is None:
                raise ReleaseError(f"{filename}:{i}: {END} without {BEGIN}")
            begin = None
        elif begin is None:
            out.append(line)
    if begin is not None:
        raise ReleaseError(f"{filename}:{begin}: {BEGIN} is never closed by {END}")
    return "".join(out), stubbed


def _check_kit(pkg: Path) -> None:
    """The kit must import in a fresh interpreter (its own package name, outside this repo)."""
    code = (
        "import importlib.util, sys; "
        f"spec = importlib.util.spec_from_file_location('starter_kit_check', {str(pkg / '__init__.py')!r}, "
        f"submodule_search_locations=[{str(pkg)!r}]); "
        "m = importlib.util.module_from_spec(spec); sys.modules[spec.name] = m; spec.loader.exec_module(m)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=pkg.parent)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise ReleaseError(f"the starter kit in {pkg} does not import: {last}")


def _defining_modules(init: Path = REFERENCE_DIR / "__init__.py") -> dict[str, str]:
    """``{name: module}`` from the reference's ``__init__.py`` (``from .module import name``)."""
    out = {}
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            out.update({alias.name: node.module for alias in node.names})
    return out


def _imported_modules(module: str) -> set[str]:
    """The reference modules ``module`` imports (``from .other import ...``)."""
    tree = ast.parse((REFERENCE_DIR / f"{module}.py").read_text(encoding="utf-8"))
    return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 1 and n.module}


def kit_names(track: str) -> list[str]:
    """The top-level names a student of ``track`` writes, in the contract's order."""
    return [n.name for n in contract.of_track(track) if n.kind != "method"]


def kit_modules(track: str) -> list[str]:
    """The reference modules of ``track``'s kit: those that define its names, and (transitively) the
    modules they import; sorted."""
    defining = _defining_modules()
    missing = [n for n in kit_names(track) if n not in defining]
    if missing:
        raise ReleaseError(f"reference/__init__.py does not export {', '.join(missing)}")
    todo = {defining[n] for n in kit_names(track)}
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo |= _imported_modules(module)
    return sorted(seen)


def _init_text(track: str) -> str:
    """The kit's ``__init__.py``: exactly ``track``'s names, each from its module."""
    defining = _defining_modules()
    by_module: dict[str, list[str]] = {}
    for name in kit_names(track):
        by_module.setdefault(defining[name], []).append(name)
    lines = [f'"""The names of the transformer-spec contract ({track} track, contract.md) that this package defines."""',
             "", "from __future__ import annotations", ""]
    lines += [f"from .{m} import {', '.join(sorted(names))}" for m, names in sorted(by_module.items())]
    lines += ["", "__all__ = ["] + [f'    "{n}",' for n in kit_names(track)] + ["]", ""]
    return "\n".join(lines)


def _readme(name: str, track: str) -> str:
    from transformer_spec.scoring.rubric import load_rubric

    flag = "" if track == tracks.DEFAULT else f" --track {track}"
    apis = [a for a in load_rubric(track=track).forbidden if a != "reference"]
    return f"""# Transformer starter kit ({track} track)

`{name}/` holds the names of the contract (`contract.md`) that the {track} track grades:
{", ".join(f"`{n}`" for n in kit_names(track))}. Every function body you write says

    raise NotImplementedError("... is not implemented yet")

Replace those lines by your code; keep the signatures, the docstrings and the argument checks.

Run the specification on your code from a checkout of the course repository:

    python -m pytest spec_tests properties --impl path/to/{name}{flag}

The end of the run shows your points per component. A failing test says what was expected,
what your code returned and where; `pytest --impl path/to/{name}{flag} "TEST ID"` re-runs one test.
Do not use {", ".join(apis)} or the course's reference: the grader detects them and fails the test.
"""


def release(out: Path, name: str = "my_transformer", force: bool = False, track: str = tracks.DEFAULT) -> Path:
    """Write ``track``'s starter kit to ``out``; returns the package folder ``out/<name>``."""
    if not name.isidentifier():
        raise ReleaseError(f"--name {name!r} is not a valid Python package name")
    track = tracks.check(track, allow_all=False)
    out = Path(out)
    pkg = out / name
    if pkg.exists():
        if not force:
            raise ReleaseError(f"{pkg} already exists; remove it or pass --force to overwrite it")
        shutil.rmtree(pkg)
    pkg.mkdir(parents=True)
    total = 0
    for module in kit_modules(track):
        src = REFERENCE_DIR / f"{module}.py"
        text = src.read_text(encoding="utf-8")
        stubbed_text, stubbed = strip_solutions(text, f"reference/{src.name}")
        if BEGIN in stubbed_text or END in stubbed_text:
            raise ReleaseError(f"reference/{src.name}: a solution marker is not on a line of its own")
        (pkg / src.name).write_text(stubbed_text, encoding="utf-8")
        total += len(stubbed)
    if total == 0:
        raise ReleaseError(f"no {BEGIN} regions found in {REFERENCE_DIR}")
    (pkg / "__init__.py").write_text(_init_text(track), encoding="utf-8")
    if CONTRACT.exists():
        shutil.copyfile(CONTRACT, out / "contract.md")
    (out / "README.md").write_text(_readme(name, track), encoding="utf-8")
    _check_kit(pkg)
    return pkg


def main(argv: list[str] | None = None) -> int:
    from . import classroom, gradescope_bundle, prairielearn

    parser = Parser(
        prog="python -m tools.release",
        description="Write the student starter kit (--out DIR: reference/ with every solution region replaced by "
                    "raise NotImplementedError(...)), or a grading platform's files: the Gradescope autograder "
                    "bundle (--gradescope OUT.zip), PrairieLearn's external grader (--prairielearn DIR), a GitHub "
                    "Classroom template repository (--github-classroom DIR).",
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--out", type=Path, metavar="DIR", help="folder to write the starter kit to")
    mode.add_argument("--gradescope", type=Path, metavar="OUT.zip",
                      help="write the Gradescope autograder zip (setup.sh, run_autograder, this project)")
    mode.add_argument("--prairielearn", type=Path, metavar="DIR",
                      help="write PrairieLearn's grader: DIR/serverFilesCourse/transformer_spec/run.sh, the image "
                           "(DIR/image/), the question's externalGradingOptions (DIR/externalGradingOptions.json)")
    mode.add_argument("--github-classroom", type=Path, metavar="DIR",
                      help="write a GitHub Classroom template repository: the starter kit and "
                           "DIR/.github/workflows/classroom.yml")
    parser.add_argument("--name", default=None,
                        help="the kit's package name (default: my_transformer; --out and --github-classroom)")
    parser.add_argument("--force", action="store_true", help="overwrite what the mode writes if it exists")
    parser.add_argument("--image", default=None,
                        help=f"--prairielearn: the grading image's name (default {prairielearn.DEFAULT_IMAGE})")
    parser.add_argument("--grader-repo", default=None, metavar="OWNER/NAME",
                        help="--github-classroom: the GitHub repository of the course's copy of this project")
    parser.add_argument("--grader-ref", default=None, metavar="REF",
                        help="--github-classroom: its branch, tag or commit (default main)")
    gradescope_bundle.add_arguments(parser.add_argument_group(
        "grading settings (--gradescope, --prairielearn, --github-classroom; passed to tools.grade single)"))
    args = parser.parse_args(argv)
    platform = ("--gradescope" if args.gradescope is not None else "--prairielearn" if args.prairielearn is not None
                else "--github-classroom" if args.github_classroom is not None else None)
    try:
        for flag, value, folder in (("--out", args.out, True), ("--gradescope", args.gradescope, False),
                                    ("--prairielearn", args.prairielearn, True),
                                    ("--github-classroom", args.github_classroom, True)):
            if value is not None:
                check_target(value, flag, folder)
        for flag, value, allowed, what in (
                ("--name", args.name, ("--github-classroom", None), "the starter kit (--out DIR) and --github-classroom"),
                ("--image", args.image, ("--prairielearn",), "--prairielearn"),
                ("--grader-repo", args.grader_repo, ("--github-classroom",), "--github-classroom"),
                ("--grader-ref", args.grader_ref, ("--github-classroom",), "--github-classroom")):
            if value is not None and platform not in allowed:
                raise ReleaseError(f"{flag} applies to {what}, not to {platform or '--out'}")
        if args.gradescope is not None:
            names = gradescope_bundle.build(args.gradescope, args, args.force)
            print(f"Gradescope autograder written to {args.gradescope} ({len(names)} files); upload it as the "
                  "assignment's autograder zip (docs/grading.md)")
            return 0
        if args.prairielearn is not None:
            written = prairielearn.build(args.prairielearn, args, args.image or prairielearn.DEFAULT_IMAGE, args.force)
            print(f"PrairieLearn grader written to {args.prairielearn} ({len(written)} files): build and push "
                  f"{args.prairielearn / 'image'}, copy serverFilesCourse/ into the course and "
                  f"{prairielearn.OPTIONS_NAME} into the question's info.json (docs/grading.md)")
            return 0
        if args.github_classroom is not None:
            course = profiles.get(args.profile)
            if course.adapter is not None:  # the template is the course's own handout: the workflow alone
                if args.name:
                    raise ReleaseError(f"--name applies to the starter kit; with --profile {args.profile} the template "
                                       "is the course's own handout and no kit is written")
                target = classroom.build(args.github_classroom, args, args.grader_repo, args.grader_ref or "main",
                                         classroom.REPOSITORY_PATH, args.force)
                print(f"GitHub Classroom workflow written to {target}: add {args.github_classroom / '.github'} to the "
                      f"course's template repository (its handout, with {course.adapter}); each push grades the "
                      "student's whole repository (docs/grading.md)")
                return 0
            if args.profile != profiles.DEFAULT:
                raise ReleaseError(f"--profile {args.profile} is not available for --github-classroom (its template is "
                                   "the starter kit of the contract's names); use --gradescope or --prairielearn")
            name = args.name or "my_transformer"
            if not name.isidentifier():
                raise ReleaseError(f"--name {name!r} is not a valid Python package name")
            if (args.github_classroom / name).exists() and not args.force:
                raise ReleaseError(f"{args.github_classroom / name} already exists; remove it or pass --force to "
                                   "overwrite it")
            target = classroom.build(args.github_classroom, args, args.grader_repo, args.grader_ref or "main", name,
                                     args.force)
            release(args.github_classroom, name, args.force, args.track or tracks.DEFAULT)
            print(f"GitHub Classroom template written to {args.github_classroom} (the kit and {target}); push it "
                  "as the assignment's template repository (docs/grading.md)")
            return 0
        if args.profile != profiles.DEFAULT:
            raise ReleaseError(f"--profile {args.profile} applies to the grading platforms (--gradescope, --prairielearn, "
                               "--github-classroom): the kit writes the contract's own names, and a course profile's "
                               "students start from the course's own handout")
        given = [flag for flag in gradescope_bundle.differs_from_defaults(args) if flag != "--track"]
        if given:
            raise ReleaseError(f"{given[0]} applies to the Gradescope bundle (--gradescope OUT.zip) and the other "
                               "grading platforms (--prairielearn, --github-classroom), not to --out")
        track = args.track or tracks.DEFAULT
        pkg = release(args.out, args.name or "my_transformer", args.force, track)
    except (ReleaseError, ToolError, gradescope_bundle.BundleError, classroom.ClassroomError) as exc:
        print(f"release: error: {exc}", file=sys.stderr)
        return 2
    flag = "" if track == tracks.DEFAULT else f" --track {track}"
    print(f"starter kit ({track} track) written to {pkg}; students run: "
          f"python -m pytest spec_tests properties --impl {pkg}{flag}")
    return 0


if __name__ == "__main__":
    run_main(main)
