"""Every property in properties/ fails on a small broken implementation.

Each case copies the reference with one or two source patches (``transformer_spec.catalogue.patching``)
and calls the hypothesis property directly with ``impl=broken``: it must raise an
``AssertionError`` whose message contains ``match`` (so it fails for the intended reason, not
by crashing). A property that passes here could not catch the mistake its law is about.
"""

from __future__ import annotations

import pytest

from properties import (
    test_attention_laws as attn_laws,
)
from properties import (
    test_block_laws as block_laws,
)
from properties import (
    test_causality as causality,
)
from properties import (
    test_linearity as linearity,
)
from properties import (
    test_mha_laws as mha_laws,
)
from properties import (
    test_model_laws as model_laws,
)
from properties import (
    test_permutation as permutation,
)
from properties import (
    test_position_and_mask_laws as pos_laws,
)
from properties import (
    test_score_variance as score_variance,
)
from properties import (
    test_seq2seq_padding as s2s_padding,
)
from properties import (
    test_softmax_rows as softmax_rows,
)
from transformer_spec.catalogue.patching import load_patched_reference
from transformer_spec.catalogue.pitfalls import by_name
from transformer_spec.probes.testing import assert_property_fails

PITFALLS = by_name()

# --------------------------------------------------------------------------- the mistakes
SCORES = ("attention.py", "scores = torch.matmul(q * scale, k.transpose(-2, -1))")
SOFTMAX = ("attention.py", "weights = F.softmax(scores, dim=-1)")
MASK_FILL = ("attention.py", 'scores.masked_fill_(mask, float("-inf"))')
OUTPUT = ("attention.py", "output = torch.matmul(mixing, v)")
DEFAULT_SCALE = ("attention.py", "scale = 1.0 / math.sqrt(q.size(-1))")


def _p(where, new):
    return (where[0], where[1], new)


NO_SCALING = _p(DEFAULT_SCALE, "scale = 1.0")
SCALE_BY_D_K = _p(DEFAULT_SCALE, "scale = 1.0 / q.size(-1)")
SCALE_FROM_BATCH = _p(DEFAULT_SCALE, "scale = 1.0 / (q.abs().mean().item() + 1.0)")
FLOAT_SCALE_IGNORED = ("attention.py", 'raise TypeError(f"scale must be None or a float, got {scale!r}")',
                       'raise TypeError(f"scale must be None or a float, got {scale!r}")\n'
                       "    else:\n        scale = 1.0 / math.sqrt(q.size(-1))")
# issue 13's missed mistakes, as the pitfall catalogue writes them
FINITE_FILL, FINITE_FILL_1E4, S2S_PADDING_FROM_LENGTHS = (
    list(PITFALLS[name].patches) for name in ("finite_mask_fill", "finite_mask_fill_1e4", "source_padding_from_lengths"))
SOFTMAX_OVER_QUERIES = _p(SOFTMAX, "weights = F.softmax(scores, dim=-2)")
SOFTMAX_UNSTABLE = _p(SOFTMAX, "weights = scores.exp() / scores.exp().sum(-1, keepdim=True)")
WEIGHTS_SEE_VALUES = _p(SOFTMAX, "weights = F.softmax(scores + v.sum(-1).unsqueeze(-2), dim=-1)")
MASK_LEAKS = _p(MASK_FILL, "scores.masked_fill_(mask, -1.0)")
BROADCAST_MASK_FLIPPED = _p(MASK_FILL, 'scores.masked_fill_(mask if mask.dim() == scores.dim() else mask.flip(-1), float("-inf"))')
BLOCKED_ROWS_NAN = ("attention.py", "blocked_rows = mask.all(dim=-1, keepdim=True)",
                    "blocked_rows = mask.all(dim=-1, keepdim=True) & False")
