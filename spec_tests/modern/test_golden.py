"""Hand-derived numbers for the modern track: each expected value is worked out in the comment
beside it from the contract's formula, not computed by any implementation. Each runs in float32 and
float64 (the ``dtype`` fixture): a course profile whose modules are float32 runs the float32 case."""

import math

import pytest
import torch

from transformer_spec import profiles
from transformer_spec.probes.assertions import assert_close
from transformer_spec.probes.testing import set_parameters

# float64, and float32 (every profile expresses it: a course's modules may be float32 only)
TOL = {torch.float64: {"rtol": 1e-12, "atol": 1e-12}, torch.float32: {"rtol": 1e-6, "atol": 1e-6}}
# the angle tables may be float32 (docs/contract.md, free choices)
ROPE_TOL = {torch.float64: {"rtol": 1e-6, "atol": 1e-6}, torch.float32: {"rtol": 1e-5, "atol": 1e-5}}


@pytest.mark.component("rotary")
def test_rotary_turns_a_4_dim_vector_at_positions_0_1_2(impl, dtype):
    # head_dim 4: pair 0 turns by p * 10000^(0/4) = p rad, pair 1 by p * 10000^(-2/4) = p / 100 rad;
    # (1, 0) turned by φ is (cos φ, sin φ), (0, 1) is (-sin φ, cos φ).
    x = torch.tensor([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0], [1.0, 0.0, 0.0, 1.0]], dtype=dtype)
    expected = torch.tensor([
        [1.0, 0.0, 1.0, 0.0],  # position 0: the identity
        [-math.sin(1), math.cos(1), -math.sin(0.01), math.cos(0.01)],  # position 1
        [math.cos(2), math.sin(2), -math.sin(0.02), math.cos(0.02)],  # position 2
    ], dtype=dtype)
    positions = None if profiles.expresses("default_positions") else torch.arange(3)  # None means 0, 1, 2
    out = impl.RotaryPositionEmbedding(4, 8)(x, positions)  # (L=3, head_dim=4)
    assert_close(out, expected, **ROPE_TOL[dtype], what="RotaryPositionEmbedding(4, 8) on rows at positions 0, 1, 2",
                 seed="RoFormer eq. 34: (a, b) -> (a cos φ - b sin φ, a sin φ + b cos φ), φ = p theta^(-2i/d)")


@pytest.mark.component("rotary")
def test_rotary_uses_its_theta_and_the_positions_given(impl, dtype):
    # theta = 100: pair 1 turns by p * 100^(-2/4) = p / 10 rad; positions 5 and 3 given explicitly.
    x = torch.tensor([[1.0, 0.0, 1.0, 0.0], [1.0, 0.0, 1.0, 0.0]], dtype=dtype)
    expected = torch.tensor([
        [math.cos(5), math.sin(5), math.cos(0.5), math.sin(0.5)],
        [math.cos(3), math.sin(3), math.cos(0.3), math.sin(0.3)],
    ], dtype=dtype)
    out = impl.RotaryPositionEmbedding(4, 8, theta=100.0)(x, torch.tensor([5, 3]))
    assert_close(out, expected, **ROPE_TOL[dtype], what="RotaryPositionEmbedding(4, 8, theta=100)(x, positions=[5, 3])",
                 seed="RoFormer eq. 34 with theta = 100")


@pytest.mark.component("rmsnorm")
def test_rmsnorm_of_1_2_2_4_with_eps_2_75(impl, dtype):
    # mean(x**2) = (1 + 4 + 4 + 16) / 4 = 6.25; + eps 2.75 = 9; sqrt = 3: x / 3 = (1/3, 2/3, 2/3, 4/3),
    # times weight (1, 2, 3, 0.5) = (1/3, 4/3, 2, 2/3).
    norm = set_parameters(impl.RMSNorm(4, eps=2.75).to(dtype), {"weight": torch.tensor([1.0, 2.0, 3.0, 0.5])})
    out = norm(torch.tensor([[1.0, 2.0, 2.0, 4.0]], dtype=dtype))
    assert_close(out, torch.tensor([[1 / 3, 4 / 3, 2.0, 2 / 3]], dtype=dtype), **TOL[dtype],
                 what="RMSNorm(4, eps=2.75) with weight (1, 2, 3, 0.5) on x = (1, 2, 2, 4)",
                 seed="x / sqrt(mean(x**2) + eps) * weight = x / 3 * weight")


@pytest.mark.component("rmsnorm")
@pytest.mark.needs('parameters')
def test_rmsnorm_weight_starts_at_ones(impl):
    weight = dict(impl.RMSNorm(6).named_parameters()).get("weight")
    assert weight is not None and torch.equal(weight.detach(), torch.ones(6)), \
        f"RMSNorm(6).weight must start as ones (6,), got {None if weight is None else weight.detach()}"


@pytest.mark.component("swiglu")
def test_swiglu_on_integer_weights(impl, dtype):
    # w1 = I, w3 = [[1, 1], [0, 2]], w2 = [[1, 0], [1, 1]]; x = (1, -1):
    # w1 x = (1, -1), silu = (σ(1), -σ(-1)); w3 x = (0, -2); product g = (0, 2 σ(-1));
    # w2 g = (0, 2 σ(-1)), σ(-1) = 1 / (1 + e).
    s = 1 / (1 + math.e)
    ffn = set_parameters(impl.SwiGLU(2, 2).to(dtype), {
        "w1.weight": torch.eye(2), "w3.weight": torch.tensor([[1.0, 1.0], [0.0, 2.0]]),
        "w2.weight": torch.tensor([[1.0, 0.0], [1.0, 1.0]])})
    out = ffn(torch.tensor([[1.0, -1.0]], dtype=dtype))
    assert_close(out, torch.tensor([[0.0, 2 * s]], dtype=dtype), **TOL[dtype],
                 what="SwiGLU(2, 2) with w1 = I, w3 = [[1, 1], [0, 2]], w2 = [[1, 0], [1, 1]] on x = (1, -1)",
                 seed="w2(silu(w1 x) * w3 x), silu(z) = z sigmoid(z)")


@pytest.mark.component("gqa")
@pytest.mark.needs('gqa')
def test_gqa_pairs_consecutive_query_heads_with_one_kv_head(impl):
    # d_model 4, 4 heads of 1 feature, 2 kv heads: query heads 0, 1 read kv head 0 and heads 2, 3 read
    # kv head 1. x = ones, so every value of kv head 0 is 0.25 * 4 = 1 and of kv head 1 is 0.5 * 4 = 2:
    # whatever the weights, head h outputs its kv head's value, (1, 1, 2, 2) with output_proj = I.
    attn = set_parameters(impl.GroupedQueryAttention(4, 4, num_kv_heads=2).double(), {
        "q_proj.weight": torch.eye(4), "k_proj.weight": torch.ones(2, 4),
        "v_proj.weight": torch.tensor([[0.25] * 4, [0.5] * 4]), "output_proj.weight": torch.eye(4)})
    out, _ = attn(torch.ones(1, 3, 4, dtype=torch.float64))
    assert_close(out, torch.tensor([[1.0, 1.0, 2.0, 2.0]], dtype=torch.float64).expand(1, 3, 4), **TOL[torch.float64],
                 what="GroupedQueryAttention(4, 4, num_kv_heads=2): each query head's output (values 1 for kv head 0, "
                      "2 for kv head 1)", seed="query head h uses kv head h // (num_heads // num_kv_heads)")
