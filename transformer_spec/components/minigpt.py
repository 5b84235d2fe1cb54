"""The 'minigpt' component. MiniGPT: token embedding * sqrt(D), positions, causal encoder blocks,
final norm, tied head.

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import torch

from transformer_spec.contract import inputs
from transformer_spec.contract.registry import Component, Name, Recheck, pitfall
from transformer_spec.probes import behaviour as bp
from transformer_spec.probes import recheck

NAMES = (
    Name("MiniGPT", "minigpt", "module",
         "MiniGPT(vocab_size, d_model=128, num_heads=4, num_layers=4, d_ff=512, max_len=128, dropout=0.1) "
         "with token_embed, pos_encoding, blocks, final_norm, lm_head (Linear(D, vocab, bias=False), tied to "
         "token_embed.weight); "
         "forward(tokens, return_attn=False) -> (logits (B, L, vocab), attn_maps)"),
)

PITFALLS = (
    pitfall("embedding_not_scaled", "minigpt",
            "The token embeddings are not multiplied by sqrt(d_model) before the position encoding (seed 000).",
            ("minigpt.py", "x = self.token_embed(tokens) * math.sqrt(self.d_model)  # (B, L, D)",
             "x = self.token_embed(tokens)  # (B, L, D)"),
            ("minigpt.py", "self.pos_encoding(self.token_embed(tokens) * math.sqrt(self.d_model), start)",
             "self.pos_encoding(self.token_embed(tokens), start)")),
    pitfall("embedding_scaled_after_positions", "minigpt",
            "The embeddings are scaled by sqrt(d_model) after adding the positions: scale first, then add PE.",
            ("minigpt.py", "x = self.token_embed(tokens) * math.sqrt(self.d_model)  # (B, L, D)\n        x = self.pos_encoding(x)",
             "x = self.pos_encoding(self.token_embed(tokens)) * math.sqrt(self.d_model)"),
            ("minigpt.py", "self.pos_encoding(self.token_embed(tokens) * math.sqrt(self.d_model), start)",
             "self.pos_encoding(self.token_embed(tokens), start) * math.sqrt(self.d_model)")),
    pitfall("no_weight_tying", "minigpt",
            "lm_head.weight is not tied to token_embed.weight: `self.lm_head.weight = self.token_embed.weight`.",
            ("minigpt.py", "self.lm_head.weight = self.token_embed.weight", "pass  # no weight tying")),
    pitfall("no_final_layernorm", "minigpt",
            "MiniGPT skips final_norm: a Pre-LN stack needs one LayerNorm before lm_head.",
            ("minigpt.py", "logits = self.lm_head(self.final_norm(x))", "logits = self.lm_head(x)"),
            ("minigpt.py", "return self.lm_head(self.final_norm(x[:, -1]))", "return self.lm_head(x[:, -1])")),
    pitfall("minigpt_without_causal_mask", "minigpt",
            "MiniGPT runs its blocks without the causal mask: every token sees the future "
            "(seed 001 section 10, 'peeking at the answer').",
            ("minigpt.py", "x, weights = block(x, mask)", "x, weights = block(x, None)"),
            ("minigpt.py", "mask = self.causal_mask[:T, :T] if T > 1 else None", "mask = None")),
    pitfall("minigpt_causal_mask_blocks_diagonal", "minigpt",
            "MiniGPT's causal mask also blocks the diagonal: a token must see itself (`diagonal=1`).",
            ("minigpt.py", "dtype=torch.bool), diagonal=1)", "dtype=torch.bool), diagonal=0)")),
    pitfall("minigpt_blocks_keep_their_default_dropout", "minigpt",
            "MiniGPT builds its blocks without passing its `dropout` on, so they keep their default 0.1: "
            "MiniGPT(dropout=0.0) still drops activations in train() mode.",
            ("minigpt.py", "[TransformerEncoderBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)]",
             "[TransformerEncoderBlock(d_model, num_heads, d_ff) for _ in range(num_layers)]")),
    # mined from public implementations (issue 27): each cites where the mistake was made
    pitfall('weight_tying_by_copy', 'minigpt',
            'The head gets a copy of the embedding matrix, nn.Parameter(W.clone()), instead of the '
            'same tensor: the two drift apart in training and the model has an extra vocab x D '
        "parameter. Tie them, self.lm_head.weight = self.token_embed.weight.",
            ('minigpt.py', 'self.lm_head.weight = self.token_embed.weight',
             'self.lm_head.weight = nn.Parameter(self.token_embed.weight.detach().clone())  # a copy'),
            source='rasbt/LLMs-from-scratch#822'),
    pitfall('minigpt_blocks_ignore_d_ff', 'minigpt',
            'MiniGPT does not pass d_ff to its blocks, which always use 4 * d_model: '
        "MiniGPT(d_ff=...) must build TransformerEncoderBlock(d_model, num_heads, d_ff, dropout).",
            ('minigpt.py', '[TransformerEncoderBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)]',
             '[TransformerEncoderBlock(d_model, num_heads, 4 * d_model, dropout) for _ in range(num_layers)]'),
            source='HorizonRobotics/alf#1299'),
    pitfall("minigpt_position_encoding_unused", "minigpt",
            "MiniGPT computes the position encoding and never uses it: the blocks get the token embeddings alone, so "
            "nothing tells them where a token is. Feed them x = pos_encoding(token_embed(tokens) * sqrt(d_model)).",
            ("minigpt.py", "x = self.pos_encoding(x)\n        attn_maps = []",
             "self.pos_encoding(x)  # computed, never used\n        attn_maps = []"),
            source="Lightning-AI/pytorch-lightning#20099"),
)


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'minigpt' (transformer_spec/probes/behaviour.py)."""
    tokens = torch.tensor([[1, 5, 2, 9, 12, 0], [3, 3, 7, 1, 4, 8]])
    bp.capture(f, "logits", lambda: bp.small_minigpt(impl)(tokens)[0])
    bp.capture(f, "attn_maps", lambda: bp.small_minigpt(impl)(tokens, return_attn=True)[1])

    def tied():
        m = bp.small_minigpt(impl)
        return m.lm_head.weight.data_ptr() == m.token_embed.weight.data_ptr()

    bp.capture(f, "tied", tied)

    def head_starts_as_the_embedding():  # a copy is equal at first, then trained apart (untied)
        torch.manual_seed(52)
        m = impl.MiniGPT(bp.VOCAB, d_model=bp.D, num_heads=bp.H, num_layers=1, d_ff=bp.FF, max_len=bp.MAX_LEN)
        return bool(torch.equal(m.lm_head.weight, m.token_embed.weight))

    bp.capture(f, "head_starts_as_the_embedding", head_starts_as_the_embedding)

    def dropout_zero_is_eval_in_train():
        m = bp.small_minigpt(impl, dropout=0.0)
        with torch.no_grad():
            eval_logits = m.eval()(tokens)[0]
            torch.manual_seed(5)
            return bool(torch.allclose(m.train()(tokens)[0], eval_logits, rtol=1e-9, atol=1e-12))

    bp.capture(f, "dropout_zero_is_eval_in_train", dropout_zero_is_eval_in_train)


