"""Tests of ``python -m tools.scaling`` (seed 000 section 8).

Independent expectations: with q, k ~ N(0, 1), ``q . k`` has standard deviation ``sqrt(d_k)``;
after ``1/sqrt(d_k)`` the logits have unit variance whatever ``d_k``, so the scaled rows look
alike at every ``d_k``, while unscaled rows approach one-hot (seed 000: near 1.0 at d_k = 256).
"""

from __future__ import annotations

import math

import pytest

from tests.tools_helpers import assert_png
from tools import scaling
from transformer_spec.catalogue.patching import load_patched_reference
from transformer_spec.submission import loader


def test_reference_reproduces_seed_finding():
    rows = scaling.measure(loader.load(None), (16, 256, 1024), seq_len=32, samples=16)
    by = {r["d_k"]: r for r in rows}
    assert by[256]["max_unscaled"] > 0.85 and by[1024]["max_unscaled"] > by[256]["max_unscaled"]
    assert by[256]["entropy_unscaled"] < 0.5
    for r in rows:
        assert r["max_scaled"] < 0.3 and 2.5 < r["entropy_scaled"] < math.log(32)
    # scaled rows do not depend on d_k: unit-variance logits each time
    assert abs(by[16]["entropy_scaled"] - by[1024]["entropy_scaled"]) < 0.15
    assert scaling.finding(rows).startswith("seed 000's finding holds")


def test_tool_uses_the_submission(tmp_path):
    """A submission that ignores 1/sqrt(d_k) shows no difference, and the tool says so."""
    broken = load_patched_reference(
        tmp_path, [("attention.py", "scale = 1.0 / math.sqrt(q.size(-1))", "scale = 1.0")], name="noscale")
    rows = scaling.measure(broken, (64, 256), seq_len=16, samples=8)
    for r in rows:
        assert r["max_scaled"] == pytest.approx(r["max_unscaled"])
    assert "does NOT hold" in scaling.finding(rows)


def test_main_prints_table_and_writes_png(tmp_path, capsys):
    assert scaling.main(["--d-k", "16", "256", "--samples", "8", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "entropy scaled" in out and "   256 |" in out and "finding holds" in out
    assert_png(tmp_path / "scaling.png", (1000, 420))


def test_the_default_output_is_under_runs_and_names_its_full_path(tmp_path, capsys, monkeypatch):
    """Under runs/, which git ignores: run from a clone, nothing shows in `git status` (issue 48)."""
    monkeypatch.chdir(tmp_path)
    assert scaling.main(["--d-k", "16", "--samples", "2"]) == 0
    assert f"wrote {tmp_path.resolve() / 'runs' / 'scaling' / 'scaling.png'}" in capsys.readouterr().out
    assert [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()] == ["runs/scaling/scaling.png"]


def test_errors_are_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as excinfo:
        scaling.main(["--impl", str(tmp_path / "nothing.py"), "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert excinfo.value.code == 2 and "\n" not in err and "--impl" in err
    with pytest.raises(SystemExit):
        scaling.main(["--d-k", "0"])
    assert "--d-k" in capsys.readouterr().err
