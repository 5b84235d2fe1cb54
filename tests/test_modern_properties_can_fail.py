"""Every property in properties/modern/ fails on a broken implementation from the pitfall catalogue.

Each case copies the reference with one pitfall's patches (``transformer_spec.catalogue.pitfalls``: the
mistakes the modern track's components declare) and calls the hypothesis property directly with
``impl=broken``: it must raise an ``AssertionError`` whose message contains ``match`` (so it fails
for the intended reason, not by crashing). A property that passes here could not catch the mistake
its law is about. One case has no pitfall in the catalogue to stand for it (MiniLlama's batch
independence, which no cataloged mistake breaks): it uses a patch of its own, as
``tests/test_properties_can_fail.py`` does.
"""

from __future__ import annotations

import pytest

from properties.modern import test_batch_laws as batch_laws
from properties.modern import test_gqa_laws as gqa_laws
from properties.modern import test_llama_laws as llama_laws
from properties.modern import test_loss_laws as loss_laws
from properties.modern import test_optimizer_laws as optim_laws
from properties.modern import test_rmsnorm_laws as rms_laws
from properties.modern import test_rotary_laws as rope_laws
from properties.modern import test_swiglu_laws as swiglu_laws
from transformer_spec.catalogue.patching import load_patched_reference
from transformer_spec.catalogue.pitfalls import by_name
from transformer_spec.probes.testing import assert_property_fails

PITFALLS = by_name()

#: not a cataloged mistake: the embeddings of the batch items are mixed (their mean added to each)
MINILLAMA_BATCH_MIXED = ("minillama.py", "x = self.token_embeddings(tokens)  # (B, L, D), not scaled",
                         "x = self.token_embeddings(tokens)  # (B, L, D), not scaled\n"
                         "        x = x + x.mean(0, keepdim=True)  # mixes the batch items")