KEY_INDEX_BIAS = _p(SCORES, "scores = torch.matmul(q, k.transpose(-2, -1)) * scale + torch.arange(k.size(-2), dtype=q.dtype)")
DISTANCE_SCORES = _p(SCORES, "scores = (torch.matmul(q, k.transpose(-2, -1)) - 0.5 * (k * k).sum(-1).unsqueeze(-2)) * scale")
VALUES_NONLINEAR = _p(OUTPUT, "output = torch.matmul(mixing, torch.tanh(v))")
OUTPUT_SCALED = _p(OUTPUT, "output = 1.5 * torch.matmul(mixing, v)")
NO_GRADIENT_THROUGH_WEIGHTS = _p(OUTPUT, "output = torch.matmul(mixing.detach(), v)")
OUTPUT_FLOAT32 = ("attention.py", "return output, weights", "return output.float(), weights.float()")

HEADS_SPLIT_WITHOUT_TRANSPOSE = ("multihead.py", "Q = self.W_Q(query).view(B, Lq, self.num_heads, self.d_k).transpose(1, 2)",
                                 "Q = self.W_Q(query).view(B, self.num_heads, Lq, self.d_k)")
VALUE_FROM_KEY = ("multihead.py", "V = self.W_V(value)", "V = self.W_V(key)")
KEYS_FROM_OTHER_ITEM = ("multihead.py", "K = self.W_K(key)", "K = self.W_K(key.flip(0))")
MHA_MASK_DROPPED = ("multihead.py", "scaled_dot_product_attention(Q, K, V, mask, dropout=self.dropout)",
                    "scaled_dot_product_attention(Q, K, V, None, dropout=self.dropout)")
MHA_DROPOUT_ALWAYS = ("multihead.py", "scaled_dot_product_attention(Q, K, V, mask, dropout=self.dropout)",
                      "scaled_dot_product_attention(Q, K, V, mask, dropout=lambda w: "
                      "nn.functional.dropout(w, self.dropout.p, training=True))")
MHA_NO_GRADIENT = ("multihead.py", "return self.W_O(concat), weights", "return self.W_O(concat.detach()), weights")
MHA_FLOAT32 = ("multihead.py", "return self.W_O(concat), weights", "return self.W_O(concat).float(), weights.float()")
SELF_ATTENTION_MASK_DROPPED = ("multihead.py", "super().forward(x, x, x, mask", "super().forward(x, x, x, None")

FFN_MIXES_POSITIONS = ("feedforward.py", "F.gelu(self.linear1(x))", "F.gelu(self.linear1(x.cumsum(-2)))")
ENC_PRE_MASK_DROPPED = ("blocks.py", "self.self_attn(self.norm1(x), mask", "self.self_attn(self.norm1(x), None")
ENC_PRE_ATTN_RESIDUAL = "x = x + self.dropout(attn_out)\n            x = x + self.dropout(self.ffn(self.norm2(x)))"
ENC_PRE_RESIDUAL_NORMED = ("blocks.py", ENC_PRE_ATTN_RESIDUAL, ENC_PRE_ATTN_RESIDUAL.replace("x = x +", "x = self.norm1(x) +", 1))
ENC_PRE_FFN_CUMSUM = ("blocks.py", "x = x + self.dropout(self.ffn(self.norm2(x)))",
                      "x = x + self.dropout(self.ffn(self.norm2(x).cumsum(1)))")
ENC_PRE_DROPOUT_ALWAYS = ("blocks.py", ENC_PRE_ATTN_RESIDUAL, ENC_PRE_ATTN_RESIDUAL.replace(
    "self.dropout(attn_out)", "nn.functional.dropout(attn_out, self.dropout.p, training=True)"))
ENC_POST_NOT_NORMED = ("blocks.py", "x = self.norm2(x + self.dropout(self.ffn(x)))",
                       "x = x + self.dropout(self.ffn(self.norm2(x)))")
