"""A key/value cache for autoregressive generation (not part of the contract).

During generation each new token's query attends to the keys and values of every earlier
position. Those never change while the window does not slide, so each layer keeps them and
appends one position per step instead of recomputing the whole window:

    K_t = concat(K_{<t}, k_t),  V_t = concat(V_{<t}, v_t)

The concatenation is written in place into buffers allocated for ``capacity`` positions
(``MiniGPT.generate`` passes ``max_len``), so a step copies one position, not the whole cache.
:func:`step_weights` gathers what ``MiniGPT.forward_step``, the one-position path, reads of a block.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch


class KVCache:
    """Keys and values ``(B, H, T, d_k)`` of the positions seen so far, for one attention layer."""

    def __init__(self, capacity: int = 0) -> None:
        self.capacity = capacity  # positions the first buffers hold (they grow if needed)
        self.length = 0  # positions filled so far
        self.key_buffer: torch.Tensor | None = None  # (B, H, >= length, d_k), filled up to length
        self.value_buffer: torch.Tensor | None = None
        self.keys: torch.Tensor | None = None  # (B, H, length, d_k): views of the filled part
        self.values: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.length

    def extend(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new positions ``(B, H, T_new, d_k)``; return all keys and values so far."""
        start, new = self.length, keys.size(-2)
        if self.key_buffer is None or start + new > self.key_buffer.size(-2):
            self._grow(keys, values, start + new)
        self.key_buffer.narrow(-2, start, new).copy_(keys)  # in place, positions start .. start+new-1
        self.value_buffer.narrow(-2, start, new).copy_(values)
        self.length = start + new
        self.keys = self.key_buffer.narrow(-2, 0, self.length)  # (B, H, T + T_new, d_k), no copy
        self.values = self.value_buffer.narrow(-2, 0, self.length)
        return self.keys, self.values

    def _grow(self, keys: torch.Tensor, values: torch.Tensor, needed: int) -> None:
        """Buffers for at least ``needed`` positions (doubling, as a Python list grows), keeping
        the positions already filled."""
        old = 0 if self.key_buffer is None else self.key_buffer.size(-2)
        size = max(needed, self.capacity, 2 * old)
        key_buffer = keys.new_empty(*keys.shape[:-2], size, keys.size(-1))
        value_buffer = values.new_empty(*values.shape[:-2], size, values.size(-1))
        if self.length:
            key_buffer.narrow(-2, 0, self.length).copy_(self.key_buffer.narrow(-2, 0, self.length))
            value_buffer.narrow(-2, 0, self.length).copy_(self.value_buffer.narrow(-2, 0, self.length))
        self.key_buffer, self.value_buffer = key_buffer, value_buffer


class StepWeights(NamedTuple):
    """One Pre-LN block's tensors for ``MiniGPT.forward_step``, gathered once per ``generate``
    call: a step then reads them from a tuple, not through ``nn.Module`` attribute lookups."""

    norm1: tuple[torch.Tensor, torch.Tensor, float]  # (weight, bias, eps) of the LayerNorm before attention
    w_qkv: torch.Tensor  # (3 D, D): W_Q / sqrt(d_k), W_K and W_V stacked
    num_heads: int
    d_k: int
    w_o: torch.Tensor  # (D, D)
    norm2: tuple[torch.Tensor, torch.Tensor, float]  # before the FFN
    w_1: torch.Tensor  # (d_ff, D), the FFN's widening layer, and its bias b_1
    b_1: torch.Tensor
    w_2: torch.Tensor  # (D, d_ff), back to D, and its bias b_2
    b_2: torch.Tensor


def step_weights(block) -> StepWeights:
    """The :class:`StepWeights` of a Pre-LN ``TransformerEncoderBlock``: one matrix-vector product
    with ``w_qkv`` gives a position's ``q / sqrt(d_k)``, ``k`` and ``v``."""
    attn, ffn = block.self_attn, block.ffn
    w_qkv = torch.cat([attn.W_Q.weight / math.sqrt(attn.d_k), attn.W_K.weight, attn.W_V.weight]).detach()
    return StepWeights((block.norm1.weight, block.norm1.bias, block.norm1.eps), w_qkv, attn.num_heads, attn.d_k,
                       attn.W_O.weight, (block.norm2.weight, block.norm2.bias, block.norm2.eps),
                       ffn.linear1.weight, ffn.linear1.bias, ffn.linear2.weight, ffn.linear2.bias)
