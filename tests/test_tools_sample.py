"""Tests of ``python -m tools.sample``."""

from __future__ import annotations

import pytest

from tests.tools_helpers import TINY
from tools import sample, train


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    train.main([*TINY, "--steps", "2", "--out", str(out)])
    return out / "model.pt"


def test_greedy_default_prompt(checkpoint, capsys):
    assert sample.main([str(checkpoint)]) == 0
    text = capsys.readouterr().out.strip()
    assert text.startswith("314|") and len(text) == 4 + 3 and set(text) <= set("0123456789|")


def test_seeded_sampling_is_reproducible(checkpoint):
    kwargs = dict(prompt="12|", temperature=1.5, top_k=5, max_new_tokens=20)
    a = sample.sample(str(checkpoint), seed=3, **kwargs)
    assert a == sample.sample(str(checkpoint), seed=3, **kwargs)
    assert a.startswith("12|") and len(a) == 23
    others = {sample.sample(str(checkpoint), seed=s, **kwargs) for s in range(4, 8)}
    assert others - {a}, "different seeds should give different samples at temperature 1.5"


@pytest.mark.parametrize("argv, needle", [
    (["--prompt", "abc"], "--prompt"),
    (["--temperature", "-1"], "--temperature"),
    (["--top-k", "0"], "--top-k"),
    (["--max-new-tokens", "0"], "--max-new-tokens"),
])
def test_bad_options(checkpoint, capsys, argv, needle):
    with pytest.raises(SystemExit) as excinfo:
        sample.main([str(checkpoint), *argv])
    err = capsys.readouterr().err.strip()
    assert excinfo.value.code == 2 and "\n" not in err and needle in err, err


def test_bad_checkpoints(tmp_path, capsys):
    (tmp_path / "junk.pt").write_bytes(b"this is not a checkpoint")
    for path, needle in ((tmp_path / "missing.pt", "no such file"), (tmp_path / "junk.pt", "not a checkpoint")):
        with pytest.raises(SystemExit):
            sample.main([str(path)])
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and needle in err and "CHECKPOINT" in err, err
