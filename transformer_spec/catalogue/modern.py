"""The modern track's allowed variations (``docs/contract.md``, "The modern track", Free choices): correct
code written differently, each a small patch of the reference's Llama-style modules.

Part of the catalogue :data:`transformer_spec.catalogue.variations.CATALOGUE` (which lists the classic track's and
these); ``python -m tools.mutants --track modern`` grades each as a row that must be clean.
"""

from __future__ import annotations

from transformer_spec.contract.registry import CACHED_GENERATE_LLAMA, PLAIN_GENERATE_LLAMA

_NORM = "h = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + self.eps)  # unit RMS"
_NORM_OUT = "return (h * self.weight.to(h.dtype)).to(in_dtype)"
_ROPE_BODY = '''        cos = self.cos[positions].to(x.dtype)  # (..., L, head_dim/2)
        sin = self.sin[positions].to(x.dtype)
        a, b = x[..., 0::2], x[..., 1::2]  # the pairs (x[2i], x[2i+1]): (..., L, head_dim/2) each
        rotated = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1)  # (..., L, head_dim/2, 2)
        return rotated.flatten(-2)  # (..., L, head_dim), pairs back in place'''
_TABLES = '''        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)'''
_REPEAT = ("k = k.repeat_interleave(group, dim=1)  # (B, H, T, d): query head h reads kv head h // group\n"
           "        v = v.repeat_interleave(group, dim=1)")
_SDPA = "out, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, L, d), (B, H, L, T)"
_PROJ = '''        q = self.q_proj(x).view(B, L, H, d).transpose(1, 2)  # (B, H, L, d)
        k = self.k_proj(x).view(B, L, KV, d).transpose(1, 2)  # (B, KV, L, d)
        v = self.v_proj(x).view(B, L, KV, d).transpose(1, 2)  # (B, KV, L, d)'''
_SWIGLU = "return self.w2(F.silu(self.w1(x)) * self.w3(x))  # (..., d_ff) -> (..., D)"
_LOGITS = "logits = self.lm_head(self.ln_final(x))  # (B, L, vocab)"

_LOSS_IMPORT = ("losses.py", "from __future__ import annotations\n", "from __future__ import annotations\n\nimport torch\n")
_ADAM_TAIL = ("p.mul_(1 - lr * decay)  # decoupled decay, from the old θ\n"
              "                step_size = lr * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)\n"
              "                p.addcdiv_(m, v.sqrt().add_(eps), value=-step_size)")
_BATCH = """    starts = np.random.randint(0, len(data) - context_length, size=batch_size)  # (B,), high exclusive
    x = np.stack([np.asarray(data[s:s + context_length], dtype=np.int64) for s in starts])  # (B, m)
    y = np.stack([np.asarray(data[s + 1:s + 1 + context_length], dtype=np.int64) for s in starts])  # (B, m)
    return torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)"""


