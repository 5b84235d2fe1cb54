"""Position encodings (seed 000 step 6, seed 001 section 5).

Self-attention does not see order: permuting the tokens only permutes its output. Adding a
position vector to each token's embedding, ``X' = X + PE``, injects the order.

    PE[pos, 2i]   = sin(pos / 10000^(2i / d_model))
    PE[pos, 2i+1] = cos(pos / 10000^(2i / d_model))

The wavelengths run from 2*pi (i = 0) to 10000 * 2*pi; ``PE(pos + k)`` is a fixed linear map
(a rotation per sin/cos pair) of ``PE(pos)``.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from ._validation import check_features, check_positive_int


def _check_length(x, max_len: int, start: int = 0) -> None:
    if start + x.size(1) > max_len:
        at = f" from position {start}" if start else ""
        raise ValueError(
            f"x has sequence length {x.size(1)}{at} but max_len={max_len}; "
            f"use shorter sequences or build the encoding with a larger max_len"
        )


class SinusoidalPositionEncoding(nn.Module):
    """Adds the fixed sinusoidal table ``pe (1, max_len, D)`` (a buffer, not trained)."""

    def __init__(self, d_model, max_len=5000):
        super().__init__()
        check_positive_int("d_model", d_model)
        check_positive_int("max_len", max_len)
        self.d_model = d_model
        self.max_len = max_len
        ### BEGIN SOLUTION
        # Computed in float64 so that positions up to max_len keep full float32 precision.
        position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (max_len, 1)
        div_term = torch.exp(
            torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model)
        )  # 1 / 10000^(2i / d_model), (ceil(D / 2),)
        pe = torch.zeros(max_len, d_model, dtype=torch.float64)
        pe[:, 0::2] = torch.sin(position * div_term)  # even features: sin
        pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])  # odd features: cos
        ### END SOLUTION
        self.register_buffer("pe", pe.to(torch.float32).unsqueeze(0))  # (1, max_len, D)

    def forward(self, x, start=0):
        """``x (B, L, D)`` -> ``x + pe[:, start:start + L]`` (``start`` > 0 only in cached generation)."""
        check_features("x", x, self.d_model)
        _check_length(x, self.max_len, start)
        ### BEGIN SOLUTION
        return x + self.pe[:, start : start + x.size(1)].to(x.dtype)
        ### END SOLUTION


class LearnedPositionEmbedding(nn.Module):
    """Adds a trained vector per position: ``x + embedding(arange(L))``."""

    def __init__(self, d_model, max_len):
        super().__init__()
        check_positive_int("d_model", d_model)
        check_positive_int("max_len", max_len)
        self.d_model = d_model
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x):
        """``x (B, L, D)`` -> ``x + embedding(arange(L))``."""
        check_features("x", x, self.d_model)
        _check_length(x, self.max_len)
        ### BEGIN SOLUTION
        positions = torch.arange(x.size(1), device=x.device)  # (L,)
        return x + self.embedding(positions).to(x.dtype)  # (B, L, D) + (L, D)
        ### END SOLUTION
