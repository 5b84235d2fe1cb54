"""The modern track's rows, one behaviour at a time: dtypes, precision of half inputs, the input
left unchanged, positions as the contract lets them be given, parameters exactly as listed, the
tied head, the default d_ff, attention maps and the causal mask (``docs/contract.md``, "The modern
track")."""

import pytest
import torch
from transformer_spec.contract.inputs import randn

from transformer_spec.probes.assertions import assert_close, assert_equal
from transformer_spec.probes.llama_shapes import gqa_shapes, llama_block_shapes, minillama_parameters
from transformer_spec.probes.testing import seeded_parameters, set_parameters

from . import formulas


def _names(module) -> dict[str, tuple[int, ...]]:
    return {n: tuple(p.shape) for n, p in module.named_parameters()}


# ------------------------------------------------------------------------------------ RMSNorm
@pytest.mark.component("rmsnorm")
@pytest.mark.parametrize("half", [torch.float16, torch.bfloat16], ids=str)
def test_rmsnorm_computes_half_inputs_in_float32(impl, half):
    # 300 * N(0, 1): mean(x**2) is about 9e4, above float16's largest number (65504): only a float32
    # computation stays finite; bfloat16 keeps 8 bits, so its sum of squares loses digits.
    x = (randn(2, 3, 16, seed=5) * 300).to(half)
    out = impl.RMSNorm(16).to(half)(x)
    assert out.dtype == half, f"RMSNorm(16) on {half} input returned {out.dtype}: the output keeps x.dtype"
    expected = formulas.rms_norm(x.double(), torch.ones(16, dtype=torch.float64)).to(half)
    assert_close(out.double(), expected.double(), rtol=1e-2, atol=1e-2,
                 what=f"RMSNorm(16) on {half} x with entries near 300 (computed in float32, returned in {half})")


@pytest.mark.component("rmsnorm")
def test_rmsnorm_leaves_its_input_unchanged(impl):
    x = randn(2, 3, 8, seed=6)
    before = x.clone()
    set_parameters(impl.RMSNorm(8).double(), seeded_parameters({"weight": (8,)}, seed=7))(x)
    assert_equal(x, before, what="x after RMSNorm(8)(x): the caller's tensor (the residual stream) must not change")


@pytest.mark.component("rmsnorm")
def test_rmsnorm_normalises_each_vector_on_its_own(impl):
    x = randn(3, 5, 8, seed=8)
    norm = set_parameters(impl.RMSNorm(8, eps=1e-5).double(), seeded_parameters({"weight": (8,)}, seed=9))
    whole = norm(x)
    for b, i in ((0, 0), (1, 3), (2, 4)):
        assert_close(norm(x[b, i][None]), whole[b, i][None], what=f"RMSNorm of token ({b}, {i}) alone vs in its batch")
    assert_close(norm(x[0, 0]), whole[0, 0], what="RMSNorm of a 1-D vector (d_model,) vs the same row of a batch")


# ------------------------------------------------------------------------------------ rotary
@pytest.mark.component("rotary")
@pytest.mark.needs('parameters')
def test_rotary_has_no_parameters_and_keeps_shape_and_dtype(impl):
    rope = impl.RotaryPositionEmbedding(8, 16)
    assert _names(rope) == {}, f"RotaryPositionEmbedding has parameters {_names(rope)}: its tables are buffers"
    for dtype in (torch.float32, torch.float64):
        x = randn(2, 3, 5, 8, seed=10).to(dtype)
        out = rope(x)
        assert out.shape == x.shape and out.dtype == dtype, \
            f"RotaryPositionEmbedding(8, 16)(x {tuple(x.shape)} {dtype}) gave {tuple(out.shape)} {out.dtype}"


@pytest.mark.component("rotary")
@pytest.mark.needs('float64')
def test_rotary_positions_by_sequence_and_far_from_0(impl):
    # (B, L) positions for x (B, L, head_dim): each sequence its own, up to 500 (pairing mistakes hide
    # at small positions, where every angle is small).
    x = randn(2, 4, 8, seed=11)
    positions = torch.tensor([[0, 499, 7, 250], [3, 3, 100, 1]])
    out = impl.RotaryPositionEmbedding(8, 512)(x, positions)
    assert_close(out, formulas.rotate(x, positions), **formulas.ROPE_TOL_FAR,
                 what="RotaryPositionEmbedding(8, 512)(x (2, 4, 8), positions (2, 4)) up to position 499")


@pytest.mark.component("rotary")
def test_rotary_float32_input_at_large_positions(impl):
    x = randn(1, 6, 16, seed=12).float()
    positions = torch.tensor([0, 1, 1000, 2047, 1500, 3])
    out = impl.RotaryPositionEmbedding(16, 2048)(x, positions)
    assert out.dtype == torch.float32, f"float32 input gave {out.dtype}"
    assert_close(out.double(), formulas.rotate(x.double(), positions), rtol=1e-4, atol=2e-4,
                 what="RotaryPositionEmbedding(16, 2048) in float32 at positions up to 2047 vs the exact rotation")


