"""A public replay is its anchor test's own computation, call for call.

The class grader calls a submission's report false (``tampering``) when a re-check run at its
``public`` seed disagrees with the reference for a test the child claimed passed
(``transformer_spec/grader/rechecks.py``). That is proof only if the replay makes exactly the calls the test
makes: the same constructor arguments, weights, mode and inputs, to the bit. So both run against
``tests/replay_spy/spy_submission.py`` (the reference, recording a digest of every call): the
anchor tests under pytest, the replays as the re-check child runs them, and the two records of
each anchor must be equal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from transformer_spec.contract import registry
from transformer_spec.layout import ROOT
from transformer_spec.grader import recheck
from transformer_spec.submission import loader

SPY = Path(__file__).resolve().parent / "replay_spy" / "spy_submission.py"
REPLAYED = [r for r in registry.rechecks() if r.public is not None]


def _calls(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_the_replays_cover_the_oracle_anchors():
    assert {r.component for r in REPLAYED} == {"attention", "mha", "ffn", "encoder", "decoder", "rmsnorm", "rotary",
                                               "swiglu", "gqa", "llama_block", "minillama"}


def test_every_public_replay_makes_its_anchor_tests_calls(tmp_path, monkeypatch):
    tests_out, replays_out = tmp_path / "tests.jsonl", tmp_path / "replays.jsonl"
    rubric = tmp_path / "rubric.toml"
    rubric.write_text("forbidden = []\n")  # the spy imports the reference
    anchors = sorted({a for r in REPLAYED for a in r.anchors})
    env = dict(os.environ, REPLAY_SPY_OUT=str(tests_out), PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "pytest", *anchors, "-q", "-p", "no:cacheprovider", "--impl", str(SPY),
                           "--rubric", str(rubric), "--track", "all"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:]
    by_test: dict[str, list[dict]] = {}
    for c in _calls(tests_out):
        by_test.setdefault(c.pop("test"), []).append(c)
    monkeypatch.setenv("REPLAY_SPY_OUT", str(replays_out))
    spy = loader.load(str(SPY))
    for r in REPLAYED:
        replays_out.unlink(missing_ok=True)
        recheck.run_one(r, spy, r.public)
        replay = [{k: v for k, v in c.items() if k != "test"} for c in _calls(replays_out)]
        assert replay, f"{r.name}: the replay made no call"
        for a in r.anchors:
            assert by_test.get(a) == replay, f"{r.name}: the replay's calls are not {a}'s"
