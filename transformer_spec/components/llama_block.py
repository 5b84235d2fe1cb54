"""The 'llama_block' component (modern track). The Llama block: pre-norm, h = x + attn(ln1(x)),
out = h + ffn(ln2(h)), with RMSNorm, rotary grouped-query attention and SwiGLU, no dropout.

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import torch

from transformer_spec.contract import inputs
from transformer_spec.contract.registry import Component, Name, Recheck, pitfall
from transformer_spec.probes import behaviour as bp
from transformer_spec.probes import recheck, testing
from transformer_spec.probes.llama_shapes import llama_block_shapes

NAMES = (
    Name("LlamaBlock", "llama_block", "module",
         "LlamaBlock(d_model, num_heads, d_ff, num_kv_heads=None, max_len=2048, theta=10000.0, eps=1e-5) with ln1, "
         "ln2 (RMSNorm), attn (GroupedQueryAttention with its RotaryPositionEmbedding), ffn (SwiGLU); "
         "forward(x, mask=None, positions=None) -> (h + ffn(ln2(h)), weights), h = x + attn(ln1(x), mask, positions)"),
)

_ATTN = "attn_out, weights = self.attn(self.ln1(x), mask, positions, kv_cache=kv_cache)"
_H = "h = x + attn_out  # (B, L, D)"
_OUT = "return h + self.ffn(self.ln2(h)), weights"

PITFALLS = (
    pitfall("llama_residual_from_normalized_input", "llama_block",
            "The residual adds the normalised x: pre-norm is h = x + attn(ln1(x)), the raw x is added back.",
            ("llama_block.py", _ATTN + "\n        " + _H,
             "x = self.ln1(x)\n        attn_out, weights = self.attn(x, mask, positions, kv_cache=kv_cache)\n"
             "        h = x + attn_out  # residual from the normalised x"),
            source="naklecha/llama3-from-scratch#28"),
    pitfall("llama_post_norm", "llama_block",
            "The block normalises after the residual (Post-LN, ln1(x + attn(x))): Llama is pre-norm, "
            "h = x + attn(ln1(x)), out = h + ffn(ln2(h)).",
            ("llama_block.py", _ATTN, "attn_out, weights = self.attn(x, mask, positions, kv_cache=kv_cache)"),
            ("llama_block.py", _H, "h = self.ln1(x + attn_out)"),
            ("llama_block.py", _OUT, "return self.ln2(h + self.ffn(h)), weights")),
    pitfall("llama_ln1_reused_for_ffn", "llama_block",
            "ln1 normalises the FFN's input too: each sublayer has its own RMSNorm (ln2 before the FFN).",
            ("llama_block.py", _OUT, "return h + self.ffn(self.ln1(h)), weights")),
    pitfall("llama_ffn_residual_missing", "llama_block",
            "The FFN's output replaces h instead of being added to it: out = h + ffn(ln2(h)).",
            ("llama_block.py", _OUT, "return self.ffn(self.ln2(h)), weights")),
    pitfall("llama_positions_not_passed", "llama_block",
            "The block never passes `positions` to its attention: a block given positions must rotate by them.",
            ("llama_block.py", _ATTN, "attn_out, weights = self.attn(self.ln1(x), mask, kv_cache=kv_cache)")),
)

D, H, FF = 8, 2, 12


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'llama_block' (transformer_spec/probes/behaviour.py)."""
    p = testing.seeded_parameters(llama_block_shapes(D, H, FF, 1), seed=111)
    x = inputs.randn(2, 5, D, seed=112)
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)

    def block(params=p):
        return bp.module(impl.LlamaBlock, params, d_model=D, num_heads=H, d_ff=FF, num_kv_heads=1, max_len=16)

    bp.capture(f, "out", lambda: block()(x, causal))
    bp.capture(f, "positions", lambda: block()(x, causal, torch.tensor([4, 1, 0, 9, 3])))
    zero = bp.zeroed(p, "attn.output_proj.weight", "ffn.w2.weight")
    bp.capture(f, "~zero_sublayers_is_identity", lambda: bool(torch.allclose(block(zero)(x)[0], x)))
    bp.capture(f, "~zero_ffn_out", lambda: block(bp.zeroed(p, "ffn.w2.weight"))(x, causal)[0])
    # as many key/value heads as query heads: what a course without grouped queries expresses (cs336)
    q = testing.seeded_parameters(llama_block_shapes(D, H, FF, H), seed=113)

    def mha_block(params=q):
        return bp.module(impl.LlamaBlock, params, d_model=D, num_heads=H, d_ff=FF, num_kv_heads=H, max_len=16)

    bp.capture(f, "mha_out", lambda: mha_block()(x, causal))
    bp.capture(f, "~mha_zero_ffn_out", lambda: mha_block(bp.zeroed(q, "ffn.w2.weight"))(x, causal)[0])


def _block(mod, seed):
    m = recheck.with_weights(mod.LlamaBlock(d_model=12, num_heads=3, d_ff=20, num_kv_heads=1, max_len=32),
                             llama_block_shapes(12, 3, 20, 1), seed, torch.float64)
    out, weights = m(inputs.randn(2, 6, 12, seed=seed + 1), torch.triu(torch.ones(6, 6, dtype=torch.bool), 1))
    return recheck.Outputs(recheck.as_numpy(out=out, weights=weights), **recheck.ROTATED)


def _block_float32(mod, seed):  # twin of the float32 formula test (every course expresses it)
    m = recheck.with_float32_weights(mod.LlamaBlock(d_model=12, num_heads=3, d_ff=20, max_len=32),
                                     llama_block_shapes(12, 3, 20, 3), seed)
    out, _ = m(inputs.randn(2, 6, 12, seed=seed + 1).float(), torch.triu(torch.ones(6, 6, dtype=torch.bool), 1))
    return recheck.float32_outputs(out=out)


RECHECKS = (
    Recheck("llama_block", "llama_block",
            ("spec_tests/modern/test_oracles.py::test_llama_block_matches_its_formula",), _block, public=79),
    Recheck("llama_block[float32]", "llama_block",
            ("spec_tests/modern/test_oracles.py::test_llama_block_in_float32_matches_its_formula",), _block_float32,
            public=81),
)


COMPONENT = Component(
    "llama_block", label="lblk", points=10, order=25, depends_on=("rmsnorm", "gqa", "swiglu"), tracks=("modern",),
    values=(  # the tests of what it computes (rubric.VALUES_SHARE of its points)
        "spec_tests/modern/test_oracles.py::test_llama_block_in_float32_matches_its_formula",
        "spec_tests/modern/test_oracles.py::test_llama_block_matches_its_formula",
        "properties/modern/test_llama_laws.py::test_llama_block_is_its_own_sublayers_composed_pre_norm",
    ),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