# ------------------------------------------------------------------------------------ GQA
@pytest.mark.component("gqa")
@pytest.mark.parametrize("kv", [None, 1, 2, 4], ids=lambda k: f"kv_{k}")
@pytest.mark.needs('gqa')
def test_gqa_parameters_are_the_contracts(impl, kv):
    rope = impl.RotaryPositionEmbedding(4, 8)
    got = _names(impl.GroupedQueryAttention(16, 4, num_kv_heads=kv, rope=rope))
    assert got == gqa_shapes(16, 4, kv), f"GroupedQueryAttention(16, 4, num_kv_heads={kv}) parameters {got}, " \
                                          f"expected exactly {gqa_shapes(16, 4, kv)} (bias-free)"


@pytest.mark.component("gqa")
@pytest.mark.parametrize("kv", [1, 2, 4], ids=lambda k: f"kv_{k}")
@pytest.mark.needs('gqa', 'mask')
def test_gqa_with_positions_and_a_padding_like_mask(impl, kv):
    p = seeded_parameters(gqa_shapes(16, 4, kv), seed=13)
    attn = set_parameters(impl.GroupedQueryAttention(16, 4, num_kv_heads=kv,
                                                     rope=impl.RotaryPositionEmbedding(4, 64)).double(), p)
    x = randn(2, 5, 16, seed=14)
    positions = torch.tensor([[9, 2, 40, 17, 3], [0, 63, 5, 5, 30]])  # (B, L): one set per sequence
    mask = torch.tensor([[False, False, True, False, True], [False] * 4 + [True]])[:, None, None, :]
    out, weights = attn(x, mask, positions)
    exp_out, exp_w = formulas.gqa(x, p, 4, kv, mask, positions)
    where = f"GroupedQueryAttention(16, 4, num_kv_heads={kv}, rope)(x, mask (B, 1, 1, L), positions (B, L))"
    assert_close(weights, exp_w, **formulas.ROPE_TOL, what=f"{where}: weights")
    assert_close(out, exp_out, **formulas.ROPE_TOL, what=f"{where}: output")


@pytest.mark.component("gqa")
@pytest.mark.needs('gqa')
def test_gqa_without_rope_ignores_positions_and_fully_blocked_rows_give_zeros(impl):
    p = seeded_parameters(gqa_shapes(8, 2, 1), seed=15)
    attn = set_parameters(impl.GroupedQueryAttention(8, 2, num_kv_heads=1).double(), p)
    x = randn(1, 3, 8, seed=16)
    mask = torch.tensor([[False, True, True], [True, True, True], [False, False, True]])
    out, weights = attn(x, mask, torch.tensor([5, 1, 2]))
    exp_out, exp_w = formulas.gqa(x, p, 2, 1, mask, rope=False)
    exp_w, exp_out = torch.nan_to_num(exp_w), exp_out.clone()
    exp_out[:, 1] = 0.0  # the fully blocked row: zero weights, zero output (before output_proj: zeros stay zeros)
    assert_close(weights, exp_w, rtol=1e-9, atol=1e-10,
                 what="GroupedQueryAttention(8, 2, num_kv_heads=1) without rope: weights (row 1 fully blocked)")
    assert_close(out, exp_out, rtol=1e-9, atol=1e-10, what="its output (positions ignored without rope)")


# ------------------------------------------------------------------------------------ block
@pytest.mark.component("llama_block")
@pytest.mark.needs('gqa')
def test_llama_block_submodules_and_parameters(impl):
    block = impl.LlamaBlock(8, 2, 12, num_kv_heads=1, max_len=16)
    got = _names(block)
    assert got == llama_block_shapes(8, 2, 12, 1), f"LlamaBlock(8, 2, 12, num_kv_heads=1) parameters {got}, " \
                                                   f"expected exactly {llama_block_shapes(8, 2, 12, 1)}"
    for name, cls in (("ln1", "RMSNorm"), ("ln2", "RMSNorm"), ("attn", "GroupedQueryAttention"), ("ffn", "SwiGLU")):
        sub = getattr(block, name, None)
        assert type(sub).__name__ == cls, f"LlamaBlock.{name} must be the submission's {cls}, got {type(sub).__name__}"


