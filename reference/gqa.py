"""Grouped-query attention (Ainslie et al. 2023, GQA; Shazeer 2019, multi-query attention) with
rotary positions (Su et al. 2021), as in Llama.

    q = x W_q -> num_heads heads,   k = x W_k, v = x W_v -> num_kv_heads heads each
    q, k <- RoPE(q, positions), RoPE(k, positions)          (never v)
    head_h = Attention(q_h, k_g, v_g),   g = h // (num_heads // num_kv_heads)
    out = Concat(head_1, ..., head_H) W_o

Each group of ``num_heads // num_kv_heads`` consecutive query heads shares one key/value head
(torch's ``scaled_dot_product_attention(..., enable_gqa=True)`` pairs them the same way).
``num_kv_heads = num_heads`` is multi-head attention, ``num_kv_heads = 1`` multi-query attention.
All projections are bias-free.
"""

from __future__ import annotations

import torch.nn as nn

from ._validation import check_features, check_heads, check_mask, check_positive_int
from .attention import scaled_dot_product_attention


class GroupedQueryAttention(nn.Module):
    """``forward(x (B, L, d_model), mask=None, positions=None) -> (out (B, L, d_model),
    weights (B, num_heads, L, L))``; ``mask``: bool, ``True`` = blocked."""

    def __init__(self, d_model, num_heads, num_kv_heads=None, rope=None):
        super().__init__()
        self.head_dim = check_heads(d_model, num_heads)
        if num_kv_heads is None:
            num_kv_heads = num_heads
        check_positive_int("num_kv_heads", num_kv_heads)
        if num_heads % num_kv_heads:
            raise ValueError(f"num_kv_heads={num_kv_heads} does not divide num_heads={num_heads}: each "
                             f"key/value head serves num_heads // num_kv_heads query heads")
        if rope is not None and getattr(rope, "head_dim", None) != self.head_dim:
            raise ValueError(f"rope must rotate head_dim = d_model // num_heads = {self.head_dim} features, "
                             f"got a rope with head_dim={getattr(rope, 'head_dim', None)}")
        self.d_model, self.num_heads, self.num_kv_heads = d_model, num_heads, num_kv_heads
        kv_dim = num_kv_heads * self.head_dim
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, kv_dim, bias=False)
        self.v_proj = nn.Linear(d_model, kv_dim, bias=False)
        self.output_proj = nn.Linear(d_model, d_model, bias=False)
        self.rope = rope

    def forward(self, x, mask=None, positions=None, *, kv_cache=None):
        """``kv_cache`` (generation only, not in the contract): a :class:`reference.kv_cache.KVCache`
        holding the rotated keys and values of the earlier positions; ``x`` holds the new ones."""
        check_features("x", x, self.d_model)
        B, L, _ = x.shape
        ### BEGIN SOLUTION
        H, KV, d = self.num_heads, self.num_kv_heads, self.head_dim
        q = self.q_proj(x).view(B, L, H, d).transpose(1, 2)  # (B, H, L, d)
        k = self.k_proj(x).view(B, L, KV, d).transpose(1, 2)  # (B, KV, L, d)
        v = self.v_proj(x).view(B, L, KV, d).transpose(1, 2)  # (B, KV, L, d)
        if self.rope is not None:
            # (B, L) positions -> (B, 1, L): one set of positions for every head
            pos = positions.unsqueeze(-2) if positions is not None and positions.dim() >= 2 else positions
            q, k = self.rope(q, pos), self.rope(k, pos)  # v is never rotated
        if kv_cache is not None:
            k, v = kv_cache.extend(k, v)  # (B, KV, T, d): the cached positions, then these
        if mask is not None:
            check_mask(mask, (B, H, L, k.size(-2)))
        group = H // KV
        k = k.repeat_interleave(group, dim=1)  # (B, H, T, d): query head h reads kv head h // group
        v = v.repeat_interleave(group, dim=1)
        out, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, L, d), (B, H, L, T)
        out = out.transpose(1, 2).reshape(B, L, self.d_model)  # heads concatenated in order
        return self.output_proj(out), weights
        ### END SOLUTION
