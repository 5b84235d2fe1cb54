"""Checkpoints of :mod:`tools.train`: written atomically, read with one-line errors.

A checkpoint is a ``torch.save`` dict holding only tensors and plain Python values (so it loads
with ``weights_only=True``)::

    format        "transformer-spec/minigpt-checkpoint"
    version       1
    model_class   the contract class it trained: "MiniGPT" (the default when absent) or "MiniLlama"
    model_config  the class's keyword arguments (vocab_size, d_model, ...)
    task          the task's dict (kind "reverse" or "text", with its vocabulary)
    model         the model's state_dict
    optimizer     the AdamW state_dict (for --resume)
    step          optimizer steps done
    total_steps   steps the run was asked for
    history       {"train": [[step, loss], ...], "val": [[step, loss, acc], ...]}
    train_args    the training options (seed, batch size, learning rate, ...)
    impl          the --impl target that trained it
"""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import torch

from transformer_spec.files import atomic_write

from .cli import ToolError, require_file

FORMAT = "transformer-spec/minigpt-checkpoint"
VERSION = 1
REQUIRED = ("model_config", "task", "model", "step")
#: the language models a checkpoint may hold: ``tools.train --model`` -> the contract's class
MODELS = {"minigpt": "MiniGPT", "minillama": "MiniLlama"}


def model_class(ckpt: dict, argument: str = "CHECKPOINT") -> str:
    """The contract class the checkpoint's weights belong to (``MiniGPT`` for checkpoints written
    before ``--model`` existed)."""
    cls = ckpt.get("model_class", "MiniGPT")
    if cls not in MODELS.values():
        raise ToolError(f"{argument}: the checkpoint holds a {cls!r}, not one of {', '.join(MODELS.values())}")
    return cls


def save_checkpoint(payload: dict, path: str | os.PathLike) -> Path:
    """Write ``payload`` to ``path`` atomically: a temporary file in the same folder, then
    ``os.replace``. A crash mid-write leaves the previous file (or none), never half a file."""
    path = Path(path)
    payload = {"format": FORMAT, "version": VERSION, **payload}
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    atomic_write(path, buffer.getvalue())
    return path


def load_checkpoint(path: str | os.PathLike, argument: str = "CHECKPOINT") -> dict:
    """Read a checkpoint written by :func:`save_checkpoint`; a :class:`ToolError` otherwise."""
    where = f"{argument} {path}"
    require_file(path, where, "give a model.pt written by python -m tools.train",
                 folder_fix="give the model.pt file inside it")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 - any failure to unpickle means the file is unusable
        # torch's own message is pages long and about its own options: say what the file is instead
        what = ("a torch file that cannot be read (truncated, or it holds more than tensors)" if zipfile.is_zipfile(path)
                else "not a whole file written by torch.save")
        raise ToolError(f"{where}: not a checkpoint ({what}); give a model.pt written by python -m tools.train") from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        raise ToolError(f"{where}: not a checkpoint of python -m tools.train (no '{FORMAT}' header)")
    if ckpt.get("version") != VERSION:
        raise ToolError(f"{where}: checkpoint version {ckpt.get('version')!r}, this tool reads version {VERSION}")
    missing = [k for k in REQUIRED if k not in ckpt]
    if missing:
        raise ToolError(f"{where}: the checkpoint lacks {', '.join(missing)}; retrain with python -m tools.train")
    return ckpt


def build_model(impl, ckpt: dict, argument: str = "CHECKPOINT"):
    """The submission's ``MiniGPT`` (or ``MiniLlama``, :func:`model_class`) rebuilt from the
    checkpoint's config, weights loaded."""
    config = ckpt["model_config"]
    cls = model_class(ckpt, argument)
    try:
        model = impl.get(cls)(**config)
    except (TypeError, ValueError) as exc:
        raise ToolError(
            f"{argument}: --impl {impl.target} cannot build {cls}({_kwargs(config)}): {exc}"
        ) from None
    try:
        model.load_state_dict(ckpt["model"])
    except RuntimeError as exc:
        detail = " ".join(str(exc).split())[:200]
        raise ToolError(
            f"{argument}: the weights do not fit the {cls} of --impl {impl.target} ({detail}); "
            f"use the --impl that trained it ({ckpt.get('impl', 'unknown')}) or retrain"
        ) from None
    return model


def _kwargs(config: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in config.items())