# (property, pitfall name or a list of patches, text the failure message must contain)
CASES = [
    # rmsnorm
    (rms_laws.test_rmsnorm_is_invariant_to_scaling_each_vector_by_a_positive_number, "rmsnorm_divides_by_rsqrt",
     "RMSNorm(c * x)"),
    (rms_laws.test_rmsnorm_is_invariant_to_scaling_each_vector_by_a_positive_number,
     "rmsnorm_over_sequence_and_features", "RMSNorm(c * x)"),
    (rms_laws.test_rmsnorm_with_unit_weight_keeps_each_direction_at_root_mean_square_one, "rmsnorm_subtracts_mean",
     "RMSNorm(x) with unit weight"),
    (rms_laws.test_rmsnorm_with_unit_weight_keeps_each_direction_at_root_mean_square_one, "rmsnorm_eps_outside_sqrt",
     "sqrt(ms / (ms + eps))"),
    (rms_laws.test_rmsnorm_with_unit_weight_keeps_each_direction_at_root_mean_square_one, "rmsnorm_eps_hardcoded",
     "sqrt(ms / (ms + eps))"),
    (rms_laws.test_rmsnorm_with_unit_weight_keeps_each_direction_at_root_mean_square_one,
     "rmsnorm_over_sequence_and_features", "each vector on its own"),
    (rms_laws.test_rmsnorm_output_is_the_unit_weight_output_times_weight, "rmsnorm_weight_applied_twice",
     "times weight"),
    (rms_laws.test_rmsnorm_output_is_the_unit_weight_output_times_weight, "rmsnorm_weight_ignored", "times weight"),
    (rms_laws.test_rmsnorm_half_inputs_give_the_float32_result_cast_back, "rmsnorm_no_float32_upcast",
     "computed in float32"),
    (rms_laws.test_rmsnorm_leaves_its_input_unchanged, "rmsnorm_normalises_input_in_place", "must not change"),
    # rotary
    (rope_laws.test_rotary_keeps_the_length_of_every_adjacent_pair, "rope_half_split_pairs", "length of each pair"),
    (rope_laws.test_rotary_keeps_the_length_of_every_adjacent_pair, "rope_rotated_pairs_concatenated",
     "length of each pair"),
    (rope_laws.test_rotary_is_the_identity_at_position_0, "rope_cos_sin_swapped", "nothing turns"),
    (rope_laws.test_rotary_is_the_identity_at_position_0, "rope_positions_start_at_1", "nothing turns"),
    (rope_laws.test_rotary_is_the_identity_at_position_0, "rope_positions_ignored", "nothing turns"),
    (rope_laws.test_rotary_turning_at_a_then_at_b_is_turning_at_a_plus_b, "rope_positions_ignored",
     "rope(rope(x, a), b)"),
    (rope_laws.test_rotary_turning_at_a_then_at_b_is_turning_at_a_plus_b, "rope_cos_sin_swapped",
     "rope(rope(x, a), b)"),
    (rope_laws.test_rotary_scores_depend_only_on_the_distance_between_positions, "rope_cos_sin_swapped",
     "moved to position 0"),
    (rope_laws.test_rotary_scores_depend_only_on_the_distance_between_positions, "rope_positions_start_at_1",
     "moved to position 0"),
    (rope_laws.test_rotary_positions_broadcast_to_every_token, "rope_positions_ignored", "turned alone"),
    (rope_laws.test_rotary_positions_none_means_arange, "rope_positions_ignored", "turned alone at position j"),
    (rope_laws.test_rotary_turns_adjacent_pairs_each_on_its_own, "rope_half_split_pairs", "features outside pair"),
    (rope_laws.test_rotary_turns_adjacent_pairs_each_on_its_own, "rope_rotated_pairs_concatenated",
     "features outside pair"),
    (rope_laws.test_rotary_pair_i_turns_by_p_times_theta_to_the_minus_2i_over_head_dim,
     "rope_frequency_index_off_by_one", "counter-clockwise"),
    (rope_laws.test_rotary_pair_i_turns_by_p_times_theta_to_the_minus_2i_over_head_dim, "rope_exponent_i_over_d",
     "counter-clockwise"),
    (rope_laws.test_rotary_pair_i_turns_by_p_times_theta_to_the_minus_2i_over_head_dim, "rope_theta_ignored",
     "counter-clockwise"),
    (rope_laws.test_rotary_pair_i_turns_by_p_times_theta_to_the_minus_2i_over_head_dim, "rope_rotation_reversed",
     "counter-clockwise"),
    # swiglu
    (swiglu_laws.test_swiglu_gates_w3_x_with_silu_of_w1_x, "swiglu_gelu_gate", "computed here from its own"),
    (swiglu_laws.test_swiglu_gates_w3_x_with_silu_of_w1_x, "swiglu_sigmoid_gate", "computed here from its own"),
    (swiglu_laws.test_swiglu_gates_w3_x_with_silu_of_w1_x, "swiglu_gate_on_w3", "computed here from its own"),
    (swiglu_laws.test_swiglu_is_linear_in_the_value_branch_w3, "swiglu_silu_on_the_product", "enters linearly"),
    (swiglu_laws.test_swiglu_is_linear_in_the_value_branch_w3, "swiglu_no_gate", "enters linearly"),
    (swiglu_laws.test_swiglu_is_bias_free_and_position_wise, "swiglu_with_biases", "bias-free"),
    # gqa
    (gqa_laws.test_gqa_with_as_many_kv_heads_as_heads_is_multi_head_attention, "gqa_scaled_by_d_model",
     "multi-head attention computed here"),
    (gqa_laws.test_gqa_with_as_many_kv_heads_as_heads_is_multi_head_attention, "gqa_heads_merged_without_transpose",
     "multi-head attention computed here"),
    (gqa_laws.test_gqa_consecutive_query_heads_share_a_kv_head, "gqa_heads_paired_modulo", "consecutive query heads"),
    (gqa_laws.test_gqa_with_one_kv_head_is_multi_query_attention, "gqa_scaled_by_d_model", "multi-query attention"),
    (gqa_laws.test_gqa_rotary_attention_is_invariant_to_shifting_every_position, "gqa_only_queries_rotated",
     "depend on m - n only"),
    (gqa_laws.test_gqa_with_every_position_equal_is_attention_without_rope, "gqa_positions_not_passed_to_rope",
     "rope=None"),
    (gqa_laws.test_gqa_with_every_position_equal_is_attention_without_rope, "gqa_values_rotated", "rope=None: output"),
    (gqa_laws.test_gqa_causal_outputs_unaffected_by_future, "gqa_heads_merged_without_transpose", "positions <="),
    (gqa_laws.test_gqa_causal_outputs_unaffected_by_future, "mask_ignored", "positions <="),
    (gqa_laws.test_gqa_batch_items_are_independent, "gqa_batch_positions_not_broadcast_over_heads",
     "(B, L) positions"),
    (gqa_laws.test_gqa_without_mask_and_rope_is_permutation_equivariant, "gqa_heads_merged_without_transpose",
     "permuted"),
    (gqa_laws.test_gqa_never_rotates_the_values, "gqa_values_rotated", "never rotated"),
    # llama_block
    (llama_laws.test_llama_block_with_zero_output_proj_and_w2_is_the_identity, "llama_post_norm", "x + 0 + 0"),
    (llama_laws.test_llama_block_with_zero_output_proj_and_w2_is_the_identity, "llama_residual_from_normalized_input",
     "x + 0 + 0"),
    (llama_laws.test_llama_block_with_zero_output_proj_and_w2_is_the_identity, "llama_ffn_residual_missing",
     "x + 0 + 0"),
    (llama_laws.test_llama_block_is_its_own_sublayers_composed_pre_norm, "llama_ln1_reused_for_ffn",
     "h + ffn(ln2(h))"),
    (llama_laws.test_llama_block_is_its_own_sublayers_composed_pre_norm, "llama_positions_not_passed",
     "attn(ln1(x), mask, positions"),
    (llama_laws.test_llama_block_causal_outputs_unaffected_by_future, "mask_ignored", "positions <="),
    # minillama
    (llama_laws.test_minillama_prefix_logits_equal_full_sequence_logits, "minillama_no_causal_mask", "first"),
    (llama_laws.test_minillama_logits_unaffected_by_future_tokens, "minillama_no_causal_mask", "positions <="),
    (llama_laws.test_minillama_batch_items_are_independent, [MINILLAMA_BATCH_MIXED], "computed alone"),
    (llama_laws.test_minillama_is_its_own_layers_composed, "minillama_embeddings_scaled", "from its own"),
    (llama_laws.test_minillama_is_its_own_layers_composed, "minillama_no_final_norm", "from its own"),
    # llama_generate
    (llama_laws.test_llama_generate_greedy_is_the_argmax_of_the_models_own_logits,
     "llama_generate_reads_first_position", "peak at token"),
    (llama_laws.test_llama_generate_greedy_is_the_argmax_of_the_models_own_logits, "llama_generate_window_ignored",
     "raised ValueError"),
    (llama_laws.test_llama_generate_greedy_is_the_argmax_of_the_models_own_logits, "llama_cached_token_rotated_at_0",
     "peak at token"),
    (llama_laws.test_llama_generate_greedy_is_the_argmax_of_the_models_own_logits,
     "llama_cached_prefill_without_causal_mask", "peak at token"),
    (llama_laws.test_llama_generate_top_k_1_equals_greedy, "llama_top_k_keeps_one_extra", "greedy"),
    (llama_laws.test_llama_generate_top_k_1_equals_greedy, "llama_top_k_ignored", "greedy"),
    (llama_laws.test_llama_generate_top_k_1_equals_greedy, "llama_top_k_filled_with_tiny_positive", "greedy"),
    (llama_laws.test_llama_generate_is_reproducible_with_a_generator_and_restores_the_mode,
     "llama_generate_mode_not_restored", "mode"),
    # the training utilities (optional components)
    (loss_laws.test_softmax_is_exp_over_its_sum_along_dim, "softmax_over_the_last_dim_always", "softmax(x, dim="),
    (loss_laws.test_softmax_is_invariant_to_a_shift_along_dim, "softmax_over_the_last_dim_always", "softmax(x + shift"),
    (loss_laws.test_softmax_is_invariant_to_a_shift_along_dim, "softmax_without_the_maximum_subtracted",
     "softmax(x + shift"),
    (loss_laws.test_softmax_is_finite_for_large_inputs, "softmax_without_the_maximum_subtracted", "must be finite"),
    (loss_laws.test_cross_entropy_is_the_mean_of_logsumexp_minus_the_target_logit, "cross_entropy_summed_over_the_batch",
     "mean(logsumexp"),
    (loss_laws.test_cross_entropy_is_invariant_to_a_shift_of_a_row, "cross_entropy_logsumexp_without_the_maximum",
     "cross_entropy(logits + shift"),
    (loss_laws.test_cross_entropy_is_finite_for_large_logits, "cross_entropy_log_of_softmax", "must be finite"),
    (loss_laws.test_cross_entropy_is_finite_for_large_logits, "cross_entropy_logsumexp_without_the_maximum",
     "must be finite"),
    (loss_laws.test_cross_entropy_of_a_batch_is_the_mean_over_its_rows, "cross_entropy_summed_over_the_batch",
     "mean of the two batches"),
    (loss_laws.test_cross_entropy_gradient_is_softmax_minus_onehot_over_n, "cross_entropy_summed_over_the_batch",
     "(softmax - onehot) / N"),
    (optim_laws.test_clipping_scales_every_gradient_to_the_maximum_norm, "grad_clip_each_parameter_on_its_own",
     "total norm"),
    (optim_laws.test_clipping_scales_every_gradient_to_the_maximum_norm, "grad_clip_reads_the_parameters_twice",
     "as a generator"),
    (optim_laws.test_gradients_within_the_bound_are_untouched, "grad_clip_scales_below_the_bound", "although"),
    (optim_laws.test_clipping_skips_gradients_of_none_and_scales_the_others_by_one_factor, "grad_clip_each_parameter_on_its_own",
     "without gradient"),
    (optim_laws.test_adamw_takes_torchs_adamw_steps, "adamw_without_bias_correction", "torch.optim.AdamW"),
    (optim_laws.test_adamw_takes_torchs_adamw_steps, "adamw_decay_without_the_learning_rate", "torch.optim.AdamW"),
    (optim_laws.test_adamw_first_step_moves_each_weight_by_lr_against_its_gradient, "adamw_without_bias_correction",
     "lr * g / (|g| + eps)"),
    (optim_laws.test_adamw_decay_is_decoupled_from_the_gradient, "adamw_decay_as_l2_regularisation",
     "(1 - lr · weight_decay)"),
    (optim_laws.test_adamw_decay_is_decoupled_from_the_gradient, "adamw_decay_without_the_learning_rate",
     "(1 - lr · weight_decay)"),
    (optim_laws.test_adamw_reads_the_learning_rate_from_its_param_groups, "adamw_learning_rate_fixed_at_construction",
     "group['lr']"),
    (optim_laws.test_adamw_skips_parameters_without_gradients, "adamw_decays_parameters_without_gradients",
     "without gradient"),
    (optim_laws.test_cosine_lr_warms_up_linearly, "cosine_lr_warmup_counted_from_one", "while warming up"),
    (optim_laws.test_cosine_lr_follows_half_a_cosine_to_the_minimum, "cosine_lr_decay_counted_from_zero",
     "cosine decay"),
    (optim_laws.test_cosine_lr_stays_at_the_minimum_after_the_cycle, "cosine_lr_without_the_floor", "lr_min after"),
    (batch_laws.test_get_batch_gives_windows_and_the_tokens_after_them, "get_batch_targets_not_shifted",
     "one token later"),
    (batch_laws.test_get_batch_gives_windows_and_the_tokens_after_them, "get_batch_keeps_the_data_dtype",
     "torch.int64"),
    (batch_laws.test_get_batch_draws_every_start, "get_batch_last_start_never_drawn", "expected every start"),
    (batch_laws.test_get_batch_puts_the_batch_on_the_given_device, "get_batch_ignores_the_device", "device='meta'"),
]


