"""A key/value cache for autoregressive generation (not part of the contract).

During generation each new token's query attends to the keys and values of every earlier
position. Those never change while the window does not slide, so each layer keeps them and
appends one position per step instead of recomputing the whole window:

    K_t = concat(K_{<t}, k_t),  V_t = concat(V_{<t}, v_t)
"""

from __future__ import annotations

import torch


class KVCache:
    """Keys and values ``(B, H, T, d_k)`` of the positions seen so far, for one attention layer."""

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.keys is None else self.keys.size(-2)

    def extend(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new positions ``(B, H, T_new, d_k)``; return all keys and values so far."""
        if self.keys is None:
            self.keys, self.values = keys, values
        else:
            self.keys = torch.cat([self.keys, keys], dim=-2)  # (B, H, T + T_new, d_k)
            self.values = torch.cat([self.values, values], dim=-2)
        return self.keys, self.values
