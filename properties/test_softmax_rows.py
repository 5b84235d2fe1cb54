"""Law 1: attention weights are a softmax over the keys.

Every row of weights (one query against all keys) lies in [0, 1] and sums to 1 when at least one
key is allowed; blocked entries (mask ``True``) are exactly 0; a row whose keys are all blocked
is all zeros, never NaN. This holds for ``scaled_dot_product_attention``, both multi-head
modules, both blocks and MiniGPT's attention maps, and stays true for scores of size 1e4
(a softmax that does not subtract the row maximum overflows there) and when every allowed score
lies far below zero, down to -1e30 in float32 and float64: a blocked key is filled with -inf (the
seeds' ``masked_fill(mask, -inf)``), so it gets exactly 0 however low the allowed scores are.
A finite fill such as ``masked_fill(mask, -1e9)`` (seed 001 section 8.1 "a sufficiently small
negative number", section 11's exercise) gives the blocked keys all the weight once the allowed
scores are below it. Those scores stay far inside the float range (a fill of
``torch.finfo(dtype).min`` behaves like -inf on them).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from transformer_spec.probes.assertions import assert_close
from transformer_spec.probes.testing import assert_attention_weights_valid

from .draws import padding_mask, x_and_memory
from .modules import attention_module, decoder_block, encoder_block, minigpt
from .strategies import (
    attention_inputs,
    bool_tensors,
    budget,
    causal,
    configs,
    law_tolerance,
    sequences,
    token_batches,
    values,
)


@pytest.mark.component("attention")
@given(inputs=attention_inputs())
@pytest.mark.needs('weights')
def test_attention_rows_sum_to_one(impl, inputs):
    """softmax(q k^T / sqrt(d_k)) over the keys: rows in [0, 1] summing to 1, blocked entries 0."""
    out, weights = impl.scaled_dot_product_attention(inputs.q, inputs.k, inputs.v, inputs.mask)
    assert tuple(weights.shape) == inputs.batch + (inputs.q.shape[-2], inputs.k.shape[-2]), (
        f"weights have shape {tuple(weights.shape)}, expected (..., Lq, Lk)"
    )
    assert_attention_weights_valid(weights, inputs.mask, what="scaled_dot_product_attention weights")
    assert torch.isfinite(out).all(), "scaled_dot_product_attention output has NaN/inf"


@pytest.mark.component("attention")
@given(inputs=attention_inputs(limit=1.0), magnitude=st.sampled_from([1e4, 1e3, 3e4]))
@pytest.mark.needs('weights')
def test_attention_rows_sum_to_one_for_scores_of_1e4(impl, inputs, magnitude):
    """Scores up to +-1e4 (q scaled up): still finite weights summing to 1, equal to a stable
    float64 softmax computed here (subtracting the row maximum)."""
    q, k, v, mask = inputs.q, inputs.k, inputs.v, inputs.mask
    d_k = q.shape[-1]
    raw = (q.double() @ k.double().transpose(-2, -1)).abs().max().item()
    assume(raw >= 0.25)  # so that scaling q up reaches the magnitude without overflowing q
    q = q * (magnitude * d_k**0.5 / raw)  # the largest |score| is now `magnitude`
    out, weights = impl.scaled_dot_product_attention(q, k, v, mask)
    assert_attention_weights_valid(weights, mask, what=f"weights for scores up to {magnitude:g}",
                                   score_size=magnitude)
    # independent computation: stable softmax in float64
    scores = (q.double() @ k.double().transpose(-2, -1)) / d_k**0.5
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    rowmax = scores.amax(-1, keepdim=True).nan_to_num(neginf=0.0).clamp_min(-1e300)
    rowmax = torch.where(torch.isinf(rowmax), torch.zeros_like(rowmax), rowmax)
    e = (scores - rowmax).exp()
    expected = e / e.sum(-1, keepdim=True).clamp_min(1e-300)
    # the scaled scores are only known to float32 precision when q, k are float32: a score of
    # 1e4 carries an absolute rounding error of ~1e-3, so compare float32 weights at 1e-2
    tol = {"rtol": 0.0, "atol": 1e-2} if q.dtype == torch.float32 else {"rtol": 1e-6, "atol": 1e-9}
    assert_close(weights.double(), expected, what=f"weights for scores up to {magnitude:g}", **tol)


#: How far below zero every score is pushed (shrinks to 2e4): below a fill of -1e4, and from
#: 1e10 on below the seeds' -1e9 too; 1e30 is still ~1e8 times below float32's largest number.
DEPTHS = (2e4, 1e10, 1e20, 1e30)


def _lowered(q, k, depth):
    """q, k with one feature appended (``a`` on every query, ``-a`` on every key) so that every
    score ``(q . k) / sqrt(d_k)`` becomes ``(q . k) / sqrt(d_k + 1) - depth``: the same shift for
    every key of a row, which a softmax does not see."""
    a = (depth * (q.shape[-1] + 1) ** 0.5) ** 0.5
    return (torch.cat([q, torch.full_like(q[..., :1], a)], dim=-1),
            torch.cat([k, torch.full_like(k[..., :1], -a)], dim=-1))


@pytest.mark.component("attention")
@given(inputs=attention_inputs(with_mask=True, min_keys=2), depth=st.sampled_from(DEPTHS))
@pytest.mark.needs('weights')
def test_blocked_keys_get_zero_weight_however_low_the_allowed_scores(impl, inputs, depth):
    """Every score lowered by ``depth`` (up to 1e30): blocked entries still exactly 0 and the
    allowed keys still get the weight. Query row 0 always has key 0 allowed and the last key
    blocked, so a finite fill above -depth puts the weight on a blocked key.

    Only masking is checked here: how exactly the weights sum to 1 at such magnitudes depends on
    the order of the float operations (law 1 at ordinary scores checks the sums)."""
    mask = torch.broadcast_to(inputs.mask, inputs.batch + (inputs.q.shape[-2], inputs.k.shape[-2])).clone()
    mask[..., 0, 0], mask[..., 0, -1] = False, True
    q, k = _lowered(inputs.q, inputs.k, depth)
    _, weights = impl.scaled_dot_product_attention(q, k, inputs.v, mask)
    what = f"weights when every score is about -{depth:g}"
    hint = "a finite fill such as -1e9 beats every allowed score below it: fill blocked scores with -inf"
    if not isinstance(weights, torch.Tensor) or tuple(weights.shape) != tuple(mask.shape):
        raise AssertionError(f"{what}: expected a tensor of shape {tuple(mask.shape)}, got "
                             f"{tuple(weights.shape) if isinstance(weights, torch.Tensor) else type(weights).__name__}")
    w = weights.detach().cpu().double()
    checks = (
        (~torch.isfinite(w), "is not finite", "a finite weight"),
        (mask & (w != 0), "is a blocked entry (mask True)", f"exactly 0 ({hint})"),
    )
    for bad, is_what, expected in checks:
        if bad.any():
            i = tuple(int(j) for j in bad.nonzero()[0])
            raise AssertionError(f"{what}: weight {w[i].item():.6g} at index {i} {is_what}: expected {expected}")
    starved = (~mask).any(-1) & ~(w.sum(-1) > 0)
    if starved.any():
        i = tuple(int(j) for j in starved.nonzero()[0])
        raise AssertionError(f"{what}: row {i} gives its allowed keys total weight {w[i].sum().item():.6g}, "
                             f"expected 1 (the softmax over the allowed keys; {hint})")


@pytest.mark.component("mha")
@pytest.mark.parametrize("self_attention", [False, True], ids=["MultiHeadAttention", "MultiHeadSelfAttention"])
@given(config=configs(), data=st.data())
def test_multihead_attention_rows_sum_to_one(impl, self_attention, config, data):
    """Each head's weights (B, H, Lq, Lk) obey the softmax law, with masks of shape (Lq, Lk),
    (B, 1, 1, Lk) (padding) or (B, 1, Lq, Lk)."""
    x = data.draw(sequences(config), label="query")
    b, lq, _ = x.shape
    if self_attention:
        cls, lk = impl.MultiHeadSelfAttention, lq
    else:
        cls, lk = impl.MultiHeadAttention, data.draw(st.integers(1, 5), label="Lk")
    mask_shape = data.draw(st.sampled_from([(lq, lk), (b, 1, 1, lk), (b, 1, lq, lk)]), label="mask shape")
    mask = data.draw(st.none() | bool_tensors(mask_shape), label="mask")
    m = attention_module(cls, config)
    if self_attention:
        _, weights = m(x, mask)
    else:
        kv = data.draw(sequences(config, batch=b, length=lk), label="key=value")
        _, weights = m(x, kv, kv, mask)
    assert tuple(weights.shape) == (b, config.num_heads, lq, lk), (
        f"{cls.__name__} weights have shape {tuple(weights.shape)}, expected (B, H, Lq, Lk) = "
        f"{(b, config.num_heads, lq, lk)}"
    )
    assert_attention_weights_valid(weights, mask, what=f"{cls.__name__} weights")


@pytest.mark.component("encoder")
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre_ln", "post_ln"])
@given(config=configs(), data=st.data())
def test_encoder_block_attention_rows_sum_to_one(impl, norm_first, config, data):
    x = data.draw(sequences(config), label="x")
    b, n, _ = x.shape
    mask = data.draw(st.none() | st.sampled_from([(n, n), (b, 1, 1, n)]).flatmap(bool_tensors), label="mask")
    block = encoder_block(impl, config, norm_first)
    _, weights = block(x, mask)
    assert tuple(weights.shape) == (b, config.num_heads, n, n), f"weights shape {tuple(weights.shape)}"
    assert_attention_weights_valid(weights, mask, what="TransformerEncoderBlock attn_weights")


@pytest.mark.component("decoder")
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre_ln", "post_ln"])
@given(config=configs(), data=st.data())
def test_decoder_block_self_and_cross_attention_rows_sum_to_one(impl, norm_first, config, data):
    x, memory = x_and_memory(data, config)
    b, lt, _ = x.shape
    ls = memory.shape[1]
    memory_mask = padding_mask(data, memory, "memory_mask", optional=True)
    block = decoder_block(impl, config, norm_first)
    tgt_mask = causal(lt)
    _, self_w, cross_w = block(x, memory, tgt_mask, memory_mask)
    assert tuple(self_w.shape) == (b, config.num_heads, lt, lt), f"self_weights shape {tuple(self_w.shape)}"
    assert tuple(cross_w.shape) == (b, config.num_heads, lt, ls), f"cross_weights shape {tuple(cross_w.shape)}"
    assert_attention_weights_valid(self_w, tgt_mask, what="TransformerDecoderBlock self_weights (causal tgt_mask)")
    assert_attention_weights_valid(cross_w, memory_mask, what="TransformerDecoderBlock cross_weights")


@pytest.mark.component("minigpt")
@budget(0.5)
@given(config=configs(max_dk=2), layers=st.integers(1, 2), vocab=st.integers(2, 9), data=st.data())
def test_minigpt_attention_maps_rows_sum_to_one(impl, config, layers, vocab, data):
    """``return_attn=True`` gives one (B, H, L, L) map per layer, each causal (entries above the
    diagonal exactly 0) with rows summing to 1."""
    tokens = data.draw(token_batches(vocab), label="tokens")
    model = minigpt(impl, config, vocab, layers)
    _, maps = model(tokens, return_attn=True)
    b, n = tokens.shape
    assert isinstance(maps, (list, tuple)) and len(maps) == layers, (
        f"MiniGPT(num_layers={layers}) returned attn_maps {type(maps).__name__} of length "
        f"{len(maps) if hasattr(maps, '__len__') else '?'}, expected a list of {layers} tensors"
    )
    for i, w in enumerate(maps):
        assert tuple(w.shape) == (b, config.num_heads, n, n), f"attn_maps[{i}] has shape {tuple(w.shape)}"
        assert_attention_weights_valid(w, causal(n), what=f"MiniGPT attn_maps[{i}] (causal)")


@pytest.mark.component("attention")
@given(inputs=attention_inputs(with_mask=True), fill=values())
@pytest.mark.needs('weights')
def test_attention_fully_blocked_rows_give_zero_weights_and_outputs(impl, inputs, fill):
    """A query whose keys are all blocked: zero weights, zero output and finite (zero) gradients."""
    q, k, v = (t.clone().requires_grad_(True) for t in (inputs.q, inputs.k, inputs.v))
    mask = inputs.mask.clone()
    mask[..., 0, :] = True  # the first query row is fully blocked (in every broadcast copy)
    out, weights = impl.scaled_dot_product_attention(q, k, v, mask)
    assert_attention_weights_valid(weights, mask, what="weights with a fully blocked row")
    assert_close(out[..., 0, :].detach(), torch.zeros_like(out[..., 0, :]),
                 what="output of the fully blocked query row 0", **law_tolerance(out.dtype))
    (out.sum() * fill + weights.sum()).backward()
    for name, t in (("q", q), ("k", k), ("v", v)):
        assert t.grad is not None and torch.isfinite(t.grad).all(), (
            f"gradient of {name} is not finite with a fully blocked query row: {t.grad}"
        )
    assert_close(q.grad[..., 0, :], torch.zeros_like(q.grad[..., 0, :]),
                 what="gradient of the fully blocked query row 0", **law_tolerance(q.dtype))
