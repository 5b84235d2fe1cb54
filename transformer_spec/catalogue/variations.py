"""The catalogue of allowed variations: correct code written differently, each a small patch of the reference.

The mirror image of :mod:`transformer_spec.catalogue.pitfalls`. Every :class:`Variation` rewrites
``reference/`` (``(file, old, new)`` patches of :mod:`transformer_spec.catalogue.patching`) in a way that
stays inside the contract (``docs/contract.md``, section "Free choices"): dropout placement inside
multi-head attention, which weights are returned, ``top_k`` above the vocabulary capped or
rejected, a tied head through ``F.linear``, einsum / bmm / matmul, hand-written softmax, GELU and
LayerNorm, masks built other ways, the KV cache on or off, ``no_grad`` or ``inference_mode``,
other float operation orders, another initialisation, another way of sampling.

``python -m tools.mutants`` grades each as a row that must be clean: a variation that loses a
point anywhere means a test relies on something the contract leaves free (fix the test), or the
contract is silent about something it should state (fix ``docs/contract.md``, drop the variation).
``component`` names the component whose code the variation rewrites (for the matrix only).
"""

from __future__ import annotations

from dataclasses import dataclass

from transformer_spec.catalogue.modern import catalogue as catalogue_modern
from transformer_spec.catalogue.patching import Patch
from transformer_spec.catalogue.pitfalls import Pitfall
from transformer_spec.contract.registry import PLAIN_GENERATE, with_plain_generate


@dataclass(frozen=True)
class Variation(Pitfall):
    """One allowed variation: the shape of a :class:`~transformer_spec.catalogue.pitfalls.Pitfall`
    (``name, component, explanation, patches``), but correct code that must lose no point."""


def _v(name: str, component: str, explanation: str, *patches: Patch) -> Variation:
    """A :class:`Variation`, its copy generating through the plain loop, as every catalogue copy
    (:data:`~transformer_spec.contract.registry.PLAIN_GENERATE`)."""
    return Variation(name, component, explanation, with_plain_generate(patches))


_SCORES = "scores = torch.matmul(q * scale, k.transpose(-2, -1))  # (..., Lq, Lk)"
_FILL = 'scores.masked_fill_(mask, float("-inf"))'
_OUTPUT = "output = torch.matmul(mixing, v)  # (..., Lq, d_v)"
_SDPA_CALL = "heads, weights = scaled_dot_product_attention(Q, K, V, mask, dropout=self.dropout)"
_SPLIT = """        Q = self.W_Q(query).view(B, Lq, self.num_heads, self.d_k).transpose(1, 2)
        K = self.W_K(key).view(B, Lk, self.num_heads, self.d_k).transpose(1, 2)
        V = self.W_V(value).view(B, Lk, self.num_heads, self.d_k).transpose(1, 2)
"""
_HEAD_LOOP = """if mask is not None:  # one (B, Lq, Lk) mask per head
            mask = check_mask(mask, (B, self.num_heads, Lq, K.size(2))).expand(B, self.num_heads, Lq, K.size(2))
        outs = [scaled_dot_product_attention(Q[:, h], K[:, h], V[:, h], None if mask is None else mask[:, h],
                                             dropout=self.dropout) for h in range(self.num_heads)]
        heads = torch.stack([o for o, _ in outs], dim=1)  # (B, H, Lq, d_k)
        weights = torch.stack([w for _, w in outs], dim=1)  # (B, H, Lq, Lk)"""
