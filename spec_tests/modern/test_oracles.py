"""The modern track against oracles: torch's own ``rms_norm``, ``silu`` and ``scaled_dot_product_attention``
(``enable_gqa=True``), and the contract's formulas written with torch's primitives
(:mod:`spec_tests.modern.formulas`) where torch has no module (rotary positions, the block, MiniLlama).

Each test is the anchor of a hidden re-check (``transformer_spec/components/<name>.py``): its seeds
are the re-check's public replay, so keep them in step. torch's functions that the modern rubric
forbids a submission are called inside ``oracle()`` (the forbidden-API guard allows them there).
"""

import pytest
import torch
import torch.nn.functional as F
from transformer_spec.contract.inputs import ORACLE, generator, randn

from transformer_spec import profiles
from transformer_spec.guard.forbidden import oracle as torch_oracle
from transformer_spec.probes.assertions import assert_close
from transformer_spec.probes.llama_shapes import (
    gqa_shapes,
    llama_block_shapes,
    minillama_parameters,
    rmsnorm_shapes,
    swiglu_shapes,
)
from transformer_spec.probes.testing import seeded_parameters, set_parameters

from . import formulas

TOL = {"rtol": 1e-9, "atol": 1e-10}  # float64 throughout; ROPE_TOL where a rotation is involved (formulas.py)
ROPE_TOL = formulas.ROPE_TOL


def _module(m, params):
    return set_parameters(m.to(torch.float64), params).eval()


@pytest.mark.component("rmsnorm")
@pytest.mark.needs('float64')
def test_rmsnorm_matches_torch_rms_norm(impl):
    p = seeded_parameters(rmsnorm_shapes(12), seed=71)
    x = randn(2, 5, 12, seed=72)
    out = _module(impl.RMSNorm(d_model=12), p)(x)
    with torch_oracle():
        expected = F.rms_norm(x, (12,), p["weight"], eps=1e-5)
    assert_close(out, expected, **TOL, what="RMSNorm(12)(x) vs torch.nn.functional.rms_norm(x, (12,), weight, 1e-5)",
                 seed="Zhang & Sennrich 2019, eq. 4")


@pytest.mark.component("swiglu")
@pytest.mark.needs('float64')
def test_swiglu_matches_its_formula_with_torch_silu(impl):
    p = seeded_parameters(swiglu_shapes(12, 20), seed=73)
    x = randn(2, 5, 12, seed=74) * 2
    out = _module(impl.SwiGLU(d_model=12, d_ff=20), p)(x)
    expected = F.linear(F.silu(F.linear(x, p["w1.weight"])) * F.linear(x, p["w3.weight"]), p["w2.weight"])
    assert_close(out, expected, **TOL, what="SwiGLU(12, 20)(x) vs w2(silu(w1 x) * w3 x)", seed="Shazeer 2020, eq. 6")


F32_TOL = {"rtol": 1e-4, "atol": 1e-5}  # a float32 module against its formula in float64


def _float32(params: dict) -> dict:
    return {k: v.float() for k, v in params.items()}


