"""Laws of ``get_batch`` (component ``get_batch``; docs/contract.md, "The modern track's training
utilities"; CS336 assignment 1, section 5.1).

The token stream here holds distinct ids (``offset, offset + 1, ...``), so every row of a batch says
where it starts: each row of ``x`` must be a window of the stream, ``y`` the same window one token
later, every start must leave room for ``y``, and every such start must be drawn. The generators a
``get_batch`` may use (numpy's, torch's) are seeded from the drawn seed, so a failure repeats.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from ..strategies import budget

DTYPES = {"int64": np.int64, "int32": np.int32, "uint16": np.uint16}


@st.composite
def _stream(draw, min_starts: int = 1):
    """(tokens, batch_size, context_length, storage): ``tokens`` = offset .. offset + n - 1 with at least
    ``min_starts`` starts, stored (:func:`_stored`) as a numpy array of a drawn integer dtype or a uint16 memmap."""
    context = draw(st.integers(1, 6), label="context_length")
    n = context + draw(st.integers(min_starts, 8), label="len(data) - context_length")
    offset = draw(st.integers(0, 1000), label="first token id")
    storage = draw(st.sampled_from(["int64", "int32", "uint16", "memmap"]), label="data")
    batch = draw(st.integers(1, 4), label="batch_size")
    seed = draw(st.integers(0, 2**31 - 1), label="seed")
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return np.arange(offset, offset + n), batch, context, storage


def _stored(tokens: np.ndarray, storage: str, folder: str) -> np.ndarray:
    if storage != "memmap":
        return tokens.astype(DTYPES[storage])
    path = Path(folder) / "tokens.bin"
    tokens.astype(np.uint16).tofile(path)
    return np.memmap(path, dtype=np.uint16, mode="r")


def _check_batch(batch, tokens, batch_size, context, call):
    if not (isinstance(batch, (tuple, list)) and len(batch) == 2):
        raise AssertionError(f"{call}: expected a pair (x, y), got {type(batch).__name__}")
    x, y = batch
    for name, t in (("x", x), ("y", y)):
        if not isinstance(t, torch.Tensor):
            raise AssertionError(f"{call}: {name} is a {type(t).__name__}, expected a torch.Tensor")
        if tuple(t.shape) != (batch_size, context) or t.dtype != torch.long:
            raise AssertionError(f"{call}: {name} has shape {tuple(t.shape)} and dtype {t.dtype}, expected "
                                 f"({batch_size}, {context}) and torch.int64")
    starts = []
    for b in range(batch_size):
        s = int(x[b, 0]) - int(tokens[0])
        window = tokens[s:s + context + 1] if 0 <= s <= len(tokens) - context - 1 else None
        if window is None or not np.array_equal(x[b].numpy(), window[:-1]):
            raise AssertionError(f"{call}: row {b} of x is {x[b].tolist()}, not a window data[s : s + {context}] "
                                 f"whose targets fit in data = {tokens.tolist()} (s from 0 to {len(tokens) - context - 1})")
        if not np.array_equal(y[b].numpy(), window[1:]):
            raise AssertionError(f"{call}: row {b}: x = {x[b].tolist()} but y = {y[b].tolist()}; expected "
                                 f"y = {window[1:].tolist()}, the same window one token later")
        starts.append(s)
    return starts


@pytest.mark.component("get_batch")
@given(case=_stream())
def test_get_batch_gives_windows_and_the_tokens_after_them(impl, case):
    """x[b] = data[s : s + m], y[b] = data[s + 1 : s + m + 1] with 0 <= s <= len(data) - m - 1: two torch.long
    tensors (batch_size, m) on the device, whatever the stream's integer dtype (a uint16 memmap too)."""
    tokens, batch_size, context, storage = case
    with tempfile.TemporaryDirectory() as folder:
        data = _stored(tokens, storage, folder)
        call = f"get_batch(data ({storage}, {len(tokens)} tokens), batch_size={batch_size}, context_length={context}, 'cpu')"
        batch = impl.get_batch(data, batch_size, context, "cpu")
        _check_batch(batch, tokens, batch_size, context, call)
        if any(t.device.type != "cpu" for t in batch):
            raise AssertionError(f"{call}: the tensors are on {[str(t.device) for t in batch]}, expected cpu")


@pytest.mark.component("get_batch")
@budget(0.5)
@given(case=_stream(min_starts=2))
def test_get_batch_draws_every_start(impl, case):
    """Every start from 0 to len(data) - m - 1 is drawn (320 rows from 2 to 8 starts: missing one by
    chance has a probability below 1e-17); none beyond."""
    tokens, _, context, storage = case
    with tempfile.TemporaryDirectory() as folder:
        data = _stored(tokens, storage, folder)
        seen = set()
        for _ in range(20):
            call = f"get_batch(data ({len(tokens)} tokens), batch_size=16, context_length={context}, 'cpu')"
            seen.update(_check_batch(impl.get_batch(data, 16, context, "cpu"), tokens, 16, context, call))
    expected = set(range(len(tokens) - context))
    if seen != expected:
        raise AssertionError(f"get_batch(data of {len(tokens)} tokens, 16, context_length={context}, 'cpu') 20 times: "
                             f"starts drawn {sorted(seen)}, expected every start {sorted(expected)} (the last one, "
                             f"{len(tokens) - context - 1}, still leaves room for y)")


@pytest.mark.component("get_batch")
@given(case=_stream())
def test_get_batch_puts_the_batch_on_the_given_device(impl, case):
    """x and y are on the device named by the ``device`` string (here 'meta', a device every torch has)."""
    tokens, batch_size, context, _ = case
    x, y = impl.get_batch(tokens, batch_size, context, "meta")
    if x.device.type != "meta" or y.device.type != "meta":
        raise AssertionError(f"get_batch(data, {batch_size}, {context}, device='meta'): x on {x.device}, y on {y.device}; "
                             "expected both on the device given (move them with .to(device))")
