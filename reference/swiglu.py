"""SwiGLU feed-forward network (Shazeer 2020, "GLU Variants Improve Transformer", eq. 6; CS336 assignment 1).

    SwiGLU(x) = W2 (SiLU(W1 x) * W3 x),   SiLU(z) = z * sigmoid(z)

``W1`` and ``W3`` widen ``d_model`` to ``d_ff`` (the gate and the value), ``W2`` brings the
product back to ``d_model``; no biases.
"""

from __future__ import annotations

import torch.nn as nn
import torch.nn.functional as F

from ._validation import check_last_dim, check_positive_int


class SwiGLU(nn.Module):
    """``w1 (d_ff, d_model)``, ``w2 (d_model, d_ff)``, ``w3 (d_ff, d_model)``, bias-free;
    ``forward(x (..., d_model)) -> (..., d_model)``."""

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        check_positive_int("d_ff", d_ff)
        self.w1 = nn.Linear(d_model, d_ff, bias=False)  # the gate, through SiLU
        self.w2 = nn.Linear(d_ff, d_model, bias=False)
        self.w3 = nn.Linear(d_model, d_ff, bias=False)  # the value the gate multiplies

    def forward(self, x):
        check_last_dim("x", x, self.d_model, "d_model")
        ### BEGIN SOLUTION
        return self.w2(F.silu(self.w1(x)) * self.w3(x))  # (..., d_ff) -> (..., D)
        ### END SOLUTION