def _multi_head_attention_in_float32(impl, rope: bool, positions, seed: int) -> None:
    """As many kv heads as query heads, in float32, so every profile expresses it: the output against the
    formula in float64 from the same float32 weights; the weights too where the profile returns them."""
    d, h, L = ORACLE.d, 3, ORACLE.lk
    p = _float32(seeded_parameters(gqa_shapes(d, h, h), seed=seed))
    x = randn(ORACLE.b, L, d, seed=seed + 1).float()
    mask = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)
    attn = set_parameters(impl.GroupedQueryAttention(
        d_model=d, num_heads=h, rope=impl.RotaryPositionEmbedding(d // h, 32) if rope else None), p).eval()
    out, weights = attn(x.clone(), mask, positions)  # a copy: an in-place update of it is the module's own affair
    expected, expected_weights = formulas.gqa(x.double(), {k: v.double() for k, v in p.items()}, h, h, mask, positions,
                                              rope=rope)
    where = (f"GroupedQueryAttention({d}, num_heads={h}"
             + (f", rope) in float32, causal mask, positions {positions.tolist()}" if rope else
                ") without rope in float32, causal mask"))
    score = "softmax(rope(q) rope(k)^T" if rope else "softmax(q k^T"
    assert_close(out.double(), expected, **F32_TOL, what=f"{where}: output vs output_proj({score} / sqrt({d // h})) v) "
                 "in float64", seed="Vaswani et al. 2017, section 3.2.2" + ("; RoFormer eq. 34" if rope else ""))
    if profiles.expresses("weights"):
        assert_close(weights.double(), expected_weights, **F32_TOL, what=f"{where}: weights")


@pytest.mark.component("gqa")
def test_multi_head_attention_with_rope_in_float32_matches_its_formula(impl):
    # CS336's run_multihead_self_attention_with_rope, with positions of uneven gaps. Projections applied as
    # x @ W instead of x @ W.T, or positions that do not reach the rotation, fail it.
    _multi_head_attention_in_float32(impl, True, torch.tensor([0, 2, 3, 7, 8, 12, 13])[:ORACLE.lk], seed=77)


@pytest.mark.component("gqa")
def test_multi_head_attention_without_rope_in_float32_matches_its_formula(impl):
    # rope=None: CS336's run_multihead_self_attention.
    _multi_head_attention_in_float32(impl, False, None, seed=135)


@pytest.mark.component("llama_block")
def test_llama_block_in_float32_matches_its_formula(impl):
    # The pre-norm block with as many kv heads as query heads, in float32 (CS336's run_transformer_block): a
    # post-norm block, a residual taken from the normalised input, one norm used twice or a residual left out
    # fails it.
    p = _float32(seeded_parameters(llama_block_shapes(12, 3, 20, 3), seed=81))
    x = randn(2, 6, 12, seed=82).float()
    mask = torch.triu(torch.ones(6, 6, dtype=torch.bool), diagonal=1)
    block = set_parameters(impl.LlamaBlock(d_model=12, num_heads=3, d_ff=20, max_len=32), p).eval()
    out, weights = block(x.clone(), mask)  # a copy: `x += ...` inside the block must not change the formula's x
    expected, expected_weights = formulas.llama_block(x.double(), {k: v.double() for k, v in p.items()}, 3, 3, mask)
    where = "LlamaBlock(12, 3, 20) in float32 (x, causal mask)"
    assert_close(out.double(), expected, **F32_TOL, what=f"{where}: h = x + attn(ln1(x)), out = h + ffn(ln2(h))",
                 seed="Touvron et al. 2023 (pre-norm)")
    if profiles.expresses("weights"):
        assert_close(weights.double(), expected_weights, **F32_TOL, what=f"{where}: weights")


@pytest.mark.component("minillama")
def test_minillama_in_float32_matches_its_formula(impl):
    # As many kv heads as query heads, in float32 (CS336's run_transformer_lm), so every profile expresses it:
    # the logits against the formula in float64 from the same float32 weights. Scaled embeddings, a final norm
    # left out or taken from the embeddings, or layers given other positions fail it.
    p = _float32(minillama_parameters(17, 12, 2, 3, 20, seed=133, num_kv_heads=3))
    tokens = torch.randint(0, 17, (2, 9), generator=generator(134))
    model = set_parameters(impl.MiniLlama(17, d_model=12, num_layers=2, num_heads=3, d_ff=20, max_len=16), p).eval()
    logits, _ = model(tokens)
    assert_close(logits.double(), formulas.minillama(tokens, {k: v.double() for k, v in p.items()}, 2, 3, 3),
                 **F32_TOL, what="MiniLlama(17, d_model=12, 2 layers, 3 heads) in float32: logits vs "
                                 "lm_head(ln_final(layers(token_embeddings(tokens)))) in float64, causal, positions 0..L-1")


@pytest.mark.component("gqa")
@pytest.mark.needs('gqa')
def test_gqa_matches_torch_sdpa_with_enable_gqa(impl):
    d, h, kv, L = ORACLE.d, 6, 2, ORACLE.lk
    p = seeded_parameters(gqa_shapes(d, h, kv), seed=75)
    x = randn(ORACLE.b, L, d, seed=76)
    mask = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)
    attn = _module(impl.GroupedQueryAttention(d_model=d, num_heads=h, num_kv_heads=kv,
                                              rope=impl.RotaryPositionEmbedding(d // h, 32)), p)
    out, weights = attn(x, mask)
    B, hd = ORACLE.b, d // h
    q = formulas.rotate(F.linear(x, p["q_proj.weight"]).view(B, L, h, hd).transpose(1, 2), torch.arange(L))
    k = formulas.rotate(F.linear(x, p["k_proj.weight"]).view(B, L, kv, hd).transpose(1, 2), torch.arange(L))
    v = F.linear(x, p["v_proj.weight"]).view(B, L, kv, hd).transpose(1, 2)
    with torch_oracle():
        heads = F.scaled_dot_product_attention(q, k, v, attn_mask=~mask, enable_gqa=True)  # True = allowed there
        eye = torch.eye(L, dtype=torch.float64).expand(B, kv, L, L)
        expected_weights = F.scaled_dot_product_attention(q, k, eye, attn_mask=~mask, enable_gqa=True)
    expected = F.linear(heads.transpose(1, 2).reshape(B, L, d), p["output_proj.weight"])
    where = "GroupedQueryAttention(12, num_heads=6, num_kv_heads=2, rope) with a causal mask"
    assert_close(weights, expected_weights, **ROPE_TOL, what=f"{where}: weights vs torch SDPA(enable_gqa=True)",
                 seed="Ainslie et al. 2023; query head h uses kv head h // 3")
    assert_close(out, expected, **ROPE_TOL, what=f"{where}: output vs torch SDPA(enable_gqa=True) then output_proj")


@pytest.mark.component("rotary")
@pytest.mark.needs('float64')
def test_rotary_matches_the_complex_rotation(impl):
    x = randn(2, 3, 6, 8, seed=77)  # (B, H, L, head_dim)
    positions = torch.randint(0, 64, (2, 1, 6), generator=generator(78))  # (B, 1, L): one set per sequence
    out = impl.RotaryPositionEmbedding(8, 64)(x, positions)
    assert_close(out, formulas.rotate(x, positions), **ROPE_TOL,
                 what="RotaryPositionEmbedding(8, 64)(x (2, 3, 6, 8), positions (2, 1, 6)) vs "
                      "(x[2i] + 1j x[2i+1]) * exp(1j p 10000^(-2i/8))", seed="RoFormer eq. 34")


@pytest.mark.component("llama_block")
@pytest.mark.needs('gqa')
def test_llama_block_matches_its_formula(impl):
    p = seeded_parameters(llama_block_shapes(12, 3, 20, 1), seed=79)
    x = randn(2, 6, 12, seed=80)
    mask = torch.triu(torch.ones(6, 6, dtype=torch.bool), diagonal=1)
    block = _module(impl.LlamaBlock(d_model=12, num_heads=3, d_ff=20, num_kv_heads=1, max_len=32), p)
    out, weights = block(x.clone(), mask)
    expected, expected_weights = formulas.llama_block(x, p, 3, 1, mask)
    where = "LlamaBlock(12, 3, 20, num_kv_heads=1)(x, causal mask)"
    assert_close(weights, expected_weights, **ROPE_TOL, what=f"{where}: weights, softmax(rope(q) rope(k)^T / sqrt(4))")
    assert_close(out, expected, **ROPE_TOL, what=f"{where}: h = x + attn(ln1(x)), out = h + ffn(ln2(h))",
                 seed="Touvron et al. 2023 (pre-norm)")


@pytest.mark.component("minillama")
@pytest.mark.needs('gqa')
def test_minillama_logits_match_its_formula(impl):
    p = minillama_parameters(17, 12, 2, 3, 20, seed=131, num_kv_heads=1)
    tokens = torch.randint(0, 17, (2, 9), generator=generator(132))
    model = _module(impl.MiniLlama(17, d_model=12, num_layers=2, num_heads=3, num_kv_heads=1, d_ff=20, max_len=16), p)
    logits, maps = model(tokens)
    assert maps is None, f"MiniLlama(tokens) returned attention maps {type(maps).__name__} without return_attn=True"
    assert_close(logits, formulas.minillama(tokens, p, 2, 3, 1), **ROPE_TOL,
                 what="MiniLlama(17, d_model=12, 2 layers, 3 heads, 1 kv head) logits vs "
                      "lm_head(ln_final(layers(token_embeddings(tokens)))), causal, positions 0..L-1")
