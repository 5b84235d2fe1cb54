"""Laws of the feed-forward network and the blocks (components ``ffn``, ``encoder``, ``decoder``).

The FFN is position-wise; a Pre-LN block whose W_O (every attention) and linear2 (weight and
bias) are zero is the identity (its residual path is all that is left); a Post-LN block's
output is layer-normalised; padded positions never change the real ones; eval() is
deterministic. Tolerances: :func:`properties.strategies.law_tolerance` (``deep`` for blocks).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from transformer_spec.probes.assertions import assert_close
from transformer_spec.probes.testing import encoder_block_shapes, seeded_parameters

from .draws import padding_mask, replace_padded, x_and_memory
from .modules import decoder_block, encoder_block, feed_forward, with_parameters
from .strategies import bool_tensors, configs, law_tolerance, sequences


@pytest.mark.component("ffn")
@given(config=configs(), data=st.data())
def test_feedforward_is_position_wise(impl, config, data):
    """The same MLP on every position independently: each position alone gives its own output."""
    x = data.draw(sequences(config), label="x")
    ffn = feed_forward(impl, config)
    out = ffn(x)
    tol = law_tolerance(config.dtype)
    for b in range(x.shape[0]):
        for i in range(x.shape[1]):
            assert_close(ffn(x[b : b + 1, i : i + 1]), out[b : b + 1, i : i + 1], **tol,
                         what=f"FeedForward of position {i} of item {b} alone vs. inside the sequence")


def _zero_sublayers_(block, attn_names):
    with torch.no_grad():
        for name in attn_names:
            getattr(block, name).W_O.weight.zero_()
        block.ffn.linear2.weight.zero_()
        block.ffn.linear2.bias.zero_()
    return block


@pytest.mark.component("encoder")
@given(config=configs(), data=st.data())
def test_pre_ln_encoder_block_with_zero_W_O_and_linear2_is_identity(impl, config, data):
    x = data.draw(sequences(config), label="x")
    n = x.shape[1]
    mask = data.draw(st.none() | bool_tensors((n, n)), label="mask")
    block = encoder_block(impl, config, True)
    _zero_sublayers_(block, ["self_attn"])
    out, _ = block(x, mask)
    assert_close(out, x, what="Pre-LN TransformerEncoderBlock with self_attn.W_O = 0 and ffn.linear2 = 0 "
                 "(x + 0 + 0)", **law_tolerance(config.dtype))


@pytest.mark.component("decoder")
@given(config=configs(), data=st.data())
def test_pre_ln_decoder_block_with_zero_W_O_and_linear2_is_identity(impl, config, data):
    x, memory = x_and_memory(data, config)
    block = decoder_block(impl, config, True)
    _zero_sublayers_(block, ["self_attn", "cross_attn"])
    n = x.shape[1]
    out, _, _ = block(x, memory, torch.ones(n, n, dtype=torch.bool).triu(1))
    assert_close(out, x, what="Pre-LN TransformerDecoderBlock with W_O = 0 in self_attn and cross_attn and "
                 "ffn.linear2 = 0 (x + 0 + 0 + 0)", **law_tolerance(config.dtype))


def _assert_layer_normalised(out, what):
    mean = out.double().mean(-1)
    var = out.double().var(-1, unbiased=False)
    atol = 1e-4 if out.dtype == torch.float32 else 1e-9
    assert_close(mean, torch.zeros_like(mean), what=f"{what}: mean over the features", atol=atol, rtol=0)
    too_big = var > 1 + atol
    assert not too_big.any(), (
        f"{what}: variance over the features {var.max().item():.6g} > 1 at position "
        f"{tuple(int(i) for i in too_big.nonzero()[0])}: the last step must be the LayerNorm"
    )


@pytest.mark.component("encoder")
@given(config=configs(min_dk=2), data=st.data())
def test_post_ln_encoder_block_output_is_layer_normalised(impl, config, data):
    """norm_first=False ends with norm2(x + ffn(x)): with norm2's weight 1 and bias 0, every
    position's output has mean 0 and (biased) variance <= 1 over the features."""
    x = data.draw(sequences(config), label="x")
    block = encoder_block(impl, config, False)
    with torch.no_grad():
        block.norm2.weight.fill_(1.0)
        block.norm2.bias.zero_()
    out, _ = block(x)
    _assert_layer_normalised(out, "Post-LN TransformerEncoderBlock output")


@pytest.mark.component("decoder")
@given(config=configs(min_dk=2), data=st.data())
def test_post_ln_decoder_block_output_is_layer_normalised(impl, config, data):
    x, memory = x_and_memory(data, config)
    block = decoder_block(impl, config, False)
    with torch.no_grad():
        block.norm3.weight.fill_(1.0)
        block.norm3.bias.zero_()
    out, _, _ = block(x, memory)
    _assert_layer_normalised(out, "Post-LN TransformerDecoderBlock output")


@pytest.mark.component("encoder")
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre_ln", "post_ln"])
@given(config=configs(), data=st.data())
def test_encoder_block_padded_positions_do_not_change_real_positions(impl, norm_first, config, data):
    """With a padding mask (B, 1, 1, L), whatever the padded positions hold, the outputs at the
    real positions stay the same."""
    x = data.draw(sequences(config), label="x")
    b, n, _ = x.shape
    mask = padding_mask(data, x, "padding mask")
    x2 = replace_padded(data, x, mask, "other padding content")
    block = encoder_block(impl, config, norm_first)
    out, _ = block(x, mask)
    out2, _ = block(x2, mask)
    real = ~mask[:, 0, 0]
    assert_close(out2[real], out[real], **law_tolerance(config.dtype, deep=True),
                 what="TransformerEncoderBlock outputs at real positions after changing the padded positions")


@pytest.mark.component("decoder")
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre_ln", "post_ln"])
@given(config=configs(), data=st.data())
def test_decoder_block_ignores_masked_memory_positions(impl, norm_first, config, data):
    """Memory positions blocked by memory_mask (source padding) do not change the output."""
    x, memory = x_and_memory(data, config)
    mask = padding_mask(data, memory, "memory_mask")
    memory2 = replace_padded(data, memory, mask, "other memory")
    block = decoder_block(impl, config, norm_first)
    out, _, _ = block(x, memory, None, mask)
    out2, _, _ = block(x, memory2, None, mask)
    assert_close(out2, out, **law_tolerance(config.dtype, deep=True),
                 what="TransformerDecoderBlock output after changing memory positions blocked by memory_mask")


@pytest.mark.component("encoder")
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre_ln", "post_ln"])
@given(config=configs(), data=st.data())
def test_encoder_block_is_deterministic_in_eval_mode(impl, norm_first, config, data):
    """eval(): dropout=0.5 acts nowhere (attention weights, residual branches, FFN)."""
    x = data.draw(sequences(config), label="x")
    params = seeded_parameters(encoder_block_shapes(config.d_model, config.d_ff), config.seed, config.dtype)
    kw = dict(d_model=config.d_model, num_heads=config.num_heads, d_ff=config.d_ff, norm_first=norm_first)
    block = with_parameters(impl.TransformerEncoderBlock, config, params, dropout=0.5, **kw)
    block0 = with_parameters(impl.TransformerEncoderBlock, config, params, dropout=0.0, **kw)
    tol = law_tolerance(config.dtype, deep=True)
    out, _ = block(x)
    assert_close(block(x)[0], out, what="two eval() calls of TransformerEncoderBlock(dropout=0.5)", **tol)
    assert_close(out, block0(x)[0], what="eval() TransformerEncoderBlock with dropout=0.5 vs. 0.0", **tol)
