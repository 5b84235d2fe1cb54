"""The 'gqa' component (modern track). Grouped-query attention with rotary positions: query head h reads
key/value head h // (num_heads // num_kv_heads); RoPE on q and k, never v (Ainslie et al. 2023; Llama).

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import torch

from transformer_spec.contract import inputs
from transformer_spec.contract.registry import Component, Name, Recheck, pitfall
from transformer_spec.probes import behaviour as bp
from transformer_spec.probes import recheck, testing
from transformer_spec.probes.llama_shapes import gqa_shapes

NAMES = (
    Name("GroupedQueryAttention", "gqa", "module",
         "GroupedQueryAttention(d_model, num_heads, num_kv_heads=None, rope=None) with bias-free q_proj, k_proj, "
         "v_proj (num_kv_heads * head_dim rows), output_proj; forward(x (B, L, d_model), mask=None, positions=None) "
         "-> (out (B, L, d_model), weights (B, num_heads, L, L)); query head h uses kv head h // (num_heads // "
         "num_kv_heads); rope rotates q and k, never v"),
)

_ROPE = "q, k = self.rope(q, pos), self.rope(k, pos)  # v is never rotated"
_REPEAT = ("k = k.repeat_interleave(group, dim=1)  # (B, H, T, d): query head h reads kv head h // group\n"
           "        v = v.repeat_interleave(group, dim=1)")
_POS = "pos = positions.unsqueeze(-2) if positions is not None and positions.dim() >= 2 else positions"
_SDPA = "out, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, L, d), (B, H, L, T)"
_MERGE = "out = out.transpose(1, 2).reshape(B, L, self.d_model)  # heads concatenated in order"
_Q = "q = self.q_proj(x).view(B, L, H, d).transpose(1, 2)  # (B, H, L, d)"
_K = "k = self.k_proj(x).view(B, L, KV, d).transpose(1, 2)  # (B, KV, L, d)"

PITFALLS = (
    pitfall("gqa_heads_paired_modulo", "gqa",
            "Key/value heads are tiled ([k0, k1, k0, k1]), so query head h reads kv head h % num_kv_heads: each "
            "group of num_heads // num_kv_heads CONSECUTIVE query heads shares one kv head "
            "(repeat_interleave, not repeat).",
            ("gqa.py", _REPEAT, "k = k.repeat(1, group, 1, 1)  # tiled\n        v = v.repeat(1, group, 1, 1)"),
            source="onnx/onnx#7274"),
    pitfall("gqa_values_rotated", "gqa",
            "The values are rotated too: RoPE turns queries and keys only (RoFormer's f_v(x) = W_v x).",
            ("gqa.py", _ROPE, _ROPE + "\n            v = self.rope(v, pos)"),
            source="JunnYu/RoFormer_pytorch#34"),
    pitfall("gqa_only_queries_rotated", "gqa",
            "Only the queries are rotated: rotate the keys too, or the scores lose their relative positions.",
            ("gqa.py", _ROPE, "q = self.rope(q, pos)  # keys not rotated")),
    pitfall("gqa_rope_before_heads_transposed", "gqa",
            "RoPE is applied to (B, L, heads, head_dim) tensors before the transpose, so it turns along the heads "
            "axis instead of the sequence: rotate (B, heads, L, head_dim).",
            ("gqa.py", _Q, "q = self.q_proj(x).view(B, L, H, d)"),
            ("gqa.py", _K, "k = self.k_proj(x).view(B, L, KV, d)"),
            ("gqa.py", _ROPE, _ROPE + "\n            q, k = q.transpose(1, 2), k.transpose(1, 2)"),
            ("gqa.py", "        if kv_cache is not None:\n",
             "        if self.rope is None:\n            q, k = q.transpose(1, 2), k.transpose(1, 2)\n"
             "        if kv_cache is not None:\n"),
            source="mlfoundations/open_lm#4"),
    pitfall("gqa_positions_not_passed_to_rope", "gqa",
            "The `positions` argument never reaches the rotation (rope(q) without positions): q and k must be "
            "rotated at the positions given.",
            ("gqa.py", _ROPE, "q, k = self.rope(q), self.rope(k)  # positions dropped")),
    pitfall("gqa_batch_positions_not_broadcast_over_heads", "gqa",
            "(B, L) positions are passed to RoPE as they are: for q of shape (B, heads, L, head_dim) they must "
            "become (B, 1, L), the same positions for every head.",
            ("gqa.py", _POS, "pos = positions")),
    pitfall("gqa_scaled_by_d_model", "gqa",
            "The scores are divided by sqrt(d_model): each head's scores are divided by sqrt(head_dim).",
            ("gqa.py", _SDPA, "out, weights = scaled_dot_product_attention(q, k, v, mask, scale=self.d_model ** -0.5)"),
            source="FareedKhan-dev/train-llm-from-scratch#3"),
    pitfall("gqa_heads_merged_without_transpose", "gqa",
            "The heads are merged without the transpose back: (B, H, L, d) must become (B, L, H, d) before the "
            "reshape to (B, L, d_model), or positions are mixed.",
            ("gqa.py", _MERGE, "out = out.reshape(B, L, self.d_model)  # no transpose"),
            source="jsbaan/transformer-from-scratch#6"),
    pitfall("gqa_kv_heads_divisibility_not_checked", "gqa",
            "num_kv_heads that does not divide num_heads is accepted: raise a ValueError naming num_kv_heads.",
            ("gqa.py", "        if num_heads % num_kv_heads:\n", "        if False:\n"),
            source="fla-org/flash-linear-attention#1029"),
    pitfall("gqa_positions_unsqueezed_whatever_their_rank", "gqa",
            "The positions are unsqueezed for the heads whatever their rank: (B, L) must become (B, 1, L), but (L,) "
            "positions must stay as they are ((L,) -> (L, 1) no longer lines up with the sequence).",
            ("gqa.py", _POS, "pos = positions.unsqueeze(1) if positions is not None else positions"),
            source="chillcharlie357/assignment1-basics@25014d2 cs336_basics/transformer/attention.py:106"),
)

D, H, KV = 16, 4, 2


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'gqa' (transformer_spec/probes/behaviour.py)."""
    x = inputs.randn(2, 5, D, seed=101)
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)

    def attn(kv=KV, rope=True):
        r = impl.RotaryPositionEmbedding(D // H, 16) if rope else None
        return bp.module(impl.GroupedQueryAttention, testing.seeded_parameters(gqa_shapes(D, H, kv), seed=102),
                         d_model=D, num_heads=H, num_kv_heads=kv, rope=r)

    bp.capture(f, "rope", lambda: attn()(x, causal))
    bp.capture(f, "no_rope", lambda: attn(rope=False)(x, causal))
    bp.capture(f, "mha", lambda: attn(kv=H, rope=False)(x))
    bp.capture(f, "positions", lambda: attn()(x, causal, torch.tensor([4, 1, 0, 9, 3])))
    bp.capture(f, "batch_positions", lambda: attn()(x, None, torch.tensor([[4, 1, 0, 9, 3], [2, 2, 7, 6, 5]])))
    # as many key/value heads as query heads, causal: what a course whose attention is always causal and
    # has no grouped queries expresses (cs336)
    bp.capture(f, "mha_causal", lambda: attn(kv=H, rope=False)(x, causal))
    bp.capture(f, "mha_causal_rope", lambda: attn(kv=H)(x, causal))
    bp.capture(f, "mha_causal_positions", lambda: attn(kv=H)(x, causal, torch.tensor([4, 1, 0, 9, 3])))
    bp.capture(f, "mha_causal_batch_positions",
               lambda: attn(kv=H)(x, causal, torch.tensor([[4, 1, 0, 9, 3], [2, 2, 7, 6, 5]])))
    bp.capture(f, "~kv_not_dividing", lambda: bp.names_arg(lambda: impl.GroupedQueryAttention(12, 4, 3), "num_kv_heads"))

    def shift_invariant():
        m = attn()
        a = m(x, causal, torch.arange(5))[1]
        b = m(x, causal, torch.arange(5) + 7)[1]
        return bool(torch.allclose(a, b))

    bp.capture(f, "~shift_invariant_weights", shift_invariant)


def _gqa(mod, seed):
    s = inputs.ORACLE
    m = recheck.with_weights(
        mod.GroupedQueryAttention(d_model=s.d, num_heads=6, num_kv_heads=2,
                                  rope=mod.RotaryPositionEmbedding(s.d // 6, 32)),
        gqa_shapes(s.d, 6, 2), seed, torch.float64)
    out, weights = m(inputs.randn(s.b, s.lk, s.d, seed=seed + 1), torch.triu(torch.ones(s.lk, s.lk, dtype=torch.bool), 1))
    return recheck.Outputs(recheck.as_numpy(out=out, weights=weights), **recheck.ROTATED)


def _mha_float32(rope: bool):
    """Twin of the float32 formula tests (as many kv heads as query heads: every course expresses them; the
    output only, as the weights are checked only where a profile returns them)."""
    def run(mod, seed):
        s, h = inputs.ORACLE, 3
        m = recheck.with_float32_weights(mod.GroupedQueryAttention(
            d_model=s.d, num_heads=h, rope=mod.RotaryPositionEmbedding(s.d // h, 32) if rope else None),
            gqa_shapes(s.d, h, h), seed)
        x = inputs.randn(s.b, s.lk, s.d, seed=seed + 1).float()
        positions = torch.tensor([0, 2, 3, 7, 8, 12, 13])[:s.lk] if rope else None
        out, _ = m(x, torch.triu(torch.ones(s.lk, s.lk, dtype=torch.bool), 1), positions)
        return recheck.float32_outputs(out=out)
    return run


_F32 = "spec_tests/modern/test_oracles.py::test_multi_head_attention_{}_in_float32_matches_its_formula"
RECHECKS = (
    Recheck("gqa", "gqa", ("spec_tests/modern/test_oracles.py::test_gqa_matches_torch_sdpa_with_enable_gqa",),
            _gqa, public=75),
    Recheck("gqa[float32-rope]", "gqa", (_F32.format("with_rope"),), _mha_float32(True), public=77),
    Recheck("gqa[float32-no_rope]", "gqa", (_F32.format("without_rope"),), _mha_float32(False), public=135),
)


COMPONENT = Component(
    "gqa", label="gqa", points=18, order=24, depends_on=("attention", "rotary"), tracks=("modern",),
    values=(  # the tests of what it computes (rubric.VALUES_SHARE of its points)
        "spec_tests/modern/test_oracles.py::test_multi_head_attention_with_rope_in_float32_matches_its_formula",
        "spec_tests/modern/test_oracles.py::test_multi_head_attention_without_rope_in_float32_matches_its_formula",
        "spec_tests/modern/test_oracles.py::test_gqa_matches_torch_sdpa_with_enable_gqa",
        "spec_tests/modern/test_golden.py::test_gqa_pairs_consecutive_query_heads_with_one_kv_head",
    ),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
