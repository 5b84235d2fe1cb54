"""The 'decoder' component. The decoder block: masked self-attention, cross-attention to the memory,
feed-forward.

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import torch

from transformer_spec.contract import inputs
from transformer_spec.contract.registry import Component, Name, Recheck, pitfall
from transformer_spec.probes import behaviour as bp
from transformer_spec.probes import recheck, testing

NAMES = (
    Name("TransformerDecoderBlock", "decoder", "module",
         "TransformerDecoderBlock(d_model=512, num_heads=8, d_ff=2048, dropout=0.1, norm_first=True) "
         "with self_attn, cross_attn, ffn, norm1, norm2, norm3, dropout; forward(x, memory, "
         "tgt_mask=None, memory_mask=None) -> (x, self_weights, cross_weights)"),
)

PITFALLS = (
    pitfall("cross_attention_to_itself", "decoder",
            "The decoder's cross-attention attends to the decoder itself: its keys and values must come "
            "from `memory` (the encoder output).",
            ("blocks.py", "self.cross_attn(self.norm2(x), memory, memory, memory_mask)",
             "self.cross_attn(self.norm2(x), self.norm2(x), self.norm2(x), None)"),
            ("blocks.py", "self.cross_attn(x, memory, memory, memory_mask)", "self.cross_attn(x, x, x, None)")),
    pitfall("cross_attention_without_memory_mask", "decoder",
            "The decoder's cross-attention ignores `memory_mask`: padded source positions are attended.",
            ("blocks.py", "self.cross_attn(self.norm2(x), memory, memory, memory_mask)",
             "self.cross_attn(self.norm2(x), memory, memory, None)"),
            ("blocks.py", "self.cross_attn(x, memory, memory, memory_mask)", "self.cross_attn(x, memory, memory, None)")),
    pitfall("decoder_self_attention_without_tgt_mask", "decoder",
            "The decoder's self-attention ignores `tgt_mask`: each target token sees the future.",
            ("blocks.py", "self.self_attn(self.norm1(x), tgt_mask)", "self.self_attn(self.norm1(x), None)"),
            ("blocks.py", "self.self_attn(x, tgt_mask)", "self.self_attn(x, None)")),
    pitfall("decoder_post_ln_for_pre_ln", "decoder",
            "The decoder block applies LayerNorm after the residual (Post-LN) when norm_first=True asks for "
            "Pre-LN: norm_first is ignored (the seed 001 tutorial's 'Add & Norm' order is the only one written).",
            ("blocks.py", "if self.norm_first:\n            attn_out, self_weights",
             "if False:  # always Post-LN\n            attn_out, self_weights")),
    pitfall("decoder_cross_residual_missing", "decoder",
            "The decoder block drops the residual connection around cross-attention.",
            ("blocks.py", "x = x + self.dropout(cross_out)", "x = self.dropout(cross_out)"),
            ("blocks.py", "x = self.norm2(x + self.dropout(cross_out))", "x = self.norm2(self.dropout(cross_out))")),
    pitfall("decoder_sublayer_output_not_dropped", "decoder",
            "The decoder block never applies its own dropout to the FFN sublayer's output: the contract's "
            "block is x + dropout(ffn(norm3(x))), like the encoder's.",
            ("blocks.py", "x = x + self.dropout(self.ffn(self.norm3(x)))", "x = x + self.ffn(self.norm3(x))")),
    # mined from public implementations (issue 27): each cites where the mistake was made
    pitfall('decoder_pre_ln_residual_from_normalized_input', 'decoder',
            "The decoder's Pre-LN normalises x in place before each sublayer, x = norm(x); x = x + "
            'sublayer(x): the residual stream must stay un-normalised, x = x + '
        "drop(sublayer(norm(x))).",
            ('blocks.py', '            attn_out, self_weights = self.self_attn(self.norm1(x), tgt_mask)\n            x = x + self.dropout(attn_out)\n            cross_out, cross_weights = self.cross_attn(self.norm2(x), memory, memory, memory_mask)\n            x = x + self.dropout(cross_out)\n            x = x + self.dropout(self.ffn(self.norm3(x)))\n',
             '            x = self.norm1(x)\n            attn_out, self_weights = self.self_attn(x, tgt_mask)\n            x = x + self.dropout(attn_out)\n            x = self.norm2(x)\n            cross_out, cross_weights = self.cross_attn(x, memory, memory, memory_mask)\n            x = x + self.dropout(cross_out)\n            x = self.norm3(x)\n            x = x + self.dropout(self.ffn(x))\n'),
            source='tracel-ai/burn#1056'),
    pitfall('decoder_masks_swapped', 'decoder',
            'The decoder passes the source (memory) mask to its self-attention and the target '
            '(causal) mask to its cross-attention: self-attention takes tgt_mask, cross-attention '
        "memory_mask.",
            ('blocks.py', 'self.self_attn(self.norm1(x), tgt_mask)',
             'self.self_attn(self.norm1(x), memory_mask)'),
            ('blocks.py', 'self.cross_attn(self.norm2(x), memory, memory, memory_mask)',
             'self.cross_attn(self.norm2(x), memory, memory, tgt_mask)'),
            ('blocks.py', 'self.self_attn(x, tgt_mask)',
             'self.self_attn(x, memory_mask)'),
            ('blocks.py', 'self.cross_attn(x, memory, memory, memory_mask)',
             'self.cross_attn(x, memory, memory, tgt_mask)'),
            source='keitakurita/Practical_NLP_in_PyTorch#1'),
    pitfall('cross_attention_residual_from_memory', 'decoder',
            "The cross-attention's residual adds the encoder output, memory + drop(cross_attn(...)): "
            "the residual is the decoder's own stream, x + drop(cross_attn(norm2(x), memory, "
        "memory)).",
            ('blocks.py', '            x = x + self.dropout(cross_out)\n',
             '            x = memory + self.dropout(cross_out)  # residual from the encoder\n'),
            ('blocks.py', 'x = self.norm2(x + self.dropout(cross_out))',
             'x = self.norm2(memory + self.dropout(cross_out))'),
            source='georgepar/slp#26'),
    pitfall('decoder_norm1_reused_for_cross_attention', 'decoder',
            'The decoder uses norm1 again for the cross-attention sublayer: each of its three '
            'sublayers has its own LayerNorm (norm1 self-attention, norm2 cross-attention, norm3 '
        "FFN).",
            ('blocks.py', 'self.cross_attn(self.norm2(x), memory, memory, memory_mask)',
             'self.cross_attn(self.norm1(x), memory, memory, memory_mask)'),
            ('blocks.py', 'x = self.norm2(x + self.dropout(cross_out))',
             'x = self.norm1(x + self.dropout(cross_out))'),
            source='ml-explore/mlx#1636'),
    pitfall("decoder_post_ln_norm_missing", "decoder",
            "In the Post-LN order (norm_first=False) the self-attention's residual is never normalised: every "
            "sublayer of Post-LN ends with its LayerNorm, x = norm1(x + drop(self_attn(x))).",
            ("blocks.py", "x = self.norm1(x + self.dropout(attn_out))\n            cross_out, cross_weights",
             "x = x + self.dropout(attn_out)\n            cross_out, cross_weights"),
            source="facebookresearch/multimodal#317"),
)


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'decoder' (transformer_spec/probes/behaviour.py)."""
    x, memory = inputs.randn(2, 4, bp.D, seed=32), inputs.randn(2, 5, bp.D, seed=33)
    memory_mask = torch.zeros(2, 1, 1, 5, dtype=torch.bool)
    memory_mask[1, ..., 3:] = True
    bp.block_probes(f, impl.TransformerDecoderBlock, testing.decoder_block_shapes(bp.D, bp.FF),
                    lambda m: m(x, memory, inputs.causal(4), memory_mask),
                    ("self_attn.W_O.weight", "cross_attn.W_O.weight", "ffn.linear2.weight", "ffn.linear2.bias"))

    def memory_matters():  # the signature of a cross-attention that reads the decoder itself (no masks: no crash)
        block = bp.module(impl.TransformerDecoderBlock, testing.seeded_parameters(
            testing.decoder_block_shapes(bp.D, bp.FF), seed=31), d_model=bp.D, num_heads=bp.H, d_ff=bp.FF, dropout=0.0)
        a = block(x, memory)[0]
        return not bool(torch.allclose(a, block(x, memory * 2 + 1)[0]))

    bp.capture(f, "~memory_changes_output", memory_matters)


