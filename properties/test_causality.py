"""Law 2: with the causal mask, outputs at positions <= t do not depend on anything at positions > t.

Changing the queries, keys, values, inputs or tokens after position t leaves every output up to
t unchanged: for ``scaled_dot_product_attention``, ``MultiHeadSelfAttention``, the encoder block,
the decoder block's self-attention, MiniGPT (future tokens) and ``Seq2SeqTransformer`` (future
target tokens). And the prefix law: the logits of a prefix equal the first positions of the
full sequence's logits. Mask given to the modules: ``True`` where ``j > i``, built in
``strategies.causal`` independently of the submission's ``causal_mask``.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from transformer_spec import profiles
from transformer_spec.probes.assertions import assert_close

from .draws import x_and_memory
from .modules import decoder_block, encoder_block, minigpt, self_attention, seq2seq
from .strategies import (
    attention_inputs,
    budget,
    causal,
    configs,
    law_tolerance,
    sequences,
    tensors,
    token_batches,
)


def _splice(old: torch.Tensor, new: torch.Tensor, t: int, dim: int) -> torch.Tensor:
    """``old`` with its positions > t (along ``dim``) taken from ``new``."""
    out = old.clone()
    idx = [slice(None)] * old.dim()
    idx[dim] = slice(t + 1, None)
    out[tuple(idx)] = new[tuple(idx)]
    return out


def _draw_t(data, n: int) -> int:
    """The last position whose outputs must not change (``0..n-1``)."""
    return data.draw(st.integers(0, n - 1), label="t")


def _new_future(data, x: torch.Tensor, t: int) -> torch.Tensor:
    """``x (B, L, d)`` with its positions > t replaced by freshly drawn values."""
    return _splice(x, data.draw(tensors(tuple(x.shape), x.dtype), label="new x"), t, 1)


def _assert_past_unchanged(run, x, x2, t: int, tol: dict, what: str) -> None:
    """``run(x2)`` equals ``run(x)`` at the positions <= t (dim 1); ``x2`` differs from ``x`` only after t."""
    out = run(x)
    out2 = run(x2)
    assert_close(out2[:, : t + 1], out[:, : t + 1], **tol, what=what)


def _assert_prefix_alone_matches(run, seq, p: int, tol: dict, what: str) -> None:
    """``run`` of the first ``p`` positions of ``seq`` alone equals the first ``p`` positions of ``run(seq)``."""
    full = run(seq)
    prefix = run(seq[:, :p])
    assert_close(prefix, full[:, :p], **tol, what=what)


def _seq2seq_case(impl, config, data):
    """A seeded ``Seq2SeqTransformer`` (vocabularies 6 and 7, max_len 8), source ids ``(B, Ls)`` below 6
    and target ids ``(B, Lt)`` below 7, lengths 1..8."""
    src = data.draw(token_batches(6, max_len=8), label="src")
    tgt = data.draw(token_batches(7, batch=src.shape[0], max_len=8), label="tgt")
    return seq2seq(impl, config, src_vocab=6, tgt_vocab=7, max_len=8), src, tgt


def _draw_prefix_length(data, n: int) -> int:
    return data.draw(st.integers(1, n), label="prefix length")


@pytest.mark.component("attention")
@given(inputs=attention_inputs(with_mask=False, same_length=True), data=st.data())
def test_attention_causal_outputs_unaffected_by_future(impl, inputs, data):
    q, k, v = inputs.q, inputs.k, inputs.v
    n = q.shape[-2]
    t = _draw_t(data, n)
    q2, k2, v2 = (_splice(x, data.draw(tensors(tuple(x.shape), x.dtype), label=f"new {name}"), t, -2)
                  for name, x in (("q", q), ("k", k), ("v", v)))
    out, w = impl.scaled_dot_product_attention(q, k, v, causal(n))
    out2, w2 = impl.scaled_dot_product_attention(q2, k2, v2, causal(n))
    tol = law_tolerance(q.dtype)
    assert_close(out2[..., : t + 1, :], out[..., : t + 1, :],
                 what=f"causal attention output at positions <= {t} after changing q, k, v at positions > {t}", **tol)
    if profiles.expresses("weights"):
        assert_close(w2[..., : t + 1, :], w[..., : t + 1, :],
                     what=f"causal attention weights of queries <= {t} after changing positions > {t}", **tol)


@pytest.mark.component("mha")
@given(config=configs(), data=st.data())
def test_multihead_self_attention_causal_outputs_unaffected_by_future(impl, config, data):
    x = data.draw(sequences(config), label="x")
    n = x.shape[1]
    t = _draw_t(data, n)
    x2 = _new_future(data, x, t)
    m = self_attention(impl, config)
    _assert_past_unchanged(lambda x_: m(x_, causal(n))[0], x, x2, t, law_tolerance(x.dtype),
                           f"MultiHeadSelfAttention (causal mask) output at positions <= {t} after changing x at > {t}")


@pytest.mark.component("encoder")
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre_ln", "post_ln"])
@given(config=configs(), data=st.data())
def test_encoder_block_causal_outputs_unaffected_by_future(impl, norm_first, config, data):
    x = data.draw(sequences(config), label="x")
    n = x.shape[1]
    t = _draw_t(data, n)
    x2 = _new_future(data, x, t)
    block = encoder_block(impl, config, norm_first)
    tol = law_tolerance(x.dtype, deep=True)
    _assert_past_unchanged(lambda x_: block(x_, causal(n))[0], x, x2, t, tol,
                           f"TransformerEncoderBlock (causal mask) output at positions <= {t} after changing x at > {t}")


@pytest.mark.component("decoder")
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre_ln", "post_ln"])
@given(config=configs(), data=st.data())
def test_decoder_block_causal_outputs_unaffected_by_future(impl, norm_first, config, data):
    """The decoder's self-attention with the causal tgt_mask: the target after t cannot leak
    back, whatever the memory."""
    x, memory = x_and_memory(data, config)
    n = x.shape[1]
    t = _draw_t(data, n)
    x2 = _new_future(data, x, t)
    block = decoder_block(impl, config, norm_first)
    out, sw, cw = block(x, memory, causal(n))
    out2, sw2, cw2 = block(x2, memory, causal(n))
    tol = law_tolerance(x.dtype, deep=True)
    assert_close(out2[:, : t + 1], out[:, : t + 1], **tol,
                 what=f"TransformerDecoderBlock (causal tgt_mask) output at positions <= {t} after changing x at > {t}")
    assert_close(cw2[:, :, : t + 1], cw[:, :, : t + 1], **tol,
                 what=f"TransformerDecoderBlock cross_weights of queries <= {t} after changing x at > {t}")


@pytest.mark.component("minigpt")
@budget(0.5)
@given(config=configs(max_dk=2), layers=st.integers(1, 2), vocab=st.integers(2, 9), data=st.data())
def test_minigpt_logits_unaffected_by_future_tokens(impl, config, layers, vocab, data):
    tokens = data.draw(token_batches(vocab, max_len=8), label="tokens")
    n = tokens.shape[1]
    t = _draw_t(data, n)
    other = data.draw(token_batches(vocab, batch=tokens.shape[0], length=n), label="new tokens")
    tokens2 = _splice(tokens, other, t, 1)
    model = minigpt(impl, config, vocab, layers)
    tol = law_tolerance(config.dtype, deep=True)
    _assert_past_unchanged(lambda tokens_: model(tokens_)[0], tokens, tokens2, t, tol,
                           f"MiniGPT logits at positions <= {t} after changing the tokens at positions > {t}")


@pytest.mark.component("minigpt")
@budget(0.5)
@given(config=configs(max_dk=2), layers=st.integers(1, 2), vocab=st.integers(2, 9), data=st.data())
def test_minigpt_prefix_logits_equal_full_sequence_logits(impl, config, layers, vocab, data):
    tokens = data.draw(token_batches(vocab, max_len=8), label="tokens")
    p = _draw_prefix_length(data, tokens.shape[1])
    model = minigpt(impl, config, vocab, layers)
    _assert_prefix_alone_matches(
        lambda tokens_: model(tokens_)[0], tokens, p, law_tolerance(config.dtype, deep=True),
        f"MiniGPT logits of the first {p} tokens alone vs. the first {p} positions of the full sequence")


@pytest.mark.component("seq2seq")
@budget(0.5)
@given(config=configs(max_dk=2), data=st.data())
def test_seq2seq_logits_unaffected_by_future_target_tokens(impl, config, data):
    model, src, tgt = _seq2seq_case(impl, config, data)
    n = tgt.shape[1]
    t = _draw_t(data, n)
    tgt2 = _splice(tgt, data.draw(token_batches(7, batch=tgt.shape[0], length=n), label="new tgt"), t, 1)
    _assert_past_unchanged(lambda tgt_: model(src, tgt_), tgt, tgt2, t, law_tolerance(config.dtype, deep=True),
                           f"Seq2SeqTransformer logits at target positions <= {t} after changing target tokens > {t}")


@pytest.mark.component("seq2seq")
@budget(0.5)
@given(config=configs(max_dk=2), data=st.data())
def test_seq2seq_prefix_logits_equal_full_target_logits(impl, config, data):
    model, src, tgt = _seq2seq_case(impl, config, data)
    p = _draw_prefix_length(data, tgt.shape[1])
    tol = law_tolerance(config.dtype, deep=True)
    _assert_prefix_alone_matches(lambda tgt_: model(src, tgt_), tgt, p, tol,
                                 f"Seq2SeqTransformer logits of the first {p} target tokens alone vs. the full target's")
