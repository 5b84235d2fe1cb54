"""Law 3: without positional information, attention does not see order.

Permuting the sequence permutes the output (equivariance) of multi-head self-attention, of the
encoder block without a mask and of the position-wise FFN; permuting keys and values together
leaves attention's output unchanged (invariance) and permutes the weights' key axis. And the
negative control: once the sinusoidal encoding is added, equivariance fails, which is why
the encoding exists (seed 000 section 6: "打乱输入序列中词的顺序，注意力输出只会在顺序上不同").
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from transformer_spec.probes.assertions import assert_close

from .draws import padding_mask, x_and_memory
from .modules import decoder_block, encoder_block, feed_forward, multihead_attention, self_attention
from .strategies import (
    attention_inputs,
    configs,
    dtypes,
    law_tolerance,
    permutations_of,
    sequences,
    tensors,
)


def _x_and_perm(data, config):
    """An input ``x (B, L, d_model)`` and a permutation of its ``L`` positions."""
    x = data.draw(sequences(config), label="x")
    return x, data.draw(permutations_of(x.shape[1]), label="perm")


def _nonidentity(perm: list[int]) -> list[int]:
    if perm == sorted(perm):
        perm = perm.copy()
        perm[0], perm[1] = perm[1], perm[0]
    return perm


@pytest.mark.component("mha")
@given(config=configs(), data=st.data())
def test_multihead_self_attention_is_permutation_equivariant(impl, config, data):
    x, perm = _x_and_perm(data, config)
    m = self_attention(impl, config)
    out, w = m(x)
    out_p, w_p = m(x[:, perm])
    tol = law_tolerance(x.dtype)
    assert_close(out_p, out[:, perm], what=f"MultiHeadSelfAttention(x[:, {perm}]) vs. its output permuted", **tol)
    assert_close(w_p, w[:, :, perm][:, :, :, perm], **tol,
                 what=f"MultiHeadSelfAttention weights for x[:, {perm}] vs. the weights permuted on both axes")


@pytest.mark.component("encoder")
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre_ln", "post_ln"])
@given(config=configs(), data=st.data())
def test_encoder_block_is_permutation_equivariant(impl, norm_first, config, data):
    x, perm = _x_and_perm(data, config)
    block = encoder_block(impl, config, norm_first)
    out, _ = block(x)
    out_p, _ = block(x[:, perm])
    assert_close(out_p, out[:, perm], **law_tolerance(x.dtype, deep=True),
                 what=f"TransformerEncoderBlock(x[:, {perm}]) (no mask) vs. its output permuted")


@pytest.mark.component("ffn")
@given(config=configs(), data=st.data())
def test_feedforward_is_permutation_equivariant(impl, config, data):
    x, perm = _x_and_perm(data, config)
    ffn = feed_forward(impl, config)
    assert_close(ffn(x[:, perm]), ffn(x)[:, perm], **law_tolerance(x.dtype),
                 what=f"FeedForward(x[:, {perm}]) vs. its output permuted")


@pytest.mark.component("attention")
@given(inputs=attention_inputs(), data=st.data())
@pytest.mark.needs('weights')
def test_attention_is_invariant_to_permuting_keys_and_values_together(impl, inputs, data):
    """Attention is a weighted sum over the key/value pairs: their order does not matter (the
    mask's key axis is permuted with them)."""
    q, k, v, mask = inputs.q, inputs.k, inputs.v, inputs.mask
    perm = data.draw(permutations_of(k.shape[-2]), label="perm")
    out, w = impl.scaled_dot_product_attention(q, k, v, mask)
    mask_p = None if mask is None else mask[..., perm]
    out_p, w_p = impl.scaled_dot_product_attention(q, k[..., perm, :], v[..., perm, :], mask_p)
    tol = law_tolerance(q.dtype)
    assert_close(out_p, out, what=f"attention output with keys and values permuted by {perm}", **tol)
    assert_close(w_p, w[..., perm], what=f"attention weights with keys and values permuted by {perm}", **tol)


@pytest.mark.component("mha")
@given(config=configs(), data=st.data())
def test_multihead_attention_is_invariant_to_permuting_keys_and_values_together(impl, config, data):
    query = data.draw(sequences(config), label="query")
    b = query.shape[0]
    kv = data.draw(sequences(config, batch=b), label="key")
    value = data.draw(sequences(config, batch=b, length=kv.shape[1]), label="value")
    lk = kv.shape[1]
    mask = padding_mask(data, kv, "mask", optional=True)
    perm = data.draw(permutations_of(lk), label="perm")
    m = multihead_attention(impl, config)
    out, w = m(query, kv, value, mask)
    out_p, w_p = m(query, kv[:, perm], value[:, perm], None if mask is None else mask[..., perm])
    tol = law_tolerance(query.dtype)
    assert_close(out_p, out, what=f"MultiHeadAttention output with key and value permuted by {perm}", **tol)
    assert_close(w_p, w[..., perm], what=f"MultiHeadAttention weights with key and value permuted by {perm}", **tol)


@pytest.mark.component("decoder")
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre_ln", "post_ln"])
@given(config=configs(), data=st.data())
def test_decoder_block_is_invariant_to_permuting_memory(impl, norm_first, config, data):
    """Cross-attention reads the memory as a set: permuting it (and memory_mask) changes nothing."""
    x, memory = x_and_memory(data, config)
    memory_mask = padding_mask(data, memory, "memory_mask", optional=True)
    perm = data.draw(permutations_of(memory.shape[1]), label="perm")
    block = decoder_block(impl, config, norm_first)
    out, _, cw = block(x, memory, None, memory_mask)
    out_p, _, cw_p = block(x, memory[:, perm], None, None if memory_mask is None else memory_mask[..., perm])
    tol = law_tolerance(x.dtype, deep=True)
    assert_close(out_p, out, what=f"TransformerDecoderBlock output with memory permuted by {perm}", **tol)
    assert_close(cw_p, cw[..., perm], what=f"TransformerDecoderBlock cross_weights with memory permuted by {perm}", **tol)


@pytest.mark.component("position")
@given(d_half=st.integers(1, 4), length=st.integers(2, 6), dtype=dtypes(), data=st.data())
def test_sinusoidal_encoding_breaks_permutation_equivariance(impl, d_half, length, dtype, data):
    """Negative control: with the submission's SinusoidalPositionEncoding added, permuting the
    tokens (any permutation but the identity) no longer just permutes the output, neither of
    the encoding itself nor of self-attention on top of it (one head, identity projections).
    Expected gaps: the encoding differs by ``PE[i] - PE[perm[i]]`` (>= 0.28 in max norm for
    positions < 6); through attention the gap is >= 0.06 in these sizes, asserted > 1e-3."""
    d = 2 * d_half
    b = data.draw(st.integers(1, 2), label="B")
    x = data.draw(tensors((b, length, d), dtype), label="x")
    perm = _nonidentity(data.draw(permutations_of(length), label="perm"))
    pe = impl.SinusoidalPositionEncoding(d_model=d, max_len=8).to(dtype).eval()
    gap = (pe(x[:, perm]) - pe(x)[:, perm]).abs().max().item()
    assert gap > 1e-2, (
        f"SinusoidalPositionEncoding: permuting the positions by {perm} only permuted the output "
        f"(largest difference {gap:.3g}): the encoding must differ from position to position, "
        f"PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(...)"
    )
    attn = impl.MultiHeadSelfAttention(d_model=d, num_heads=1, dropout=0.0).to(dtype).eval()
    with torch.no_grad():
        for name in ("W_Q", "W_K", "W_V", "W_O"):
            getattr(attn, name).weight.copy_(torch.eye(d, dtype=dtype))

    def f(z):
        return attn(pe(z))[0]

    gap = (f(x[:, perm]) - f(x)[:, perm]).abs().max().item()
    assert gap > 1e-3, (
        f"self-attention after SinusoidalPositionEncoding is still permutation-equivariant for "
        f"perm {perm} (largest difference {gap:.3g}): the encoding does not make order visible"
    )
