"""Language-modelling batches from a token stream (CS336 assignment 1, section 5.1).

A batch is ``batch_size`` windows of the stream, each starting at an independent uniform start
``s`` in ``0 .. len(data) - context_length - 1``: the inputs are ``data[s : s + m]`` and the targets
the same window shifted by one, ``data[s + 1 : s + m + 1]`` (``m`` = ``context_length``), so the
target of every input token is the token after it.
"""

from __future__ import annotations

import numpy as np
import torch


def get_batch(data, batch_size, context_length, device):
    """``data``: a 1-D numpy array of token ids -> ``(x, y)``, ``torch.long`` ``(batch_size, context_length)``
    on ``device``."""
    ### BEGIN SOLUTION
    starts = np.random.randint(0, len(data) - context_length, size=batch_size)  # (B,), high exclusive
    x = np.stack([np.asarray(data[s:s + context_length], dtype=np.int64) for s in starts])  # (B, m)
    y = np.stack([np.asarray(data[s + 1:s + 1 + context_length], dtype=np.int64) for s in starts])  # (B, m)
    return torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)
    ### END SOLUTION
