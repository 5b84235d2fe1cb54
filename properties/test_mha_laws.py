"""More laws of multi-head attention (component ``mha``).

Head decomposition, one identity head = ``scaled_dot_product_attention``, self-attention =
``MultiHeadAttention(x, x, x)``, batch independence, padding invariance, eval determinism,
gradients, dtype. Weights are set by the contract's names (``W_Q``, ``W_K``, ``W_V``, ``W_O``).
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from transformer_spec.probes.assertions import assert_close
from transformer_spec.probes.testing import mha_shapes, seeded_parameters, set_parameters

from .draws import replace_padded
from .modules import multihead_attention, with_parameters
from .strategies import bool_tensors, budget, configs, law_tolerance, sequences, tensors


def _single_head(q, k, v, mask):
    """softmax(q k^T / sqrt(d_k)) v computed here, fully blocked rows -> 0 (the contract)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
        dead = mask.all(-1, keepdim=True)
        scores = scores.masked_fill(dead, 0.0)
    w = torch.softmax(scores, dim=-1)
    if mask is not None:
        w = w.masked_fill(dead, 0.0)
    return w @ v, w


@st.composite
def _mha_case(draw, config):
    query = draw(sequences(config))
    b = query.shape[0]
    key = draw(sequences(config, batch=b))
    value = draw(tensors(tuple(key.shape), key.dtype))
    mask = draw(st.none() | bool_tensors((b, 1, 1, key.shape[1])))
    return query, key, value, mask


def _mha_on_a_case(impl, config, data):
    """A seeded ``MultiHeadAttention``, a drawn ``(query, key, value, mask)`` and its ``(output, weights)``."""
    query, key, value, mask = data.draw(_mha_case(config), label="query, key, value, mask")
    m = multihead_attention(impl, config)
    return m, (query, key, value, mask), m(query, key, value, mask)


@pytest.mark.component("mha")
@given(config=configs(max_heads=3), data=st.data())
def test_multihead_attention_heads_decompose_into_single_head_attentions(impl, config, data):
    """H heads = H single-head attentions, head h on rows h*d_k..(h+1)*d_k-1 of W_Q, W_K, W_V
    (the seed's view(B, L, H, d_k)), concatenated, then W_O. The reference computation is
    written out here."""
    m, (query, key, value, mask), (out, w) = _mha_on_a_case(impl, config, data)
    Wq, Wk, Wv, Wo = (getattr(m, n).weight.detach() for n in ("W_Q", "W_K", "W_V", "W_O"))
    dk = config.d_k
    heads, weights = [], []
    for h in range(config.num_heads):
        rows = slice(h * dk, (h + 1) * dk)
        sub_mask = None if mask is None else mask[:, 0]  # (B, 1, Lk)
        o_h, w_h = _single_head(query @ Wq[rows].T, key @ Wk[rows].T, value @ Wv[rows].T, sub_mask)
        heads.append(o_h)
        weights.append(w_h)
    expected = torch.cat(heads, dim=-1) @ Wo.T
    tol = law_tolerance(config.dtype)
    assert_close(w, torch.stack(weights, dim=1), what=f"MultiHeadAttention weights vs. {config.num_heads} "
                 f"single-head attentions on slices of W_Q/W_K", **tol)
    assert_close(out, expected, what=f"MultiHeadAttention output vs. {config.num_heads} single-head "
                 f"attentions on slices of W_Q/W_K/W_V, concatenated, then W_O", **tol)


@pytest.mark.component("mha")
@given(config=configs(max_heads=1, max_dk=4), data=st.data())
def test_multihead_attention_single_identity_head_equals_attention(impl, config, data):
    """num_heads=1 with W_Q = W_K = W_V = W_O = I is scaled_dot_product_attention itself."""
    query, key, value, mask = data.draw(_mha_case(config), label="query, key, value, mask")
    d = config.d_model
    m = impl.MultiHeadAttention(d_model=d, num_heads=1, dropout=0.1).to(config.dtype).eval()
    eye = torch.eye(d, dtype=config.dtype)
    set_parameters(m, {f"{n}.weight": eye for n in ("W_Q", "W_K", "W_V", "W_O")})
    out, w = m(query, key, value, mask)
    out_a, w_a = impl.scaled_dot_product_attention(query, key, value, None if mask is None else mask[:, 0])
    tol = law_tolerance(config.dtype)
    assert_close(out, out_a, what="one head with identity projections vs. scaled_dot_product_attention", **tol)
    assert_close(w[:, 0], w_a, what="weights of one identity head vs. scaled_dot_product_attention's", **tol)


