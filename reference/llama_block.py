"""The Llama decoder block (Touvron et al. 2023; CS336 assignment 1): pre-norm with RMSNorm,
grouped-query attention with rotary positions, a SwiGLU feed-forward network, no dropout.

    h   = x + Attention(RMSNorm_1(x), mask, positions)
    out = h + SwiGLU(RMSNorm_2(h))
"""

from __future__ import annotations

import torch.nn as nn

from ._validation import check_heads, check_positive_float, check_positive_int
from .gqa import GroupedQueryAttention
from .rmsnorm import RMSNorm
from .rotary import RotaryPositionEmbedding
from .swiglu import SwiGLU


class LlamaBlock(nn.Module):
    """``ln1``, ``attn`` (with its ``rope``), ``ln2``, ``ffn``; ``forward(x (B, L, d_model), mask=None,
    positions=None) -> (out (B, L, d_model), weights (B, num_heads, L, L))``."""

    def __init__(self, d_model, num_heads, d_ff, num_kv_heads=None, max_len=2048, theta=10000.0, eps=1e-5):
        super().__init__()
        head_dim = check_heads(d_model, num_heads)
        check_positive_int("d_ff", d_ff)
        check_positive_int("max_len", max_len)
        check_positive_float("theta", theta)
        check_positive_float("eps", eps)
        self.ln1 = RMSNorm(d_model, eps)
        self.attn = GroupedQueryAttention(d_model, num_heads, num_kv_heads,
                                          rope=RotaryPositionEmbedding(head_dim, max_len, theta))
        self.ln2 = RMSNorm(d_model, eps)
        self.ffn = SwiGLU(d_model, d_ff)

    def forward(self, x, mask=None, positions=None, *, kv_cache=None):
        ### BEGIN SOLUTION
        attn_out, weights = self.attn(self.ln1(x), mask, positions, kv_cache=kv_cache)
        h = x + attn_out  # (B, L, D)
        return h + self.ffn(self.ln2(h)), weights
        ### END SOLUTION
