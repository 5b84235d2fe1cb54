"""tools.twins: the share of a rubric the hidden re-checks cover (docs/class_grading.md, "Limits")."""

from __future__ import annotations

import pytest

from tools import twins


def test_the_covered_points_are_those_of_the_rechecks_anchors():
    table = twins.coverage("classic")
    assert sum(v[3] for v in table.values()) == pytest.approx(100)
    assert all(0 <= twins_ <= n and 0 <= covered <= total + 1e-9 for n, twins_, covered, total in table.values())
    # seq2seq's law a constant fails has a twin (issue 45, attack 12); errors' argument checks mostly do not
    assert table["seq2seq"][1] >= 4 and table["errors"][1] < table["errors"][0]


def test_the_cli_prints_the_bound(capsys):
    assert twins.main(["--track", "modern"]) == 0
    out = capsys.readouterr().out
    assert "a forger whose code runs keeps its claims of twin-less tests: at most" in out and "\nall " in out
