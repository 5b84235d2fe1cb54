"""Rotary position embedding, RoPE (Su et al. 2021, RoFormer, eq. 34; CS336 assignment 1).

Each adjacent pair of features ``(x[2i], x[2i+1])`` of a query or key at position ``p`` is
rotated by the angle ``p * theta_i`` with ``theta_i = theta ** (-2i / head_dim)``,
``i = 0 .. head_dim/2 - 1``:

    (a, b) -> (a cos(p theta_i) - b sin(p theta_i),  a sin(p theta_i) + b cos(p theta_i))

A rotation keeps norms, and the dot product of a query rotated at ``m`` with a key rotated at
``n`` depends on ``m - n`` only, so attention scores see relative positions. The cos/sin tables
are computed once for ``max_len`` positions (float64, cast to the input's dtype per call) and
kept as non-persistent buffers: the module has no parameters.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from ._validation import check_last_dim, check_positive_float, check_positive_int


class RotaryPositionEmbedding(nn.Module):
    """``forward(x (..., L, head_dim), positions=None) -> (..., L, head_dim)``; ``positions``
    broadcastable to ``x.shape[:-1]`` (``(L,)``, ``(B, L)``, ``(B, 1, L)``), ``None`` = ``arange(L)``."""

    def __init__(self, head_dim, max_len, theta=10000.0):
        super().__init__()
        check_positive_int("head_dim", head_dim)
        if head_dim % 2:
            raise ValueError(f"head_dim must be even (features are rotated in pairs), got head_dim={head_dim}")
        self.head_dim = head_dim
        self.max_len = check_positive_int("max_len", max_len)
        self.theta = check_positive_float("theta", theta)
        ### BEGIN SOLUTION
        inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)  # (head_dim/2,)
        angles = torch.arange(max_len, dtype=torch.float64)[:, None] * inv_freq  # (max_len, head_dim/2)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        ### END SOLUTION

    def forward(self, x, positions=None):
        check_last_dim("x", x, self.head_dim, "head_dim")
        positions = self._positions(x, positions)
        ### BEGIN SOLUTION
        cos = self.cos[positions].to(x.dtype)  # (..., L, head_dim/2)
        sin = self.sin[positions].to(x.dtype)
        a, b = x[..., 0::2], x[..., 1::2]  # the pairs (x[2i], x[2i+1]): (..., L, head_dim/2) each
        rotated = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1)  # (..., L, head_dim/2, 2)
        return rotated.flatten(-2)  # (..., L, head_dim), pairs back in place
        ### END SOLUTION

    def _positions(self, x, positions):
        """``arange(L)`` for ``None``; otherwise checked: integers in ``[0, max_len)``, broadcastable."""
        L = x.size(-2) if x.dim() >= 2 else 0
        if positions is None:
            if L > self.max_len:
                raise ValueError(f"x has {L} positions but max_len={self.max_len}; "
                                 f"build the module with a larger max_len")
            return torch.arange(L, device=x.device)
        if not isinstance(positions, torch.Tensor) or positions.dtype.is_floating_point \
                or positions.dtype == torch.bool or positions.is_complex():
            raise TypeError(f"positions must be an integer torch.Tensor, got "
                            f"{getattr(positions, 'dtype', type(positions).__name__)}")
        if positions.numel() and (int(positions.min()) < 0 or int(positions.max()) >= self.max_len):
            raise ValueError(f"positions must lie in [0, {self.max_len - 1}] (max_len={self.max_len}), "
                             f"got values from {int(positions.min())} to {int(positions.max())}")
        batch = x.shape[:-1]
        fits = positions.dim() <= len(batch) and all(
            p in (1, s) for p, s in zip(reversed(positions.shape), reversed(batch)))
        if not fits:
            raise ValueError(f"positions of shape {tuple(positions.shape)} do not broadcast to x's "
                             f"shape without its last dimension, {tuple(batch)}")
        return positions
