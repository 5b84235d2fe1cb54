"""The 'mha' component. Multi-head attention: W_Q, W_K, W_V, heads of d_k = D / H, W_O (seed 001,
section 5).

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import torch

from transformer_spec.contract import inputs
from transformer_spec.contract.registry import Component, Name, Recheck, pitfall
from transformer_spec.probes import behaviour as bp
from transformer_spec.probes import recheck, testing

_SPLIT = "self.W_{p}({a}).view(B, {n}, self.num_heads, self.d_k).transpose(1, 2)"

NAMES = (
    Name("MultiHeadAttention", "mha", "module",
         "MultiHeadAttention(d_model=512, num_heads=8, dropout=0.1) with W_Q, W_K, W_V, W_O "
         "(Linear(D, D, bias=False)); forward(query, key, value, mask=None) -> (output (B, Lq, D), "
         "weights (B, H, Lq, Lk))"),
    Name("MultiHeadSelfAttention", "mha", "module",
         "MultiHeadSelfAttention(d_model=512, num_heads=8, dropout=0.1); forward(x, mask=None) -> "
         "(output, weights (B, H, L, L)), same as MultiHeadAttention(x, x, x, mask); where (or whether) dropout "
         "acts inside is free"),
)

PITFALLS = (
    pitfall("heads_split_without_transpose", "mha",
            "The heads are split with view(B, H, L, d_k): it must be view(B, L, H, d_k).transpose(1, 2), "
            "otherwise each 'head' mixes positions (seed 001 section 10, 'shapes mixed up').",
            *(("multihead.py", _SPLIT.format(p=p, a=a, n=n),
          f"self.W_{p}({a}).view(B, self.num_heads, {n}, self.d_k)")
         for p, a, n in (("Q", "query", "Lq"), ("K", "key", "Lk"), ("V", "value", "Lk")))),
    pitfall("heads_merged_without_transpose", "mha",
            "The heads are merged with reshape(B, L, D) straight from (B, H, L, d_k): transpose(1, 2) first, "
            "so each position gets its own heads back.",
            ("multihead.py", "heads.transpose(1, 2).reshape(B, Lq, self.d_model)", "heads.reshape(B, Lq, self.d_model)")),
    pitfall("W_O_missing", "mha",
            "The concatenated heads are returned without the output projection W_O.",
            ("multihead.py", "return self.W_O(concat), weights", "return concat, weights")),
    pitfall("scaled_by_sqrt_d_model", "mha",
            "Multi-head attention scales by 1/sqrt(d_model): each head has d_k = d_model / num_heads "
            "features, so the scale is 1/sqrt(d_k).",
            ("multihead.py", "import torch.nn as nn\n", "import math\n\nimport torch.nn as nn\n"),
            ("multihead.py", "scaled_dot_product_attention(Q, K, V, mask, dropout=self.dropout)",
             "scaled_dot_product_attention(Q, K, V, mask, scale=1.0 / math.sqrt(self.d_model), dropout=self.dropout)")),
    pitfall("keys_from_query", "mha",
            "The keys are projected from the query (W_K(query)): in cross-attention the keys come from `key`.",
            ("multihead.py", "K = self.W_K(key).view(B, Lk,", "K = self.W_K(query).view(B, Lk,")),
    pitfall("values_from_key", "mha",
            "The values are projected from `key` instead of `value`.",
            ("multihead.py", "V = self.W_V(value).view(", "V = self.W_V(key).view(")),
    pitfall("W_Q_used_for_keys", "mha",
            "The keys are projected with W_Q instead of W_K (a copy-paste slip).",
            ("multihead.py", "K = self.W_K(key)", "K = self.W_Q(key)")),
    pitfall("mha_mask_not_passed", "mha",
            "Multi-head attention does not pass `mask` on to the attention: blocked keys are attended.",
            ("multihead.py", "scaled_dot_product_attention(Q, K, V, mask, dropout=self.dropout)",
             "scaled_dot_product_attention(Q, K, V, None, dropout=self.dropout)")),
    pitfall("mha_dropout_argument_ignored", "mha",
            "The attention dropout ignores the `dropout` argument (a fixed nn.Dropout(0.1)): with dropout=0.0 the "
            "attention weights must not be dropped, in train() mode too.",
            ("multihead.py", "self.dropout = nn.Dropout(check_dropout(dropout))",
             "check_dropout(dropout)\n        self.dropout = nn.Dropout(0.1)")),
    pitfall("mha_dropout_in_eval", "mha",
            "Attention dropout stays active in eval(): dropout must act only in train() mode.",
            ("multihead.py", "scaled_dot_product_attention(Q, K, V, mask, dropout=self.dropout)",
             "scaled_dot_product_attention(Q, K, V, mask, dropout=lambda w: nn.functional.dropout("
             "w, self.dropout.p, training=True))")),
    pitfall("self_attention_ignores_mask", "mha",
            "MultiHeadSelfAttention drops its `mask` argument.",
            ("multihead.py", "return super().forward(x, x, x, mask, kv_cache=kv_cache)",
             "return super().forward(x, x, x, None, kv_cache=kv_cache)")),
    # mined from public implementations (issue 27): each cites where the mistake was made
    pitfall('softmax_over_heads_and_keys', 'mha',
            'The scores of all heads are flattened together before the softmax, so the weights are '
            'normalised over heads x keys jointly: each head must have its own softmax over the keys '
        "(dim=-1 of (B, H, Lq, Lk)).",
            ('multihead.py', 'import torch.nn as nn\n',
             'import math\n\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n'),
            ('multihead.py', 'from ._validation import check_dropout, check_features, check_heads\n',
             'from ._validation import check_dropout, check_features, check_heads, check_mask\n'),
            ('multihead.py', '        heads, weights = scaled_dot_product_attention(Q, K, V, mask, dropout=self.dropout)\n',
             '        scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(self.d_k)  # (B, H, Lq, Lk)\n        if mask is not None:\n            check_mask(mask, scores.shape)\n            scores = scores.masked_fill(mask, float("-inf"))\n        # one softmax over the heads and the keys together (B, Lq, H * Lk)\n        weights = F.softmax(scores.transpose(1, 2).flatten(2), dim=-1)\n        weights = weights.view(B, Lq, self.num_heads, -1).transpose(1, 2)  # (B, H, Lq, Lk)\n        heads = torch.matmul(self.dropout(weights), V)\n'),
            source='facebookresearch/detr#247'),
    pitfall('output_projection_created_in_forward', 'mha',
            'The output projection is a new nn.Linear built inside forward: its random weights change '
            'on every call and are never trained (W_O stays unused). Build W_O once in __init__ and '
        "call self.W_O.",
            ('multihead.py', 'return self.W_O(concat), weights  # (B, Lq, D), (B, H, Lq, Lk)',
             'W_O = nn.Linear(self.d_model, self.d_model, bias=False).to(concat)  # new every call\n        return W_O(concat), weights'),
            source='graykode/nlp-tutorial 5-1.Transformer/Transformer-Torch.py@0e67ef8d1f55ab8ae6acbde709e23c32ff63115d'),
    pitfall('kv_heads_split_with_query_length', 'mha',
            "The keys and values are split into heads with the query's shape, view(B, Lq, -1, d_k): "
            'in cross-attention, where Lk != Lq, this infers a wrong number of heads or fails. Split '
        "key and value with their own length, view(B, Lk, H, d_k).",
            ('multihead.py', 'K = self.W_K(key).view(B, Lk, self.num_heads, self.d_k).transpose(1, 2)',
             "K = self.W_K(key).view(B, Lq, -1, self.d_k).transpose(1, 2)  # the query's shape"),
            ('multihead.py', 'V = self.W_V(value).view(B, Lk, self.num_heads, self.d_k).transpose(1, 2)',
             'V = self.W_V(value).view(B, Lq, -1, self.d_k).transpose(1, 2)'),
            source='huggingface/transformers#48356'),
)


def _mha_params():
    return testing.seeded_parameters(testing.mha_shapes(bp.D), seed=11)


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'mha' (transformer_spec/probes/behaviour.py)."""
    p = _mha_params()
    query, key, value = inputs.randn(2, 3, bp.D, seed=12), inputs.randn(2, 5, bp.D, seed=13), inputs.randn(2, 5, bp.D, seed=14)
    mask = torch.zeros(2, 1, 1, 5, dtype=torch.bool)
    mask[1, ..., 3:] = True
    x = inputs.randn(2, 4, bp.D, seed=15)

    def mha(dropout=0.0):
        return bp.module(impl.MultiHeadAttention, p, d_model=bp.D, num_heads=bp.H, dropout=dropout)

    bp.capture(f, "cross", lambda: mha()(query, key, value))
    bp.capture(f, "cross_equal_lengths", lambda: mha()(query, key[:, :3], value[:, :3]))
    bp.capture(f, "cross_masked", lambda: mha()(query, key, value, mask))
    bp.capture(f, "self_causal", lambda: bp.module(impl.MultiHeadSelfAttention, p, d_model=bp.D, num_heads=bp.H,
                                               dropout=0.0)(x, inputs.causal(4)))
    bp.capture(f, "eval_deterministic", lambda: bp.deterministic(lambda: mha(0.5)(query, key, value)[0]))

    def train_without_dropout():  # dropout=0.0: nothing is dropped in train() mode either
        m = mha(0.0).train()
        return bp.deterministic(lambda: m(query, key, value)[0])

    bp.capture(f, "train_dropout_0_deterministic", train_without_dropout)


