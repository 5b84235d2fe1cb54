"""Notebook submissions (``transformer_spec.submission.notebooks``): graded like the same code in a ``.py`` file.

IPython lines and cell magics are skipped with a note naming the cell; errors name the cell and
its line; a graded run of a notebook gives exactly the results of the same code as a module.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from tests.notebook_helpers import write_notebook
from transformer_spec.catalogue.patching import INDEPENDENT_IMPL
from transformer_spec.submission import loader, notebooks

REPO = Path(__file__).resolve().parent.parent


def _notebook(path: Path, *cells: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("notes")] + [nbformat.v4.new_code_cell(c) for c in cells]
    nbformat.write(nb, str(path))
    return path


def test_ipython_lines_and_cell_magics_are_skipped_with_a_note(tmp_path):
    nb = notebooks.read(_notebook(tmp_path / "a.ipynb", "%matplotlib inline\nx = 1\n!pip install foo",
                                  "%%time\ny = 2", "def f():\n    torch?\n    return x", 's = """\n%d percent\n"""'))
    assert [c.number for c in nb.cells] == [2, 4, 5], "the %%time cell (4th of the notebook) is skipped whole"
    assert nb.notes == ["cell 2, line 1: skipped the IPython line '%matplotlib inline'",
                        "cell 2, line 3: skipped the IPython line '!pip install foo'",
                        "cell 3: skipped the whole cell (the cell magic '%%time')",
                        "cell 4, line 2: skipped the IPython line 'torch?'"]
    assert nb.cells[-1].source == 's = """\n%d percent\n"""\n', "a valid cell is left exactly as it is"


def test_a_notebook_runs_as_one_module_with_the_future_imports_of_earlier_cells(tmp_path):
    path = _notebook(tmp_path / "m.ipynb", "from __future__ import annotations\nimport math",
                     "def area(r: NotDefinedAnywhere) -> float:\n    return math.pi * r * r")
    sub = loader.load(str(path))
    assert sub.error is None, sub.error
    assert sub.module.area(1.0) == pytest.approx(3.14159, abs=1e-5)
    assert sub.module.__file__ == str(path.resolve())


@pytest.mark.parametrize("cells, needle", [
    (("x = 1", "def f(:\n    pass"), "SyntaxError: invalid syntax (at {nb}, cell 3, line 1)"),
    (("x = 1", "y = 2\nraise RuntimeError('boom')"), "RuntimeError while being imported: boom (at {nb}, cell 3, line 2)"),
])
def test_errors_name_the_cell_and_its_line(tmp_path, cells, needle):
    path = _notebook(tmp_path / "bad.ipynb", *cells)
    sub = loader.load(str(path))
    assert sub.error is not None and needle.format(nb=path.resolve()) in sub.error, sub.error
    assert "cell 3" in sub.fix, sub.fix


def test_a_file_that_is_not_a_notebook_says_so(tmp_path):
    path = tmp_path / "broken.ipynb"
    path.write_text('{"cells": [')
    sub = loader.load(str(path))
    assert sub.error is not None and "not a notebook nbformat can read" in sub.error, sub.error
    assert "Save" in sub.fix


def grade(tmp_path: Path, impl: Path) -> dict:
    out = tmp_path / f"{impl.name}.json"
    assert pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", str(REPO), "--impl", str(impl),
                        "--grade-json", str(out), str(REPO / "spec_tests")]) == 0
    return json.loads(out.read_text())


@pytest.mark.slow
def test_a_notebook_gets_the_results_of_the_same_code_as_a_py_file(tmp_path):
    """Every component's golden tests (the whole suite through the class grader, on the oracle
    tests: tests/test_grade_class.py::test_a_notebook_gets_the_grade_of_the_same_code_as_a_py_file)."""
    notebook = write_notebook(INDEPENDENT_IMPL, tmp_path / "nb" / "my_transformer.ipynb")
    as_notebook, as_module = grade(tmp_path, notebook), grade(tmp_path, INDEPENDENT_IMPL)
    assert as_notebook["score"] == as_module["score"] == pytest.approx(sum(t["max_score"] for t in as_module["tests"]))
    assert [(t["name"], t["score"]) for t in as_notebook["tests"]] == [(t["name"], t["score"]) for t in as_module["tests"]]


def test_the_skipped_lines_are_named_in_results_json(tmp_path):
    """Students on Gradescope read results.json's output, not the run's header."""
    notebook = write_notebook(INDEPENDENT_IMPL, tmp_path / "nb" / "my_transformer.ipynb")
    nb = nbformat.read(str(notebook), as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell("%matplotlib inline"))
    nbformat.write(nb, str(notebook))
    out = tmp_path / "results.json"
    pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", str(REPO), "--impl", str(notebook),
                 "--grade-json", str(out), str(REPO / "spec_tests" / "test_seed001_worked_example.py")])
    output = json.loads(out.read_text())["output"]
    assert "note: cell 1, line 1: skipped the IPython line '%matplotlib inline'" in output, output