SNAPSHOTS = "spec_tests/test_snapshots.py::"
#: spec_tests/test_snapshots.py compares MiniGPT's float64 outputs with rtol = atol = 1e-6 (a
#: sinusoidal table built in float32, which the contract allows, moves the logits by ~4e-8)
SNAPSHOT_TOL = {"rtol": 1e-6, "atol": 1e-6}


def _snapshot_case(mod, seed):
    """The snapshot's MiniGPT with weights from ``seed``, and a (2, max_len) batch of tokens."""
    c = recheck.SNAPSHOT_MINIGPT
    tokens = torch.randint(0, c["vocab_size"], (2, c["max_len"]), generator=inputs.generator(seed + 1))
    return recheck.snapshot_minigpt(mod, seed), tokens


def _logits(mod, seed):
    model, tokens = _snapshot_case(mod, seed)
    logits, _ = model(tokens)
    return recheck.Outputs(recheck.as_numpy(logits=logits), **SNAPSHOT_TOL)


def _attn_maps(mod, seed):
    model, tokens = _snapshot_case(mod, seed)
    _, attn_maps = model(tokens, return_attn=True)
    return recheck.Outputs(recheck.as_numpy(attn_maps=torch.stack(list(attn_maps))), **SNAPSHOT_TOL)


RECHECKS = (
    Recheck("minigpt[logits]", "minigpt", (f"{SNAPSHOTS}test_minigpt_logits_snapshot[float64]",), _logits),
    Recheck("minigpt[attn_maps]", "minigpt", (f"{SNAPSHOTS}test_minigpt_attention_maps_snapshot[float64]",),
            _attn_maps),
)


COMPONENT = Component(
    "minigpt", label="gpt", points=10, order=8, depends_on=("encoder", "position"),
    values=(  # the tests of what it computes (rubric.VALUES_SHARE of its points)
        "spec_tests/test_snapshots.py::test_minigpt_logits_snapshot",
        "spec_tests/test_snapshots.py::test_minigpt_attention_maps_snapshot",
        "spec_tests/test_snapshots.py::test_minigpt_prefix_logits_snapshot",
    ),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
