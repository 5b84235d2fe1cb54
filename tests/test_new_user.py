"""What a new user meets (issue 48): each slip of the first table of the issue, typed as a new user typed
it, is answered in one or two lines that name the problem and the fix, never a traceback."""

from __future__ import annotations

import ast
import shutil
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


# ------------------------------------------------------------------ outputs that say what they are
def run_suite(*args: str) -> tuple[int, list[str]]:
    proc = subprocess.run([sys.executable, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    # stdout only: under xdist, pytest-benchmark warns on stderr in the child (it inherits the worker's variables)
    return proc.returncode, [line for line in proc.stdout.splitlines() if line.strip()]


def test_other_tracks_tests_are_counted_with_the_option_that_runs_them():
    code, lines = run_suite("spec_tests/test_seed001_worked_example.py", "spec_tests/modern/test_golden.py",
                            "--impl", "reference")
    assert code == 0
    assert ("10 collected test(s) belong to the modern track, not the classic track graded here: run them with "
            "--track modern") in lines
    assert lines[-1].startswith("18 passed, 10 deselected")


def test_collect_only_prints_no_score():
    code, lines = run_suite("spec_tests/test_seed001_worked_example.py", "--impl", "reference", "--co")
    assert code == 0 and not any("score of" in line for line in lines), lines


def test_a_failing_test_the_rubric_does_not_grade_is_short_and_says_so(tmp_path):
    bug = tmp_path / "bug"
    shutil.copytree(ROOT / "reference", bug)
    seq2seq = bug / "seq2seq.py"
    seq2seq.write_text(seq2seq.read_text().replace("return self.out(self.decoder_norm(x))",
                                                   "return self.out(self.decoder_norm(x)) * 1.5"))
    code, lines = run_suite("spec_tests/test_snapshots.py", "--impl", str(bug))
    assert code == 1
    assert "Traceback" not in "\n".join(lines) and len(lines) < 40, lines
    assert lines.count("(not graded: the rubric gives this test no points)") == 2
    assert ("2 failed test(s) are not graded (no component, or dropped by the rubric): pytest counts them, the "
            "score does not.") in lines


def test_the_starter_kit_run_is_one_line_per_unimplemented_name(tmp_path):
    """README: the kit's run (its command: spec_tests properties, -q) is under 45 lines."""
    kit = release.release(tmp_path, "kit", False, "classic")
    code, lines = run_suite("spec_tests", "properties", "--impl", str(kit))
    assert code == 1  # still a failing run
    assert len(lines) < 45, "\n".join(lines)
    assert not any(line.startswith("____") for line in lines), "no failure sections for names not implemented yet"
    header = next(i for i, line in enumerate(lines) if "failed on a name that is not implemented yet" in line)
    needs = [line.split()[2] for line in lines[header + 1:] if line.startswith("  ") and " need " in line]
    assert len(needs) == len(set(needs)) >= 5 and "scaled_dot_product_attention" in needs, lines
    assert lines[-1].split(" in ")[0].endswith("not implemented"), lines[-1]


def test_resume_counts_what_it_graded_now_and_what_it_kept(capsys, tmp_path):
    cls, out = tmp_path / "class", tmp_path / "out"
    cls.mkdir()
    for student in ("alice", "bob"):
        shutil.copytree(ROOT / "reference", cls / student)
    fast = ["--tests", "spec_tests/test_seed001_worked_example.py", "--no-progress", "--no-rechecks"]
    code, lines = answer(capsys, grade_cli.main, [str(cls), "--out", str(out), *fast])
    assert code == 0 and lines[0].startswith("graded 2 submission(s) in ") and lines[0].endswith(" min: 2 ok"), lines
    shutil.copytree(ROOT / "reference", cls / "carol")
    code, lines = answer(capsys, grade_cli.main, [str(cls), "--out", str(out), "--resume", *fast])
    assert code == 0 and lines[0].startswith("graded 1 submission(s) in "), lines
    assert lines[0].endswith(" min, kept 2 graded before (--resume): 3 ok"), lines


def test_single_prints_the_component_table(capsys, tmp_path):
    code, lines = answer(capsys, grade_cli.main, ["single", str(ROOT / "reference"), "--results-json",
                                                  str(tmp_path / "results.json"), "--no-progress", "--no-rechecks",
                                                  "--tests", "spec_tests/test_seed001_worked_example.py"])
    assert code == 0
    assert lines[0].split() == ["component", "points", "tests", "passed"], lines
    assert lines[1].split()[0] == "attention" and lines[3].split()[0] == "total", lines
    assert lines[4] == "reference: ok, 28 / 28", lines


# ------------------------------------------------------------------ plots
def test_a_short_run_has_plain_loss_ticks_and_a_long_one_a_log_axis():
    from tools import figures

    short = {"train": [(s, 2.4 - 0.01 * s) for s in range(1, 11)], "val": [(10, 2.35)]}
    long = {"train": [(s, 2.4 / s) for s in range(1, 101)], "val": [(100, 0.03)]}
    for history, scale in ((short, "linear"), (long, "log")):
        fig = figures.loss_figure(history, "MiniGPT loss")
        assert fig.axes[0].get_yscale() == scale and fig.axes[0].get_title() == "MiniGPT loss"
        figures.plt.close(fig)


def test_every_figure_of_a_training_run_names_the_model(monkeypatch, tmp_path):
    from tools import figures

    titles = []
    monkeypatch.setattr(figures, "_save", lambda fig, path: (titles.append(fig.get_suptitle() or fig.axes[0].get_title()),
                                                             figures.plt.close(fig)))
    code = train.main(["--steps", "2", "--d-model", "16", "--num-heads", "2", "--num-layers", "1", "--d-ff", "32",
                       "--model", "minillama", "--out", str(tmp_path / "run")])
    assert code == 0 and len(titles) == 3, titles
    assert all(t.startswith("MiniLlama") for t in titles), titles
    assert "--impl reference, 2 steps" in titles[0], titles


def test_output_piped_into_head_ends_quietly():
    """``python -m tools.mutants --list | head`` printed a BrokenPipeError's traceback (issue 48)."""
    proc = subprocess.run(f"{sys.executable} -m tools.mutants --list | head -n 1", shell=True, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.stdout.startswith("pitfall") and proc.stdout.count("\n") == 1
    assert proc.stderr == "", proc.stderr


def test_every_tool_ends_through_run_main():
    """The next tool gets the same treatment: ``python -m tools.X`` ends through ``tools.cli.run_main``
    (classroom_check runs as a plain script, without tools.cli, and prints a few lines)."""
    for path in sorted(ROOT.glob("tools/**/*.py")):
        text = path.read_text()
        if 'if __name__ == "__main__":' in text and path.name != "classroom_check.py":
            assert 'if __name__ == "__main__":\n    run_main(main)' in text, path
    assert (ROOT / "tools/grade/__main__.py").read_text().rstrip().endswith("run_main(main)")


def test_the_untouched_starter_kit_is_not_implemented_yet_in_the_gradebook(capsys, tmp_path):
    """Issue 48: the gradebook said `ok`, 0 and nothing else for an untouched kit."""
    kit = release.release(tmp_path / "kit", "my_transformer", False, "classic")
    code, lines = answer(capsys, grade_cli.main, ["single", str(kit), "--results-json", str(tmp_path / "r.json"),
                                                  "--no-progress", "--no-rechecks",
                                                  "--tests", "spec_tests/test_seed001_worked_example.py"])
    assert code == 0
    assert ("my_transformer: ok, 0 / 28 (not implemented yet (raises NotImplementedError): "
            "scaled_dot_product_attention, MultiHeadAttention)") in lines, lines


def test_a_class_folder_that_is_a_file(capsys, tmp_path, a_file):
    code, lines = answer(capsys, grade_cli.main, [str(a_file), "--out", str(tmp_path / "out"), "--no-progress"])
    assert code == 2
    assert lines == [f"python -m tools.grade: error: {a_file} is a file: give the class folder, one .py file, notebook or "
                     "folder per student (one submission: python -m tools.grade single SUBMISSION --results-json FILE)"]
    assert not (tmp_path / "out").exists()