DEC_PRE_TGT_MASK_DROPPED = ("blocks.py", "self.self_attn(self.norm1(x), tgt_mask)", "self.self_attn(self.norm1(x), None)")
DEC_PRE_MEMORY_MASK_DROPPED = ("blocks.py", "self.cross_attn(self.norm2(x), memory, memory, memory_mask)",
                               "self.cross_attn(self.norm2(x), memory, memory, None)")
DEC_PRE_MEMORY_KEYS_CUMSUM = ("blocks.py", "self.cross_attn(self.norm2(x), memory, memory, memory_mask)",
                              "self.cross_attn(self.norm2(x), memory.cumsum(1), memory, memory_mask)")
DEC_PRE_RESIDUAL_NORMED = ("blocks.py", "x = x + self.dropout(cross_out)\n            x = x + self.dropout(self.ffn(self.norm3(x)))",
                           "x = self.norm2(x) + self.dropout(cross_out)\n            x = x + self.dropout(self.ffn(self.norm3(x)))")
DEC_POST_NOT_NORMED = ("blocks.py", "x = self.norm3(x + self.dropout(self.ffn(x)))",
                       "x = x + self.dropout(self.ffn(self.norm3(x)))")

PE_TOO_LARGE = ("position.py", "pe[:, 0::2] = torch.sin(position * div_term)", "pe[:, 0::2] = 1.5 * torch.sin(position * div_term)")
PE_COS_DOUBLE_FREQUENCY = ("position.py", "torch.cos(position * div_term[: d_model // 2])",
                           "torch.cos(2 * position * div_term[: d_model // 2])")
PE_WRONG_BASE = ("position.py", "(-math.log(10000.0) / d_model)", "(-math.log(1000.0) / d_model)")
PE_ROWS = "self.pe[:, start : start + x.size(1)]"
PE_LAST_ROWS = ("position.py", PE_ROWS, "self.pe[:, self.pe.size(1) - x.size(1) :]")
PE_SAME_FOR_ALL = ("position.py", PE_ROWS, "self.pe[:, start : start + 1]")
LEARNED_REVERSED = ("position.py", "positions = torch.arange(x.size(1), device=x.device)",
                    "positions = torch.arange(x.size(1), device=x.device).flip(0)")

CAUSAL_BLOCKS_DIAGONAL = ("masks.py", "torch.triu(ones, diagonal=1)", "torch.triu(ones, diagonal=0)")
CAUSAL_BLOCKS_PAST = ("masks.py", "torch.triu(ones, diagonal=1)", "torch.tril(ones, diagonal=-1)")
PADDING_INVERTED = ("masks.py", "(tokens == pad_id)[:, None, None, :]", "(tokens != pad_id)[:, None, None, :]")

GPT_MAPS_TRANSPOSED = ("minigpt.py", "attn_maps.append(weights)", "attn_maps.append(weights.transpose(-2, -1))")
GPT_NOT_CAUSAL = ("minigpt.py", "mask = self.causal_mask[:L, :L]", "mask = self.causal_mask[:L, :L] & False")
GPT_POSITIONS_FROM_END = ("minigpt.py", "x = self.pos_encoding(x)", "x = x + self.pos_encoding.pe[:, -L:].to(x.dtype)")
GPT_BATCH_MIXED = ("minigpt.py", "x = self.pos_encoding(x)", "x = self.pos_encoding(x) + x.mean(0, keepdim=True)")
GPT_UNTIED = ("minigpt.py", "self.lm_head.weight = self.token_embed.weight",
              "self.lm_head.weight = nn.Parameter(self.token_embed.weight.detach().clone())")
GPT_HEAD_DETACHED = ("minigpt.py", "logits = self.lm_head(self.final_norm(x))",
                     "logits = F.linear(self.final_norm(x), self.token_embed.weight.detach())")
GPT_HEAD_BIAS = ("minigpt.py", "logits = self.lm_head(self.final_norm(x))", "logits = self.lm_head(self.final_norm(x)) + 0.1")
TOP_K_REJECTED_UNNAMED = ("minigpt.py", '            check_positive_int("top_k", top_k)\n',
                          '            check_positive_int("top_k", top_k)\n            if top_k > self.vocab_size:\n'
                          '                raise ValueError("k is too large")\n')
