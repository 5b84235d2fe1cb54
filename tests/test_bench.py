"""Tests of ``python -m tools.bench`` and :mod:`tools.benchmarks` on tiny sizes and one repetition
(the numbers are not checked, only that every row is measured, side by side, and reported)."""

from __future__ import annotations

import pytest
import torch

from tools import bench
from tools.benchmarks import graded_run, timing, torch_gpt, workloads
from tools.cli import ToolError
from transformer_spec.submission import loader


@pytest.fixture(scope="module")
def ref() -> loader.Submission:
    return loader.load("reference")


def test_side_by_side_alternates_and_takes_the_median():
    order: list[str] = []
    ours, base = timing.side_by_side(lambda: order.append("a"), lambda: order.append("b"), repeats=4, warmup=1)
    assert order == ["a", "b", "a", "b", "b", "a", "a", "b", "b", "a"]  # warm-up, then alternating
    assert ours >= 0 and base >= 0


def test_side_by_side_repeats_short_calls_up_to_min_time():
    calls = {"a": 0, "b": 0}
    timing.side_by_side(lambda: calls.__setitem__("a", calls["a"] + 1),
                        lambda: calls.__setitem__("b", calls["b"] + 1), repeats=1, min_time=0.002)
    assert calls["a"] > 2 and calls["a"] == calls["b"], calls


def test_side_by_side_rejects_zero_repeats():
    with pytest.raises(ToolError, match="--repeats"):
        timing.side_by_side(lambda: None, lambda: None, repeats=0)


def test_row_ratio_and_target():
    slow = timing.Row("x", ours=2.0, baseline=1.0, target="<= 1.15x", limit=1.15)
    assert slow.ratio == 2.0 and slow.met == "NO"
    fast = timing.Row("y", ours=1.0, baseline=6.0, target=">= 5x faster", speedup=True, limit=5.0)
    assert fast.ratio == 6.0 and fast.met == "yes"
    table = timing.format_table([slow, fast, timing.Row("z", 1.0, 1.0, note="a note")])
    assert "| x | 2.0000 | 1.0000 | 2.00x | <= 1.15x | NO |" in table
    assert "6.00x faster" in table and "- z: a note" in table
    assert "2.00x slower" in timing.format_table([timing.Row("w", ours=2.0, baseline=1.0, speedup=True)])


def test_attention_rows(ref):
    rows = workloads.bench_attention(ref, [8], repeats=1, batch=1, d_model=8, num_heads=2, min_time=0.0)
    assert [r.name.split(" L=")[0] for r in rows] == ["sdpa forward", "sdpa forward+backward",
                                                       "MHSA forward", "MHSA forward+backward"]
    assert all(r.ours > 0 and r.baseline > 0 for r in rows)


def test_train_row_compares_models_of_the_same_size(ref):
    row = workloads.bench_train(ref, repeats=1, vocab_size=7, d_model=8, num_heads=2, num_layers=1, d_ff=16,
                                seq_len=6, batch=2)
    assert row.note == "" and row.limit == 1.0 and row.target == "<= 1.0x" and row.ours > 0 and row.baseline > 0


def test_torch_native_model_has_minigpts_parameter_count_at_the_benchmark_size(ref):
    sizes = dict(vocab_size=65, d_model=128, num_heads=4, num_layers=4, d_ff=512, max_len=128, dropout=0.1)
    count = torch_gpt.count_parameters
    assert count(torch_gpt.TorchGPT(**sizes)) == count(ref.MiniGPT(**sizes))


def test_torch_native_model_computes_minigpt(ref):
    """The baseline is the same function: with MiniGPT's weights copied in, the same logits."""
    sizes = dict(vocab_size=11, d_model=16, num_heads=4, num_layers=2, d_ff=32, max_len=9, dropout=0.0)
    torch.manual_seed(0)
    ours, theirs = ref.MiniGPT(**sizes).eval(), torch_gpt.TorchGPT(**sizes).eval()
    with torch.no_grad():
        theirs.token_embed.weight.copy_(ours.token_embed.weight)
        theirs.final_norm.load_state_dict(ours.final_norm.state_dict())
        for a, b in zip(ours.blocks, theirs.blocks, strict=True):
            att = a.self_attn
            b.self_attn.in_proj_weight.copy_(torch.cat([att.W_Q.weight, att.W_K.weight, att.W_V.weight]))
            b.self_attn.out_proj.weight.copy_(att.W_O.weight)
            b.linear1.load_state_dict(a.ffn.linear1.state_dict())
            b.linear2.load_state_dict(a.ffn.linear2.state_dict())
            b.norm1.load_state_dict(a.norm1.state_dict())
            b.norm2.load_state_dict(a.norm2.state_dict())
        tokens = torch.randint(0, 11, (2, 9), generator=torch.Generator().manual_seed(1))
        torch.testing.assert_close(theirs(tokens), ours(tokens)[0], rtol=1e-4, atol=1e-5)


def test_generate_row_uses_a_window_that_does_not_slide(ref):
    row = workloads.bench_generate(ref, repeats=1, new_tokens=4, seed_len=2, vocab_size=5, d_model=8,
                                   num_heads=2, num_layers=1, d_ff=8, threads=1)
    assert "max_len=6, window never slides, 1 thread(s)" in row.name and row.speedup and row.limit == 8.0
    assert row.note == ""  # cached and uncached chose the same tokens
    sliding = workloads.bench_generate(ref, repeats=1, new_tokens=4, seed_len=2, max_len=3, vocab_size=5,
                                       d_model=8, num_heads=2, num_layers=1, d_ff=8)
    assert "window slides" in sliding.name and sliding.limit is None


