"""The submission loader, on small throw-away submissions."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from transformer_spec.submission import loader

ROOT = Path(__file__).resolve().parent.parent

ATTENTION_ONLY = """
import torch

def scaled_dot_product_attention(q, k, v, mask=None, scale=None):
    scale = q.size(-1) ** -0.5 if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_default_target_is_reference(monkeypatch):
    monkeypatch.delenv(loader.ENV_VAR, raising=False)
    assert loader.resolve_target(None) == "reference"
    sub = loader.load()
    assert sub.error is None and sub.target == "reference"
    assert sub.has("MiniGPT.generate")


def test_option_wins_over_environment_variable():
    assert loader.resolve_target("a.py", {loader.ENV_VAR: "b.py"}) == "a.py"
    assert loader.resolve_target(None, {loader.ENV_VAR: "b.py"}) == "b.py"


def test_loads_a_py_file(tmp_path):
    sub = loader.load(str(write(tmp_path / "mine.py", ATTENTION_ONLY)))
    assert sub.error is None, sub.error
    assert callable(sub.scaled_dot_product_attention)
    assert sub.origin.endswith("mine.py")


def test_loads_an_importable_module_name(tmp_path, monkeypatch):
    write(tmp_path / "student_mod_xyz.py", ATTENTION_ONLY)
    monkeypatch.syspath_prepend(str(tmp_path))
    sub = loader.load("student_mod_xyz")
    assert sub.error is None, sub.error
    assert sub.has("scaled_dot_product_attention")


def test_loads_a_package_folder_with_relative_imports(tmp_path):
    pkg = tmp_path / "my_transformer"
    write(pkg / "attention.py", ATTENTION_ONLY)
    write(pkg / "__init__.py", "from .attention import scaled_dot_product_attention\n")
    sub = loader.load(str(pkg))
    assert sub.error is None, sub.error
    assert sub.has("scaled_dot_product_attention")
    assert not sub.has("MultiHeadAttention")


def test_missing_name_names_the_contract_row(tmp_path):
    sub = loader.load(str(write(tmp_path / "mine.py", ATTENTION_ONLY)))
    with pytest.raises(loader.NotSubmitted) as info:
        sub.MultiHeadAttention  # noqa: B018
    message = str(info.value)
    assert "`MultiHeadAttention` is not defined by the submission" in message
    assert "W_Q" in message  # the contract row says what to write


@pytest.mark.parametrize(
    "source, expected",
    [
        ("def f(:\n    pass\n", "SyntaxError"),
        ("raise RuntimeError('boom at import')\n", "it raised RuntimeError while being imported: boom at import"),
        ("import sys\nsys.exit(3)\n", "it called sys.exit(3) while being imported"),
        ("import definitely_not_installed_pkg\n", "needs the module 'definitely_not_installed_pkg'"),
        ("raise KeyboardInterrupt\n", "it raised KeyboardInterrupt while being imported"),
    ],
    ids=["syntax-error", "exception", "sys-exit", "missing-dependency", "keyboard-interrupt"],
)
def test_import_failure_becomes_one_line(tmp_path, source, expected):
    path = write(tmp_path / "broken.py", source)
    sub = loader.load(str(path))
    assert sub.error is not None and expected in sub.error, sub.error
    assert "\n" not in sub.error
    with pytest.raises(loader.SubmissionImportError, match="could not be imported"):
        sub.scaled_dot_product_attention  # noqa: B018
    assert not sub.has("scaled_dot_product_attention")



@pytest.mark.parametrize("package", [False, True], ids=["file", "package"])
def test_a_null_byte_is_placed_and_its_fix_said(tmp_path, package):
    """Issue 27: Python reports a null byte in the source with no file and no line ("at None:None");
    the loader finds the first one itself."""
    source = b"x = 1\ny = 2\x00\n"
    if package:
        (tmp_path / "pkg").mkdir()
        (tmp_path / "pkg" / "__init__.py").write_text("from .helper import y\n")
        (tmp_path / "pkg" / "helper.py").write_bytes(source)
        target, file = tmp_path / "pkg", tmp_path / "pkg" / "helper.py"
    else:
        target = file = tmp_path / "mine.py"
        file.write_bytes(source)
    sub = loader.load(str(target))
    assert f"(at {file}:2)" in sub.error and "None" not in sub.error, sub.error
    fix = sub.fix
    assert f"remove the null bytes from {file} (the first on line 2)" in fix and "None" not in fix, fix

