"""RMSNorm: root-mean-square layer normalisation (Zhang & Sennrich 2019, eq. 4; CS336 assignment 1).

    RMSNorm(x) = x / sqrt(mean(x_i^2) + eps) * weight

over the last dimension. Unlike LayerNorm it neither subtracts the mean nor adds a bias: it only
rescales each vector to unit root mean square, then by a learned gain ``weight`` (ones at init).
For float16 and bfloat16 inputs the statistics are computed in float32 and the result is cast
back to the input's dtype.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from ._validation import check_last_dim, check_positive_float, check_positive_int

_HALF = (torch.float16, torch.bfloat16)


class RMSNorm(nn.Module):
    """``weight (d_model,)``; ``forward(x (..., d_model)) -> (..., d_model)`` in ``x.dtype``."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.eps = check_positive_float("eps", eps)
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        check_last_dim("x", x, self.d_model, "d_model")
        ### BEGIN SOLUTION
        in_dtype = x.dtype
        h = x.float() if in_dtype in _HALF else x  # (..., D), float32 for half inputs
        h = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + self.eps)  # unit RMS
        return (h * self.weight.to(h.dtype)).to(in_dtype)
        ### END SOLUTION