@pytest.mark.component("llama_block")
@pytest.mark.needs('eps')
def test_llama_block_rotates_by_the_positions_given(impl):
    p = seeded_parameters(llama_block_shapes(8, 2, 12, 2), seed=17)
    block = set_parameters(impl.LlamaBlock(8, 2, 12, max_len=64, theta=500.0, eps=1e-3).double(), p)
    x = randn(2, 4, 8, seed=18)
    positions = torch.tensor([31, 7, 0, 63])
    out, weights = block(x.clone(), None, positions)
    exp_out, exp_w = formulas.llama_block(x, p, 2, 2, None, positions, theta=500.0, eps=1e-3)
    where = "LlamaBlock(8, 2, 12, max_len=64, theta=500, eps=1e-3)(x, positions=[31, 7, 0, 63])"
    assert_close(weights, exp_w, **formulas.ROPE_TOL, what=f"{where}: weights")
    assert_close(out, exp_out, **formulas.ROPE_TOL, what=f"{where}: output")


# ------------------------------------------------------------------------------------ MiniLlama
@pytest.mark.component("minillama")
@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
@pytest.mark.needs('parameters')
def test_minillama_parameter_count_and_tied_head(impl, tied):
    model = impl.MiniLlama(100, tie_weights=tied)
    count = sum(p.numel() for p in model.parameters())
    expected = 113_216 if tied else 119_616  # docs/contract.md: 6,400 + 2 x 53,376 + 64 (+ 6,400 untied)
    assert count == expected, f"MiniLlama(100, tie_weights={tied}) has {count} parameters, expected {expected}"
    same = model.lm_head.weight is model.token_embeddings.weight
    assert same == tied, (f"MiniLlama(100, tie_weights={tied}): lm_head.weight "
                          f"{'is' if same else 'is not'} token_embeddings.weight")


@pytest.mark.component("minillama")
@pytest.mark.needs('parameters')
def test_minillama_default_d_ff_is_8_thirds_rounded_up_to_64(impl):
    # d_model 48: 8 * 48 / 3 = 128 = 2 * 64; d_model 40: 106.7 -> 128; d_model 100: 266.7 -> 320;
    # d_model 146: 389.3 -> 448 (just above 6 * 64)
    for d, ff in ((48, 128), (40, 128), (100, 320), (146, 448)):
        model = impl.MiniLlama(10, d_model=d, num_layers=1, num_heads=1)
        w1 = dict(model.named_parameters()).get("layers.0.ffn.w1.weight")
        got = None if w1 is None else tuple(w1.shape)
        assert got == (ff, d), f"MiniLlama(10, d_model={d}, d_ff=None): layers.0.ffn.w1 has shape {got}, " \
                               f"expected ({ff}, {d}): d_ff = 64 * ceil(8 * d_model / 3 / 64)"


@pytest.mark.component("minillama")
@pytest.mark.needs('eps')
def test_minillama_passes_eps_and_theta_to_every_norm_and_rotation(impl):
    p = minillama_parameters(17, 12, 2, 3, 20, seed=133, num_kv_heads=1)
    tokens = torch.randint(0, 17, (2, 9), generator=torch.Generator().manual_seed(134))
    model = set_parameters(impl.MiniLlama(17, d_model=12, num_layers=2, num_heads=3, num_kv_heads=1, d_ff=20, max_len=16,
                                          theta=50.0, eps=0.5).double(), p)
    assert_close(model(tokens)[0], formulas.minillama(tokens, p, 2, 3, 1, theta=50.0, eps=0.5), **formulas.ROPE_TOL,
                 what="MiniLlama(17, d_model=12, 2 layers, theta=50, eps=0.5) logits vs its formula: every RMSNorm "
                      "(ln1, ln2 of each layer, ln_final) with eps=0.5, every rotation with theta=50")


@pytest.mark.component("minillama")
@pytest.mark.needs('weights')
def test_minillama_return_attn_and_causality(impl):
    p = minillama_parameters(11, 8, 2, 2, 12, seed=19)
    model = set_parameters(impl.MiniLlama(11, d_model=8, num_layers=2, num_heads=2, d_ff=12, max_len=8).double(), p)
    tokens = torch.tensor([[1, 5, 3, 9, 2], [4, 4, 0, 7, 10]])
    logits, maps = model(tokens, return_attn=True)
    assert isinstance(maps, list) and len(maps) == 2, f"return_attn=True must give a list of 2 maps, got {type(maps)}"
    for i, m in enumerate(maps):
        assert tuple(m.shape) == (2, 2, 5, 5), f"attention map {i} has shape {tuple(m.shape)}, expected (2, 2, 5, 5)"
        assert_equal(m.triu(1), torch.zeros_like(m), what=f"layer {i}'s weights above the diagonal (causal: blocked)")
    changed = tokens.clone()
    changed[:, 3:] = (changed[:, 3:] + 1) % 11
    assert_close(model(changed)[0][:, :3], logits[:, :3],
                 what="MiniLlama logits of positions 0..2 after changing tokens 3, 4 (causal: they must not move)")
