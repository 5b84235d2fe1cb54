"""Notebook submissions: a Jupyter notebook's code cells run in order as one module.

``nbformat`` reads the ``.ipynb`` file. IPython's own syntax is not Python, so these lines are
skipped, each with a note naming its cell (:attr:`NotebookSource.notes`):

* line magics (``%matplotlib inline``, ``%time f(x)``) and shell lines (``!pip install x``);
* cell magics: a cell whose first line starts with ``%%`` is skipped whole;
* help lines (``torch.nn?``, ``??obj``).

Only a cell that is not valid Python as it stands is changed (a ``%`` line inside a string stays).

Each cell is compiled under its own file name, ``<notebook path>/cell N`` (``N`` counts every
cell of the notebook from 1, markdown included, as they appear in Jupyter), so a syntax error or
a traceback names the cell and the line within it, and ``linecache`` knows the cells' text (a
failure message can quote the line). The name lies "inside" the notebook's path, so whatever
tells the submission's frames from others by path (the forbidden-API guard, the failure
messages) counts the cells as the submission's. Skipped lines become ``pass`` at their indentation, so line
numbers stay those of the cell.
"""

from __future__ import annotations

import codeop
import linecache
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

SUFFIX = ".ipynb"
_CELL_NAME = re.compile(r"^(?P<path>.*\.ipynb)/cell (?P<cell>\d+)$")
_IPYTHON_LINE = re.compile(r"^\s*(%|!)|^\s*\?\??\S|^\s*[\w.\[\]]+\s*\?\??\s*$")


@dataclass(frozen=True)
class Cell:
    number: int  # 1-based position among all the notebook's cells
    filename: str  # "<path>/cell N": what tracebacks and syntax errors show
    source: str


@dataclass
class NotebookSource:
    cells: list[Cell] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # one line per skipped line or cell


def read(path: str | Path) -> NotebookSource:
    """The code cells of the notebook at ``path``, IPython lines skipped (see the module docstring).
    Raises ``ValueError`` naming the file when it is not a notebook nbformat can read."""
    import nbformat  # only for notebook submissions: a graded run of a .py file never imports it

    path = Path(path)
    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception as exc:  # noqa: BLE001 - nbformat raises json, validation and reader errors
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise ValueError(f"{path.name} is not a notebook nbformat can read: {first}") from None
    out = NotebookSource()
    for number, cell in enumerate(nb.cells, start=1):
        if cell.get("cell_type") != "code":
            continue
        lines = cell.get("source", "").splitlines()
        if lines and lines[0].lstrip().startswith("%%"):
            out.notes.append(f"cell {number}: skipped the whole cell (the cell magic {lines[0].strip()[:60]!r})")
            continue
        filename = f"{path}/cell {number}"
        source = "\n".join(lines) + "\n"
        if not _compiles(source, filename):  # only then: a '%' or '!' line inside a string stays as it is
            kept = []
            for i, line in enumerate(lines, start=1):
                if _IPYTHON_LINE.match(line):
                    out.notes.append(f"cell {number}, line {i}: skipped the IPython line {line.strip()[:60]!r}")
                    line = line[: len(line) - len(line.lstrip())] + "pass  # skipped: IPython syntax"
                kept.append(line)
            source = "\n".join(kept) + "\n"
        out.cells.append(Cell(number, filename, source))
    return out


def _compiles(source: str, filename: str) -> bool:
    try:
        compile(source, filename, "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def run(notebook: NotebookSource, module: ModuleType) -> None:
    """Execute the cells in order in ``module``'s namespace (as "Restart & Run All" would). A
    ``from __future__`` import holds in the later cells too, as in IPython (``codeop.Compile``)."""
    compiler = codeop.Compile()
    for cell in notebook.cells:
        linecache.cache[cell.filename] = (len(cell.source), None, cell.source.splitlines(True), cell.filename)
        exec(compiler(cell.source, cell.filename, "exec"), module.__dict__)  # noqa: S102 - the submission's code


def cell_of(filename: str | None) -> tuple[str, int] | None:
    """``(notebook path, cell number)`` when ``filename`` names a notebook cell, else None."""
    match = _CELL_NAME.match(filename or "")
    return (match["path"], int(match["cell"])) if match else None
