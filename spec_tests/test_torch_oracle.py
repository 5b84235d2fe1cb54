"""PyTorch's own attention and transformer layers as an independent oracle.

The submission's modules get seeded weights by the contract's names
(:func:`transformer_spec.probes.testing.set_parameters`); PyTorch's modules get the same weights
(:mod:`transformer_spec.probes.testing`: ``in_proj_weight = cat(W_Q, W_K, W_V)``, attention biases
zeroed, ``linear1/linear2/norm*`` copied). Both run in eval mode, in float32 and float64.

Two conventions differ from ours and are translated here, not in the submission:

* ``F.scaled_dot_product_attention``'s boolean ``attn_mask`` is True = ALLOWED: it gets ``~mask``.
  It returns no weights, so the oracle's weights are its output for ``v = I`` (identity values).
* ``nn.MultiheadAttention`` masks are True = blocked like ours; a padding mask ``(B, 1, 1, Lk)``
  becomes its ``key_padding_mask (B, Lk)``.

No mask used here blocks a whole row (PyTorch gives NaN there; the contract gives zeros, which
``test_behaviours.py`` checks).

Every call of torch's attention is inside ``oracle()`` (the forbidden-API guard allows it there,
for this thread only), and no call of the submission is.
"""

import pytest
import torch
import torch.nn.functional as F
from transformer_spec.contract.inputs import ORACLE, causal, padding, randn, random_mask

from transformer_spec.guard.forbidden import oracle as torch_oracle
from transformer_spec.probes.assertions import assert_close
from transformer_spec.probes.testing import (
    decoder_block_shapes,
    encoder_block_shapes,
    ffn_shapes,
    mha_shapes,
    seeded_parameters,
    set_parameters,
    torch_decoder_layer,
    torch_encoder_layer,
    torch_mha,
)

# Tolerances per dtype. float32: the submission and PyTorch may sum in different orders
# (heads batched or looped, fused kernels), ~1e-6 relative per operation, a few operations deep.
TOL = {
    torch.float32: {"rtol": 1e-4, "atol": 2e-5},
    torch.float64: {"rtol": 1e-9, "atol": 1e-10},
}

S = ORACLE  # the sizes the hidden re-checks mirror (transformer_spec/contract/inputs.py)
B, LQ, LK, D, H, FF = S.b, S.lq, S.lk, S.d, S.h, S.ff


# ---------------------------------------------------------------- scaled_dot_product_attention
SDPA_MASKS = {
    "none": lambda: None,
    "random": lambda: random_mask(B, H, LQ, LK, seed=11),
    "broadcast_lq_lk": lambda: random_mask(LQ, LK, seed=12),
    "padding": lambda: padding(LK, [LK, 4]),
}


@pytest.mark.component("attention")
@pytest.mark.parametrize("mask_kind", list(SDPA_MASKS))
@pytest.mark.parametrize("scale", [None, 0.3], ids=["scale_none", "scale_0.3"])
@pytest.mark.needs('scale', 'weights')
def test_sdpa_matches_torch(impl, dtype, mask_kind, scale):
    q, k, v = randn(B, H, LQ, 4, dtype=dtype, seed=1), randn(B, H, LK, 4, dtype=dtype, seed=2), \
        randn(B, H, LK, 6, dtype=dtype, seed=3)
    mask = SDPA_MASKS[mask_kind]()
    out, weights = impl.scaled_dot_product_attention(q, k, v, mask=mask, scale=scale)
    allowed = None if mask is None else ~mask  # torch: True = allowed
    eye = torch.eye(LK, dtype=dtype).expand(B, H, LK, LK)
    with torch_oracle():
        expected_out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=scale)
        expected_w = F.scaled_dot_product_attention(q, k, eye, attn_mask=allowed, scale=scale)
    what = f"scaled_dot_product_attention(mask={mask_kind}, scale={scale})"
    assert_close(weights, expected_w, **TOL[dtype], what=what + " weights vs torch", seed="seed 000 step 2")
    assert_close(out, expected_out, **TOL[dtype], what=what + " output vs torch", seed="seed 000 step 2")


@pytest.mark.component("attention")
def test_sdpa_matches_torch_unbatched_2d(impl, dtype):
    """(Lq, d_k) inputs with no leading dimensions, as in seed 001 section 9."""
    q, k, v = randn(LQ, 3, dtype=dtype, seed=4), randn(LK, 3, dtype=dtype, seed=5), randn(LK, 2, dtype=dtype, seed=6)
    out, weights = impl.scaled_dot_product_attention(q, k, v)
    with torch_oracle():
        expected = F.scaled_dot_product_attention(q[None], k[None], v[None])[0]
    assert_close(out, expected, **TOL[dtype],
                 what="2-D scaled_dot_product_attention output vs torch", seed="seed 001 section 9")


