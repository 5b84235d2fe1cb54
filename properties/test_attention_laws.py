"""More laws of ``scaled_dot_product_attention`` (component ``attention``).

Shift invariance, the ``scale`` argument, outputs as convex combinations of the values, equal
keys giving uniform weights, batch independence, mask broadcasting, gradients (gradcheck in
float64), dtype and device. Tolerances: :func:`properties.strategies.law_tolerance`.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from transformer_spec import profiles
from transformer_spec.probes.assertions import assert_close

from .strategies import attention_inputs, budget, law_tolerance, tensors, values


def _scores_shape(q, k) -> tuple[int, ...]:
    """The weights' shape ``(..., Lq, Lk)``, without asking for the weights."""
    return (*q.shape[:-1], k.shape[-2])


@pytest.mark.component("attention")
@given(inputs=attention_inputs(limit=2.0), data=st.data())
@pytest.mark.needs('weights')
def test_attention_weights_invariant_to_shifting_every_key(impl, inputs, data):
    """Adding the same vector c to every key adds q.c to a whole row of scores: softmax does
    not change. (float32: scores up to ~30 lose ~1e-5 to rounding, so weights compare at 1e-4.)"""
    q, k, v, mask = inputs.q, inputs.k, inputs.v, inputs.mask
    c = data.draw(tensors((k.shape[-1],), k.dtype, limit=2.0), label="c")
    out, w = impl.scaled_dot_product_attention(q, k, v, mask)
    out_s, w_s = impl.scaled_dot_product_attention(q, k + c, v, mask)
    tol = law_tolerance(q.dtype) if q.dtype == torch.float64 else {"rtol": 1e-4, "atol": 1e-4}
    assert_close(w_s, w, what=f"attention weights after adding c={c.tolist()} to every key", **tol)
    out_tol = dict(tol, atol=tol["atol"] * (1 + v.abs().max().item()))
    assert_close(out_s, out, what=f"attention output after adding c={c.tolist()} to every key", **out_tol)


@pytest.mark.component("attention")
@given(inputs=attention_inputs(), s=values(2.0))
@pytest.mark.needs('scale')
def test_attention_scale_argument_multiplies_the_scores(impl, inputs, s):
    """``scale=s`` equals scaling the queries by s with ``scale=1.0``; ``scale=None`` equals
    ``scale=1/sqrt(d_k)``."""
    q, k, v, mask = inputs.q, inputs.k, inputs.v, inputs.mask
    tol = law_tolerance(q.dtype)
    out_a, w_a = impl.scaled_dot_product_attention(q, k, v, mask, scale=s)
    out_b, w_b = impl.scaled_dot_product_attention(q * s, k, v, mask, scale=1.0)
    assert_close(w_a, w_b, what=f"weights with scale={s:g} vs. q*{s:g} with scale=1.0", **tol)
    assert_close(out_a, out_b, what=f"output with scale={s:g} vs. q*{s:g} with scale=1.0", **tol)
    d_k = q.shape[-1]
    out_n, w_n = impl.scaled_dot_product_attention(q, k, v, mask)
    out_d, w_d = impl.scaled_dot_product_attention(q, k, v, mask, scale=1 / d_k**0.5)
    assert_close(w_n, w_d, what=f"weights with scale=None vs. scale=1/sqrt(d_k)=1/sqrt({d_k})", **tol)
    assert_close(out_n, out_d, what=f"output with scale=None vs. scale=1/sqrt({d_k})", **tol)


@pytest.mark.component("attention")
@given(inputs=attention_inputs())
def test_attention_output_is_a_convex_combination_of_values(impl, inputs):
    """Each output row is a weighted mean of the allowed value rows: ``output = weights @ v``,
    so every coordinate lies between the smallest and largest allowed value."""
    q, k, v, mask = inputs.q, inputs.k, inputs.v, inputs.mask
    out, w = impl.scaled_dot_product_attention(q, k, v, mask)
    tol = law_tolerance(q.dtype)
    if profiles.expresses("weights"):
        assert_close(out.double(), w.double() @ v.double(), what="attention output vs. weights @ v (computed here)",
                     rtol=tol["rtol"], atol=tol["atol"] * 10)
    full_mask = torch.zeros(out.shape[:-1] + (k.shape[-2],), dtype=torch.bool)
    if mask is not None:
        full_mask = full_mask | mask
    vb = v.double().unsqueeze(-3).expand(out.shape[:-1] + tuple(v.shape[-2:]))  # (..., Lq, Lk, d_v)
    blocked = full_mask.unsqueeze(-1)
    hi = vb.masked_fill(blocked, float("-inf")).amax(-2)
    lo = vb.masked_fill(blocked, float("inf")).amin(-2)
    allowed = ~full_mask.all(-1, keepdim=True)
    slack = 1e-5 if q.dtype == torch.float32 else 1e-12
    outside = allowed & ((out.double() > hi + slack) | (out.double() < lo - slack))
    assert not outside.any(), (
        f"attention output at index {tuple(int(i) for i in outside.nonzero()[0])} lies outside the range of "
        f"the allowed values: it must be a weighted mean of the value rows"
    )


