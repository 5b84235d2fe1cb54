"""Scaled dot-product attention (seed 000 step 2, seed 001 section 3.2).

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._validation import check_mask, check_tensor


def scaled_dot_product_attention(q, k, v, mask=None, scale=None, *, dropout=None):
    """``softmax(q k^T * scale) v`` with ``scale = 1/sqrt(d_k)`` unless given.

    Args:
        q: queries ``(..., Lq, d_k)``.
        k: keys ``(..., Lk, d_k)``.
        v: values ``(..., Lk, d_v)``.
        mask: optional bool tensor broadcastable to ``(..., Lq, Lk)``; ``True`` = blocked
            (the seed's ``scores.masked_fill(mask, -inf)``).
        scale: ``None`` for ``1/sqrt(d_k)``; a float multiplies the scores instead
            (``scale=1.0`` gives the unscaled logits of seed 001 section 9.4).
        dropout: optional callable applied to the weights before they mix the values
            (used by multi-head attention in training; not part of the contract).

    Returns:
        ``(output (..., Lq, d_v), weights (..., Lq, Lk))``. A query row whose keys are all
        blocked gets all-zero weights and an all-zero output (and zero gradients), never NaN.
    """
    check_tensor("q", q, min_dim=2)
    check_tensor("k", k, min_dim=2)
    check_tensor("v", v, min_dim=2)
    if q.size(-1) != k.size(-1):
        raise ValueError(
            f"q and k must share their last dimension d_k, got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    if k.size(-2) != v.size(-2):
        raise ValueError(
            f"k and v must have the same number of positions Lk (dimension -2), "
            f"got k {tuple(k.shape)} and v {tuple(v.shape)}"
        )
    if scale is None:
        scale = 1.0 / math.sqrt(q.size(-1))
    elif isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"scale must be None or a float, got {scale!r}")

    ### BEGIN SOLUTION
    # (q * scale) k^T = (q k^T) * scale: scaling q touches Lq x d_k numbers, not Lq x Lk scores.
    scores = torch.matmul(q * scale, k.transpose(-2, -1))  # (..., Lq, Lk)
    blocked_rows = None
    if mask is not None:
        check_mask(mask, scores.shape)
        # In place: `scores` is this call's own temporary (nothing else holds it, and the
        # matmul's backward needs its inputs, not its output), so an out-of-place fill would
        # only copy the (..., Lq, Lk) scores once more.
        scores.masked_fill_(mask, float("-inf"))
        # A row with every key blocked would be softmax(-inf, ..., -inf) = NaN. Give such rows
        # finite scores here and zero weights below, so they output 0 with zero gradients.
        blocked_rows = mask.all(dim=-1, keepdim=True)  # (..., Lq, 1), from the small mask
        if blocked_rows.any():
            scores.masked_fill_(blocked_rows, 0.0)
        else:
            # The usual case (a causal mask, padding of a non-empty sequence): no such row, so
            # skip the two passes over the scores and weights that would change nothing.
            blocked_rows = None
    weights = F.softmax(scores, dim=-1)  # over the keys: each row sums to 1
    if blocked_rows is not None:
        weights = weights.masked_fill(blocked_rows, 0.0)
    mixing = dropout(weights) if dropout is not None else weights
    output = torch.matmul(mixing, v)  # (..., Lq, d_v)
    return output, weights
    ### END SOLUTION