# ---------------------------------------------------------------- multi-head attention
def _mha_masks(self_attention):
    L_k = LQ if self_attention else LK
    return {
        "none": (None, None, None),
        # (ours, torch attn_mask, torch key_padding_mask)
        "lq_lk": ((m := random_mask(LQ, L_k, seed=21)), m, None),
        "padding": ((p := padding(L_k, [L_k, 3])), None, p[:, 0, 0, :]),
        **({"causal": (causal(LQ), causal(LQ), None)} if self_attention else {}),
    }


def _with_torch_mha(cls, seed, dtype):
    """``cls(d_model=D, num_heads=H)`` and ``torch.nn.MultiheadAttention``, holding the same seeded weights."""
    params = seeded_parameters(mha_shapes(D), seed=seed)
    module = set_parameters(cls(d_model=D, num_heads=H, dropout=0.0).to(dtype), params).eval()
    return module, torch_mha(params, D, H, dtype=dtype)


def _assert_same_as_torch_mha(got, oracle, qkv, attn_mask, kpm, dtype, what, weights_what):
    """``got = (output, weights)`` against ``oracle(*qkv)`` with torch's masks ``attn_mask`` and ``kpm``."""
    out, weights = got
    with torch_oracle():
        exp_out, exp_w = oracle(*qkv, attn_mask=attn_mask, key_padding_mask=kpm,
                                need_weights=True, average_attn_weights=False)
    assert_close(weights, exp_w, **TOL[dtype], what=what + weights_what, seed="seed 000 step 3")
    assert_close(out, exp_out, **TOL[dtype], what=what + " output vs torch.nn.MultiheadAttention",
                 seed="seed 000 step 3")


@pytest.mark.component("mha")
@pytest.mark.parametrize("mask_kind", ["none", "lq_lk", "padding"])
def test_multihead_attention_matches_torch(impl, dtype, mask_kind):
    mha, oracle = _with_torch_mha(impl.MultiHeadAttention, 31, dtype)
    query, key, value = randn(B, LQ, D, dtype=dtype, seed=32), randn(B, LK, D, dtype=dtype, seed=33), \
        randn(B, LK, D, dtype=dtype, seed=34)
    ours, attn_mask, kpm = _mha_masks(False)[mask_kind]
    _assert_same_as_torch_mha(mha(query, key, value, mask=ours), oracle, (query, key, value), attn_mask, kpm, dtype,
                              f"MultiHeadAttention(d_model={D}, num_heads={H}) mask={mask_kind}",
                              " weights (B, H, Lq, Lk) vs torch.nn.MultiheadAttention")


@pytest.mark.component("mha")
@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding"])
def test_multihead_self_attention_matches_torch(impl, dtype, mask_kind):
    mhsa, oracle = _with_torch_mha(impl.MultiHeadSelfAttention, 41, dtype)
    x = randn(B, LQ, D, dtype=dtype, seed=42)
    ours, attn_mask, kpm = _mha_masks(True)[mask_kind]
    _assert_same_as_torch_mha(mhsa(x, mask=ours), oracle, (x, x, x), attn_mask, kpm, dtype,
                              f"MultiHeadSelfAttention(d_model={D}, num_heads={H}) mask={mask_kind}",
                              " weights vs torch.nn.MultiheadAttention")


# ---------------------------------------------------------------- feed-forward
@pytest.mark.component("ffn")
def test_feed_forward_matches_torch(impl, dtype):
    params = seeded_parameters(ffn_shapes(D, FF), seed=51)
    ffn = set_parameters(impl.FeedForward(d_model=D, d_ff=FF, dropout=0.0).to(dtype), params).eval()
    x = randn(B, LQ, D, dtype=dtype, seed=52) * 2  # spread the pre-activations over GELU's curve
    p = {n: t.to(dtype) for n, t in params.items()}
    hidden = F.gelu(F.linear(x, p["linear1.weight"], p["linear1.bias"]))  # exact erf GELU
    expected = F.linear(hidden, p["linear2.weight"], p["linear2.bias"])
    assert_close(ffn(x), expected, **TOL[dtype], what="FeedForward output vs F.linear(F.gelu(F.linear(x)))",
                 seed="seed 000 step 4")