@pytest.mark.component("attention")
@given(inputs=attention_inputs())
@pytest.mark.needs('weights')
def test_attention_equal_keys_give_uniform_weights(impl, inputs):
    """All keys equal: every allowed key gets 1 / (number of allowed keys)."""
    q, v, mask = inputs.q, inputs.v, inputs.mask
    k = inputs.k[..., :1, :].expand_as(inputs.k).contiguous()
    _, w = impl.scaled_dot_product_attention(q, k, v, mask)
    blocked = torch.zeros(w.shape, dtype=torch.bool) if mask is None else torch.broadcast_to(mask, w.shape)
    allowed = (~blocked).to(torch.float64)
    expected = allowed / allowed.sum(-1, keepdim=True).clamp_min(1)
    assert_close(w.double(), expected, what="weights for keys that are all equal", **law_tolerance(q.dtype))


@pytest.mark.component("attention")
@given(inputs=attention_inputs(min_batch_dims=1))
def test_attention_batch_items_are_independent(impl, inputs):
    """Leading dimensions are a batch: each item computed alone gives the same result."""
    q, k, v, mask = inputs.q, inputs.k, inputs.v, inputs.mask
    out, w = impl.scaled_dot_product_attention(q, k, v, mask)
    full = None if mask is None else torch.broadcast_to(mask, _scores_shape(q, k))
    tol = law_tolerance(q.dtype)
    for i in itertools.product(*(range(n) for n in inputs.batch)):
        o_i, w_i = impl.scaled_dot_product_attention(q[i], k[i], v[i], None if full is None else full[i])
        assert_close(o_i, out[i], what=f"attention output of batch item {i} computed alone", **tol)
        if profiles.expresses("weights"):
            assert_close(w_i, w[i], what=f"attention weights of batch item {i} computed alone", **tol)


@pytest.mark.component("attention")
@given(inputs=attention_inputs(with_mask=True))
def test_attention_broadcast_mask_equals_expanded_mask(impl, inputs):
    """A mask of shape (Lq, Lk) or (1, Lk) acts like its copy expanded to (..., Lq, Lk)."""
    q, k, v, mask = inputs.q, inputs.k, inputs.v, inputs.mask
    out, w = impl.scaled_dot_product_attention(q, k, v, mask)
    expanded = torch.broadcast_to(mask, _scores_shape(q, k)).contiguous()
    out_e, w_e = impl.scaled_dot_product_attention(q, k, v, expanded)
    tol = law_tolerance(q.dtype)
    assert_close(out_e, out, what=f"output with the mask of shape {tuple(mask.shape)} expanded", **tol)
    if profiles.expresses("weights"):
        assert_close(w_e, w, what=f"weights with the mask of shape {tuple(mask.shape)} expanded", **tol)


@pytest.mark.component("attention")
@pytest.mark.needs("float64")  # finite differences need float64; a float32 softmax inside is correct code
@budget(0.5)
@given(inputs=attention_inputs(dtype=torch.float64, max_len=3, max_dim=3))
def test_attention_gradients_match_finite_differences(impl, inputs):
    """torch.autograd.gradcheck in float64 on q, k and v (also with masks and fully blocked rows)."""
    q, k, v = (t.clone().requires_grad_(True) for t in (inputs.q, inputs.k, inputs.v))
    mask = inputs.mask

    def f(q, k, v):
        out, weights = impl.scaled_dot_product_attention(q, k, v, mask)
        return (out, weights) if profiles.expresses("weights") else out

    assert torch.autograd.gradcheck(f, (q, k, v), eps=1e-6, atol=1e-5, rtol=1e-4, raise_exception=False), (
        "scaled_dot_product_attention: the analytic gradients (backward) of the output and weights "
        "differ from finite differences in float64"
    )


@pytest.mark.component("attention")
@given(inputs=attention_inputs())
def test_attention_preserves_dtype_and_device(impl, inputs):
    q = inputs.q
    out, w = impl.scaled_dot_product_attention(q, inputs.k, inputs.v, inputs.mask)
    for name, t in (("output", out), ("weights", w))[:2 if profiles.expresses("weights") else 1]:
        assert t.dtype == q.dtype, f"attention {name} has dtype {t.dtype}, the inputs are {q.dtype}"
        assert t.device == q.device, f"attention {name} is on {t.device}, the inputs on {q.device}"