TOP_K_VOCAB_REJECTED = ("minigpt.py", '            check_positive_int("top_k", top_k)\n',
                        '            check_positive_int("top_k", top_k)\n            if top_k >= self.vocab_size:\n'
                        '                raise ValueError(f"top_k={top_k} is too large")\n')
TOP_K_SMALLEST = ("minigpt.py", "kth_best = torch.topk(next_logits, top_k).values[-1]",
                  "kth_best = torch.topk(next_logits, top_k, largest=False).values[-1]")
ONE_TOKEN_SHORT = ("minigpt.py", "for _ in range(max_new_tokens):", "for _ in range(max_new_tokens - 1):")
# the reference crops in two places (with and without its KV cache): patch the commented one, then the other
WINDOW = "window = torch.tensor([tokens[-self.max_len:]], device=device)"
WINDOW_FROM_START = [("minigpt.py", WINDOW + "  #", WINDOW.replace("[-self.max_len:]", "[: self.max_len]") + "  #"),
                     ("minigpt.py", WINDOW, WINDOW.replace("[-self.max_len:]", "[: self.max_len]"))]
MODE_NOT_RESTORED = ("minigpt.py", "self.train(was_training)", "pass")

S2S_NOT_CAUSAL = ("seq2seq.py", "tgt_mask = causal_mask(tgt.size(1), device=tgt.device)", "tgt_mask = None")
S2S_PADDING_SEEN = ("seq2seq.py", "src_mask = padding_mask(src, self.pad_id)", "src_mask = None")
S2S_SOURCE_UNREAD = ("seq2seq.py", "memory = self.encoder_norm(memory)", "memory = self.encoder_norm(memory) * 0")
S2S_CONSTANT = ("seq2seq.py", "return self.out(self.decoder_norm(x))  # (B, Lt, tgt_vocab)",
                "return self.out(self.decoder_norm(x)) * 0  # (B, Lt, tgt_vocab)")
S2S_BATCH_MIXED = ("seq2seq.py", "memory = self.encoder_norm(memory)",
                   "memory = self.encoder_norm(memory + memory.mean(0, keepdim=True))")

PRE, POST = {"norm_first": True}, {"norm_first": False}

