"""Laws of RMSNorm (component ``rmsnorm``): ``x * rsqrt(mean(x**2, -1, keepdim=True) + eps) * weight``.

It only rescales each vector (no centring): invariant to scaling a vector by ``c > 0``; with unit
``weight`` every vector comes out in its own direction with root mean square
``sqrt(ms / (ms + eps))`` (1 up to ``eps``, ``ms`` its mean square); the gain multiplies that
output once; float16 and bfloat16 inputs are computed in float32 and returned in their dtype; the
input is never changed (it is the residual stream). Tolerances:
:func:`properties.strategies.law_tolerance`.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from transformer_spec.probes.assertions import assert_close, assert_equal

from ..strategies import batch_shapes, dtypes, law_tolerance, seeds, tensors
from .strategies import rmsnorm

#: eps values a module is built with (shrink to the default, 1e-5)
epsilons = st.sampled_from([1e-5, 1e-2, 1.0])


@st.composite
def _norm_inputs(draw, dtype=None, max_dim: int = 6):
    """``x (B, d_model)`` or ``(B, L, d_model)``, and a weight seed."""
    dtype = draw(dtypes()) if dtype is None else dtype
    shape = draw(batch_shapes(max_size=3, min_dims=1)) + (draw(st.integers(1, max_dim)),)
    return draw(tensors(shape, dtype)), draw(seeds())


def _mean_square(t: torch.Tensor) -> torch.Tensor:
    return t.double().pow(2).mean(-1, keepdim=True)


@pytest.mark.component("rmsnorm")
@given(case=_norm_inputs(), data=st.data())
def test_rmsnorm_is_invariant_to_scaling_each_vector_by_a_positive_number(impl, case, data):
    """RMSNorm(c x) = RMSNorm(x) for c > 0, each vector with its own c: the mean square grows by c**2
    and the root takes it back. Inputs well above eps: every entry is at least 1 in size and the
    module is built with eps=1e-12, so eps changes nothing at the tolerance."""
    x, seed = case
    x = x + torch.where(x < 0, -1.0, 1.0).to(x.dtype)  # |x| >= 1 everywhere: mean squares >= 1
    c = data.draw(tensors(tuple(x.shape[:-1]) + (1,), x.dtype, limit=3.0), label="c").abs() + 0.25
    norm = rmsnorm(impl, x.shape[-1], seed, x.dtype, eps=1e-12)
    assert_close(norm(c * x), norm(x), **law_tolerance(x.dtype),
                 what=f"RMSNorm(c * x) vs RMSNorm(x), each vector scaled by its own c > 0, c = {c.flatten().tolist()} "
                      f"(normalising by the root mean square undoes any positive scale)")


@pytest.mark.component("rmsnorm")
@given(case=_norm_inputs(), eps=epsilons)
def test_rmsnorm_with_unit_weight_keeps_each_direction_at_root_mean_square_one(impl, case, eps):
    """weight = 1: each output vector is its input times one positive number (RMSNorm never centres),
    and its root mean square is sqrt(ms / (ms + eps)) for the input's mean square ms: 1 up to eps.
    Each vector on its own (the mean runs over the last dimension only)."""
    x, _ = case
    norm = impl.RMSNorm(x.shape[-1], eps=eps).to(x.dtype).eval()
    with torch.no_grad():
        norm.weight.fill_(1.0)
    out = norm(x)
    tol = law_tolerance(x.dtype)
    ratio = out.double().norm(dim=-1, keepdim=True) / x.double().norm(dim=-1, keepdim=True).clamp_min(1e-300)
    assert_close(out.double(), x.double() * ratio, **tol,
                 what="RMSNorm(x) with unit weight vs x times one positive number per vector (the input's own "
                      "direction: RMSNorm rescales, it does not subtract the mean)")
    ms = _mean_square(x)
    assert_close(_mean_square(out).sqrt(), (ms / (ms + eps)).sqrt(), **tol,
                 what=f"root mean square of each vector of RMSNorm(x) with unit weight and eps={eps:g}: "
                      f"sqrt(ms / (ms + eps)) for the input's mean square ms (1 up to eps, each vector on its own)")


@pytest.mark.component("rmsnorm")
@given(case=_norm_inputs())
def test_rmsnorm_output_is_the_unit_weight_output_times_weight(impl, case):
    """The gain multiplies the normalised vector once: RMSNorm_w(x) = RMSNorm_1(x) * w."""
    x, seed = case
    norm = rmsnorm(impl, x.shape[-1], seed, x.dtype)
    unit = impl.RMSNorm(x.shape[-1]).to(x.dtype).eval()
    with torch.no_grad():
        unit.weight.fill_(1.0)
    weight = norm.weight.detach()
    assert_close(norm(x), unit(x) * weight, **law_tolerance(x.dtype),
                 what=f"RMSNorm(x) with weight={weight.tolist()} vs the unit-weight output times weight")


@pytest.mark.component("rmsnorm")
@given(case=_norm_inputs(dtype=torch.float64), half=st.sampled_from([torch.float16, torch.bfloat16]),
       scale=st.sampled_from([1.0, 300.0]))
def test_rmsnorm_half_inputs_give_the_float32_result_cast_back(impl, case, half, scale):
    """float16 / bfloat16 x: the result is the float32 computation on the same (half) numbers, cast
    back to x.dtype, within two of the half type's epsilons. Entries near 300 make mean(x**2) larger
    than float16's largest number (65504): only a float32 computation stays finite."""
    x, seed = case
    x = (x * scale).to(half)
    norm = rmsnorm(impl, x.shape[-1], seed, half)
    out = norm(x)
    assert out.dtype == half, f"RMSNorm on {half} input returned {out.dtype}: the output keeps x.dtype"
    h = x.float()
    expected = (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5) * norm.weight.detach().float()).to(half)
    eps = torch.finfo(half).eps
    assert_close(out.float(), expected.float(), rtol=2 * eps, atol=2 * eps,
                 what=f"RMSNorm on {half} x (entries up to {float(x.abs().max()):g}) vs the same computed in "
                      f"float32 and cast back to {half}")


@pytest.mark.component("rmsnorm")
@given(case=_norm_inputs())
def test_rmsnorm_leaves_its_input_unchanged(impl, case):
    x, seed = case
    before = x.clone()
    rmsnorm(impl, x.shape[-1], seed, x.dtype)(x)
    assert_equal(x, before, what="x after RMSNorm(x): the caller's tensor (the residual stream) must not change")
