"""Laws of grouped-query attention (component ``gqa``).

Without ``rope`` and with as many key/value heads as heads it is multi-head attention, computed
here from the same weights (heads split, ``softmax(q k^T / sqrt(head_dim))``, concatenated,
``output_proj``); with fewer key/value heads it is that attention with each key/value head's rows
repeated for its group of consecutive query heads (``num_kv_heads=1``: multi-query attention).
With ``rope``: shifting every position changes nothing, equal positions are attention without
``rope``, and values are never rotated. Causality, batch independence (each item with its own
positions) and permutation equivariance (no mask, no ``rope``). Weights by the contract's names,
float64. Tolerances: :func:`properties.strategies.law_tolerance`, and
:func:`properties.modern.strategies.rope_tolerance` where two sides turn by different angles.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from transformer_spec import profiles
from transformer_spec.probes.assertions import assert_close

from ..strategies import bool_tensors, causal, law_tolerance, permutations_of, sequences
from .strategies import (
    MAX_LEN,
    LlamaConfig,
    accepted,
    causal_or_none,
    gqa,
    llama_configs,
    new_future,
    positions,
    rope_tolerance,
)


def _by_hand(x, Wq, Wk, Wv, Wo, num_heads, mask=None):
    """Multi-head attention written out: head h uses rows h*d .. (h+1)*d - 1 of Wq, Wk, Wv;
    softmax(q k^T / sqrt(d)) with mask True = blocked and fully blocked rows 0; heads concatenated; Wo."""
    B, L, D = x.shape
    d = D // num_heads

    def split(W):
        return (x @ W.T).view(B, L, num_heads, d).transpose(1, 2)  # (B, H, L, d)

    q, k, v = split(Wq), split(Wk), split(Wv)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    if mask is not None:
        blocked = torch.broadcast_to(mask, scores.shape)
        dead = blocked.all(-1, keepdim=True)
        scores = scores.masked_fill(blocked, float("-inf")).masked_fill(dead, 0.0)
    w = torch.softmax(scores, dim=-1)
    if mask is not None:
        w = w.masked_fill(dead, 0.0)
    return (w @ v).transpose(1, 2).reshape(B, L, D) @ Wo.T, w


def _weights(m):
    return [getattr(m, n).weight.detach() for n in ("q_proj", "k_proj", "v_proj", "output_proj")]


def _per_query_head(W, config: LlamaConfig):
    """``k_proj`` / ``v_proj`` rows ``(num_kv_heads * d, D)`` repeated for each query head: kv head g's
    rows once for each of the ``group`` consecutive query heads h with h // group = g."""
    d = config.head_dim
    return W.view(config.num_kv_heads, d, -1).repeat_interleave(config.group, dim=0).reshape(config.num_heads * d, -1)


def _masks(x, num_heads):
    """Any mask broadcastable to (B, heads, L, L), or none; only the causal mask under a profile whose
    attention is always causal (:mod:`transformer_spec.profiles`)."""
    B, L = x.shape[:2]
    if profiles.lacks("mask"):
        return causal_or_none(L)
    return st.none() | bool_tensors((L, L)) | bool_tensors((B, 1, 1, L)) | bool_tensors((B, num_heads, L, L))


def _assert_is_multi_head_attention(impl, config, data, what):
    x = data.draw(sequences(config), label="x")
    mask = data.draw(_masks(x, config.num_heads), label="mask")
    pos = data.draw(st.none() | positions((x.shape[1],)), label="positions (ignored without rope)")
    m = gqa(impl, config, rope=False)
    out, w = m(x, mask=mask, positions=pos)
    Wq, Wk, Wv, Wo = _weights(m)
    expected, expected_w = _by_hand(x, Wq, _per_query_head(Wk, config), _per_query_head(Wv, config), Wo,
                                    config.num_heads, mask)
    tol = law_tolerance(config.dtype)
    sizes = f"num_heads={config.num_heads}, num_kv_heads={config.num_kv_heads}"
    if profiles.expresses("weights"):
        assert_close(w, expected_w, **tol, what=f"GroupedQueryAttention weights ({sizes}, rope=None) vs {what}")
    assert_close(out, expected, **tol, what=f"GroupedQueryAttention output ({sizes}, rope=None) vs {what}")