def _decoder(norm_first: bool, mask_kind: str, dtype: str):
    def run(mod, seed):
        s, dt = inputs.ORACLE, getattr(torch, dtype)
        block = mod.TransformerDecoderBlock(d_model=s.d, num_heads=s.h, d_ff=s.ff, dropout=0.0, norm_first=norm_first)
        block = recheck.with_weights(block, testing.decoder_block_shapes(s.d, s.ff), seed, dt)
        x, memory = inputs.randn(s.b, s.lq, s.d, seed=seed + 1, dtype=dt), inputs.randn(s.b, s.lk, s.d, seed=seed + 2, dtype=dt)
        masks = (None, None) if mask_kind == "none" else (inputs.causal(s.lq), inputs.padding(s.lk, [s.lk, 4]))
        out, self_w, cross_w = block(x, memory, tgt_mask=masks[0], memory_mask=masks[1])
        return recheck.oracle_outputs(dtype, out=out, self_weights=self_w, cross_weights=cross_w)
    return run


RECHECKS = tuple(
    Recheck(recheck.oracle_name("decoder", dtype, f"{kind}-{nid}"), "decoder",
            (f"{recheck.ORACLE}test_decoder_block_matches_torch[{dtype}-{kind}-{nid}]",),
            _decoder(norm_first, kind, dtype), public=71)  # weights 71, x 72, memory 73 as in the anchor
    for dtype in recheck.ORACLE_DTYPES
    for norm_first, nid in ((True, "pre_ln"), (False, "post_ln"))
    for kind in ("none", "causal_and_memory_padding")
)


COMPONENT = Component(
    "decoder", label="dec", points=10, order=6, depends_on=("mha", "ffn"),
    values=(  # the tests of what it computes (rubric.VALUES_SHARE of its points)
        "spec_tests/test_torch_oracle.py::test_decoder_block_matches_torch",
    ),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
