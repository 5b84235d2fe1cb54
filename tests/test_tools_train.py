"""Tests of ``python -m tools.train`` (and the checkpoint/plot helpers it uses).

Expected figure sizes follow the rule documented in ``tools/figures.py`` and ``docs/tools.md``:
``loss.png`` 900x500; heatmap figures 360 px per panel, at most 4 panels a row, plus 60 px title.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.tools_helpers import TINY, assert_png
from tools import figures, train
from tools.checkpoint import FORMAT, build_model, load_checkpoint, save_checkpoint
from tools.cli import ToolError
from tools.tasks import ReverseTask, TextTask
from transformer_spec.submission import loader

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One tiny training run shared by the tests that only read its outputs."""
    out = tmp_path_factory.mktemp("run")
    assert train.main([*TINY, "--steps", "4", "--out", str(out)]) == 0
    return out


def _one_line_error(capsys, excinfo, *needles):
    assert excinfo.value.code == 2, f"expected exit status 2, got {excinfo.value.code}"
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, f"the error should be one line, got:\n{err}"
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, f"the error should mention {needle!r}, got: {err}"
    return err


# ------------------------------------------------------------------------------- outputs


def test_run_writes_all_outputs(tiny_run):
    for name in ("loss.png", "attention_layers.png", "attention_heads.png", "model.pt", "samples.txt", "metrics.json"):
        assert (tiny_run / name).is_file(), f"{name} missing from {sorted(p.name for p in tiny_run.iterdir())}"
    metrics = json.loads((tiny_run / "metrics.json").read_text())
    assert metrics["steps"] == 4 and 0.0 <= metrics["token_acc"] <= 1.0
    samples = (tiny_run / "samples.txt").read_text()
    answers = [line for line in samples.splitlines() if line.endswith(("] ok", "] WRONG"))]
    assert len(answers) == 10, samples
    assert not [p for p in tiny_run.iterdir() if p.name.endswith(".tmp")], "temporary files left behind"


def test_plots_have_documented_pixel_sizes(tiny_run):
    assert_png(tiny_run / "loss.png", (900, 500))
    assert_png(tiny_run / "attention_layers.png", (720, 420))  # 2 layers: 2 panels of 360
    assert_png(tiny_run / "attention_heads.png", (720, 420))  # 2 heads in the last layer


def test_heatmap_grid_wraps_after_four_panels(tmp_path):
    maps = torch.softmax(torch.randn(6, 5, 5), dim=-1)
    figures.plot_attention_heads(maps, list("abcde"), tmp_path / "h.png", layer=3)
    assert_png(tmp_path / "h.png", (4 * 360, 2 * 360 + 60))


def test_heatmaps_have_a_colorbar_readable_labels_and_no_band_under_the_title():
    """What users could not read: the weights (no colorbar), 6-point token labels with --text's 24
    tokens, and ~50 px of nothing between the figure's title and the panels'."""
    tokens = list("to be or not to be, that")  # 24 characters, as tools.train --text draws
    maps = [torch.softmax(torch.randn(24, 24, generator=torch.Generator().manual_seed(i)), -1).numpy() for i in range(4)]
    fig = figures.heatmap_figure(maps, tokens, [f"head {i}" for i in range(4)], "title")
    try:
        bars = [ax for ax in fig.axes if ax.get_ylabel() == "attention weight"]
        assert len(bars) == 1, "one shared colorbar labelled 'attention weight'"
        panels = [ax for ax in fig.axes if ax not in bars]
        sizes = {t.get_fontsize() for ax in panels for t in ax.get_xticklabels() + ax.get_yticklabels()}
        assert min(sizes) >= 8, f"token labels of {sorted(sizes)} pt for 24 tokens"
        renderer = fig.canvas.get_renderer()
        title = [t for t in fig.findobj(figures.matplotlib.text.Text) if t.get_text() == "title"]
        title_bottom = title[0].get_window_extent(renderer).y0
        panel_top = max(ax.title.get_window_extent(renderer).y1 for ax in panels)
        assert title_bottom - panel_top < 30, f"{title_bottom - panel_top:.0f} px between the title and the panels"
    finally:
        figures.plt.close(fig)


