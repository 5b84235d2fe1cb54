"""Tests of ``tools.mutation_score`` (the mutmut score) and of the checked-in equivalent list."""

import re
from pathlib import Path

import pytest

from tools import mutation_score as ms
from transformer_spec import layout
from transformer_spec.contract import names as contract
from transformer_spec.contract import tracks
from transformer_spec.submission.loader import load

REPO = Path(__file__).resolve().parent.parent

RESULTS = """\
    reference.masks.x_causal_mask__mutmut_1: killed
    reference.masks.x_causal_mask__mutmut_11: survived
    reference.attention.x_scaled_dot_product_attention__mutmut_85: survived
    reference.multihead.xǁMultiHeadAttentionǁ__init____mutmut_14: survived
    reference.position.x__check_length__mutmut_2: timeout
    reference.position.x__check_length__mutmut_3: not checked
"""


def test_parse_results_reads_every_status():
    statuses = ms.parse_results(RESULTS + "\nsome other line\n")
    assert len(statuses) == 6
    assert statuses["reference.multihead.xǁMultiHeadAttentionǁ__init____mutmut_14"] == "survived"
    assert statuses["reference.position.x__check_length__mutmut_3"] == "not checked"


def test_score_counts_only_non_equivalent_mutants():
    statuses = {f"m.x_f__mutmut_{i}": "killed" for i in range(19)} | {"m.x_f__mutmut_19": "survived",
                                                                      "m.x_f__mutmut_20": "survived"}
    result = ms.score(statuses, {"m.x_f__mutmut_20": "same value"})
    assert (result.total, result.killed, result.equivalent, result.countable) == (21, 19, 1, 20)
    assert result.percent == pytest.approx(95.0) and result.unexplained == ["m.x_f__mutmut_19"]
    assert not result.ok and "m.x_f__mutmut_19" in result.report()
    everything = ms.score(statuses, {"m.x_f__mutmut_19": "r", "m.x_f__mutmut_20": "r"})
    assert everything.ok and everything.percent == 100.0 and everything.report().endswith("OK")


def test_score_fails_below_the_minimum_stale_lines_and_unfinished_mutants():
    statuses = {"m.x_f__mutmut_1": "killed", "m.x_f__mutmut_2": "survived"}
    assert not ms.score(statuses, {"m.x_f__mutmut_2": "r"}, minimum=101).ok  # below the minimum
    stale = ms.score(statuses, {"m.x_f__mutmut_2": "r", "m.x_f__mutmut_1": "r"})
    assert stale.stale == ["m.x_f__mutmut_1"] and not stale.ok
    unfinished = ms.score(statuses | {"m.x_f__mutmut_3": "timeout"}, {"m.x_f__mutmut_2": "r"})
    assert unfinished.other == {"m.x_f__mutmut_3": "timeout"} and not unfinished.ok


def test_equivalent_list_lines_need_a_reason(tmp_path):
    bad = tmp_path / "eq.txt"
    bad.write_text("# comment\nreference.masks.x_causal_mask__mutmut_11\n")
    with pytest.raises(ms.ScoreError, match="line 2"):
        ms.load_equivalents(bad)
    bad.write_text("reference.a.x_f__mutmut_1: r\nreference.a.x_f__mutmut_1: r\n")
    with pytest.raises(ms.ScoreError, match="twice"):
        ms.load_equivalents(bad)
    with pytest.raises(ms.ScoreError, match="--equivalents"):
        ms.load_equivalents(tmp_path / "missing.txt")


def test_dir_without_a_mutmut_run_is_a_usage_error(tmp_path, capsys):
    assert ms.main(["--dir", str(tmp_path)]) == 2
    assert "no mutants/ folder" in capsys.readouterr().err


def test_checked_in_equivalents_name_functions_of_the_reference():
    """Each listed mutant names a function (or method) that still exists in ``reference/``."""
    listed = ms.load_equivalents()
    assert len(listed) >= 1
    for name in listed:
        m = re.fullmatch(r"reference\.(\w+)\.(?:xǁ(\w+)ǁ|x_)(\w+?)__mutmut_\d+", name)
        assert m, f"unexpected mutant name {name}"
        module, cls, func = m.groups()
        source = (REPO / "reference" / f"{module}.py").read_text()
        assert re.search(rf"def {re.escape(func)}\(", source), f"{name}: no function {func} in reference/{module}.py"
        if cls:
            assert f"class {cls}" in source, f"{name}: no class {cls} in reference/{module}.py"


@pytest.mark.parametrize("track", tracks.names())
def test_each_tracks_independent_implementation_defines_its_contract(track):
    """``tests/independent/alt_submission.py`` (classic) and ``alt_modern.py`` (modern), graded by
    ``python -m tools.mutants --track T`` as a correct row."""
    impl = load(str(layout.ROOT / tracks.get(track).independent))
    missing = [n.name for n in contract.of_track(track) if not impl.has(n.name)]
    assert not missing, f"the {track} track's independent implementation lacks {missing}"


def test_modules_restrict_the_mutants_and_the_equivalents_scored(tmp_path, capsys):
    equivalents = {"reference.masks.x_causal_mask__mutmut_11": "a", "reference.gqa.xǁGroupedQueryAttentionǁforward__mutmut_1": "b"}
    assert ms.only_modules(equivalents, ["gqa"]) == {"reference.gqa.xǁGroupedQueryAttentionǁforward__mutmut_1": "b"}
    assert ms.only_modules(equivalents, None) == equivalents
    (tmp_path / "reference").mkdir()
    (tmp_path / "reference" / "gqa.py").write_text("")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.mutmut]\nsource_paths = ["reference/"]\n')
    ms.set_only_mutate(tmp_path, ["gqa"])
    assert 'only_mutate = ["reference/gqa.py"]\nsource_paths' in (tmp_path / "pyproject.toml").read_text()
    with pytest.raises(ms.ScoreError, match="--modules rope: no reference/rope.py"):
        ms.set_only_mutate(tmp_path, ["rope"])
