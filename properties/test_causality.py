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

from transformer_spec.assertions import assert_close

from .strategies import (
    attention_inputs,
    budget,
    build,
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


@pytest.mark.component("attention")
@given(inputs=attention_inputs(with_mask=False, same_length=True), data=st.data())
def test_attention_causal_outputs_unaffected_by_future(impl, inputs, data):
    q, k, v = inputs.q, inputs.k, inputs.v
    n = q.shape[-2]
    t = data.draw(st.integers(0, n - 1), label="t")
    q2, k2, v2 = (_splice(x, data.draw(tensors(tuple(x.shape), x.dtype), label=f"new {name}"), t, -2)
                  for name, x in (("q", q), ("k", k), ("v", v)))
    out, w = impl.scaled_dot_product_attention(q, k, v, causal(n))
    out2, w2 = impl.scaled_dot_product_attention(q2, k2, v2, causal(n))
    tol = law_tolerance(q.dtype)
    assert_close(out2[..., : t + 1, :], out[..., : t + 1, :],
                 what=f"causal attention output at positions <= {t} after changing q, k, v at positions > {t}", **tol)
    assert_close(w2[..., : t + 1, :], w[..., : t + 1, :],
                 what=f"causal attention weights of queries <= {t} after changing positions > {t}", **tol)


@pytest.mark.component("mha")
@given(config=configs(), data=st.data())
def test_multihead_self_attention_causal_outputs_unaffected_by_future(impl, config, data):
    x = data.draw(sequences(config), label="x")
    n = x.shape[1]
    t = data.draw(st.integers(0, n - 1), label="t")
    x2 = _splice(x, data.draw(tensors(tuple(x.shape), x.dtype), label="new x"), t, 1)
    m = build(impl.MultiHeadSelfAttention, config, d_model=config.d_model, num_heads=config.num_heads)
    out, _ = m(x, causal(n))
    out2, _ = m(x2, causal(n))
    assert_close(out2[:, : t + 1], out[:, : t + 1], **law_tolerance(x.dtype),
                 what=f"MultiHeadSelfAttention (causal mask) output at positions <= {t} after changing x at > {t}")


@pytest.mark.component("encoder")
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre_ln", "post_ln"])
@given(config=configs(), data=st.data())
def test_encoder_block_causal_outputs_unaffected_by_future(impl, norm_first, config, data):
    x = data.draw(sequences(config), label="x")
    n = x.shape[1]
    t = data.draw(st.integers(0, n - 1), label="t")
    x2 = _splice(x, data.draw(tensors(tuple(x.shape), x.dtype), label="new x"), t, 1)
    block = build(impl.TransformerEncoderBlock, config, d_model=config.d_model, num_heads=config.num_heads,
                  d_ff=config.d_ff, norm_first=norm_first)
    out, _ = block(x, causal(n))
    out2, _ = block(x2, causal(n))
    assert_close(out2[:, : t + 1], out[:, : t + 1], **law_tolerance(x.dtype, deep=True),
                 what=f"TransformerEncoderBlock (causal mask) output at positions <= {t} after changing x at > {t}")


@pytest.mark.component("decoder")
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre_ln", "post_ln"])
@given(config=configs(), data=st.data())
def test_decoder_block_causal_outputs_unaffected_by_future(impl, norm_first, config, data):
    """The decoder's self-attention with the causal tgt_mask: the target after t cannot leak
    back, whatever the memory."""
    x = data.draw(sequences(config), label="x")
    b, n, _ = x.shape
    memory = data.draw(sequences(config, batch=b), label="memory")
    t = data.draw(st.integers(0, n - 1), label="t")
    x2 = _splice(x, data.draw(tensors(tuple(x.shape), x.dtype), label="new x"), t, 1)
    block = build(impl.TransformerDecoderBlock, config, d_model=config.d_model, num_heads=config.num_heads,
                  d_ff=config.d_ff, norm_first=norm_first)
    out, sw, cw = block(x, memory, causal(n))
    out2, sw2, cw2 = block(x2, memory, causal(n))
    tol = law_tolerance(x.dtype, deep=True)
    assert_close(out2[:, : t + 1], out[:, : t + 1], **tol,
                 what=f"TransformerDecoderBlock (causal tgt_mask) output at positions <= {t} after changing x at > {t}")
    assert_close(cw2[:, :, : t + 1], cw[:, :, : t + 1], **tol,
                 what=f"TransformerDecoderBlock cross_weights of queries <= {t} after changing x at > {t}")


def _minigpt(impl, config, vocab, layers, max_len=8):
    return build(impl.MiniGPT, config, vocab_size=vocab, d_model=config.d_model, num_heads=config.num_heads,
                 num_layers=layers, d_ff=config.d_ff, max_len=max_len)


@pytest.mark.component("minigpt")
@budget(0.5)
@given(config=configs(max_dk=2), layers=st.integers(1, 2), vocab=st.integers(2, 9), data=st.data())
def test_minigpt_logits_unaffected_by_future_tokens(impl, config, layers, vocab, data):
    tokens = data.draw(token_batches(vocab, max_len=8), label="tokens")
    n = tokens.shape[1]
    t = data.draw(st.integers(0, n - 1), label="t")
    other = data.draw(token_batches(vocab, batch=tokens.shape[0], length=n), label="new tokens")
    tokens2 = _splice(tokens, other, t, 1)
    model = _minigpt(impl, config, vocab, layers)
    logits, _ = model(tokens)
    logits2, _ = model(tokens2)
    assert_close(logits2[:, : t + 1], logits[:, : t + 1], **law_tolerance(config.dtype, deep=True),
                 what=f"MiniGPT logits at positions <= {t} after changing the tokens at positions > {t}")


@pytest.mark.component("minigpt")
@budget(0.5)
@given(config=configs(max_dk=2), layers=st.integers(1, 2), vocab=st.integers(2, 9), data=st.data())
def test_minigpt_prefix_logits_equal_full_sequence_logits(impl, config, layers, vocab, data):
    tokens = data.draw(token_batches(vocab, max_len=8), label="tokens")
    p = data.draw(st.integers(1, tokens.shape[1]), label="prefix length")
    model = _minigpt(impl, config, vocab, layers)
    full, _ = model(tokens)
    prefix, _ = model(tokens[:, :p])
    assert_close(prefix, full[:, :p], **law_tolerance(config.dtype, deep=True),
                 what=f"MiniGPT logits of the first {p} tokens alone vs. the first {p} positions of the full sequence")


def _seq2seq(impl, config, src_vocab, tgt_vocab):
    return build(impl.Seq2SeqTransformer, config, src_vocab_size=src_vocab, tgt_vocab_size=tgt_vocab,
                 d_model=config.d_model, num_heads=config.num_heads, num_encoder_layers=1,
                 num_decoder_layers=1, d_ff=config.d_ff, max_len=8, pad_id=0)


@pytest.mark.component("seq2seq")
@budget(0.5)
@given(config=configs(max_dk=2), data=st.data())
def test_seq2seq_logits_unaffected_by_future_target_tokens(impl, config, data):
    src = data.draw(token_batches(6, max_len=8), label="src")
    tgt = data.draw(token_batches(7, batch=src.shape[0], max_len=8), label="tgt")
    n = tgt.shape[1]
    t = data.draw(st.integers(0, n - 1), label="t")
    tgt2 = _splice(tgt, data.draw(token_batches(7, batch=tgt.shape[0], length=n), label="new tgt"), t, 1)
    model = _seq2seq(impl, config, 6, 7)
    logits = model(src, tgt)
    logits2 = model(src, tgt2)
    assert_close(logits2[:, : t + 1], logits[:, : t + 1], **law_tolerance(config.dtype, deep=True),
                 what=f"Seq2SeqTransformer logits at target positions <= {t} after changing target tokens > {t}")


@pytest.mark.component("seq2seq")
@budget(0.5)
@given(config=configs(max_dk=2), data=st.data())
def test_seq2seq_prefix_logits_equal_full_target_logits(impl, config, data):
    src = data.draw(token_batches(6, max_len=8), label="src")
    tgt = data.draw(token_batches(7, batch=src.shape[0], max_len=8), label="tgt")
    p = data.draw(st.integers(1, tgt.shape[1]), label="prefix length")
    model = _seq2seq(impl, config, 6, 7)
    full = model(src, tgt)
    prefix = model(src, tgt[:, :p])
    assert_close(prefix, full[:, :p], **law_tolerance(config.dtype, deep=True),
                 what=f"Seq2SeqTransformer logits of the first {p} target tokens alone vs. the full target's")
