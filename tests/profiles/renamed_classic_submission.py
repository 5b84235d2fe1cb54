"""A submission to the course of docs/examples/course_profile.py: the reference under that course's
names (its attention's and its causal mask's masks mean *keep*; ``MHA`` and ``GPT`` rename their
arguments), so the profile, mapping them back, must give it full marks."""

import torch

import reference
from reference import *  # noqa: F401,F403 - the contract's names the course kept

del MultiHeadAttention, MiniGPT, scaled_dot_product_attention, causal_mask  # noqa: F821 - the course renamed them


def attention(query, key, value, attn_mask=None, scale=None):
    """softmax(q kᵀ · scale) v, where ``attn_mask`` is True where a query may attend."""
    if isinstance(attn_mask, torch.Tensor) and attn_mask.dtype == torch.bool:
        attn_mask = ~attn_mask  # keep -> the reference's blocked (anything else meets the reference's own check)
    return reference.scaled_dot_product_attention(query, key, value, attn_mask, scale)


def subsequent_mask(size, device=None):
    """True where position i may attend to j (j <= i)."""
    return ~reference.causal_mask(size, device)


class MHA(reference.MultiHeadAttention):
    def __init__(self, embed_dim=512, n_heads=8, p_drop=0.1):
        super().__init__(embed_dim, n_heads, p_drop)

    def forward(self, query, key, value, attn_mask=None):
        return super().forward(query, key, value, attn_mask)


class GPT(reference.MiniGPT):
    def __init__(self, vocab_size, embed_dim=128, n_heads=4, n_layers=4, d_ff=512, block_size=128, p_drop=0.1):
        super().__init__(vocab_size, embed_dim, n_heads, n_layers, d_ff, block_size, p_drop)
