"""The modern track's training-step baseline: MiniLlama rebuilt from torch's own pieces.

``nn.RMSNorm`` for the norms, ``F.scaled_dot_product_attention(..., is_causal=True, enable_gqa=True)``
for grouped-query attention (torch's fused kernel, which returns no weights), ``F.silu`` for
SwiGLU, and the rotation of adjacent pairs from one precomputed cos/sin table (torch has no
rotary layer). The parameters are the contract's, so the parameter count is exactly MiniLlama's.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``(a, b) -> (a cos - b sin, a sin + b cos)`` on the pairs ``(x[..., 2i], x[..., 2i+1])``."""
    a, b = x[..., 0::2], x[..., 1::2]  # (B, H, L, d/2)
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)


class TorchGQA(nn.Module):
    """The contract's ``GroupedQueryAttention`` parameters around torch's fused attention."""

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.output_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, cos, sin):
        B, L, D = x.shape
        q = self.q_proj(x).view(B, L, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, L, d)
        k = self.k_proj(x).view(B, L, self.num_kv_heads, self.head_dim).transpose(1, 2)  # (B, KV, L, d)
        v = self.v_proj(x).view(B, L, self.num_kv_heads, self.head_dim).transpose(1, 2)
        q, k = rotate_pairs(q, cos, sin), rotate_pairs(k, cos, sin)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)  # (B, H, L, d)
        return self.output_proj(out.transpose(1, 2).reshape(B, L, D))


class TorchSwiGLU(nn.Module):
    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)
        self.w3 = nn.Linear(d_model, d_ff, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TorchLlamaBlock(nn.Module):
    """Pre-norm: ``h = x + attn(ln1(x))``, ``h + ffn(ln2(h))``; the contract's parameter names."""

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, d_ff: int, eps: float):
        super().__init__()
        self.ln1, self.ln2 = nn.RMSNorm(d_model, eps=eps), nn.RMSNorm(d_model, eps=eps)
        self.attn = TorchGQA(d_model, num_heads, num_kv_heads)
        self.ffn = TorchSwiGLU(d_model, d_ff)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.ln1(x), cos, sin)
        return x + self.ffn(self.ln2(x))


class TorchLlama(nn.Module):
    """MiniLlama from ``nn.RMSNorm`` and torch's fused attention: the same parameter names (a
    MiniLlama's ``state_dict`` loads into it) and the same logits up to rounding; no attention
    weights."""

    def __init__(self, vocab_size=65, d_model=128, num_layers=4, num_heads=4, num_kv_heads=None, d_ff=None,
                 max_len=128, theta=10000.0, eps=1e-5):
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        d_ff = 64 * math.ceil(8 * d_model / 3 / 64) if d_ff is None else d_ff
        self.token_embeddings = nn.Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList([TorchLlamaBlock(d_model, num_heads, num_kv_heads, d_ff, eps)
                                     for _ in range(num_layers)])
        self.ln_final = nn.RMSNorm(d_model, eps=eps)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        head_dim = d_model // num_heads
        angles = torch.arange(max_len)[:, None] * theta ** (-torch.arange(0, head_dim, 2) / head_dim)
        self.register_buffer("cos", angles.cos(), persistent=False)  # (max_len, head_dim / 2)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, tokens):
        L = tokens.size(1)
        cos, sin = self.cos[:L], self.sin[:L]
        x = self.token_embeddings(tokens)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.ln_final(x))
