"""Masks, ``True`` = blocked (seed 000 section 7.1, seed 001 section 8)."""

from __future__ import annotations

import numbers

import torch

from ._validation import check_positive_int, check_tensor


def causal_mask(seq_len, device=None):
    """The causal ("look-ahead") mask: position i may not attend to j > i.

    ``torch.triu(ones(seq_len, seq_len), diagonal=1)`` as bool: ``True`` strictly above the
    diagonal. For ``seq_len=4`` (seed 000 section 7.1)::

        [[False,  True,  True,  True],
         [False, False,  True,  True],
         [False, False, False,  True],
         [False, False, False, False]]

    Returns a bool tensor ``(seq_len, seq_len)`` on ``device``. Built on the CPU and then moved,
    as seed 000 section 7.1 builds its mask buffer: on torch's ``meta`` device, which has no data,
    ``triu`` would run torch's Python meta kernels, whose first use imports ``torch._dynamo``
    (docs/performance.md); on a GPU the move is one small copy.
    """
    check_positive_int("seq_len", seq_len)
    ### BEGIN SOLUTION
    ones = torch.ones(seq_len, seq_len, dtype=torch.bool)
    return torch.triu(ones, diagonal=1).to(device)
    ### END SOLUTION


def padding_mask(tokens, pad_id):
    """Block the padded keys: ``True`` where ``tokens == pad_id``.

    ``tokens (B, L)`` -> bool ``(B, 1, 1, L)``, which broadcasts over heads and queries of the
    scores ``(B, H, Lq, L)``: every query ignores the padded keys (seed 001 section 8.1).
    """
    check_tensor("tokens", tokens, dim=2)
    if isinstance(pad_id, bool) or not isinstance(pad_id, numbers.Integral):
        raise TypeError(f"pad_id must be an int token id, got {pad_id!r}")
    ### BEGIN SOLUTION
    return (tokens == pad_id)[:, None, None, :]  # (B, 1, 1, L)
    ### END SOLUTION