def test_checkpoint_rebuilds_model_with_same_outputs(tiny_run):
    ckpt = load_checkpoint(tiny_run / "model.pt")
    assert ckpt["format"] == FORMAT and ckpt["step"] == 4
    assert ckpt["task"] == {"kind": "reverse", "length": 3, "symbols": "0123456789"}
    assert ckpt["model_config"]["max_len"] == 7 and ckpt["model_config"]["vocab_size"] == 11
    model = build_model(loader.load(None), ckpt).eval()
    x = torch.tensor([[1, 2, 3, 10, 3, 2]])
    again = build_model(loader.load(None), ckpt).eval()
    torch.testing.assert_close(model(x)[0], again(x)[0])
    assert len(ckpt["history"]["train"]) == 4 and [r[0] for r in ckpt["history"]["val"]] == [2, 4]


def test_reverse_task_examples_are_reversed():
    task = ReverseTask(4)
    seqs = task.examples(5, torch.Generator().manual_seed(0))
    assert seqs.shape == (5, 9)
    assert (seqs[:, 4] == task.sep_id).all()
    assert torch.equal(seqs[:, 5:], seqs[:, :4].flip(1))
    batch = task.train_batch(3, torch.Generator().manual_seed(1))
    # the loss counts exactly the 4 answer digits, the targets after the separator
    assert batch.weight.sum(1).tolist() == [4, 4, 4]
    assert torch.equal(batch.y[batch.weight].view(3, 4), batch.x[:, :4].flip(1))


def test_learning_rate_warms_up_then_decays():
    lrs = [train.learning_rate(s, 200, 1.0, warmup=50) for s in range(200)]
    assert lrs[0] == pytest.approx(1 / 50) and lrs[49] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lrs[49:], lrs[50:], strict=False)) and lrs[-1] >= 0.1


# ------------------------------------------------------------------------- resume, Ctrl-C


def test_ctrl_c_saves_checkpoint_and_resume_continues(tmp_path, monkeypatch, capsys):
    real = train.batch_generator

    def interrupt_at_step_3(seed, rank, step, stream=0):
        if step == 3:
            raise KeyboardInterrupt
        return real(seed, rank, step, stream)

    monkeypatch.setattr(train, "batch_generator", interrupt_at_step_3)
    with pytest.raises(SystemExit) as excinfo:
        train.main([*TINY, "--steps", "6", "--out", str(tmp_path)])
    assert excinfo.value.code == 130
    assert "--resume" in capsys.readouterr().err
    ckpt = load_checkpoint(tmp_path / "model.pt")
    assert ckpt["step"] == 3 and len(ckpt["history"]["train"]) == 3 and "optimizer" in ckpt
    assert not (tmp_path / "loss.png").exists()  # the run did not finish; only the checkpoint

    monkeypatch.setattr(train, "batch_generator", real)
    assert train.main(["--resume", str(tmp_path / "model.pt"), "--no-progress", "--threads", "1"]) == 0
    ckpt = load_checkpoint(tmp_path / "model.pt")
    assert ckpt["step"] == 6 and [r[0] for r in ckpt["history"]["train"]] == [1, 2, 3, 4, 5, 6]
    assert (tmp_path / "loss.png").is_file()

    with pytest.raises(SystemExit) as excinfo:  # finished: asks for a larger --steps
        train.main(["--resume", str(tmp_path / "model.pt"), "--no-progress"])
    _one_line_error(capsys, excinfo, "--steps", "step 6")