# ---------------------------------------------------------------- encoder / decoder blocks
NORM_FIRST = pytest.mark.parametrize("norm_first", [True, False], ids=["pre_ln", "post_ln"])


@pytest.mark.component("encoder")
@NORM_FIRST
@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding"])
def test_encoder_block_matches_torch(impl, dtype, norm_first, mask_kind):
    params = seeded_parameters(encoder_block_shapes(D, FF), seed=61)
    block = impl.TransformerEncoderBlock(d_model=D, num_heads=H, d_ff=FF, dropout=0.0, norm_first=norm_first)
    block = set_parameters(block.to(dtype), params).eval()
    oracle = torch_encoder_layer(params, D, H, FF, norm_first, dtype=dtype)
    x = randn(B, LQ, D, dtype=dtype, seed=62)
    ours, attn_mask, kpm = _mha_masks(True)[mask_kind]
    out, weights = block(x, ours)
    with torch_oracle():
        expected = oracle(x, src_mask=attn_mask, src_key_padding_mask=kpm)
    what = f"TransformerEncoderBlock(norm_first={norm_first}) mask={mask_kind}"
    assert_close(out, expected, **TOL[dtype], what=what + " output vs torch.nn.TransformerEncoderLayer",
                 seed="seed 000 step 5" if norm_first else "seed 001 section 6")
    # The attention weights are those of self_attn applied to norm1(x) (Pre-LN) or x (Post-LN).
    attn_in = oracle.norm1(x) if norm_first else x
    with torch_oracle():
        _, exp_w = oracle.self_attn(attn_in, attn_in, attn_in, attn_mask=attn_mask, key_padding_mask=kpm,
                                    need_weights=True, average_attn_weights=False)
    assert_close(weights, exp_w, **TOL[dtype], what=what + " attn_weights vs torch", seed="seed 000 step 5")


@pytest.mark.component("decoder")
@NORM_FIRST
@pytest.mark.parametrize("mask_kind", ["none", "causal_and_memory_padding"])
def test_decoder_block_matches_torch(impl, dtype, norm_first, mask_kind):
    params = seeded_parameters(decoder_block_shapes(D, FF), seed=71)
    block = impl.TransformerDecoderBlock(d_model=D, num_heads=H, d_ff=FF, dropout=0.0, norm_first=norm_first)
    block = set_parameters(block.to(dtype), params).eval()
    oracle = torch_decoder_layer(params, D, H, FF, norm_first, dtype=dtype)
    x, memory = randn(B, LQ, D, dtype=dtype, seed=72), randn(B, LK, D, dtype=dtype, seed=73)
    if mask_kind == "none":
        tgt_mask = memory_mask = mem_kpm = None
    else:
        tgt_mask = causal(LQ)
        memory_mask = padding(LK, [LK, 4])
        mem_kpm = memory_mask[:, 0, 0, :]
    out, self_w, cross_w = block(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask)
    with torch_oracle():
        expected = oracle(x, memory, tgt_mask=tgt_mask, memory_key_padding_mask=mem_kpm)
    what = f"TransformerDecoderBlock(norm_first={norm_first}) masks={mask_kind}"
    assert_close(out, expected, **TOL[dtype], what=what + " output vs torch.nn.TransformerDecoderLayer",
                 seed="seed 001 section 2")
    # Self-attention weights: self_attn on norm1(x) (Pre-LN) or x (Post-LN).
    s_in = oracle.norm1(x) if norm_first else x
    with torch_oracle():
        s_out, exp_self = oracle.self_attn(s_in, s_in, s_in, attn_mask=tgt_mask, need_weights=True,
                                           average_attn_weights=False)
    assert_close(self_w, exp_self, **TOL[dtype], what=what + " self_weights vs torch", seed="seed 001 section 2")
    # Cross-attention weights: queries from the decoder after the first residual, keys from memory.
    h = x + s_out if norm_first else oracle.norm1(x + s_out)
    c_in = oracle.norm2(h) if norm_first else h
    with torch_oracle():
        _, exp_cross = oracle.multihead_attn(c_in, memory, memory, key_padding_mask=mem_kpm, need_weights=True,
                                             average_attn_weights=False)
    assert_close(cross_w, exp_cross, **TOL[dtype], what=what + " cross_weights (B, H, Lt, Ls) vs torch",
                 seed="seed 001 section 2")
