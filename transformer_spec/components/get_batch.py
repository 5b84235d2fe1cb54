"""The 'get_batch' component (modern track, optional: a training utility). get_batch(data, batch_size,
context_length, device): windows of the token stream at uniform starts, and the same windows one
token later (CS336 assignment 1, section 5.1).

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import numpy as np
import torch

from transformer_spec.contract.inputs import generator
from transformer_spec.contract.registry import Component, Name, Recheck, pitfall
from transformer_spec.probes import behaviour as bp

NAMES = (
    Name("get_batch", "get_batch", "function",
         "get_batch(data, batch_size, context_length, device) -> (x, y) torch.long (B, m) on device: x[b] = data[s:s+m], "
         "y[b] = data[s+1:s+m+1], s uniform in 0 .. len(data) - m - 1"),
)

_STARTS = "starts = np.random.randint(0, len(data) - context_length, size=batch_size)  # (B,), high exclusive"
_X = "x = np.stack([np.asarray(data[s:s + context_length], dtype=np.int64) for s in starts])  # (B, m)"
_Y = "y = np.stack([np.asarray(data[s + 1:s + 1 + context_length], dtype=np.int64) for s in starts])  # (B, m)"
_RETURN = "return torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)"

PITFALLS = (
    pitfall("get_batch_last_start_never_drawn", "get_batch",
            "The starts stop one short: the last window, data[n - m - 1 : n - 1] with targets up to data[n - 1], is "
            "never drawn (randint's upper bound is exclusive: it is len(data) - context_length).",
            ("batches.py", _STARTS, _STARTS.replace("len(data) - context_length,", "len(data) - context_length - 1,"))),
    pitfall("get_batch_targets_not_shifted", "get_batch",
            "The targets are the inputs themselves: y is the same window one token later, data[s + 1 : s + m + 1] "
            "(each token's target is the next token).",
            ("batches.py", _Y, _Y.replace("data[s + 1:s + 1 + context_length]", "data[s:s + context_length]"))),
    pitfall("get_batch_keeps_the_data_dtype", "get_batch",
            "The batch keeps the stream's dtype (uint16 or int32 from a token file): embeddings and cross-entropy "
            "need torch.long (int64) token ids.",
            ("batches.py", _X, _X.replace(", dtype=np.int64", "")),
            ("batches.py", _Y, _Y.replace(", dtype=np.int64", ""))),
    pitfall("get_batch_ignores_the_device", "get_batch",
            "The batch stays on the CPU whatever device is asked for: move x and y with .to(device).",
            ("batches.py", _RETURN, "return torch.from_numpy(x), torch.from_numpy(y)")),
    pitfall("get_batch_returns_int32", "get_batch",
            "The windows come back as int32 (`.int()`, `dtype=torch.int32`): the handout asks for LongTensors, "
            "torch.long.",
            ("batches.py", "return torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)",
             "return torch.from_numpy(x).int().to(device), torch.from_numpy(y).int().to(device)"),
            source="AgainstTheCurrent/assignment1-basics@7465bd8 cs336_basics/training_utils.py:13; "
                   "0Chris5R/StanfordCS336-Own-Transformer@439c6c6 cs336_basics/train.py:207"),
)


def _windows_ok(batch, tokens, context) -> bool:
    x, y = batch
    for row_x, row_y in zip(x.tolist(), y.tolist()):
        s = row_x[0] - int(tokens[0])
        if not (0 <= s <= len(tokens) - context - 1 and row_x == tokens[s:s + context].tolist()):
            return False
        if row_y != tokens[s + 1:s + context + 1].tolist():
            return False
    return True


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'get_batch' (transformer_spec/probes/behaviour.py)."""
    tokens = np.arange(100, 112)

    def starts():
        seen = set()
        for _ in range(20):
            x, _ = impl.get_batch(tokens, 16, 5, "cpu")
            seen.update(int(v) - 100 for v in x[:, 0])
        return sorted(seen) == list(range(7))

    bp.capture(f, "~windows_and_targets", lambda: _windows_ok(impl.get_batch(tokens, 4, 5, "cpu"), tokens, 5))
    bp.capture(f, "~every_start", starts)
    bp.capture(f, "~dtype_from_uint16", lambda: str(impl.get_batch(tokens.astype(np.uint16), 2, 3, "cpu")[0].dtype))
    bp.capture(f, "~device_meta", lambda: str(impl.get_batch(tokens, 2, 3, "meta")[0].device))


def _get_batch(mod, seed):
    offset, n = (int(v) for v in torch.randint(0, 1000, (2,), generator=generator(seed)))
    tokens = np.arange(offset, offset + 7 + n % 8)
    x, y = mod.get_batch(tokens, 4, 6, "cpu")
    return {"x": x.numpy(), "y": y.numpy(), "data": tokens}


def _law(answer, reference):
    x, y, tokens = answer["x"], answer["y"], reference["data"]
    if x.shape != (4, 6) or y.shape != (4, 6) or x.dtype != np.int64 or y.dtype != np.int64:
        return f"x {x.shape} {x.dtype}, y {y.shape} {y.dtype}: expected (4, 6) int64 each"
    if not _windows_ok((x, y), tokens, 6):
        return f"x = {x.tolist()}, y = {y.tolist()}: not windows of data = {tokens.tolist()} and the tokens after them"
    return None


RECHECKS = (
    Recheck("get_batch", "get_batch",
            ("properties/modern/test_batch_laws.py::test_get_batch_gives_windows_and_the_tokens_after_them",),
            _get_batch, law=_law),
)

COMPONENT = Component(
    "get_batch", label="batch", points=3, order=33, depends_on=(), tracks=("modern",), optional=True,
    values=(  # the tests of what it computes (rubric.VALUES_SHARE of its points)
        "properties/modern/test_batch_laws.py::test_get_batch_gives_windows_and_the_tokens_after_them",
    ),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
