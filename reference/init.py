"""The initial weights of the language models (MiniGPT, MiniLlama, Seq2SeqTransformer).

Small normal weights, std 0.02, and zero biases, as GPT-2 and nanoGPT (``_init_weights`` in
nanoGPT's ``model.py``). The contract leaves initial weights free: tests set the weights they
need by name.
"""

from __future__ import annotations

import torch.nn as nn


def init_weights(module: nn.Module) -> None:
    """Small normal initial weights (std 0.02, as GPT-2 and nanoGPT) and zero biases."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