def catalogue(v):
    """The modern variations, made by ``v`` (:func:`transformer_spec.catalogue.variations._v`'s signature)."""
    return (
        v("rmsnorm_divided_by_sqrt", "rmsnorm", "RMSNorm written x / sqrt(mean(x**2) + eps) instead of rsqrt.",
          ("rmsnorm.py", _NORM, "h = h / torch.sqrt(h.pow(2).mean(dim=-1, keepdim=True) + self.eps)")),
        v("rmsnorm_weight_after_the_cast", "rmsnorm",
          "The gain applied after the cast back to the input's dtype (Meta's and Hugging Face's order).",
          ("rmsnorm.py", _NORM_OUT, "return h.to(in_dtype) * self.weight.to(in_dtype)")),
        v("rmsnorm_mean_of_squares_by_hand", "rmsnorm", "mean(x**2) as (x * x).sum(-1) / d_model.",
          ("rmsnorm.py", _NORM, "h = h * torch.rsqrt((h * h).sum(dim=-1, keepdim=True) / self.d_model + self.eps)")),
        v("rope_with_complex_numbers", "rotary",
          "The rotation as a product of complex numbers (torch.polar, view_as_complex), as Meta's Llama writes it.",
          ("rotary.py", _ROPE_BODY,
           '''        angles = torch.atan2(self.sin[positions], self.cos[positions])  # (..., L, head_dim/2), float64
        turn = torch.polar(torch.ones_like(angles), angles)
        pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2).contiguous())
        return torch.view_as_real(pairs * turn).flatten(-2).to(x.dtype)''')),
        v("rope_tables_per_call", "rotary", "cos and sin computed at each call from the positions, no tables kept.",
          ("rotary.py", _TABLES, "        self.register_buffer(\"inv_freq\", inv_freq, persistent=False)"),
          ("rotary.py", "        cos = self.cos[positions].to(x.dtype)  # (..., L, head_dim/2)\n"
                        "        sin = self.sin[positions].to(x.dtype)",
           "        angles = positions.to(torch.float64)[..., None] * self.inv_freq  # (..., L, head_dim/2)\n"
           "        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)")),
        v("rope_tables_in_float32", "rotary", "The cos/sin tables computed and kept in float32.",
          ("rotary.py", _TABLES, '''        self.register_buffer("cos", angles.float().cos(), persistent=False)
        self.register_buffer("sin", angles.float().sin(), persistent=False)''')),
        v("swiglu_value_times_gate", "swiglu", "The product written w3(x) * silu(w1(x)).",
          ("swiglu.py", _SWIGLU, "return self.w2(self.w3(x) * F.silu(self.w1(x)))")),
        v("swiglu_silu_by_its_formula", "swiglu", "SiLU written z * sigmoid(z) by hand.",
          ("swiglu.py", _SWIGLU, "gate = self.w1(x)\n        return self.w2(gate * gate.sigmoid() * self.w3(x))")),
        v("gqa_kv_expanded_with_expand_and_reshape", "gqa",
          "Key/value heads expanded with expand + reshape instead of repeat_interleave (Llama's repeat_kv).",
          ("gqa.py", _REPEAT,
           "k = k[:, :, None].expand(B, KV, group, *k.shape[2:]).reshape(B, H, *k.shape[2:])\n"
           "        v = v[:, :, None].expand(B, KV, group, *v.shape[2:]).reshape(B, H, *v.shape[2:])")),
        v("gqa_loop_over_query_heads", "gqa", "Each query head attends in a loop, reading its kv head h // group.",
          ("gqa.py", _REPEAT + "\n        " + _SDPA,
           "outs = [scaled_dot_product_attention(q[:, h], k[:, h // group], v[:, h // group],\n"
           "                                     None if mask is None else torch.broadcast_to(mask, (B, H, L, k.size(-2)))[:, h])\n"
           "                for h in range(H)]\n"
           "        out = torch.stack([o for o, _ in outs], dim=1)  # (B, H, L, d)\n"
           "        weights = torch.stack([w for _, w in outs], dim=1)  # (B, H, L, T)"),
          ("gqa.py", "import torch.nn as nn\n", "import torch\nimport torch.nn as nn\n")),
        v("gqa_fused_projection", "gqa",
          "q, k and v from one matrix multiplication: the three weights concatenated at each call.",
          ("gqa.py", _PROJ, '''        w = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])  # (D + 2 KV d, D)
        q, k, v = (x @ w.T).split([H * d, KV * d, KV * d], dim=-1)
        q = q.view(B, L, H, d).transpose(1, 2)  # (B, H, L, d)
        k = k.view(B, L, KV, d).transpose(1, 2)  # (B, KV, L, d)
        v = v.view(B, L, KV, d).transpose(1, 2)'''),
          ("gqa.py", "import torch.nn as nn\n", "import torch\nimport torch.nn as nn\n")),
        v("gqa_scale_folded_into_queries", "gqa", "The 1/sqrt(head_dim) scale applied to q, then scale=1.0.",
          ("gqa.py", _SDPA, "out, weights = scaled_dot_product_attention(q * self.head_dim ** -0.5, k, v, mask, scale=1.0)")),
        v("llama_block_residuals_written_f_plus_x", "llama_block", "Residuals written attn_out + x and ffn(...) + h.",
          ("llama_block.py", "h = x + attn_out  # (B, L, D)", "h = attn_out + x"),
          ("llama_block.py", "return h + self.ffn(self.ln2(h)), weights", "return self.ffn(self.ln2(h)) + h, weights")),
        v("minillama_head_through_f_linear", "minillama", "The logits as F.linear(h, lm_head.weight).",
          ("minillama.py", _LOGITS, "logits = F.linear(self.ln_final(x), self.lm_head.weight)")),
        v("minillama_causal_mask_per_call", "minillama", "The causal mask built at each call, no buffer.",
          ("minillama.py", "mask = self.causal_mask[:L, :L]  # (L, L), True above the diagonal = blocked",
           "mask = torch.ones(L, L, dtype=torch.bool, device=tokens.device).triu(1)")),
        v("llama_generate_with_kv_cache", "llama_generate",
          "generate with the reference's KV cache (every other catalogue copy generates without): a cached token "
          "is rotated at its absolute position in the window.", CACHED_GENERATE_LLAMA),
        v("llama_generate_without_kv_cache", "llama_generate",
          "generate recomputes the whole window each step, this row with nothing else changed.", PLAIN_GENERATE_LLAMA),
        v("llama_generate_under_no_grad", "llama_generate", "torch.no_grad() instead of torch.inference_mode().",
          ("minillama.py", "with torch.inference_mode():", "with torch.no_grad():")),
        v("softmax_through_logsumexp", "softmax", "softmax as exp(x - logsumexp(x, dim)), no maximum subtracted by hand.",
          _LOSS_IMPORT,
          ("losses.py", "    shifted = x - x.amax(dim=dim, keepdim=True)  # (...), every entry <= 0 along dim\n"
                        "    e = shifted.exp()\n    return e / e.sum(dim=dim, keepdim=True)",
           "    return (x - torch.logsumexp(x, dim=dim, keepdim=True)).exp()")),
        v("cross_entropy_through_torch_logsumexp", "cross_entropy", "logsumexp by torch.logsumexp.", _LOSS_IMPORT,
          ("losses.py", "log_z = (logits - top).exp().sum(dim=-1).log() + top.squeeze(-1)  # (N,) logsumexp",
           "log_z = torch.logsumexp(logits, dim=-1)")),
        v("grad_clip_without_eps", "grad_clip", "The factor max_norm / g, without the 1e-6.",
          ("optim.py", "g.mul_(max_norm / (total + 1e-6))", "g.mul_(max_norm / total)")),
        v("grad_clip_clamped_factor_always_applied", "grad_clip", "Every gradient multiplied by min(1, max_norm / "
          "(g + 1e-6)) whatever g is, as torch.nn.utils.clip_grad_norm_ does (it changes gradients within the "
          "bound only within 1e-6 of it).",
          ("optim.py", "    if total > max_norm:\n        for g in grads:\n            g.mul_(max_norm / (total + 1e-6))",
           "    factor = min(1.0, max_norm / (total + 1e-6))\n    for g in grads:\n        g.mul_(factor)")),
        v("adamw_decay_after_the_step", "adamw", "The decoupled decay applied after the Adam step, from the new θ "
          "(CS336's Algorithm 1 order).",
          ("optim.py", _ADAM_TAIL, "step_size = lr * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)\n"
                                   "                p.addcdiv_(m, v.sqrt().add_(eps), value=-step_size)\n"
                                   "                p.mul_(1 - lr * decay)  # decoupled decay, from the new θ")),
        v("adamw_eps_on_the_bias_corrected_moments", "adamw", "eps added to sqrt of the bias-corrected v (as torch).",
          ("optim.py", _ADAM_TAIL, "p.mul_(1 - lr * decay)\n"
                                   "                m_hat, v_hat = m / (1 - beta1 ** t), v / (1 - beta2 ** t)\n"
                                   "                p.sub_(lr * m_hat / (v_hat.sqrt() + eps))")),
        v("cosine_lr_as_a_tensor", "lr_schedule", "The rate returned as a 0-d float64 tensor, not a float.",
          ("optim.py", "return lr_min + (1 + math.cos(math.pi * progress)) / 2 * (lr_max - lr_min)",
           "return torch.tensor(lr_min + (1 + math.cos(math.pi * progress)) / 2 * (lr_max - lr_min), dtype=torch.float64)")),
        v("get_batch_with_torch_and_an_index_matrix", "get_batch", "Starts from torch's generator, rows gathered by "
          "one index matrix over the whole stream as a tensor.",
          ("batches.py", _BATCH,
           """    starts = torch.randint(len(data) - context_length, (batch_size,))  # (B,)
    index = starts[:, None] + torch.arange(context_length + 1)  # (B, m + 1)
    windows = torch.from_numpy(np.asarray(data).astype(np.int64))[index]  # (B, m + 1)
    return windows[:, :-1].to(device), windows[:, 1:].to(device)""")),
    )
