"""Draws that several laws make the same way, through hypothesis's ``st.data()`` (with labels).

Each draws exactly the strategies of :mod:`properties.strategies` that the laws drew inline, in
the same order and with the same labels, so counterexamples read the same.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from .strategies import Config, bool_tensors, sequences, tensors


def x_and_memory(data, config: Config) -> tuple[torch.Tensor, torch.Tensor]:
    """A decoder input ``x (B, Lt, d_model)`` and a ``memory (B, Ls, d_model)`` of the same batch."""
    x = data.draw(sequences(config), label="x")
    memory = data.draw(sequences(config, batch=x.shape[0]), label="memory")
    return x, memory


def padding_mask(data, t: torch.Tensor, label: str, *, optional: bool = False) -> torch.Tensor | None:
    """A bool mask ``(B, 1, 1, L)`` over the positions of ``t (B, L, d)``; ``optional``: or ``None``."""
    mask = bool_tensors((t.shape[0], 1, 1, t.shape[1]))
    return data.draw(st.none() | mask if optional else mask, label=label)


def replace_padded(data, t: torch.Tensor, mask: torch.Tensor, label: str) -> torch.Tensor:
    """``t (B, L, d)`` with the positions a padding mask ``(B, 1, 1, L)`` blocks replaced by drawn values."""
    return torch.where(mask[:, 0, 0, :, None], data.draw(tensors(tuple(t.shape), t.dtype), label=label), t)