def test_resumed_run_equals_uninterrupted_run(tmp_path, monkeypatch):
    """Batches depend only on (seed, rank, step) and the optimizer state is saved: same weights."""
    train.main([*TINY, "--steps", "4", "--out", str(tmp_path / "a")])
    train.main([*TINY, "--steps", "2", "--out", str(tmp_path / "b")])
    train.main(["--resume", str(tmp_path / "b" / "model.pt"), "--steps", "4", "--no-progress", "--threads", "1"])
    a = load_checkpoint(tmp_path / "a" / "model.pt")["model"]
    b = load_checkpoint(tmp_path / "b" / "model.pt")["model"]
    for name in a:
        torch.testing.assert_close(b[name], a[name], msg=lambda m, n=name: f"{n}: {m}")


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "model.pt"
    save_checkpoint({"model_config": {}, "task": {}, "model": {}, "step": 1}, path)
    before = path.read_bytes()

    def crash(obj, fh, *a, **k):
        fh.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(OSError):
        save_checkpoint({"model_config": {}, "task": {}, "model": {}, "step": 2}, path)
    assert path.read_bytes() == before, "a failed write must leave the previous checkpoint intact"
    assert [p.name for p in tmp_path.iterdir()] == ["model.pt"], "temporary file left behind"


# ------------------------------------------------------------------------------- --text


def test_text_training(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 20, encoding="utf-8")
    out = tmp_path / "out"
    assert train.main([*TINY, "--text", str(text), "--block-size", "8", "--steps", "2", "--out", str(out)]) == 0
    ckpt = load_checkpoint(out / "model.pt")
    assert ckpt["task"]["kind"] == "text" and ckpt["task"]["chars"] == "".join(sorted(set(text.read_text())))
    assert ckpt["model_config"]["max_len"] == 9
    assert_png(out / "attention_layers.png", (720, 420))
    assert "samples at temperature" in (out / "samples.txt").read_text()


# ------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize("content, needle", [
    (None, "no such file"),
    (b"", "empty"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
    (b"caf\xe9 au lait " * 50, "not UTF-8"),
    (b"too short", "only 9 characters"),
])
def test_bad_text_file_is_one_line_error(tmp_path, capsys, content, needle):
    path = tmp_path / "data.txt"
    if content is not None:
        path.write_bytes(content)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as excinfo:
        train.main([*TINY, "--text", str(path), "--out", str(out)])
    _one_line_error(capsys, excinfo, "--text", needle)