def test_generate_rows_set_their_thread_count_and_restore_it(ref, monkeypatch):
    seen = []
    real_side_by_side = workloads.side_by_side

    def recording(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real_side_by_side(*args, **kwargs)

    monkeypatch.setattr(workloads, "side_by_side", recording)
    before = torch.get_num_threads()
    sizes = dict(repeats=1, new_tokens=2, seed_len=2, vocab_size=5, d_model=8, num_heads=2, num_layers=1, d_ff=8)
    rows = [workloads.bench_generate(ref, threads=n, **sizes) for n in (2, 1, 3)]
    assert seen == [2, 1, 3] and torch.get_num_threads() == before
    assert [r.limit for r in rows] == [5.0, 8.0, None]  # no target for a thread count without a goal
    assert [r.target for r in rows] == [">= 5x faster", ">= 8x faster", ""]


def test_run_measures_generation_at_one_and_two_threads(ref, monkeypatch):
    calls = []
    monkeypatch.setattr(bench, "bench_generate", lambda impl, repeats, **kw: calls.append(kw) or
                        timing.Row("g", 1.0, 1.0))
    bench.run(["generate"], ref, repeats=1, quick=True)
    assert calls == [{"threads": 1}, {"threads": 2}]
    calls.clear()
    bench.run(["generate"], ref, repeats=1, quick=False)
    assert calls == [{"threads": 1}, {"threads": 2}, {"max_len": 128}]


def test_suite_command_runs_the_specification_with_the_grading_profile():
    cmd = graded_run.suite_command("my_impl.py")
    assert cmd[1:5] == ["-m", "pytest", "spec_tests", "properties"]
    assert "--impl" in cmd and cmd[cmd.index("--impl") + 1] == "my_impl.py"
    assert "-p" in cmd and "no:cacheprovider" in cmd
    assert graded_run.grading_profile_exists() and "--hypothesis-profile=grading" in cmd


def test_suite_row_times_a_real_pytest_run(tmp_path, ref):
    # A stand-in project: the harness's plugins and one test in each folder.
    (tmp_path / "conftest.py").write_text(
        'pytest_plugins = ["transformer_spec.pytest_plugin.plugin", "transformer_spec.pytest_plugin.hypothesis_profiles"]\n')
    for folder in ("spec_tests", "properties"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / f"test_{folder}.py").write_text("def test_ok(impl):\n    assert impl.has('MiniGPT')\n")
    row = graded_run.bench_suite("reference", repeats=1, cwd=tmp_path)
    assert row.ours > 0 and row.baseline > 0 and row.limit == 5.0


def test_suite_row_reports_a_run_that_could_not_start(tmp_path):
    with pytest.raises(ToolError, match="exited with"):
        graded_run.bench_suite("reference", repeats=1, cwd=tmp_path)  # no conftest: --impl is unknown


def test_help_and_bad_arguments(capsys):
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--help"])
    assert exit_.value.code == 0 and "side by side" in capsys.readouterr().out
    for argv, says in ((["--only", "nope"], "--only"), (["--repeats", "0"], "--repeats"),
                       (["--lengths", "a,b"], "--lengths"), (["--threads", "0"], "--threads")):
        with pytest.raises(SystemExit) as exit_:
            bench.main(argv)
        assert exit_.value.code == 2
        assert says in capsys.readouterr().err


def test_main_prints_a_table(capsys):
    assert bench.main(["--only", "attention", "--lengths", "4", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "| measurement |" in out and "sdpa forward L=4" in out


# ----------------------------------------------------------------------------- the modern track


def test_torch_native_llama_computes_minillama(ref):
    """The modern baseline is the same function: MiniLlama's state_dict loads into it (the contract's
    parameter names) and gives the same logits, with grouped-query attention."""
    from tools.benchmarks import torch_llama

    sizes = dict(vocab_size=11, d_model=16, num_layers=2, num_heads=4, num_kv_heads=2, max_len=9)
    torch.manual_seed(0)
    ours, theirs = ref.MiniLlama(**sizes).eval(), torch_llama.TorchLlama(**sizes).eval()
    theirs.load_state_dict(ours.state_dict(), strict=True)
    assert torch_gpt.count_parameters(theirs) == torch_gpt.count_parameters(ours)
    tokens = torch.randint(0, 11, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(theirs(tokens), ours(tokens)[0], rtol=1e-4, atol=1e-5)


def test_modern_rows_train_and_generate_minillama(ref):
    row = workloads.bench_train_llama(ref, repeats=1, vocab_size=7, d_model=8, num_heads=2, num_kv_heads=1,
                                      num_layers=1, seq_len=6, batch=2)
    assert row.note == "" and row.limit == 1.1 and "MiniLlama training step" in row.name
    gen = workloads.bench_generate(ref, repeats=1, new_tokens=4, seed_len=2, vocab_size=5, threads=1,
                                   model_name="MiniLlama", d_model=8, num_heads=2, num_layers=1)
    assert gen.name.startswith("MiniLlama generate 4 tokens") and gen.limit == 5.0 and gen.note == ""


def test_track_modern_chooses_the_modern_sections(capsys, monkeypatch):
    calls = []
    monkeypatch.setattr(bench, "run_modern", lambda sections, impl, repeats, say: calls.append(sections) or [])
    assert bench.main(["--track", "modern", "--repeats", "1"]) == 0
    assert calls == [["suite", "train", "generate"]] and "(modern track)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--track", "modern", "--only", "attention"])
    assert exit_.value.code == 2 and "--track modern" in capsys.readouterr().err