@pytest.mark.component("mha")
@given(config=configs(), data=st.data())
def test_multihead_self_attention_equals_multihead_attention_of_x_x_x(impl, config, data):
    x = data.draw(sequences(config), label="x")
    b, n, _ = x.shape
    mask = data.draw(st.none() | st.sampled_from([(n, n), (b, 1, 1, n)]).flatmap(bool_tensors), label="mask")
    params = seeded_parameters(mha_shapes(config.d_model), config.seed, config.dtype)
    kw = dict(d_model=config.d_model, num_heads=config.num_heads)
    self_attn = with_parameters(impl.MultiHeadSelfAttention, config, params, **kw)
    attn = with_parameters(impl.MultiHeadAttention, config, params, **kw)
    out, w = self_attn(x, mask)
    out2, w2 = attn(x, x, x, mask)
    tol = law_tolerance(config.dtype)
    assert_close(out, out2, what="MultiHeadSelfAttention(x) vs. MultiHeadAttention(x, x, x), same weights", **tol)
    assert_close(w, w2, what="MultiHeadSelfAttention weights vs. MultiHeadAttention(x, x, x)'s", **tol)


@pytest.mark.component("mha")
@given(config=configs(), data=st.data())
def test_multihead_attention_batch_items_are_independent(impl, config, data):
    m, (query, key, value, mask), (out, w) = _mha_on_a_case(impl, config, data)
    tol = law_tolerance(config.dtype)
    for i in range(query.shape[0]):
        s = slice(i, i + 1)
        o_i, w_i = m(query[s], key[s], value[s], None if mask is None else mask[s])
        assert_close(o_i, out[s], what=f"MultiHeadAttention output of batch item {i} computed alone", **tol)
        assert_close(w_i, w[s], what=f"MultiHeadAttention weights of batch item {i} computed alone", **tol)


@pytest.mark.component("mha")
@given(config=configs(), data=st.data())
def test_multihead_attention_ignores_the_content_of_padded_keys(impl, config, data):
    """Keys blocked by a padding mask (B, 1, 1, Lk) get weight 0, and whatever their key and
    value vectors hold, the output does not change; an item whose keys are all padded outputs 0."""
    query, key, value, mask = data.draw(_mha_case(config), label="query, key, value, mask")
    if mask is None:
        mask = torch.zeros(key.shape[0], 1, 1, key.shape[1], dtype=torch.bool)
    key2 = replace_padded(data, key, mask, "other key content")
    value2 = replace_padded(data, value, mask, "other value content")
    m = multihead_attention(impl, config)
    out, w = m(query, key, value, mask)
    out2, _ = m(query, key2, value2, mask)
    tol = law_tolerance(config.dtype)
    assert_close(out2, out, what="MultiHeadAttention output after changing the content of padded keys/values", **tol)
    blocked = torch.broadcast_to(mask, w.shape)
    assert (w[blocked] == 0).all(), "padded keys (mask True) must get weight exactly 0"
    dead = mask[:, 0, 0].all(-1)
    assert_close(out[dead], torch.zeros_like(out[dead]), **tol,
                 what="MultiHeadAttention output for batch items whose keys are all padded")


@pytest.mark.component("mha")
@given(config=configs(), data=st.data())
def test_multihead_attention_is_deterministic_in_eval_mode(impl, config, data):
    """In eval() dropout does nothing: dropout=0.5 gives twice the same result, equal to
    dropout=0.0 with the same weights."""
    query, key, value, mask = data.draw(_mha_case(config), label="query, key, value, mask")
    params = seeded_parameters(mha_shapes(config.d_model), config.seed, config.dtype)
    kw = dict(d_model=config.d_model, num_heads=config.num_heads)
    m = with_parameters(impl.MultiHeadAttention, config, params, dropout=0.5, **kw)
    m0 = with_parameters(impl.MultiHeadAttention, config, params, dropout=0.0, **kw)
    out_a, w_a = m(query, key, value, mask)
    out_b, _ = m(query, key, value, mask)
    out_0, w_0 = m0(query, key, value, mask)
    tol = law_tolerance(config.dtype)
    assert_close(out_b, out_a, what="two eval() calls of MultiHeadAttention(dropout=0.5)", **tol)
    assert_close(out_a, out_0, what="eval() MultiHeadAttention with dropout=0.5 vs. dropout=0.0", **tol)
    assert_close(w_a, w_0, what="eval() weights with dropout=0.5 vs. dropout=0.0", **tol)


@pytest.mark.component("mha")
@budget(0.5)
@given(config=configs(max_dk=2, dtype=torch.float64), data=st.data())
def test_multihead_attention_gradients_match_finite_differences(impl, config, data):
    query, key, value, mask = data.draw(_mha_case(config), label="query, key, value, mask")
    m = multihead_attention(impl, config)
    inputs = tuple(t.clone().requires_grad_(True) for t in (query, key, value))

    def f(q, k, v):
        return m(q, k, v, mask)

    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-5, rtol=1e-4, raise_exception=False), (
        "MultiHeadAttention: the analytic gradients w.r.t. query, key and value differ from finite "
        "differences in float64"
    )


@pytest.mark.component("mha")
@given(config=configs(), data=st.data())
def test_multihead_attention_preserves_dtype_and_device(impl, config, data):
    m, (query, key, value, mask), (out, w) = _mha_on_a_case(impl, config, data)
    for name, t in (("output", out), ("weights", w)):
        assert t.dtype == query.dtype, f"MultiHeadAttention {name} has dtype {t.dtype}, the input is {query.dtype}"
        assert t.device == query.device, f"MultiHeadAttention {name} is on {t.device}, the input on {query.device}"