def _patches(mistake):
    return list(PITFALLS[mistake].patches) if isinstance(mistake, str) else mistake


def _id(case):
    test, mistake, _ = case
    return test.__name__.removeprefix("test_") + f"[{mistake if isinstance(mistake, str) else 'own patch'}]"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_modern_property_fails_on_broken_implementation(case, tmp_path):
    test, mistake, match = case
    broken = load_patched_reference(tmp_path, _patches(mistake))
    assert broken.error is None, broken.error
    assert_property_fails(test, match=match, impl=broken)


def test_every_modern_property_has_a_broken_implementation():
    """No property in properties/modern/ is left without a case above."""
    modules = [rms_laws, rope_laws, swiglu_laws, gqa_laws, llama_laws, loss_laws, optim_laws, batch_laws]
    properties = {
        f"{m.__name__}.{name}" for m in modules for name in dir(m)
        if name.startswith("test_") and callable(getattr(m, name))
    }
    covered = {f"{c[0].__module__}.{c[0].__name__}" for c in CASES}
    assert properties - covered == set(), f"properties without a broken implementation: {sorted(properties - covered)}"


def test_every_case_names_a_pitfall_of_the_catalogue_or_says_why_not():
    """Only MiniLlama's batch independence uses a patch of its own (no cataloged mistake breaks it)."""
    own = [c[0].__name__ for c in CASES if not isinstance(c[1], str)]
    assert own == ["test_minillama_batch_items_are_independent"], own
    unknown = sorted({c[1] for c in CASES if isinstance(c[1], str)} - set(PITFALLS))
    assert unknown == [], f"not in the pitfall catalogue: {unknown}"
