"""The handout's ``tests/adapters.py`` as a CS336 student fills it in: each function imports the class it needs
from ``cs336_basics`` inside its body (as many real repositories do, so an import problem shows only when a test
calls it), builds it with the handout's names and loads the given weights. ``tests/profiles/repositories.py``
copies this file into a handout-layout repository."""

from __future__ import annotations


def run_linear(d_in, d_out, weights, in_features):
    from cs336_basics.model import Linear

    layer = Linear(d_in, d_out, dtype=weights.dtype)
    layer.load_state_dict({"weight": weights})
    return layer(in_features)


def run_embedding(vocab_size, d_model, weights, token_ids):
    from cs336_basics.model import Embedding

    layer = Embedding(vocab_size, d_model, dtype=weights.dtype)
    layer.load_state_dict({"weight": weights})
    return layer(token_ids)


def run_swiglu(d_model, d_ff, w1_weight, w2_weight, w3_weight, in_features):
    from cs336_basics.model import SwiGLU

    ffn = SwiGLU(d_model, d_ff, dtype=w1_weight.dtype)
    ffn.load_state_dict({"w1.weight": w1_weight, "w2.weight": w2_weight, "w3.weight": w3_weight})
    return ffn(in_features)


def run_scaled_dot_product_attention(Q, K, V, mask=None):
    from cs336_basics.model import scaled_dot_product_attention

    return scaled_dot_product_attention(Q, K, V, mask)


def _attention(d_model, num_heads, max_seq_len, theta, weights, in_features, token_positions):
    from cs336_basics.model import MultiHeadSelfAttention

    attn = MultiHeadSelfAttention(d_model, num_heads, max_seq_len, theta, dtype=weights[0].dtype)
    names = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "output_proj.weight")
    attn.load_state_dict(dict(zip(names, weights, strict=True)))
    return attn(in_features, token_positions)


def run_multihead_self_attention(d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight,
                                 in_features):
    return _attention(d_model, num_heads, None, None, (q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight),
                      in_features, None)


def run_multihead_self_attention_with_rope(d_model, num_heads, max_seq_len, theta, q_proj_weight, k_proj_weight,
                                           v_proj_weight, o_proj_weight, in_features, token_positions=None):
    return _attention(d_model, num_heads, max_seq_len, theta,
                      (q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight), in_features, token_positions)


def run_rope(d_k, theta, max_seq_len, in_query_or_key, token_positions):
    from cs336_basics.model import RotaryPositionalEmbedding

    return RotaryPositionalEmbedding(theta, d_k, max_seq_len)(in_query_or_key, token_positions)


def run_transformer_block(d_model, num_heads, d_ff, max_seq_len, theta, weights, in_features):
    from cs336_basics.model import TransformerBlock

    block = TransformerBlock(d_model, num_heads, d_ff, max_seq_len, theta, dtype=weights["ln1.weight"].dtype)
    block.load_state_dict(weights)
    return block(in_features)


def run_transformer_lm(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta, weights,
                       in_indices):
    from cs336_basics.model import TransformerLM

    model = TransformerLM(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta,
                          dtype=weights["ln_final.weight"].dtype)
    model.load_state_dict(weights)
    return model(in_indices)


def run_rmsnorm(d_model, eps, weights, in_features):
    from cs336_basics.model import RMSNorm

    norm = RMSNorm(d_model, eps, dtype=weights.dtype)
    norm.load_state_dict({"weight": weights})
    return norm(in_features)


def run_silu(in_features):
    import torch

    return in_features * torch.sigmoid(in_features)


def run_get_batch(dataset, batch_size, context_length, device):
    from cs336_basics.model import get_batch

    return get_batch(dataset, batch_size, context_length, device)


def run_softmax(in_features, dim):
    from cs336_basics.model import softmax

    return softmax(in_features, dim)


def run_cross_entropy(inputs, targets):
    from cs336_basics.model import cross_entropy

    return cross_entropy(inputs, targets)


def run_gradient_clipping(parameters, max_l2_norm):
    from cs336_basics.model import gradient_clipping

    gradient_clipping(parameters, max_l2_norm)


def get_adamw_cls():
    from cs336_basics.model import AdamW

    return AdamW


def run_get_lr_cosine_schedule(it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters):
    from cs336_basics.model import get_lr_cosine_schedule

    return get_lr_cosine_schedule(it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters)