_HAND_LAYERNORM = '''

class LayerNorm(nn.Module):
    """nn.LayerNorm(d_model) by hand: same parameters (weight, bias), same eps=1e-5, biased variance."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
        return (x - mean) * torch.rsqrt(var + self.eps) * self.weight + self.bias
'''
_DECODER_BODY = """        if self.norm_first:
            attn_out, self_weights = self.self_attn(self.norm1(x), tgt_mask)
            x = x + self.dropout(attn_out)
            cross_out, cross_weights = self.cross_attn(self.norm2(x), memory, memory, memory_mask)
            x = x + self.dropout(cross_out)
            x = x + self.dropout(self.ffn(self.norm3(x)))
        else:
            attn_out, self_weights = self.self_attn(x, tgt_mask)
            x = self.norm1(x + self.dropout(attn_out))
            cross_out, cross_weights = self.cross_attn(x, memory, memory, memory_mask)
            x = self.norm2(x + self.dropout(cross_out))
            x = self.norm3(x + self.dropout(self.ffn(x)))
        return x, self_weights, cross_weights
"""
_DECODER_WITH_HELPER = """        def sublayer(x, norm, f):
            # one residual step, Pre-LN x + drop(f(norm(x))) or Post-LN norm(x + drop(f(x)))
            out, weights = f(norm(x) if self.norm_first else x)
            x = x + self.dropout(out)
            return (x if self.norm_first else norm(x)), weights

        x, self_weights = sublayer(x, self.norm1, lambda h: self.self_attn(h, tgt_mask))
        x, cross_weights = sublayer(x, self.norm2, lambda h: self.cross_attn(h, memory, memory, memory_mask))
        x, _ = sublayer(x, self.norm3, lambda h: (self.ffn(h), None))
        return x, self_weights, cross_weights
"""
_SAMPLE = "next_token = int(torch.multinomial(probs, 1, generator=generator))"
_INVERSE_CDF = """cdf = probs.double().cumsum(0)  # inverse-CDF sampling instead of multinomial
                        u = torch.rand((), generator=generator, dtype=torch.float64) * cdf[-1]
                        next_token = int(torch.searchsorted(cdf, u.reshape(1)))"""

