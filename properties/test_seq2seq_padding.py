"""Seq2SeqTransformer blocks every source position whose token is ``pad_id``, wherever it is.

The contract blocks source padding by token, ``src == pad_id`` (``padding_mask``), in the
encoder's self-attention and in cross-attention, not by length: a pad between real tokens is
blocked too, and the real tokens after it are not. So a pad position is invisible whichever id
marks it: the same weights built with ``pad_id=0`` and with ``pad_id=5`` give the same logits
for one source written with 0 and with 5 at its pad positions. A mask derived from a count of
pads (blocking the last n positions, as some public encoder-decoders do) lets the interior pad
through, and its embedding, row 0 or row 5, shows in the logits.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from transformer_spec.probes.assertions import assert_close

from .modules import seq2seq
from .strategies import budget, configs, law_tolerance, token_batches

SRC_VOCAB, TGT_VOCAB = 6, 7
OTHER_PAD = 5  # the second pad id; real source and target tokens are 1..4, neither pad id


def _model(impl, config, pad_id):
    return seq2seq(impl, config, src_vocab=SRC_VOCAB, tgt_vocab=TGT_VOCAB, max_len=10, pad_id=pad_id)


@st.composite
def sources_with_an_interior_pad(draw):
    """``(B, Ls)`` ids 1..4 with pads (0) at random positions; row 0 has a pad before its last
    token, which is a real one."""
    b = draw(st.integers(1, 2), label="batch")
    n = draw(st.integers(2, 6), label="source length")
    real = draw(st.lists(st.integers(1, OTHER_PAD - 1), min_size=b * n, max_size=b * n), label="real tokens")
    pads = draw(st.lists(st.booleans(), min_size=b * n, max_size=b * n), label="pad positions")
    hole = draw(st.integers(0, n - 2), label="interior pad of row 0")
    src = torch.tensor(real).reshape(b, n).masked_fill(torch.tensor(pads).reshape(b, n), 0)
    src[0, hole], src[0, -1] = 0, real[n - 1]
    return src


@pytest.mark.component("seq2seq")
@budget(0.5)
@given(config=configs(min_dk=3, max_dk=4), src=sources_with_an_interior_pad(), data=st.data())
def test_seq2seq_pad_positions_are_invisible_wherever_they_are(impl, config, src, data):
    """Same weights, ``pad_id=0`` vs ``pad_id=5``, the source's pads written 0 vs 5: same logits.

    ``d_k >= 3`` (``d_model`` 3..8): with one or two features a LayerNorm keeps at most a sign,
    and the two pad embeddings could look alike, hiding a pad that is attended."""
    tgt = data.draw(token_batches(OTHER_PAD - 1, batch=src.shape[0]), label="tgt") + 1  # ids 1..4
    with_0 = _model(impl, config, pad_id=0)(src, tgt)
    with_5 = _model(impl, config, pad_id=OTHER_PAD)(src.masked_fill(src == 0, OTHER_PAD), tgt)
    assert_close(with_5, with_0, **law_tolerance(config.dtype, deep=True),
                 what=f"Seq2SeqTransformer logits for src {src.tolist()} with pad_id=0, vs. the same weights with "
                      f"pad_id={OTHER_PAD} and those pads written {OTHER_PAD} (every pad position, also one between "
                      f"real tokens, must be blocked by its token, src == pad_id, not by a count of pads)")