def test_nonexistent_path_is_reported(tmp_path):
    sub = loader.load(str(tmp_path / "nope.py"))
    assert "no such file or folder" in sub.error


def test_unknown_module_name_is_reported():
    sub = loader.load("no_such_module_anywhere_123")
    assert "no module or path of that name" in sub.error


def test_folder_without_init_is_reported(tmp_path):
    (tmp_path / "loose").mkdir()
    sub = loader.load(str(tmp_path / "loose"))
    assert "without __init__.py" in sub.error


def run_suite(*args: str, env_impl: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != loader.ENV_VAR}
    if env_impl is not None:
        env[loader.ENV_VAR] = env_impl
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--no-header", *args],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=300,
    )


def test_broken_submission_fails_every_test_without_a_collection_crash(tmp_path):
    bad = write(tmp_path / "bad.py", "def f(:\n")
    result = run_suite("spec_tests/test_contract_basics.py", f"--impl={bad}")
    assert result.returncode == 1, result.stdout[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert "passed" not in summary and "error" not in summary, summary
    assert "could not be imported: SyntaxError" in result.stdout


def test_partial_submission_is_graded_name_by_name(tmp_path):
    mine = write(tmp_path / "mine.py", ATTENTION_ONLY)
    result = run_suite("spec_tests/test_contract_basics.py", env_impl=str(mine))
    out = result.stdout
    assert result.returncode == 1
    assert "PASSED" not in out  # -q: passes are dots; check the failures name what is missing
    assert "`MiniGPT` is not defined by the submission" in out
    assert "FAILED spec_tests/test_contract_basics.py::test_attention_output_shapes_and_dtype" not in out
    assert "error" not in out.strip().splitlines()[-1]


def test_two_package_folders_with_the_same_name_do_not_share_modules(tmp_path):
    first, second = tmp_path / "a" / "my_transformer", tmp_path / "b" / "my_transformer"
    for pkg, value in ((first, 1), (second, 2)):
        write(pkg / "attention.py", f"VALUE = {value}\n")
        write(pkg / "__init__.py", "from .attention import VALUE\n")
    assert loader.load(str(first)).module.VALUE == 1
    assert loader.load(str(second)).module.VALUE == 2


def test_a_path_loaded_again_sees_the_edited_code(tmp_path):
    pkg = tmp_path / "my_transformer"
    write(pkg / "attention.py", "VALUE = 1\n")
    write(pkg / "__init__.py", "from .attention import VALUE\n")
    assert loader.load(str(pkg)).module.VALUE == 1
    write(pkg / "attention.py", "VALUE = 22\n")  # a different size, so no stale bytecode is used
    assert loader.load(str(pkg)).module.VALUE == 22


def test_a_module_without_any_contract_name_cannot_be_graded(tmp_path):
    empty = write(tmp_path / "empty.py", "")
    assert loader.load(str(empty)).error is None  # importable: tools may load any module
    sub = loader.load(str(empty), require_contract=True)  # a graded run needs a contract name
    assert "defines none of the contract's names" in sub.error and "\n" not in sub.error
    assert "--impl" in sub.fix


@pytest.mark.parametrize("source, fix", [
    ("def f(:\n", "py_compile"),
    ("import no_such_package_xyz\n", "remove the import of 'no_such_package_xyz'"),
    ("import sys\nsys.exit(3)\n", 'if __name__ == "__main__":'),
    ("raise RuntimeError('training...')\n", "to see the whole error"),
])
def test_an_import_failure_comes_with_a_fix(tmp_path, source, fix):
    sub = loader.load(str(write(tmp_path / "mine.py", source)))
    assert sub.error is not None and fix in sub.fix, sub.fix
