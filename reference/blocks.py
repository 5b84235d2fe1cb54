"""Encoder and decoder blocks (seed 000 step 5, seed 001 sections 2 and 6).

Pre-LN (``norm_first=True``, the default, GPT-2 style, seed 000)::

    x = x + Dropout(Sublayer(LayerNorm(x)))

Post-LN "Add & Norm" (``norm_first=False``, the original paper, seed 001 section 6)::

    x = LayerNorm(x + Dropout(Sublayer(x)))
"""

from __future__ import annotations

import torch.nn as nn

from ._validation import check_dropout, check_features, check_heads, check_positive_int
from .feedforward import FeedForward
from .multihead import MultiHeadAttention, MultiHeadSelfAttention


class TransformerEncoderBlock(nn.Module):
    """Self-attention then FFN, each wrapped in a residual connection and a LayerNorm."""

    def __init__(self, d_model=512, num_heads=8, d_ff=2048, dropout=0.1, norm_first=True):
        super().__init__()
        check_heads(d_model, num_heads)
        check_positive_int("d_ff", d_ff)
        self.d_model = d_model
        self.norm_first = bool(norm_first)
        self.self_attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(check_dropout(dropout))

    def forward(self, x, mask=None, *, kv_cache=None):
        """``(x (B, L, D), mask)`` -> ``(x (B, L, D), attn_weights (B, H, L, L))``.

        ``kv_cache`` is passed to the self-attention (generation only, Pre-LN only).
        """
        check_features("x", x, self.d_model)
        ### BEGIN SOLUTION
        if self.norm_first:
            attn_out, attn_weights = self.self_attn(self.norm1(x), mask, kv_cache=kv_cache)
            x = x + self.dropout(attn_out)
            x = x + self.dropout(self.ffn(self.norm2(x)))
        else:
            attn_out, attn_weights = self.self_attn(x, mask, kv_cache=kv_cache)
            x = self.norm1(x + self.dropout(attn_out))
            x = self.norm2(x + self.dropout(self.ffn(x)))
        return x, attn_weights
        ### END SOLUTION


class TransformerDecoderBlock(nn.Module):
    """Masked self-attention, cross-attention to the encoder's memory, then FFN.

    Cross-attention takes its queries from the decoder and its keys and values from ``memory``
    (seed 001 section 2).
    """

    def __init__(self, d_model=512, num_heads=8, d_ff=2048, dropout=0.1, norm_first=True):
        super().__init__()
        check_heads(d_model, num_heads)
        check_positive_int("d_ff", d_ff)
        self.d_model = d_model
        self.norm_first = bool(norm_first)
        self.self_attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(check_dropout(dropout))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        """``(x (B, Lt, D), memory (B, Ls, D), tgt_mask, memory_mask)`` ->
        ``(x (B, Lt, D), self_weights (B, H, Lt, Lt), cross_weights (B, H, Lt, Ls))``.
        """
        check_features("x", x, self.d_model)
        check_features("memory", memory, self.d_model)
        ### BEGIN SOLUTION
        if self.norm_first:
            attn_out, self_weights = self.self_attn(self.norm1(x), tgt_mask)
            x = x + self.dropout(attn_out)
            cross_out, cross_weights = self.cross_attn(self.norm2(x), memory, memory, memory_mask)
            x = x + self.dropout(cross_out)
            x = x + self.dropout(self.ffn(self.norm3(x)))
        else:
            attn_out, self_weights = self.self_attn(x, tgt_mask)
            x = self.norm1(x + self.dropout(attn_out))
            cross_out, cross_weights = self.cross_attn(x, memory, memory, memory_mask)
            x = self.norm2(x + self.dropout(cross_out))
            x = self.norm3(x + self.dropout(self.ffn(x)))
        return x, self_weights, cross_weights
        ### END SOLUTION