@pytest.mark.component("gqa")
@given(config=llama_configs(kv="mha"), data=st.data())
def test_gqa_with_as_many_kv_heads_as_heads_is_multi_head_attention(impl, config, data):
    _assert_is_multi_head_attention(impl, config, data, "multi-head attention computed here from q_proj, k_proj, "
                                    "v_proj, output_proj (softmax(q k^T / sqrt(head_dim)) per head, concatenated)")


@pytest.mark.component("gqa")
@given(config=llama_configs(kv="grouped"), data=st.data())
@pytest.mark.needs('gqa')
def test_gqa_consecutive_query_heads_share_a_kv_head(impl, config, data):
    _assert_is_multi_head_attention(impl, config, data, "multi-head attention computed here with each kv head's "
                                    "k_proj/v_proj rows repeated for its group of consecutive query heads "
                                    "(query head h reads kv head h // (num_heads // num_kv_heads))")


@pytest.mark.component("gqa")
@given(config=llama_configs(kv="mqa"), data=st.data())
@pytest.mark.needs('gqa')
def test_gqa_with_one_kv_head_is_multi_query_attention(impl, config, data):
    _assert_is_multi_head_attention(impl, config, data, "multi-query attention computed here: every query head "
                                    "reads the one key/value head (its k_proj/v_proj rows repeated for every head)")


def _shiftable(data, x, label="positions"):
    """``(L,)`` or ``(B, L)`` positions, and a shift ``s`` keeping them below ``MAX_LEN``."""
    B, L = x.shape[:2]
    pos = data.draw(st.sampled_from([(L,), (B, L)]).flatmap(positions), label=label)
    return pos, data.draw(st.integers(0, MAX_LEN - 1 - int(pos.max())), label="s")


@pytest.mark.component("gqa")
@given(config=llama_configs(), data=st.data())
def test_gqa_rotary_attention_is_invariant_to_shifting_every_position(impl, config, data):
    """Scores see m - n only, and values are not rotated: positions + s give the same weights and output."""
    x = data.draw(sequences(config), label="x")
    pos, s = _shiftable(data, x)
    mask = data.draw(causal_or_none(x.shape[1]), label="mask")
    m = gqa(impl, config)
    out, w = m(x, mask=mask, positions=pos)
    out_s, w_s = m(x, mask=mask, positions=pos + s)
    tol = rope_tolerance(config.dtype, scale=10.0)
    what = f"GroupedQueryAttention with rope at positions {pos.tolist()} + {s} vs at the positions themselves"
    if profiles.expresses("weights"):
        assert_close(w_s, w, **tol, what=f"{what}: weights (scores depend on m - n only)")
    assert_close(out_s, out, **tol, what=f"{what}: output")


@pytest.mark.component("gqa")
@given(config=llama_configs(), data=st.data())
def test_gqa_with_every_position_equal_is_attention_without_rope(impl, config, data):
    """All tokens at the same position p: q and k turn by the same angles, which no score sees, and v
    does not turn, so the weights and output are those of the same weights without rope."""
    x = data.draw(sequences(config), label="x")
    p = data.draw(st.integers(0, MAX_LEN - 1), label="p")
    mask = data.draw(causal_or_none(x.shape[1]), label="mask")
    pos = torch.full((x.shape[1],), p, dtype=torch.long)
    out, w = gqa(impl, config)(x, mask=mask, positions=pos)
    out_0, w_0 = gqa(impl, config, rope=False)(x, mask=mask)
    tol = rope_tolerance(config.dtype, scale=10.0)
    what = f"GroupedQueryAttention with rope and every position = {p} vs the same weights with rope=None"
    if profiles.expresses("weights"):
        assert_close(w, w_0, **tol, what=f"{what}: weights")
    assert_close(out, out_0, **tol, what=f"{what}: output")