CATALOGUE: tuple[Variation, ...] = (
    # ------------------------------------------------------------------ attention
    _v("scores_with_einsum", "attention",
       "q k^T written with torch.einsum: the same product, another kernel.",
       ("attention.py", _SCORES, 'scores = torch.einsum("...qd,...kd->...qk", q, k) * scale')),
    _v("scores_scaled_after_the_matmul", "attention",
       "(q k^T) * scale, the seed's order, instead of (q * scale) k^T: equal up to float rounding, which the "
       "contract does not fix.",
       ("attention.py", _SCORES, "scores = torch.matmul(q, k.transpose(-2, -1)) * scale")),
    _v("scale_split_between_q_and_k", "attention",
       "(q sqrt(scale)) (k sqrt(scale))^T: another float operation order for the same scores.",
       ("attention.py", _SCORES,
        "root = math.sqrt(scale) if scale >= 0 else None\n"
        "    scores = (torch.matmul(q * root, (k * root).transpose(-2, -1)) if root is not None\n"
        "              else torch.matmul(q, k.transpose(-2, -1)) * scale)")),
    _v("handwritten_softmax", "attention",
       "A numerically stable softmax by hand (subtract the row max, exp, divide by the sum) over the keys.",
       ("attention.py", "weights = F.softmax(scores, dim=-1)  # over the keys: each row sums to 1",
        "exp = (scores - scores.amax(dim=-1, keepdim=True)).exp()\n"
        "    weights = exp / exp.sum(dim=-1, keepdim=True)")),
    _v("softmax_via_logsumexp", "attention",
       "softmax as exp(s - logsumexp(s)): stable, equal to F.softmax up to float rounding (at scores "
       "of 1e4 a float32 row sums to 1 only within ~1e-3, as the score itself is only that exact).",
       ("attention.py", "weights = F.softmax(scores, dim=-1)  # over the keys: each row sums to 1",
        "weights = (scores - scores.logsumexp(dim=-1, keepdim=True)).exp()")),
    _v("mask_filled_with_torch_where", "attention",
       "Blocked scores set to -inf with torch.where instead of masked_fill: the same scores.",
       ("attention.py", _FILL, 'scores = torch.where(mask, torch.full_like(scores, float("-inf")), scores)')),
    _v("additive_minus_inf_mask", "attention",
       "The boolean mask turned into an additive 0 / -inf mask and added to the scores.",
       ("attention.py", _FILL,
        'scores = scores + torch.zeros(mask.shape, dtype=scores.dtype, device=scores.device).masked_fill(\n'
        '            mask, float("-inf"))')),
    _v("blocked_rows_zeroed_by_multiplication", "attention",
       "Fully blocked rows zeroed by multiplying with the 'not fully blocked' indicator instead of masked_fill.",
       ("attention.py", "weights = weights.masked_fill(blocked_rows, 0.0)",
        "weights = weights * (~blocked_rows).to(weights.dtype)")),
    _v("output_with_bmm", "attention",
       "weights @ v computed by torch.bmm on the broadcast, flattened batch dimensions.",
       ("attention.py", _OUTPUT,
        "lead = torch.broadcast_shapes(mixing.shape[:-2], v.shape[:-2])\n"
        "    m = mixing.expand(*lead, *mixing.shape[-2:]).reshape(-1, *mixing.shape[-2:])\n"
        "    vv = v.expand(*lead, *v.shape[-2:]).reshape(-1, *v.shape[-2:])\n"
        "    output = torch.bmm(m, vv).reshape(*lead, mixing.size(-2), v.size(-1))")),
    # ------------------------------------------------------------------ masks
    _v("causal_mask_by_comparison", "masks",
       "The causal mask as column index > row index (arange comparison) instead of triu.",
       ("masks.py", "ones = torch.ones(seq_len, seq_len, dtype=torch.bool)\n"
                    "    return torch.triu(ones, diagonal=1).to(device)",
        "i = torch.arange(seq_len, device=device)\n    return i[None, :] > i[:, None]")),
    _v("causal_mask_from_tril", "masks",
       "The causal mask as the complement of the lower triangle (~tril): True strictly above the diagonal.",
       ("masks.py", "return torch.triu(ones, diagonal=1)", "return ~torch.tril(ones)")),
    _v("padding_mask_with_eq_and_view", "masks",
       "padding_mask as tokens.eq(pad_id).view(B, 1, 1, L): the same mask written another way.",
       ("masks.py", "return (tokens == pad_id)[:, None, None, :]  # (B, 1, 1, L)",
        "return tokens.eq(pad_id).view(tokens.size(0), 1, 1, tokens.size(1))")),
    # ------------------------------------------------------------------ mha
    _v("no_dropout_inside_attention", "mha",
       "MultiHeadAttention never uses its dropout (seed 000's MultiHeadSelfAttention): the blocks' sublayer "
       "dropout is enough, and where MHA uses dropout is free.",
       ("multihead.py", _SDPA_CALL, "heads, weights = scaled_dot_product_attention(Q, K, V, mask)")),
    _v("weights_returned_after_dropout", "mha",
       "The attention weights are returned after dropout (as torch's own MultiheadAttention in train mode): "
       "which of the two is returned is free.",
       ("attention.py", "return output, weights", "return output, mixing")),
    _v("heads_split_with_reshape_and_permute", "mha",
       "Heads split with reshape + permute(0, 2, 1, 3) instead of view + transpose(1, 2).",
       ("multihead.py", _SPLIT, _SPLIT.replace(".view(", ".reshape(").replace(".transpose(1, 2)", ".permute(0, 2, 1, 3)"))),
    _v("heads_in_a_python_loop", "mha",
       "Each head's attention computed in a Python loop over the heads and stacked: slower, the same result.",
       ("multihead.py", _SDPA_CALL, _HEAD_LOOP),
       ("multihead.py", "import torch.nn as nn\n", "import torch\nimport torch.nn as nn\n"),
       ("multihead.py", "from ._validation import check_dropout, check_features, check_heads\n",
        "from ._validation import check_dropout, check_features, check_heads, check_mask\n")),
    _v("projections_with_einsum", "mha",
       "x W^T written as einsum with each Linear's weight instead of calling the Linear module.",
       ("multihead.py", _SPLIT, _SPLIT.replace("self.W_Q(query)", 'torch.einsum("bld,ed->ble", query, self.W_Q.weight)')
        .replace("self.W_K(key)", 'torch.einsum("bld,ed->ble", key, self.W_K.weight)')
        .replace("self.W_V(value)", 'torch.einsum("bld,ed->ble", value, self.W_V.weight)')),
       ("multihead.py", "import torch.nn as nn\n", "import torch\nimport torch.nn as nn\n")),
    _v("output_projection_with_functional_linear", "mha",
       "W_O applied with F.linear(concat, W_O.weight) instead of calling the module.",
       ("multihead.py", "return self.W_O(concat), weights",
        "return nn.functional.linear(concat, self.W_O.weight), weights")),
    # ------------------------------------------------------------------ ffn
    _v("handwritten_erf_gelu", "ffn",
       "The exact GELU written by hand, 0.5 x (1 + erf(x / sqrt 2)): the same function as F.gelu.",
       ("feedforward.py", "return self.linear2(self.dropout(F.gelu(self.linear1(x))))",
        "h = self.linear1(x)\n        h = 0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0)))\n"
        "        return self.linear2(self.dropout(h))"),
       ("feedforward.py", "import torch.nn as nn\n", "import math\n\nimport torch\nimport torch.nn as nn\n")),
    _v("gelu_as_a_submodule", "ffn",
       "GELU as an nn.GELU() submodule (no parameters): submodules of one's own are allowed.",
       ("feedforward.py", "self.dropout = nn.Dropout(check_dropout(dropout))",
        "self.dropout = nn.Dropout(check_dropout(dropout))\n        self.activation = nn.GELU()"),
       ("feedforward.py", "F.gelu(self.linear1(x))", "self.activation(self.linear1(x))")),
    # ------------------------------------------------------------------ encoder / decoder
    _v("handwritten_layernorm", "encoder",
       "The blocks' LayerNorms written by hand with the same parameters (weight, bias) and eps=1e-5.",
       ("blocks.py", "from .multihead import MultiHeadAttention, MultiHeadSelfAttention\n",
        "from .multihead import MultiHeadAttention, MultiHeadSelfAttention\n" + _HAND_LAYERNORM),
       ("blocks.py", "import torch.nn as nn\n", "import torch\nimport torch.nn as nn\n"),
       ("blocks.py", "self.norm1 = nn.LayerNorm(d_model)\n        self.norm2 = nn.LayerNorm(d_model)\n"
                     "        self.norm3 = nn.LayerNorm(d_model)",
        "self.norm1 = LayerNorm(d_model)\n        self.norm2 = LayerNorm(d_model)\n        self.norm3 = LayerNorm(d_model)"),
       ("blocks.py", "self.norm1 = nn.LayerNorm(d_model)\n        self.norm2 = nn.LayerNorm(d_model)\n",
        "self.norm1 = LayerNorm(d_model)\n        self.norm2 = LayerNorm(d_model)\n")),
    _v("residual_written_sublayer_first", "encoder",
       "The encoder's residual sums written drop(sublayer) + x: float addition is commutative, the same block.",
       ("blocks.py", "x = x + self.dropout(attn_out)\n            x = x + self.dropout(self.ffn(self.norm2(x)))",
        "x = self.dropout(attn_out) + x\n            x = self.dropout(self.ffn(self.norm2(x))) + x"),
       ("blocks.py", "x = self.norm1(x + self.dropout(attn_out))\n            x = self.norm2(x + self.dropout(self.ffn(x)))",
        "x = self.norm1(self.dropout(attn_out) + x)\n            x = self.norm2(self.dropout(self.ffn(x)) + x)")),
    _v("decoder_with_a_sublayer_helper", "decoder",
       "The decoder's Pre-LN and Post-LN written once, as a sublayer helper parameterised by norm_first.",
       ("blocks.py", _DECODER_BODY, _DECODER_WITH_HELPER)),
    # ------------------------------------------------------------------ position
    _v("sinusoidal_table_in_float32", "position",
       "The sinusoidal table computed in float32 arithmetic, as seed 000 does (differences ~1e-7).",
       ("position.py", "position = torch.arange(max_len, dtype=torch.float64)",
        "position = torch.arange(max_len, dtype=torch.float32)"),
       ("position.py", "torch.arange(0, d_model, 2, dtype=torch.float64)", "torch.arange(0, d_model, 2, dtype=torch.float32)"),
       ("position.py", "pe = torch.zeros(max_len, d_model, dtype=torch.float64)",
        "pe = torch.zeros(max_len, d_model, dtype=torch.float32)")),
    _v("learned_positions_by_slicing_the_weight", "position",
       "LearnedPositionEmbedding as x + embedding.weight[:L] instead of embedding(arange(L)).",
       ("position.py", "positions = torch.arange(x.size(1), device=x.device)  # (L,)\n"
                       "        return x + self.embedding(positions).to(x.dtype)",
        "return x + self.embedding.weight[: x.size(1)].to(x.dtype)")),
    # ------------------------------------------------------------------ minigpt
    _v("tied_head_with_functional_linear", "minigpt",
       "The tied head as F.linear(h, token_embed.weight) instead of calling lm_head: identical logits.",
       ("minigpt.py", "logits = self.lm_head(self.final_norm(x))",
        "logits = F.linear(self.final_norm(x), self.token_embed.weight)"),
       ("minigpt.py", "return self.lm_head(self.final_norm(x[:, -1]))",
        "return F.linear(self.final_norm(x[:, -1]), self.token_embed.weight)")),
    _v("pytorch_default_initialisation", "minigpt",
       "PyTorch's default initial weights instead of normal(0, 0.02): initial weights are free.",
       ("minigpt.py", "self.apply(init_weights)", "pass  # PyTorch's default initialisation"),
       ("seq2seq.py", "self.apply(init_weights)", "pass  # PyTorch's default initialisation")),
    _v("embedding_dropout", "minigpt",
       "Dropout on the embeddings plus positions in train mode (GPT-2, the original Transformer): only the "
       "blocks' and the FFN's dropout positions are fixed.",
       ("minigpt.py", "self.final_norm = nn.LayerNorm(d_model)", "self.final_norm = nn.LayerNorm(d_model)\n"
                      "        self.embed_dropout = nn.Dropout(dropout)"),
       ("minigpt.py", "x = self.pos_encoding(x)\n", "x = self.embed_dropout(self.pos_encoding(x))\n"),
       ("seq2seq.py", "self.decoder_norm = nn.LayerNorm(d_model)", "self.decoder_norm = nn.LayerNorm(d_model)\n"
                      "        self.embed_dropout = nn.Dropout(dropout)"),
       ("seq2seq.py", "memory = self.pos_encoding(self.src_embed(src) * scale)",
        "memory = self.embed_dropout(self.pos_encoding(self.src_embed(src) * scale))"),
       ("seq2seq.py", "x = self.pos_encoding(self.tgt_embed(tgt) * scale)",
        "x = self.embed_dropout(self.pos_encoding(self.tgt_embed(tgt) * scale))")),
    _v("embedding_scale_as_a_power", "minigpt",
       "The embedding scale written d_model ** 0.5 and multiplied on the left.",
       ("minigpt.py", "x = self.token_embed(tokens) * math.sqrt(self.d_model)  # (B, L, D)",
        "x = self.d_model ** 0.5 * self.token_embed(tokens)  # (B, L, D)")),
    # ------------------------------------------------------------------ generate
    _v("generate_without_kv_cache", "generate",
       "generate recomputes the whole window every step (no KV cache; every catalogue copy generates so, this "
       "row with nothing else changed): a cache is an optimisation, not contract.",
       PLAIN_GENERATE),
    _v("generate_under_no_grad", "generate",
       "generate under torch.no_grad() instead of torch.inference_mode(): either stops autograd.",
       ("minigpt.py", "with torch.inference_mode():", "with torch.no_grad():")),
    _v("top_k_above_vocabulary_rejected", "generate",
       "top_k larger than the vocabulary rejected with a ValueError naming top_k instead of keeping every token.",
       ("minigpt.py", '            check_positive_int("top_k", top_k)\n',
        '            check_positive_int("top_k", top_k)\n'
        "            if top_k > self.vocab_size:\n"
        '                raise ValueError(f"top_k={top_k} is larger than vocab_size={self.vocab_size}")\n')),
    _v("sampling_by_inverse_cdf", "generate",
       "Sampling by inverse CDF (one uniform draw, searchsorted) instead of torch.multinomial: the same "
       "distribution, other tokens for a given generator seed.",
       ("minigpt.py", _SAMPLE, _INVERSE_CDF)),
    _v("greedy_with_max", "generate",
       "Greedy decoding with torch.max(...).indices instead of argmax.",
       ("minigpt.py", "next_token = int(next_logits.argmax())", "next_token = int(torch.max(next_logits, dim=-1).indices)")),
    # ------------------------------------------------------------------ errors
    _v("type_errors_as_value_errors", "errors",
       "A size or dropout of the wrong type rejected with ValueError instead of TypeError: either is allowed "
       "when the message names the argument.",
       ("_validation.py", 'raise TypeError(f"{name} must be a positive int, got {value!r} ({type(value).__name__})")',
        'raise ValueError(f"{name} must be a positive int, got {value!r} ({type(value).__name__})")'),
       ("_validation.py", 'raise TypeError(f"dropout must be a float in [0, 1), got {value!r} ({type(value).__name__})")',
        'raise ValueError(f"dropout must be a float in [0, 1), got {value!r} ({type(value).__name__})")')),
    # ------------------------------------------------------------------ seq2seq
    _v("seq2seq_embeddings_not_scaled", "seq2seq",
       "Seq2SeqTransformer without the sqrt(d_model) embedding scale: the contract fixes only its encoder, "
       "decoder and masks.",
       ("seq2seq.py", "memory = self.pos_encoding(self.src_embed(src) * scale)", "memory = self.pos_encoding(self.src_embed(src))"),
       ("seq2seq.py", "x = self.pos_encoding(self.tgt_embed(tgt) * scale)", "x = self.pos_encoding(self.tgt_embed(tgt))")),
    _v("seq2seq_target_pad_keys_blocked", "seq2seq",
       "Target pad tokens also blocked as keys of the target self-attention (the Annotated Transformer's "
       "make_std_mask, PyTorch's tgt_key_padding_mask): free, the contract fixes the target's causality only.",
       ("seq2seq.py", "tgt_mask = causal_mask(tgt.size(1), device=tgt.device)",
        "tgt_mask = causal_mask(tgt.size(1), device=tgt.device) | padding_mask(tgt, self.pad_id)")),
    _v("seq2seq_target_pad_queries_blocked", "seq2seq",
       "Target pad positions blocked as whole query rows of the target self-attention (a pad query attends "
       "nothing): free, as above.",
       ("seq2seq.py", "tgt_mask = causal_mask(tgt.size(1), device=tgt.device)",
        "tgt_mask = causal_mask(tgt.size(1), device=tgt.device) | (tgt == self.pad_id)[:, None, :, None]")),
    _v("seq2seq_masks_built_inline", "seq2seq",
       "Seq2SeqTransformer builds its masks inline (src == pad_id, triu) instead of calling the mask helpers.",
       ("seq2seq.py", "src_mask = padding_mask(src, self.pad_id)", "src_mask = (src == self.pad_id)[:, None, None, :]"),
       ("seq2seq.py", "tgt_mask = causal_mask(tgt.size(1), device=tgt.device)",
        "tgt_mask = torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool, device=tgt.device).triu(1)"),
       ("seq2seq.py", "import torch.nn as nn\n", "import torch\nimport torch.nn as nn\n")),
)

CATALOGUE += catalogue_modern(_v)  # the modern track's (transformer_spec/catalogue/modern.py)

BY_NAME: dict[str, Variation] = {v.name: v for v in CATALOGUE}
