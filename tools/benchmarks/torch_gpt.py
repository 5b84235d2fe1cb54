"""The training step's baseline: MiniGPT rebuilt from torch's own ``nn.TransformerEncoderLayer``."""

from __future__ import annotations

import math

import torch
import torch.nn as nn


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """``PE[pos, 2i] = sin(pos / 10000^(2i/D))``, ``PE[pos, 2i+1] = cos(...)``, computed here again."""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    freq = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq[: d_model // 2])
    return pe.float()


class TorchGPT(nn.Module):
    """MiniGPT rebuilt from ``nn.TransformerEncoderLayer``: Pre-LN, GELU, causal, tied head.

    The attention projections have no bias, as in the contract (``W_Q`` ... ``W_O`` are
    ``bias=False``), so the parameter count is exactly MiniGPT's.
    """

    def __init__(self, vocab_size=65, d_model=128, num_heads=4, num_layers=4, d_ff=512, max_len=128,
                 dropout=0.1):
        super().__init__()
        self.d_model = d_model
        self.token_embed = nn.Embedding(vocab_size, d_model)
        self.register_buffer("pe", sinusoidal_table(max_len, d_model))
        layers = []
        for _ in range(num_layers):
            layer = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout, activation="gelu",
                                               batch_first=True, norm_first=True)
            layer.self_attn = nn.MultiheadAttention(d_model, num_heads, dropout=dropout, bias=False,
                                                    batch_first=True)
            layers.append(layer)
        self.blocks = nn.ModuleList(layers)
        self.final_norm = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.token_embed.weight
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(max_len).isinf())

    def forward(self, tokens):
        L = tokens.size(1)
        x = self.token_embed(tokens) * math.sqrt(self.d_model) + self.pe[:L]
        mask = self.causal[:L, :L]
        for block in self.blocks:
            x = block(x, src_mask=mask, is_causal=True)
        return self.lm_head(self.final_norm(x))


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # tied weights are counted once
