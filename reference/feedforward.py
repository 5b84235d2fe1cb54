"""Position-wise feed-forward network (seed 000 step 4, seed 001 section 7).

    FFN(x) = GELU(x W_1 + b_1) W_2 + b_2,   d_model -> d_ff -> d_model
"""

from __future__ import annotations

import torch.nn as nn
import torch.nn.functional as F

from ._validation import check_dropout, check_positive_int, check_tensor


class FeedForward(nn.Module):
    """The same two-layer MLP applied to every position independently (exact erf GELU)."""

    def __init__(self, d_model=512, d_ff=2048, dropout=0.1):
        super().__init__()
        check_positive_int("d_model", d_model)
        check_positive_int("d_ff", d_ff)
        self.d_model = d_model
        self.linear1 = nn.Linear(d_model, d_ff)  # widen, usually 4x
        self.linear2 = nn.Linear(d_ff, d_model)  # back to d_model
        self.dropout = nn.Dropout(check_dropout(dropout))

    def forward(self, x):
        """``x (..., D)`` -> ``(..., D)``: ``linear2(dropout(gelu(linear1(x))))``."""
        check_tensor("x", x, min_dim=1)
        if x.size(-1) != self.d_model:
            raise ValueError(
                f"x has {x.size(-1)} features in its last dimension (shape {tuple(x.shape)}) "
                f"but the module was built with d_model={self.d_model}"
            )
        ### BEGIN SOLUTION
        return self.linear2(self.dropout(F.gelu(self.linear1(x))))
        ### END SOLUTION