# (property, patches, extra keyword arguments, text the failure message must contain)
CASES = [
    # law 1: attention weights are a softmax over the keys
    (softmax_rows.test_attention_rows_sum_to_one, [SOFTMAX_OVER_QUERIES], {}, "scaled_dot_product_attention weights"),
    (softmax_rows.test_attention_rows_sum_to_one_for_scores_of_1e4, [SOFTMAX_UNSTABLE], {}, "non-finite"),
    (softmax_rows.test_multihead_attention_rows_sum_to_one, [SOFTMAX_OVER_QUERIES], {"self_attention": False}, "sums to"),
    (softmax_rows.test_multihead_attention_rows_sum_to_one, [MASK_LEAKS], {"self_attention": True}, "blocked entry"),
    (softmax_rows.test_encoder_block_attention_rows_sum_to_one, [ENC_PRE_MASK_DROPPED], PRE, "blocked entry"),
    (softmax_rows.test_decoder_block_self_and_cross_attention_rows_sum_to_one, [DEC_PRE_TGT_MASK_DROPPED], PRE, "blocked entry"),
    (softmax_rows.test_minigpt_attention_maps_rows_sum_to_one, [GPT_MAPS_TRANSPOSED], {}, "attn_maps"),
    (softmax_rows.test_attention_fully_blocked_rows_give_zero_weights_and_outputs, [BLOCKED_ROWS_NAN], {}, "non-finite"),
    (softmax_rows.test_blocked_keys_get_zero_weight_however_low_the_allowed_scores, FINITE_FILL, {}, "blocked entry"),
    (softmax_rows.test_blocked_keys_get_zero_weight_however_low_the_allowed_scores, FINITE_FILL_1E4, {}, "blocked entry"),
    # law 2: causality (outputs at positions <= t ignore positions > t)
    (causality.test_attention_causal_outputs_unaffected_by_future, [CAUSAL_BLOCKS_DIAGONAL, MASK_LEAKS], {}, "positions <="),
    (causality.test_multihead_self_attention_causal_outputs_unaffected_by_future, [MHA_MASK_DROPPED], {}, "positions <="),
    (causality.test_encoder_block_causal_outputs_unaffected_by_future, [ENC_PRE_MASK_DROPPED], PRE, "positions <="),
    (causality.test_decoder_block_causal_outputs_unaffected_by_future, [DEC_PRE_TGT_MASK_DROPPED], PRE, "positions <="),
    (causality.test_minigpt_logits_unaffected_by_future_tokens, [GPT_NOT_CAUSAL], {}, "positions <="),
    (causality.test_minigpt_prefix_logits_equal_full_sequence_logits, [GPT_POSITIONS_FROM_END], {}, "first"),
    (causality.test_seq2seq_logits_unaffected_by_future_target_tokens, [S2S_NOT_CAUSAL], {}, "positions <="),
    (causality.test_seq2seq_prefix_logits_equal_full_target_logits, [S2S_NOT_CAUSAL], {}, "first"),
    # law 3: permutation equivariance and invariance
    (permutation.test_multihead_self_attention_is_permutation_equivariant, [HEADS_SPLIT_WITHOUT_TRANSPOSE], {}, "permuted"),
    (permutation.test_encoder_block_is_permutation_equivariant, [ENC_PRE_FFN_CUMSUM], PRE, "permuted"),
    (permutation.test_feedforward_is_permutation_equivariant, [FFN_MIXES_POSITIONS], {}, "permuted"),
    (permutation.test_attention_is_invariant_to_permuting_keys_and_values_together, [KEY_INDEX_BIAS], {}, "permuted by"),
    (permutation.test_multihead_attention_is_invariant_to_permuting_keys_and_values_together, [KEY_INDEX_BIAS], {}, "permuted by"),
    (permutation.test_decoder_block_is_invariant_to_permuting_memory, [DEC_PRE_MEMORY_KEYS_CUMSUM], PRE, "permuted by"),
    (permutation.test_sinusoidal_encoding_breaks_permutation_equivariance, [PE_SAME_FOR_ALL], {}, "only permuted"),
    # law 4: attention is linear in V
    (linearity.test_attention_is_linear_in_values, [VALUES_NONLINEAR], {}, "attn(q, k,"),
    (linearity.test_attention_weights_do_not_depend_on_values, [WEIGHTS_SEE_VALUES], {}, "other values"),
    (linearity.test_multihead_attention_is_linear_in_values, [VALUE_FROM_KEY], {}, "same combination"),
    # law 5: the scaled scores' variance
    (score_variance.test_attention_scaled_scores_have_unit_variance, [NO_SCALING], {}, "variance"),
    (score_variance.test_attention_scaled_scores_have_unit_variance, [SCALE_BY_D_K], {}, "variance"),
    (score_variance.test_attention_unscaled_scores_have_variance_d_k, [FLOAT_SCALE_IGNORED], {}, "variance"),
    # attention
    (attn_laws.test_attention_weights_invariant_to_shifting_every_key, [DISTANCE_SCORES], {}, "to every key"),
    (attn_laws.test_attention_scale_argument_multiplies_the_scores, [SCALE_BY_D_K], {}, "scale=None"),
    (attn_laws.test_attention_output_is_a_convex_combination_of_values, [OUTPUT_SCALED], {}, "weights @ v"),
    (attn_laws.test_attention_equal_keys_give_uniform_weights, [KEY_INDEX_BIAS], {}, "all equal"),
    (attn_laws.test_attention_batch_items_are_independent, [SCALE_FROM_BATCH], {}, "computed alone"),
    (attn_laws.test_attention_broadcast_mask_equals_expanded_mask, [BROADCAST_MASK_FLIPPED], {}, "expanded"),
    (attn_laws.test_attention_gradients_match_finite_differences, [NO_GRADIENT_THROUGH_WEIGHTS], {}, "finite differences"),
    (attn_laws.test_attention_preserves_dtype_and_device, [OUTPUT_FLOAT32], {}, "dtype"),
    # mha
    (mha_laws.test_multihead_attention_heads_decompose_into_single_head_attentions, [HEADS_SPLIT_WITHOUT_TRANSPOSE], {}, "single-head"),
    (mha_laws.test_multihead_attention_single_identity_head_equals_attention, [VALUE_FROM_KEY], {}, "identity"),
    (mha_laws.test_multihead_self_attention_equals_multihead_attention_of_x_x_x, [SELF_ATTENTION_MASK_DROPPED], {}, "(x, x, x)"),
    (mha_laws.test_multihead_attention_batch_items_are_independent, [KEYS_FROM_OTHER_ITEM], {}, "computed alone"),
    (mha_laws.test_multihead_attention_ignores_the_content_of_padded_keys, [MHA_MASK_DROPPED], {}, "padded"),
    (mha_laws.test_multihead_attention_is_deterministic_in_eval_mode, [MHA_DROPOUT_ALWAYS], {}, "dropout"),
    (mha_laws.test_multihead_attention_gradients_match_finite_differences, [MHA_NO_GRADIENT], {}, "finite differences"),
    (mha_laws.test_multihead_attention_preserves_dtype_and_device, [MHA_FLOAT32], {}, "dtype"),
    # blocks
    (block_laws.test_feedforward_is_position_wise, [FFN_MIXES_POSITIONS], {}, "alone"),
    (block_laws.test_pre_ln_encoder_block_with_zero_W_O_and_linear2_is_identity, [ENC_PRE_RESIDUAL_NORMED], {}, "x + 0"),
    (block_laws.test_pre_ln_decoder_block_with_zero_W_O_and_linear2_is_identity, [DEC_PRE_RESIDUAL_NORMED], {}, "x + 0"),
    (block_laws.test_post_ln_encoder_block_output_is_layer_normalised, [ENC_POST_NOT_NORMED], {}, "Post-LN"),
    (block_laws.test_post_ln_decoder_block_output_is_layer_normalised, [DEC_POST_NOT_NORMED], {}, "Post-LN"),
    (block_laws.test_encoder_block_padded_positions_do_not_change_real_positions, [ENC_PRE_MASK_DROPPED], PRE, "padded"),
    (block_laws.test_decoder_block_ignores_masked_memory_positions, [DEC_PRE_MEMORY_MASK_DROPPED], PRE, "memory_mask"),
    (block_laws.test_encoder_block_is_deterministic_in_eval_mode, [ENC_PRE_DROPOUT_ALWAYS], PRE, "dropout"),
    # position and masks
    (pos_laws.test_sinusoidal_encoding_is_bounded_by_one, [PE_TOO_LARGE], {}, "<= 1"),
    (pos_laws.test_sinusoidal_encoding_sin_cos_pairs_have_unit_norm, [PE_COS_DOUBLE_FREQUENCY], {}, "^2"),
    (pos_laws.test_sinusoidal_encoding_shift_by_k_is_a_fixed_rotation, [PE_WRONG_BASE], {}, "rotation"),
    (pos_laws.test_position_encoding_adds_one_fixed_vector_per_position, [PE_LAST_ROWS],
     {"kind": "SinusoidalPositionEncoding"}, "first"),
    (pos_laws.test_position_encoding_adds_one_fixed_vector_per_position, [LEARNED_REVERSED],
     {"kind": "LearnedPositionEmbedding"}, "first"),
    (pos_laws.test_causal_mask_blocks_exactly_the_future, [CAUSAL_BLOCKS_DIAGONAL], {}, "causal_mask"),
    (pos_laws.test_padding_mask_blocks_exactly_the_padded_keys, [PADDING_INVERTED], {}, "padding_mask"),
    (pos_laws.test_causal_mask_makes_attention_causal, [CAUSAL_BLOCKS_PAST], {}, "future keys"),
    # models
    (model_laws.test_minigpt_weight_tying_shares_one_tensor_and_gets_gradient_from_both_uses, [GPT_UNTIED], {}, "same tensor"),
    (model_laws.test_minigpt_weight_tying_shares_one_tensor_and_gets_gradient_from_both_uses, [GPT_HEAD_DETACHED], {},
     "absent from the input"),
    (model_laws.test_minigpt_weight_tying_shares_one_tensor_and_gets_gradient_from_both_uses, [GPT_HEAD_BIAS], {},
     "bias-free"),
    (model_laws.test_generate_returns_the_seed_then_new_tokens_inside_the_vocabulary, [TOP_K_REJECTED_UNNAMED], {},
     "must name `top_k`"),
    (model_laws.test_generate_returns_the_seed_then_new_tokens_inside_the_vocabulary, [TOP_K_VOCAB_REJECTED], {},
     "must work"),
    (model_laws.test_minigpt_batch_items_are_independent, [GPT_BATCH_MIXED], {}, "computed alone"),
    (model_laws.test_generate_top_k_1_equals_greedy, [TOP_K_SMALLEST], {}, "greedy"),
    (model_laws.test_generate_returns_the_seed_then_new_tokens_inside_the_vocabulary, [ONE_TOKEN_SHORT], {}, "expected seed"),
    (model_laws.test_generate_past_max_len_uses_the_last_max_len_tokens, WINDOW_FROM_START, {}, "last"),
    (model_laws.test_generate_is_reproducible_with_a_generator_and_restores_the_mode, [MODE_NOT_RESTORED], {}, "mode"),
    (model_laws.test_seq2seq_source_padding_does_not_change_logits, [S2S_PADDING_SEEN], {}, "pad tokens"),
    (model_laws.test_seq2seq_batch_items_are_independent, [S2S_BATCH_MIXED], {}, "computed alone"),
    (model_laws.test_seq2seq_logits_depend_on_each_real_source_token_and_on_the_target_token, [S2S_SOURCE_UNREAD], {},
     "do not read the source"),
    (model_laws.test_seq2seq_logits_depend_on_each_real_source_token_and_on_the_target_token, [S2S_CONSTANT], {},
     "do not read the"),
    (s2s_padding.test_seq2seq_pad_positions_are_invisible_wherever_they_are, S2S_PADDING_FROM_LENGTHS, {}, "pad_id="),
    (s2s_padding.test_seq2seq_pad_positions_are_invisible_wherever_they_are, [S2S_PADDING_SEEN], {}, "pad_id="),
]


def _id(case):
    test, patches, kwargs, _ = case
    extra = "-".join(str(v) for v in kwargs.values())
    return test.__name__.removeprefix("test_") + (f"[{extra}]" if extra else "")


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_property_fails_on_broken_implementation(case, tmp_path):
    test, patches, kwargs, match = case
    broken = load_patched_reference(tmp_path, patches)
    assert broken.error is None, broken.error
    assert_property_fails(test, match=match, impl=broken, **kwargs)


def test_every_property_has_a_broken_implementation():
    """No property in properties/ is left without a case above."""
    modules = [softmax_rows, causality, permutation, linearity, score_variance,
               attn_laws, mha_laws, block_laws, pos_laws, model_laws, s2s_padding]
    properties = {
        f"{m.__name__}.{name}" for m in modules for name in dir(m)
        if name.startswith("test_") and callable(getattr(m, name))
    }
    covered = {f"{c[0].__module__}.{c[0].__name__}" for c in CASES}
    assert properties - covered == set(), f"properties without a broken implementation: {sorted(properties - covered)}"