def _mha(mask_kind: str, dtype: str):
    def run(mod, seed):
        s, dt = inputs.ORACLE, getattr(torch, dtype)
        m = recheck.with_weights(mod.MultiHeadAttention(d_model=s.d, num_heads=s.h, dropout=0.0),
                                 testing.mha_shapes(s.d), seed, dt)
        q, k, v = (inputs.randn(s.b, s.lq, s.d, seed=seed + 1, dtype=dt), inputs.randn(s.b, s.lk, s.d, seed=seed + 2, dtype=dt),
                   inputs.randn(s.b, s.lk, s.d, seed=seed + 3, dtype=dt))
        out, weights = m(q, k, v, mask=recheck.mha_masks(s.lk, False)[mask_kind])
        return recheck.oracle_outputs(dtype, out=out, weights=weights)
    return run


def _mhsa(mask_kind: str, dtype: str):
    def run(mod, seed):
        s, dt = inputs.ORACLE, getattr(torch, dtype)
        m = recheck.with_weights(mod.MultiHeadSelfAttention(d_model=s.d, num_heads=s.h, dropout=0.0),
                                 testing.mha_shapes(s.d), seed, dt)
        out, weights = m(inputs.randn(s.b, s.lq, s.d, seed=seed + 1, dtype=dt), mask=recheck.mha_masks(s.lq, True)[mask_kind])
        return recheck.oracle_outputs(dtype, out=out, weights=weights)
    return run