@pytest.mark.component("gqa")
@given(config=llama_configs(), data=st.data())
def test_gqa_causal_outputs_unaffected_by_future(impl, config, data):
    x = data.draw(sequences(config), label="x")
    n = x.shape[1]
    t = data.draw(st.integers(0, n - 1), label="t")
    x2 = new_future(data, x, t)
    m = gqa(impl, config)
    out, w = m(x, mask=causal(n))
    out2, w2 = m(x2, mask=causal(n))
    tol = law_tolerance(config.dtype)
    assert_close(out2[:, : t + 1], out[:, : t + 1], **tol,
                 what=f"GroupedQueryAttention (rope, causal mask) output at positions <= {t} after changing x at > {t}")
    if profiles.expresses("weights"):
        assert_close(w2[:, :, : t + 1], w[:, :, : t + 1], **tol,
                     what=f"GroupedQueryAttention (rope, causal mask) weights of queries <= {t} after changing x at > {t}")


@pytest.mark.component("gqa")
@given(config=llama_configs(), data=st.data())
def test_gqa_batch_items_are_independent(impl, config, data):
    """Each item computed alone, with its own row of (B, L) positions, gives the same output and weights."""
    x = data.draw(sequences(config, max_batch=3), label="x")
    B, L = x.shape[:2]
    pos = data.draw(positions((B, L)), label="positions")
    mask = data.draw(causal_or_none(L), label="mask")
    m = gqa(impl, config)
    what = f"GroupedQueryAttention with (B, L) positions {pos.tolist()}"
    out, w = accepted(lambda: m(x, mask=mask, positions=pos), what)
    tol = law_tolerance(config.dtype)
    for i in range(B):
        o_i, w_i = m(x[i : i + 1], mask=mask, positions=pos[i : i + 1])
        assert_close(out[i : i + 1], o_i, **tol, what=f"{what}: output of batch item {i} vs item {i} computed alone")
        if profiles.expresses("weights"):
            assert_close(w[i : i + 1], w_i, **tol, what=f"{what}: weights of batch item {i} vs item {i} computed alone")


@pytest.mark.component("gqa")
@given(config=llama_configs(), data=st.data())
@pytest.mark.needs('non_causal')
def test_gqa_without_mask_and_rope_is_permutation_equivariant(impl, config, data):
    x = data.draw(sequences(config), label="x")
    perm = data.draw(permutations_of(x.shape[1]), label="perm")
    m = gqa(impl, config, rope=False)
    out, w = m(x)
    out_p, w_p = m(x[:, perm])
    tol = law_tolerance(config.dtype)
    assert_close(out_p, out[:, perm], **tol,
                 what=f"GroupedQueryAttention (no mask, no rope) of x[:, {perm}] vs its output permuted")
    assert_close(w_p, w[:, :, perm][:, :, :, perm], **tol,
                 what=f"GroupedQueryAttention weights for x[:, {perm}] vs the weights permuted on both axes")


@pytest.mark.component("gqa")
@given(config=llama_configs(), data=st.data())
def test_gqa_never_rotates_the_values(impl, config, data):
    """q_proj = 0: every score is 0, the weights are uniform over the keys a query may see (all of them,
    or 0 .. i under the causal mask), and the output is output_proj of each kv head's mean value over
    those keys, whatever the positions (rope turns q and k, never v)."""
    x = data.draw(sequences(config), label="x")
    pos, _ = _shiftable(data, x)
    B, L, _ = x.shape
    mask = data.draw(causal_or_none(L), label="mask")
    m = gqa(impl, config)
    with torch.no_grad():
        m.q_proj.weight.zero_()
    out, w = m(x, mask=mask, positions=pos)
    _, _, Wv, Wo = _weights(m)
    seen = torch.ones(L, L, dtype=x.dtype) if mask is None else (~mask).to(x.dtype)  # (L, L): 1 = a key it sees
    uniform = seen / seen.sum(-1, keepdim=True)  # row i: 1 / (keys seen) on each key seen
    tol = law_tolerance(config.dtype)
    where = "every key" if mask is None else "keys 0 .. i (causal mask)"
    what = f"GroupedQueryAttention with q_proj = 0, rope at positions {pos.tolist()} and {where}"
    if profiles.expresses("weights"):
        assert_close(w, uniform.expand_as(w), **tol, what=f"{what}: weights (all scores 0: uniform over {where})")
    means = uniform @ (x @ _per_query_head(Wv, config).T)  # (B, L, D): head h's mean value over the keys seen
    assert_close(out, means @ Wo.T, **tol,
                 what=f"{what}: output vs output_proj of the mean of the values (v_proj x, never rotated; query "
                      f"head h reads kv head h // {config.group})")
