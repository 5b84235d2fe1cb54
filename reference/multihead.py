"""Multi-head attention (seed 000 step 3, seed 001 section 4).

    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O

with ``d_k = d_v = d_model / h``; all heads' projections live in one ``d_model x d_model``
matrix each (``W_Q``, ``W_K``, ``W_V``), split into heads by ``view`` + ``transpose``.
"""

from __future__ import annotations

import torch.nn as nn

from ._validation import check_dropout, check_features, check_heads
from .attention import scaled_dot_product_attention


class MultiHeadAttention(nn.Module):
    """Attention whose queries come from ``query`` and keys/values from ``key``/``value``.

    Used as cross-attention in the decoder (queries from the decoder, keys and values from the
    encoder's memory) and, through :class:`MultiHeadSelfAttention`, as self-attention.
    Dropout acts on the attention weights in ``train()`` mode only.
    """

    def __init__(self, d_model=512, num_heads=8, dropout=0.1):
        super().__init__()
        self.d_k = check_heads(d_model, num_heads)  # per-head dimension
        self.d_model = d_model
        self.num_heads = num_heads
        self.W_Q = nn.Linear(d_model, d_model, bias=False)
        self.W_K = nn.Linear(d_model, d_model, bias=False)
        self.W_V = nn.Linear(d_model, d_model, bias=False)
        self.W_O = nn.Linear(d_model, d_model, bias=False)  # mixes the concatenated heads
        self.dropout = nn.Dropout(check_dropout(dropout))

    def forward(self, query, key, value, mask=None, *, kv_cache=None):
        """``(query (B, Lq, D), key (B, Lk, D), value (B, Lk, D), mask)`` ->
        ``(output (B, Lq, D), weights (B, H, Lq, Lk))``.

        ``mask`` is bool, ``True`` = blocked, broadcastable to ``(B, H, Lq, Lk)``.
        ``kv_cache`` (generation only, see :mod:`reference.kv_cache`): the keys and values of
        earlier positions, extended by this call's; ``Lk`` then counts the cached positions too.
        """
        check_features("query", query, self.d_model)
        check_features("key", key, self.d_model)
        check_features("value", value, self.d_model)
        if key.shape[:2] != value.shape[:2] or key.size(0) != query.size(0):
            raise ValueError(
                f"query, key and value must share the batch size, and key and value the length: "
                f"got query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
            )
        ### BEGIN SOLUTION
        B, Lq, _ = query.shape
        Lk = key.size(1)
        # (B, L, D) -> (B, L, H, d_k) -> (B, H, L, d_k): one slice of the features per head
        Q = self.W_Q(query).view(B, Lq, self.num_heads, self.d_k).transpose(1, 2)
        K = self.W_K(key).view(B, Lk, self.num_heads, self.d_k).transpose(1, 2)
        V = self.W_V(value).view(B, Lk, self.num_heads, self.d_k).transpose(1, 2)
        if kv_cache is not None:
            K, V = kv_cache.extend(K, V)  # (B, H, T_cached + Lk, d_k)
        heads, weights = scaled_dot_product_attention(Q, K, V, mask, dropout=self.dropout)
        # (B, H, Lq, d_k) -> (B, Lq, H, d_k) -> (B, Lq, D): concatenate the heads
        concat = heads.transpose(1, 2).reshape(B, Lq, self.d_model)
        return self.W_O(concat), weights  # (B, Lq, D), (B, H, Lq, Lk)
        ### END SOLUTION


class MultiHeadSelfAttention(MultiHeadAttention):
    """Self-attention: queries, keys and values all come from the same ``x``."""

    def forward(self, x, mask=None, *, kv_cache=None):
        """``(x (B, L, D), mask)`` -> ``(output (B, L, D), weights (B, H, L, L))``."""
        check_features("x", x, self.d_model)  # errors name `x`, not the `query` it becomes
        ### BEGIN SOLUTION
        return super().forward(x, x, x, mask, kv_cache=kv_cache)
        ### END SOLUTION
