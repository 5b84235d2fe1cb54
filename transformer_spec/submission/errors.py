"""What a submission that cannot be loaded is told: the errors the loader raises, and one line saying
why an import failed and one saying what to do about it (the kind of exception decides; the place is
the submission's own file and line, or a notebook's cell)."""

from __future__ import annotations

import importlib.metadata
import traceback
from pathlib import Path

from transformer_spec.results.outcomes import Kind
from transformer_spec.submission import notebooks


class SubmissionError(Exception):
    """Base class: the submission, not the test, is at fault. Its message is one readable line."""


class SubmissionImportError(SubmissionError):
    """The submission could not be imported at all."""


class NotSubmitted(SubmissionError, AttributeError):
    """A contract name that the submission does not define."""


class SymlinkOutside(SubmissionError):
    """A file of the submission is a symlink to a file outside the submission's folder (into
    ``reference/``, say): refused before anything is imported."""

    outcome_kind = Kind.FORBIDDEN  # how the grade classifies it (transformer_spec/results/outcomes.py)


def describe_import_failure(target: str, exc: BaseException) -> str:
    """One line naming why ``target`` could not be imported, with the submission's own location."""
    return f"the submission {target!r} could not be imported: {_reason(target, exc)}"


def _reason(target: str, exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if "importlib" not in f.filename and "transformer_spec" not in f.filename]
    where = f" (at {_place(own[-1].filename, own[-1].lineno)})" if own else ""
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} (at {_place(*_syntax_place(target, exc))})"
    if isinstance(exc, importlib.metadata.PackageNotFoundError):
        return (f"it reads the package metadata of {exc.name!r} (importlib.metadata), and no such package is "
                f"installed{where}")
    if isinstance(exc, ModuleNotFoundError) and exc.name != target:
        return f"it needs the module {exc.name!r}, which is not installed{where}"
    if isinstance(exc, ModuleNotFoundError):
        return "no module or path of that name exists"
    if isinstance(exc, FileNotFoundError) and not own:
        return str(exc)
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r}) while being imported{where}"
    if isinstance(exc, SymlinkOutside):
        return str(exc)
    lines = str(exc).strip().splitlines()
    message = f": {lines[0]}" if lines else ""
    return f"it raised {type(exc).__name__} while being imported{message}{where}"


def _null_byte(target: str) -> tuple[str, int] | None:
    """The file and line of the first null byte in the submission's ``.py`` files, or None."""
    path = Path(target)
    files = sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.is_file() else []
    for file in files:
        try:
            data = file.read_bytes()
        except OSError:
            continue
        if b"\x00" in data:
            return str(file), data[: data.index(b"\x00")].count(b"\n") + 1
    return None


def _syntax_place(target: str, exc: SyntaxError) -> tuple[str | None, int | None]:
    """Where a SyntaxError is: its own file and line, or, when Python gives none (a null byte in the
    source), the first null byte of the submission's files."""
    if exc.filename is not None:
        return exc.filename, exc.lineno
    return _null_byte(target) or (str(target), None)


def _place(filename: str | None, lineno: int | None) -> str:
    """``file:line``, or ``notebook.ipynb, cell N, line L`` for a notebook's cell."""
    cell = notebooks.cell_of(filename)
    if cell is not None:
        return f"{cell[0]}, cell {cell[1]}, line {lineno}"
    return f"{filename}:{lineno}"


def how_to_fix(target: str, exc: BaseException) -> str:
    """One line saying what to do about an import failure (the kind of exception decides)."""
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if "importlib" not in f.filename and "transformer_spec" not in f.filename]
    if isinstance(exc, SyntaxError) and notebooks.cell_of(exc.filename) is not None:
        return f"fix the syntax at {_place(exc.filename, exc.lineno)} (Jupyter's Restart & Run All shows it too)"
    if isinstance(exc, SyntaxError) and exc.filename is None and _null_byte(target) is not None:
        filename, lineno = _null_byte(target)
        return (f"remove the null bytes from {filename} (the first on line {lineno}): a .py file is plain text, "
                f"so save it again as UTF-8 text from your editor")
    if isinstance(exc, SyntaxError):
        filename, lineno = _syntax_place(target, exc)
        return (f"fix the syntax at {filename}:{lineno}; `python -m py_compile {filename}` "
                f"checks a file in a second")
    if isinstance(exc, ValueError) and str(target).endswith(notebooks.SUFFIX) and not own:
        return "save the notebook from Jupyter again (File > Save), or hand in the code as a .py file"
    if isinstance(exc, importlib.metadata.PackageNotFoundError):
        return (f"give the repository's pyproject.toml a [project] table with name = {exc.name!r} and a version "
                f"(the grader reads them there, as an install would), or stop reading the package's metadata")
    if isinstance(exc, ModuleNotFoundError) and exc.name != target:
        return (f"remove the import of {exc.name!r} (or install it, if the assignment allows it); the grader "
                f"has the course's packages only")
    if isinstance(exc, (ModuleNotFoundError, FileNotFoundError)) and not own:
        return ("check the path after --impl: a .py file, a package folder with __init__.py, "
                "or an importable module name")
    if isinstance(exc, SymlinkOutside):
        return ("put your own files in the submission's folder instead of symlinks (`cp -L` copies a link's "
                "target; the course's reference/ is not allowed)")
    first = own[-1].filename if own else target
    cell = notebooks.cell_of(first)
    if cell is not None:
        return (f"importing runs every cell of {cell[0]} in order: run Restart & Run All in Jupyter to see the "
                f"whole error (cell {cell[1]}), and put demos and training code in cells of their own under "
                f"`if __name__ == \"__main__\":`")
    if isinstance(exc, SystemExit):
        return (f"importing must not exit: move the sys.exit() (and any script code) of {first} under "
                f"`if __name__ == \"__main__\":`")
    return (f"importing runs every line at the top level of a module: run `python {first}` to see the whole "
            f"error, and move demos and training code under `if __name__ == \"__main__\":`")