def test_text_too_short_for_block_size_names_the_fix(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("x" * 300)
    with pytest.raises(ToolError, match="--block-size"):
        TextTask.from_file(str(path), block_size=64)
    assert TextTask.from_file(str(path), block_size=8).vocab.chars == "x"


def test_unwritable_out_dir_fails_before_training(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(SystemExit) as excinfo:
        train.main([*TINY, "--steps", "2", "--out", str(blocker / "sub")])
    _one_line_error(capsys, excinfo, "--out", "is a file, not a folder")


def test_a_trained_model_is_not_overwritten_without_force(tmp_path, capsys):
    out = tmp_path / "run"
    assert train.main([*TINY, "--steps", "2", "--out", str(out), "--no-progress"]) == 0
    before = (out / "model.pt").read_bytes()
    with pytest.raises(SystemExit) as excinfo:
        train.main([*TINY, "--steps", "3", "--out", str(out), "--no-progress"])
    _one_line_error(capsys, excinfo, "--out", "--resume", "--force")
    assert (out / "model.pt").read_bytes() == before, "the refused run changed model.pt"
    assert train.main([*TINY, "--steps", "3", "--out", str(out), "--no-progress", "--force"]) == 0
    assert load_checkpoint(out / "model.pt")["step"] == 3


def test_outputs_have_the_mode_of_the_umask(tiny_run):
    from transformer_spec.files import current_umask

    want = 0o666 & ~current_umask()
    for name in ("model.pt", "metrics.json", "loss.png"):
        mode = (tiny_run / name).stat().st_mode & 0o777
        assert mode == want, f"{name} has mode {mode:o}, expected {want:o} (0666 less the umask)"


def test_impl_without_minigpt(tmp_path, capsys):
    partial = tmp_path / "partial.py"
    partial.write_text("def causal_mask(seq_len, device=None):\n    return None\n")
    with pytest.raises(SystemExit) as excinfo:
        train.main([*TINY, "--steps", "2", "--impl", str(partial), "--out", str(tmp_path / "o")])
    _one_line_error(capsys, excinfo, "--impl", "MiniGPT")
    assert not (tmp_path / "o" / "model.pt").exists()


def test_corrupt_checkpoint_on_resume(tiny_run, tmp_path, capsys):
    broken = tmp_path / "model.pt"
    data = (tiny_run / "model.pt").read_bytes()
    broken.write_bytes(data[: len(data) // 2])
    with pytest.raises(SystemExit) as excinfo:
        train.main(["--resume", str(broken), "--steps", "8"])
    _one_line_error(capsys, excinfo, "--resume", "not a checkpoint")


def test_mismatched_checkpoint(tiny_run, tmp_path):
    ckpt = load_checkpoint(tiny_run / "model.pt")
    ckpt["model_config"] = {**ckpt["model_config"], "d_model": 32, "d_ff": 64}
    path = tmp_path / "model.pt"
    save_checkpoint({k: v for k, v in ckpt.items() if k not in ("format", "version")}, path)
    with pytest.raises(ToolError, match="do not fit the MiniGPT"):
        build_model(loader.load(None), load_checkpoint(path))
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(ToolError, match="not a checkpoint of python -m tools.train"):
        load_checkpoint(tmp_path / "other.pt")


def test_bad_numbers_and_device(capsys, tmp_path):
    for argv, needle in ((["--steps", "0"], "--steps"), (["--lr", "-1"], "--lr"),
                         (["--device", "tpu"], "--device"), (["--num-heads", "3"], "num_heads")):
        with pytest.raises(SystemExit) as excinfo:
            train.main([*TINY, *argv, "--out", str(tmp_path)])
        _one_line_error(capsys, excinfo, needle)


# --------------------------------------------------------------------------- many processes


@pytest.mark.slow
def test_torchrun_two_processes(tmp_path):
    """Two processes with gloo: the run completes, rank 0 alone writes, the checkpoint loads."""
    out = tmp_path / "ddp"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
             "-m", "tools.train", *TINY, "--steps", "3", "--out", str(out)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=90,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"torchrun did not finish in 90 s:\n{exc.stdout}\n{exc.stderr}")
    assert proc.returncode == 0, f"torchrun failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    assert proc.stdout.count("done in") == 1, f"only rank 0 should report:\n{proc.stdout}"
    ckpt = load_checkpoint(out / "model.pt")
    assert ckpt["step"] == 3 and ckpt["world_size"] == 2
    build_model(loader.load(None), ckpt)
    assert (out / "attention_heads.png").is_file()


# ------------------------------------------------------------------------- the modern track


def test_minillama_trains_checkpoints_and_samples(tmp_path):
    """``--model minillama``: the modern track's MiniLlama on the same task; its checkpoint names
    the class, rebuilds the same model and feeds ``tools.sample``."""
    from tools import sample

    out = tmp_path / "llama"
    assert train.main([*TINY, "--model", "minillama", "--num-kv-heads", "1", "--steps", "4", "--out", str(out)]) == 0
    ckpt = load_checkpoint(out / "model.pt")
    assert ckpt["model_class"] == "MiniLlama"
    assert ckpt["model_config"]["num_kv_heads"] == 1 and "dropout" not in ckpt["model_config"]
    model = build_model(loader.load(None), ckpt).eval()
    assert type(model).__name__ == "MiniLlama" and model.layers[0].attn.k_proj.weight.shape == (8, 16)
    x = torch.tensor([[1, 2, 3, 10, 3, 2]])
    torch.testing.assert_close(model(x)[0], build_model(loader.load(None), ckpt).eval()(x)[0])
    assert json.loads((out / "metrics.json").read_text())["model"] == "MiniLlama"
    assert (out / "attention_heads.png").is_file()
    assert len(sample.sample(out / "model.pt", max_new_tokens=3)) > 3


@pytest.mark.parametrize("argv, needle", [
    (["--model", "minillama", "--dropout", "0.1"], "--dropout"),
    (["--num-kv-heads", "1"], "--num-kv-heads"),
    (["--model", "minillama", "--num-kv-heads", "3"], "num_kv_heads"),
])
def test_options_that_do_not_fit_the_model_are_one_line_errors(capsys, tmp_path, argv, needle):
    with pytest.raises(SystemExit) as excinfo:
        train.main([*TINY, *argv, "--out", str(tmp_path)])
    _one_line_error(capsys, excinfo, needle)
