"""Stanford CS336 assignment 1's adapter functions over any implementation of the contract's modern
track, written as a student fills in the handout's ``tests/adapters.py``: build the module, load the given
weights, run it. ``adapters_for(impl)`` gives the functions: the project's test repositories' ``tests/adapters.py``
(``tests/profiles/cs336_reference``, ``cs336_independent``) take them for their implementation, the cs336 kill
matrix writes this file into each row's repository, and the diagnosis writes the catalogue's mistakes in the
course's API with it (:mod:`transformer_spec.catalogue.cs336`). It ships in the package, so a wheel or a
grading bundle has it. Only the handout's public function names and signatures are used.
"""

from __future__ import annotations

import torch


def adapters_for(impl) -> dict:
    """The handout's ``run_*`` functions over ``impl`` (a module defining the contract's modern names)."""

    def _load(module, weights):
        module.load_state_dict(weights)
        return module

    def run_rmsnorm(d_model, eps, weights, in_features):
        return _load(impl.RMSNorm(d_model, eps).to(weights.dtype), {"weight": weights})(in_features)

    def run_swiglu(d_model, d_ff, w1_weight, w2_weight, w3_weight, in_features):
        ffn = impl.SwiGLU(d_model, d_ff).to(w1_weight.dtype)
        return _load(ffn, {"w1.weight": w1_weight, "w2.weight": w2_weight, "w3.weight": w3_weight})(in_features)

    def run_rope(d_k, theta, max_seq_len, in_query_or_key, token_positions):
        return impl.RotaryPositionEmbedding(d_k, max_seq_len, theta)(in_query_or_key, token_positions)

    def run_scaled_dot_product_attention(Q, K, V, mask=None):
        blocked = None if mask is None else ~mask  # the handout's mask: True = attend
        return impl.scaled_dot_product_attention(Q, K, V, blocked)[0]

    def _attention(d_model, num_heads, rope, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features,
                   token_positions=None):
        attn = impl.GroupedQueryAttention(d_model, num_heads, rope=rope).to(q_proj_weight.dtype)
        _load(attn, {"q_proj.weight": q_proj_weight, "k_proj.weight": k_proj_weight, "v_proj.weight": v_proj_weight,
                     "output_proj.weight": o_proj_weight})
        L = in_features.size(-2)
        return attn(in_features, impl.causal_mask(L), token_positions)[0]

    def run_multihead_self_attention(d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight,
                                     in_features):
        return _attention(d_model, num_heads, None, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight,
                          in_features)

    def run_multihead_self_attention_with_rope(d_model, num_heads, max_seq_len, theta, q_proj_weight, k_proj_weight,
                                               v_proj_weight, o_proj_weight, in_features, token_positions=None):
        rope = impl.RotaryPositionEmbedding(d_model // num_heads, max_seq_len, theta)
        return _attention(d_model, num_heads, rope, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight,
                          in_features, token_positions)

    def run_transformer_block(d_model, num_heads, d_ff, max_seq_len, theta, weights, in_features):
        dtype = weights["ln1.weight"].dtype
        block = _load(impl.LlamaBlock(d_model, num_heads, d_ff, max_len=max_seq_len, theta=theta).to(dtype), weights)
        return block(in_features, impl.causal_mask(in_features.size(-2)))[0]

    def run_transformer_lm(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta, weights,
                           in_indices):
        dtype = weights["ln_final.weight"].dtype
        model = impl.MiniLlama(vocab_size, d_model, num_layers, num_heads, d_ff=d_ff, max_len=context_length,
                                    theta=rope_theta).to(dtype)
        return _load(model, weights)(in_indices)[0]

    def run_silu(in_features):
        return in_features * torch.sigmoid(in_features)

    def run_softmax(in_features, dim):
        return impl.softmax(in_features, dim)

    def run_cross_entropy(inputs, targets):
        return impl.cross_entropy(inputs, targets)

    def run_gradient_clipping(parameters, max_l2_norm):
        impl.clip_grad_norm(parameters, max_l2_norm)

    def get_adamw_cls():
        return impl.AdamW

    def run_get_lr_cosine_schedule(it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters):
        return impl.cosine_lr(it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters)

    def run_get_batch(dataset, batch_size, context_length, device):
        return impl.get_batch(dataset, batch_size, context_length, device)

    return {name: fn for name, fn in locals().items() if name.startswith(("run_", "get_"))}
