"""The 'minillama' component (modern track). MiniLlama: lm_head(ln_final(layers(token_embeddings(tokens)))),
rotary positions 0 .. L-1 under the causal mask, no embedding scale, tied head on request.

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import torch

from transformer_spec.contract import inputs
from transformer_spec.contract.registry import Component, Name, Recheck, pitfall
from transformer_spec.probes import behaviour as bp
from transformer_spec.probes import recheck, testing
from transformer_spec.probes.llama_shapes import SMALL, minillama_parameters, small_minillama

NAMES = (
    Name("MiniLlama", "minillama", "module",
         "MiniLlama(vocab_size, d_model=64, num_layers=2, num_heads=4, num_kv_heads=None, d_ff=None, max_len=128, "
         "theta=10000.0, eps=1e-5, tie_weights=False) with token_embeddings, layers (LlamaBlock), ln_final (RMSNorm), "
         "lm_head (bias-free); forward(tokens, return_attn=False) -> (logits (B, L, vocab), attn maps or None); "
         "no embedding scale, causal, positions 0 .. L-1; d_ff=None means 64 * ceil(8 * d_model / 3 / 64)"),
)

_EMBED = "x = self.token_embeddings(tokens)  # (B, L, D), not scaled"
_LOGITS = "logits = self.lm_head(self.ln_final(x))  # (B, L, vocab)"
_MASK = "mask = self.causal_mask[:L, :L]  # (L, L), True above the diagonal = blocked"
_WIDTH = "return 64 * math.ceil(8 * d_model / 3 / 64)"

PITFALLS = (
    pitfall("minillama_embeddings_scaled", "minillama",
            "The embeddings are multiplied by sqrt(d_model) (the original Transformer's and Gemma's habit): Llama "
            "feeds token_embeddings(tokens) as they are.",
            ("minillama.py", _EMBED, "x = self.token_embeddings(tokens) * math.sqrt(self.d_model)"),
            source="google/gemma_pytorch#29"),
    pitfall("minillama_no_final_norm", "minillama",
            "ln_final is never applied: the logits are lm_head(ln_final(h)) for the last layer's output h.",
            ("minillama.py", _LOGITS, "logits = self.lm_head(x)  # no final norm"),
            source="awslabs/keys_values#139"),
    pitfall("minillama_tie_weights_ignored", "minillama",
            "tie_weights=True does not tie: lm_head.weight must be the same tensor as token_embeddings.weight.",
            ("minillama.py", "        if tie_weights:\n", "        if False:  # tie_weights ignored\n"),
            source="facebookresearch/lingua#74"),
    pitfall("minillama_always_tied", "minillama",
            "The head is tied even with tie_weights=False (the default): Llama keeps a separate lm_head.",
            ("minillama.py", "        if tie_weights:\n", "        if True:  # always tied\n")),
    pitfall("minillama_no_causal_mask", "minillama",
            "The layers get no causal mask: each position sees the future tokens, so training is a copy task.",
            ("minillama.py", _MASK, "mask = None  # no causal mask")),
    pitfall("minillama_default_d_ff_not_rounded", "minillama",
            "d_ff=None is 8/3 d_model rounded UP to a multiple of 64, 64 * ceil(8 * d_model / 3 / 64), not "
            "int(8 * d_model / 3).",
            ("minillama.py", _WIDTH, "return int(8 * d_model / 3)"),
            source="EleutherAI/gpt-neox#1309"),
)

VOCAB = SMALL["vocab_size"]


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'minillama' (transformer_spec/probes/behaviour.py)."""
    tokens = torch.tensor([[3, 1, 4, 1, 5, 9], [2, 6, 5, 3, 5, 8]])
    bp.capture(f, "logits", lambda: small_minillama(impl, 121)(tokens)[0])
    bp.capture(f, "tied_logits", lambda: small_minillama(impl, 121, tied=True)(tokens)[0])

    def params(**kw):
        return sum(t.numel() for t in impl.MiniLlama(100, **kw).parameters())

    # under a course profile the profile holds the parameters: their count is no behaviour of the student's
    bp.capture(f, "params", lambda: params(), needs=("parameters",))
    bp.capture(f, "params_tied", lambda: params(tie_weights=True), needs=("parameters",))
    bp.capture(f, "params_d_model_48", lambda: params(d_model=48), needs=("parameters",))

    def causal():
        m = small_minillama(impl, 121)
        a = m(tokens)[0][:, :3]
        b = m(torch.cat([tokens[:, :3], (tokens[:, 3:] + 1) % VOCAB], 1))[0][:, :3]
        return bool(torch.allclose(a, b))

    bp.capture(f, "~causal", causal)
    # as many key/value heads as query heads: what a course without grouped queries expresses (cs336)
    bp.capture(f, "mha_logits", lambda: small_minillama(impl, 122, num_kv_heads=SMALL["num_heads"])(tokens)[0])


def _logits(mod, seed):
    m = mod.MiniLlama(17, d_model=12, num_layers=2, num_heads=3, num_kv_heads=1, d_ff=20, max_len=16).double().eval()
    testing.set_parameters(m, minillama_parameters(17, 12, 2, 3, 20, seed, num_kv_heads=1))
    tokens = torch.randint(0, 17, (2, 9), generator=inputs.generator(seed + 1))
    return recheck.Outputs(recheck.as_numpy(logits=m(tokens)[0]), **recheck.ROTATED)


def _logits_float32(mod, seed):  # twin of the float32 formula test (every course expresses it)
    m = recheck.with_float32_weights(mod.MiniLlama(17, d_model=12, num_layers=2, num_heads=3, d_ff=20, max_len=16),
                                     params=minillama_parameters(17, 12, 2, 3, 20, seed, num_kv_heads=3))
    tokens = torch.randint(0, 17, (2, 9), generator=inputs.generator(seed + 1))
    return recheck.float32_outputs(logits=m(tokens)[0])


RECHECKS = (
    Recheck("minillama", "minillama",
            ("spec_tests/modern/test_oracles.py::test_minillama_logits_match_its_formula",), _logits, public=131),
    Recheck("minillama[float32]", "minillama",
            ("spec_tests/modern/test_oracles.py::test_minillama_in_float32_matches_its_formula",), _logits_float32,
            public=133),
)


COMPONENT = Component(
    "minillama", label="llama", points=14, order=26, depends_on=("llama_block",), tracks=("modern",),
    values=(  # the tests of what it computes (rubric.VALUES_SHARE of its points)
        "spec_tests/modern/test_oracles.py::test_minillama_in_float32_matches_its_formula",
        "spec_tests/modern/test_oracles.py::test_minillama_logits_match_its_formula",
        "properties/modern/test_llama_laws.py::test_minillama_is_its_own_layers_composed",
    ),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