RECHECKS = (
    *(Recheck(recheck.oracle_name("mha", dtype, kind), "mha",
              (f"{recheck.ORACLE}test_multihead_attention_matches_torch[{dtype}-{kind}]",),
              _mha(kind, dtype), public=31)  # weights 31, q/k/v 32-34 as in the anchor
      for dtype in recheck.ORACLE_DTYPES for kind in ("none", "lq_lk", "padding")),
    *(Recheck(recheck.oracle_name("mhsa", dtype, kind), "mha",
              (f"{recheck.ORACLE}test_multihead_self_attention_matches_torch[{dtype}-{kind}]",),
              _mhsa(kind, dtype), public=41)  # weights 41, x 42
      for dtype in recheck.ORACLE_DTYPES for kind in ("none", "causal", "padding")),
)


COMPONENT = Component(
    "mha", label="mha", points=14, order=3, depends_on=("attention",),
    values=(  # the tests of what it computes (rubric.VALUES_SHARE of its points)
        "spec_tests/test_torch_oracle.py::test_multihead_attention_matches_torch",
        "spec_tests/test_torch_oracle.py::test_multihead_self_attention_matches_torch",
        "spec_tests/test_seed001_worked_example.py::test_worked_example_through_one_head_self_attention",
        "properties/test_mha_laws.py::test_multihead_attention_heads_decompose_into_single_head_attentions",
        "properties/test_mha_laws.py::test_multihead_attention_single_identity_head_equals_attention",
    ),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
