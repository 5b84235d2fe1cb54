"""What a training run of :mod:`tools.train` measures and writes: validation metrics, the attention
maps of one display sequence, ``samples.txt`` and the figures."""

from __future__ import annotations

from pathlib import Path

import torch

from . import figures
from .cli import ToolError
from .tasks import ReverseTask, masked_loss


@torch.no_grad()
def evaluate(model, task, val_batches) -> dict:
    """Held-out loss and accuracy (see the task's ``accuracy``), in eval mode."""
    was_training = model.training
    model.eval()
    try:
        losses, accs = [], []
        for batch in val_batches:
            logits, _ = model(batch.x)
            losses.append(masked_loss(logits, batch).item())
            accs.append(task.accuracy(model, batch))
        result = {"val_loss": sum(losses) / len(losses)}
        for key in accs[0]:
            result[key] = sum(a[key] for a in accs) / len(accs)
        return result
    finally:
        model.train(was_training)


@torch.no_grad()
def attention_of(model, task, seed: int):
    """(tokens as characters, attention maps: list of (H, L, L)) for the task's display sequence."""
    was_training = model.training
    model.eval()
    try:
        seq = task.display_sequence(seed)
        device = next(model.parameters()).device
        _, maps = model(seq[None].to(device), return_attn=True)
    finally:
        model.train(was_training)
    if not maps:
        raise ToolError(f"the {type(model).__name__} of --impl returned no attention maps for return_attn=True")
    return list(task.vocab.decode(seq)), [m[0].detach().cpu() for m in maps]


def write_samples(model, task, path, seed: int, metrics: dict) -> str:
    """Write ``samples.txt`` from the model's ``generate`` (``MiniGPT.generate``, ``MiniLlama.generate``)
    and return its text."""
    lines = [f"task: {task.describe()}"]
    if isinstance(task, ReverseTask):
        lines.append("greedy generation (temperature 0) on held-out prompts: prompt -> answer [expected]")
        for prompt, expected in task.prompts(seed, 10):
            out = model.generate(task.vocab.encode(prompt), max_new_tokens=task.length, temperature=0)
            answer = task.vocab.decode(out[len(prompt):])
            lines.append(f"{prompt} -> {answer}  [{expected}] {'ok' if answer == expected else 'WRONG'}")
    else:
        lines.append("samples at temperature 0.8, top-k 20, after a held-out prompt:")
        g = torch.Generator().manual_seed(seed)
        for prompt, _ in task.prompts(seed, 3):
            out = model.generate(task.vocab.encode(prompt), max_new_tokens=200, temperature=0.8,
                                 top_k=20, generator=g)
            lines.append("-" * 60)
            lines.append(task.vocab.decode(out))
    lines.append("-" * 60)
    lines.append("held-out metrics: " + ", ".join(f"{k}={v:.4g}" for k, v in metrics.items()))
    text = "\n".join(lines) + "\n"
    Path(path).write_text(text, encoding="utf-8")
    return text


def write_figures(model, task, history: dict, out: Path, seed: int, title: str) -> list[Path]:
    tokens, maps = attention_of(model, task, seed)
    paths = [out / "loss.png", out / "attention_layers.png", out / "attention_heads.png"]
    name = type(model).__name__  # MiniGPT or MiniLlama: the figures of the two look alike otherwise
    figures.plot_loss(history, paths[0], title=title)
    figures.plot_attention_layers(maps, tokens, paths[1], model=name)
    figures.plot_attention_heads(maps[-1], tokens, paths[2], layer=len(maps), model=name)
    return paths
