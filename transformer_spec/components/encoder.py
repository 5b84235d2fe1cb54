"""The 'encoder' component. The encoder block: self-attention and feed-forward sublayers with
residuals, Pre-LN or Post-LN.

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import torch

from transformer_spec.contract import inputs
from transformer_spec.contract.registry import Component, Name, Recheck, pitfall
from transformer_spec.probes import behaviour as bp
from transformer_spec.probes import recheck, testing

NAMES = (
    Name("TransformerEncoderBlock", "encoder", "module",
         "TransformerEncoderBlock(d_model=512, num_heads=8, d_ff=2048, dropout=0.1, norm_first=True) "
         "with self_attn, ffn, norm1, norm2, dropout; forward(x, mask=None) -> (x, attn_weights)"),
)

PITFALLS = (
    pitfall("encoder_post_ln_for_pre_ln", "encoder",
            "The encoder block applies LayerNorm after the residual (Post-LN) when norm_first=True asks for "
            "Pre-LN, x + drop(attn(norm1(x))): norm_first is ignored (the seed 001 tutorial's 'Add & Norm' order "
            "is the only one written).",
            ("blocks.py", "if self.norm_first:\n            attn_out, attn_weights",
             "if False:  # always Post-LN\n            attn_out, attn_weights")),
    pitfall("encoder_attention_residual_missing", "encoder",
            "The encoder block drops the residual connection around self-attention: x = x + drop(attn(...)).",
            ("blocks.py", "x = x + self.dropout(attn_out)\n            x = x + self.dropout(self.ffn(self.norm2(x)))",
             "x = self.dropout(attn_out)\n            x = x + self.dropout(self.ffn(self.norm2(x)))")),
    pitfall("encoder_ffn_residual_missing", "encoder",
            "The encoder block drops the residual connection around the feed-forward: x = x + drop(ffn(...)).",
            ("blocks.py", "x = x + self.dropout(self.ffn(self.norm2(x)))", "x = self.dropout(self.ffn(self.norm2(x)))")),
    pitfall("encoder_one_layernorm_reused", "encoder",
            "The encoder block reuses norm1 before the feed-forward: each sublayer has its own LayerNorm (norm2).",
            ("blocks.py", "x = x + self.dropout(self.ffn(self.norm2(x)))", "x = x + self.dropout(self.ffn(self.norm1(x)))")),
    pitfall("encoder_mask_not_passed", "encoder",
            "The encoder block does not pass `mask` to its self-attention.",
            ("blocks.py", "self.self_attn(self.norm1(x), mask, kv_cache=kv_cache)",
             "self.self_attn(self.norm1(x), None, kv_cache=kv_cache)"),
            ("blocks.py", "self.self_attn(x, mask, kv_cache=kv_cache)", "self.self_attn(x, None, kv_cache=kv_cache)")),
    pitfall("encoder_dropout_on_residual_stream", "encoder",
            "Dropout is applied to the residual sum, dropout(x + attn): it belongs on the sublayer's output "
            "only, x + dropout(attn(...)).",
            ("blocks.py", "x = x + self.dropout(attn_out)\n            x = x + self.dropout(self.ffn(self.norm2(x)))",
             "x = self.dropout(x + attn_out)\n            x = self.dropout(x + self.ffn(self.norm2(x)))")),
    pitfall("encoder_sublayer_output_not_dropped", "encoder",
            "The encoder block never applies its own dropout to the FFN sublayer's output (as when dropout "
            "lives only inside the sublayers, nanoGPT-style): the contract's block is x + dropout(ffn(norm2(x))) "
            "(seed 000 step 5).",
            ("blocks.py", "x = x + self.dropout(self.ffn(self.norm2(x)))", "x = x + self.ffn(self.norm2(x))")),
    # mined from public implementations (issue 27): each cites where the mistake was made
    pitfall('layernorm_unbiased_std_eps_outside_sqrt', 'encoder',
            "The blocks' LayerNorm is written by hand as (x - mean) / (x.std(-1) + eps): torch's std "
            'is the unbiased (n-1) estimate and eps sits outside the root. LayerNorm divides by '
        "sqrt(biased variance + eps), as nn.LayerNorm(d_model) does.",
            ('blocks.py', 'import torch.nn as nn\n',
             'import torch\nimport torch.nn as nn\n'),
            ('blocks.py', 'from .multihead import MultiHeadAttention, MultiHeadSelfAttention\n',
             'from .multihead import MultiHeadAttention, MultiHeadSelfAttention\n\n\nclass LayerNorm(nn.Module):\n    """The Annotated Transformer\'s LayerNorm (a_2, b_2 renamed weight, bias)."""\n\n    def __init__(self, features, eps=1e-6):\n        super().__init__()\n        self.weight = nn.Parameter(torch.ones(features))\n        self.bias = nn.Parameter(torch.zeros(features))\n        self.eps = eps\n\n    def forward(self, x):\n        mean = x.mean(-1, keepdim=True)\n        std = x.std(-1, keepdim=True)  # unbiased\n        return self.weight * (x - mean) / (std + self.eps) + self.bias\n'),
            ('blocks.py', 'self.norm1 = nn.LayerNorm(d_model)\n        self.norm2 = nn.LayerNorm(d_model)\n        self.dropout',
             'self.norm1 = LayerNorm(d_model)\n        self.norm2 = LayerNorm(d_model)\n        self.dropout'),
            ('blocks.py', 'self.norm1 = nn.LayerNorm(d_model)\n        self.norm2 = nn.LayerNorm(d_model)\n        self.norm3 = nn.LayerNorm(d_model)',
             'self.norm1 = LayerNorm(d_model)\n        self.norm2 = LayerNorm(d_model)\n        self.norm3 = LayerNorm(d_model)'),
            source='harvardnlp/annotated-transformer#122'),
    pitfall('pre_ln_residual_from_normalized_input', 'encoder',
            'The Pre-LN block overwrites x with norm1(x) and adds the attention to that, norm(x) + '
        "attn(norm(x)): the residual must carry the raw input, x + attn(norm1(x)).",
            ('blocks.py', '            attn_out, attn_weights = self.self_attn(self.norm1(x), mask, kv_cache=kv_cache)\n            x = x + self.dropout(attn_out)\n            x = x + self.dropout(self.ffn(self.norm2(x)))\n',
             '            x = self.norm1(x)  # the residual now starts from the normalised x\n            attn_out, attn_weights = self.self_attn(x, mask, kv_cache=kv_cache)\n            x = x + self.dropout(attn_out)\n            x = x + self.dropout(self.ffn(self.norm2(x)))\n'),
            source='Howuhh/faster-trajectory-transformer#3'),
    pitfall('sublayer_output_normalized_before_residual', 'encoder',
            "LayerNorm is applied to the sublayer's output, x + drop(norm(attn(x))), instead of its "
            'input: Pre-LN normalises what goes into the sublayer, x + drop(attn(norm1(x))); Post-LN '
        "normalises the sum, norm1(x + drop(attn(x))).",
            ('blocks.py', '            attn_out, attn_weights = self.self_attn(self.norm1(x), mask, kv_cache=kv_cache)\n            x = x + self.dropout(attn_out)\n            x = x + self.dropout(self.ffn(self.norm2(x)))\n',
             '            attn_out, attn_weights = self.self_attn(x, mask, kv_cache=kv_cache)\n            x = x + self.dropout(self.norm1(attn_out))\n            x = x + self.dropout(self.norm2(self.ffn(x)))\n'),
            source='keitakurita/Practical_NLP_in_PyTorch#1'),
    pitfall('layernorm_created_in_forward', 'encoder',
            'The block builds a new nn.LayerNorm inside forward, so its weight and bias are always 1 '
            'and 0, never trained, and norm1/norm2 are never used. Create the LayerNorms in __init__ '
        "and call self.norm1 / self.norm2.",
            ('blocks.py', 'attn_out, attn_weights = self.self_attn(self.norm1(x), mask, kv_cache=kv_cache)',
             'attn_out, attn_weights = self.self_attn(nn.LayerNorm(self.d_model).to(x)(x), mask, kv_cache=kv_cache)'),
            ('blocks.py', 'x = x + self.dropout(self.ffn(self.norm2(x)))',
             'x = x + self.dropout(self.ffn(nn.LayerNorm(self.d_model).to(x)(x)))'),
            ('blocks.py', 'x = self.norm1(x + self.dropout(attn_out))\n            x = self.norm2(x + self.dropout(self.ffn(x)))',
             'x = nn.LayerNorm(self.d_model).to(x)(x + self.dropout(attn_out))\n            x = nn.LayerNorm(self.d_model).to(x)(x + self.dropout(self.ffn(x)))'),
            source='graykode/nlp-tutorial 5-1.Transformer/Transformer-Torch.py@0e67ef8d1f55ab8ae6acbde709e23c32ff63115d'),
    pitfall('layernorm_over_sequence_and_features', 'encoder',
            'The LayerNorm normalises over the sequence and the features together (normalized_shape = '
            'x.shape[1:]): each position must be normalised on its own, over the last dimension only '
        "(nn.LayerNorm(d_model)).",
            ('blocks.py', 'import torch.nn as nn\n',
             'import torch.nn as nn\nimport torch.nn.functional as F\n\n\ndef _norm_over_sequence(norm, x):\n    """Statistics over (L, D) together, then the LayerNorm\'s own weight and bias."""\n    return F.layer_norm(x, x.shape[1:]) * norm.weight + norm.bias\n'),
            ('blocks.py', 'attn_out, attn_weights = self.self_attn(self.norm1(x), mask, kv_cache=kv_cache)',
             'attn_out, attn_weights = self.self_attn(_norm_over_sequence(self.norm1, x), mask, kv_cache=kv_cache)'),
            ('blocks.py', 'x = x + self.dropout(self.ffn(self.norm2(x)))',
             'x = x + self.dropout(self.ffn(_norm_over_sequence(self.norm2, x)))'),
            ('blocks.py', 'x = self.norm1(x + self.dropout(attn_out))\n            x = self.norm2(x + self.dropout(self.ffn(x)))',
             'x = _norm_over_sequence(self.norm1, x + self.dropout(attn_out))\n            x = _norm_over_sequence(self.norm2, x + self.dropout(self.ffn(x)))'),
            source='Qualcomm-AI-research/geometric-algebra-transformer#8'),
    pitfall("encoder_post_ln_norm_missing", "encoder",
            "In the Post-LN order (norm_first=False) the block adds the feed-forward's output and stops: every "
            "sublayer of Post-LN ends with its LayerNorm, x = norm2(x + drop(ffn(x))).",
            ("blocks.py", "x = self.norm2(x + self.dropout(self.ffn(x)))", "x = x + self.dropout(self.ffn(x))"),
            source="NVIDIA-NeMo/Speech#4350"),
)


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'encoder' (transformer_spec/probes/behaviour.py)."""
    x = inputs.randn(2, 4, bp.D, seed=32)
    mask = torch.zeros(2, 1, 1, 4, dtype=torch.bool)
    mask[1, ..., 3] = True
    bp.block_probes(f, impl.TransformerEncoderBlock, testing.encoder_block_shapes(bp.D, bp.FF),
                    lambda m: m(x, mask), ("self_attn.W_O.weight", "ffn.linear2.weight", "ffn.linear2.bias"))
    bp.capture(f, "pre_causal", lambda: bp.module(
        impl.TransformerEncoderBlock, testing.seeded_parameters(testing.encoder_block_shapes(bp.D, bp.FF), seed=31),
        d_model=bp.D, num_heads=bp.H, d_ff=bp.FF, dropout=0.0)(x, inputs.causal(4)))


def _encoder(norm_first: bool, mask_kind: str, dtype: str):
    def run(mod, seed):
        s, dt = inputs.ORACLE, getattr(torch, dtype)
        block = mod.TransformerEncoderBlock(d_model=s.d, num_heads=s.h, d_ff=s.ff, dropout=0.0, norm_first=norm_first)
        block = recheck.with_weights(block, testing.encoder_block_shapes(s.d, s.ff), seed, dt)
        out, weights = block(inputs.randn(s.b, s.lq, s.d, seed=seed + 1, dtype=dt), recheck.mha_masks(s.lq, True)[mask_kind])
        return recheck.oracle_outputs(dtype, out=out, weights=weights)
    return run


RECHECKS = tuple(
    Recheck(recheck.oracle_name("encoder", dtype, f"{kind}-{nid}"), "encoder",
            (f"{recheck.ORACLE}test_encoder_block_matches_torch[{dtype}-{kind}-{nid}]",),
            _encoder(norm_first, kind, dtype), public=61)  # weights 61, x 62 as in the anchor
    for dtype in recheck.ORACLE_DTYPES
    for norm_first, nid in ((True, "pre_ln"), (False, "post_ln"))
    for kind in ("none", "causal", "padding")
)


COMPONENT = Component(
    "encoder", label="enc", points=10, order=5, depends_on=("mha", "ffn"),
    values=(  # the tests of what it computes (rubric.VALUES_SHARE of its points)
        "spec_tests/test_torch_oracle.py::test_encoder_block_matches_torch",
    ),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
