"""``python -m tools.class_scale``: the table's arithmetic and the class it grades (the timings themselves are
measured by the command, docs/class_grading.md and docs/performance.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.benchmarks.class_scale import Run, table, write_cs336_class

REPO = Path(__file__).resolve().parent.parent


def test_the_time_outside_the_tasks_is_the_wall_time_less_their_span():
    one = Run("one machine", 0, wall=100.0, size=20, task_seconds=[])  # 20 submissions x 10 core-seconds on 2 cores
    two = Run("Slurm, 2 tasks", 2, wall=130.0, size=20, task_seconds=[110.0, 120.0], span=121.0)
    text = table([one, two], cores=2)
    assert "| one machine | 100 s | 12.00 | | |" in text
    assert "| Slurm, 2 tasks | 130 s | 9.23 | 110, 120 s | 9 s |" in text
    assert "a submission costs 10.0 core-seconds (20 in 100 s on 2 cores)" in text


def test_the_class_cycles_through_the_catalogue_and_every_member_is_a_repository(tmp_path, monkeypatch):
    from tools.benchmarks import class_scale
    from transformer_spec.catalogue import cs336

    every = class_scale.members()
    assert len(every) > 40 and every[1][0] == cs336.PITFALLS[0].name
    monkeypatch.setattr(class_scale, "members", lambda: every[:2])
    names = write_cs336_class(tmp_path, 5)
    assert names == ["correct", every[1][0], "correct_2", f"{every[1][0]}_2", "correct_3"]
    assert all((tmp_path / n / "tests" / "adapters.py").is_file() for n in names)


def test_slips_get_one_line(capsys):
    from tools import class_scale

    for argv, said in ((["slurm", "--tasks", "0"], "--tasks '0'"), (["curve", "--sizes", "a"], "--sizes 'a'"),
                       (["curv"], "invalid choice")):
        with pytest.raises(SystemExit) as exited:
            class_scale.main(argv)
        err = capsys.readouterr().err
        assert exited.value.code == 2 and said in err and "Traceback" not in err, err
