"""Notebook submissions for the tests: a ``.py`` file's code written as a Jupyter notebook."""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat

#: what students' notebooks hold besides their code: IPython lines and a cell magic
IPYTHON_CELLS = ("%matplotlib inline\n!pip install --quiet torch\nimport torch", "%%time\nfor i in range(3): pass")


def write_notebook(py_file: Path, dest: Path, ipython: bool = True) -> Path:
    """``py_file``'s code as a notebook at ``dest``: a markdown cell, then (``ipython``) the IPython
    cells of :data:`IPYTHON_CELLS`, then one code cell per top-level statement group (a cell per
    function or class, as students split them)."""
    source = Path(py_file).read_text()
    lines = source.splitlines(keepends=True)
    starts = sorted({node.lineno - len(getattr(node, "decorator_list", [])) for node in ast.parse(source).body})
    starts = [1, *[s for s in starts if s > 1]]
    chunks = ["".join(lines[a - 1:b - 1]) for a, b in zip(starts, [*starts[1:], len(lines) + 1], strict=True)]
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell("# My Transformer\nThe assignment, cell by cell."))
    if ipython:
        nb.cells += [nbformat.v4.new_code_cell(c) for c in IPYTHON_CELLS]
    nb.cells += [nbformat.v4.new_code_cell(c.rstrip("\n")) for c in chunks if c.strip()]
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(dest))
    return dest
