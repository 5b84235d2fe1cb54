"""What a new user meets (issue 48): each slip of the first table of the issue, typed as a new user typed
it, is answered in one or two lines that name the problem and the fix, never a traceback."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tools import release, sample, train
from tools.grade import cli as grade_cli

ROOT = Path(__file__).resolve().parents[1]


def answer(capsys, main, argv) -> tuple[int, list[str]]:
    """The exit status of ``main(argv)`` and the non-empty lines it printed."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, [line for line in (out.out + out.err).splitlines() if line.strip()]


@pytest.fixture
def a_file(tmp_path) -> Path:
    path = tmp_path / "somefile"
    path.write_text("not a folder\n")
    return path


def test_grade_out_is_a_file(capsys, tmp_path, a_file):
    (tmp_path / "class").mkdir()
    code, lines = answer(capsys, grade_cli.main, [str(tmp_path / "class"), "--out", str(a_file), "--no-progress"])
    assert code == 2
    assert lines == [f"python -m tools.grade: error: --out {a_file}: is a file, not a folder; give --out a folder "
                     "(it is created if missing)"]


def test_release_out_is_a_file(capsys, a_file):
    code, lines = answer(capsys, release.main, ["--out", str(a_file)])
    assert code == 2
    assert lines == [f"release: error: --out {a_file}: is a file, not a folder; give --out a folder "
                     "(it is created if missing)"]


def test_release_zip_is_a_folder(capsys, tmp_path):
    code, lines = answer(capsys, release.main, ["--gradescope", str(tmp_path)])
    assert code == 2 and len(lines) == 1 and "is a folder, not a file" in lines[0]


def test_unknown_hypothesis_profile_lists_the_profiles():
    proc = subprocess.run([sys.executable, "-m", "pytest", "spec_tests/test_seed001_worked_example.py", "--impl",
                           "reference", "-p", "no:cacheprovider", "--hypothesis-profile", "fast"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert proc.returncode == 4, lines
    assert lines == ["ERROR: --hypothesis-profile fast: no such profile; choose one of dev, grading, thorough, "
                     "mutation, no-shrink (see transformer_spec/pytest_plugin/hypothesis_profiles.py)"]


def test_misspelt_subcommand(capsys, tmp_path):
    code, lines = answer(capsys, grade_cli.main, ["singel", str(tmp_path), "--results-json", "x.json"])
    assert code == 2
    assert lines == ["python -m tools.grade: error: singel: no such folder; did you mean the subcommand 'single'?",
                     "python -m tools.grade --help lists every option"]


def test_misspelt_option_is_named_before_the_missing_one(capsys, tmp_path):
    code, lines = answer(capsys, grade_cli.main, [str(tmp_path), "--otu", str(tmp_path / "o")])
    assert code == 2
    assert lines == ["python -m tools.grade: error: unknown option --otu; did you mean --out?",
                     "python -m tools.grade --help lists every option"]


def test_options_are_not_abbreviated(capsys, tmp_path):
    code, lines = answer(capsys, train.main, ["--step", "10", "--out", str(tmp_path / "o")])
    assert code == 2
    assert lines == ["python -m tools.train: error: unknown option --step (options are not abbreviated): write --steps",
                     "python -m tools.train --help lists every option"]
    assert not (tmp_path / "o").exists()


def test_a_file_that_is_not_a_checkpoint(capsys):
    code, lines = answer(capsys, sample.main, [str(ROOT / "README.md")])
    assert code == 2
    assert lines == [f"python -m tools.sample: error: CHECKPOINT {ROOT / 'README.md'}: not a checkpoint (not a whole "
                     "file written by torch.save); give a model.pt written by python -m tools.train"]


def test_a_misspelt_choice_gets_the_closest(capsys):
    from tools import class_scale

    code, lines = answer(capsys, class_scale.main, ["curvee"])
    assert code == 2 and len(lines) == 2 and lines[0].endswith("did you mean 'curve'?")


def test_every_command_line_refuses_abbreviations():
    """The next tool gets the same treatment: every parser in tools/ and transformer_spec/ is
    ``tools.cli.Parser`` or an ``argparse.ArgumentParser`` told ``allow_abbrev=False`` (the tools run as
    plain scripts, which cannot import tools.cli)."""
    bare = []
    for path in sorted([*ROOT.glob("tools/**/*.py"), *ROOT.glob("transformer_spec/**/*.py")]):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "ArgumentParser"
                    and not any(k.arg == "allow_abbrev" for k in node.keywords)):
                bare.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not bare, f"argparse.ArgumentParser without allow_abbrev=False (use tools.cli.Parser): {bare}"
