"""A CS336 assignment-1 solution as a student writes it from the handout (spring 2025): the handout's own class
and function names (``Linear``, ``Embedding``, ``RMSNorm``, ``SwiGLU``, ``RotaryPositionalEmbedding``,
``MultiHeadSelfAttention``, ``TransformerBlock``, ``TransformerLM``, ``softmax``, ``cross_entropy``,
``gradient_clipping``, ``AdamW``, ``get_lr_cosine_schedule``, ``get_batch``), none of the contract's. Written
for this project's tests from the handout's text alone (not from ``reference/`` or the other independent
implementations): ``tests/profiles/repositories.py`` lays it out as a handout repository's
``cs336_basics/model.py``, reached through lazy imports in ``tests/adapters.py``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn


class Linear(nn.Module):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__()
        std = math.sqrt(2.0 / (in_features + out_features))
        self.weight = nn.Parameter(nn.init.trunc_normal_(torch.empty(out_features, in_features, device=device,
                                                                     dtype=dtype), 0.0, std, -3 * std, 3 * std))

    def forward(self, x):
        return torch.einsum("...i,oi->...o", x, self.weight)


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(nn.init.trunc_normal_(torch.empty(num_embeddings, embedding_dim, device=device,
                                                                     dtype=dtype), 0.0, 1.0, -3.0, 3.0))

    def forward(self, token_ids):
        return self.weight[token_ids]


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x):  # (batch_size, sequence_length, d_model)
        in_dtype = x.dtype
        x = x.to(torch.float32) if in_dtype in (torch.float16, torch.bfloat16) else x
        rms = torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x / rms * self.weight.to(x.dtype)).to(in_dtype)


class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff, device=None, dtype=None):
        super().__init__()
        self.w1 = Linear(d_model, d_ff, device, dtype)
        self.w2 = Linear(d_ff, d_model, device, dtype)
        self.w3 = Linear(d_model, d_ff, device, dtype)

    def forward(self, x):
        a = self.w1(x)
        return self.w2(a * torch.sigmoid(a) * self.w3(x))


class RotaryPositionalEmbedding(nn.Module):
    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__()
        freq = theta ** (-torch.arange(0, d_k, 2, dtype=torch.float64, device=device) / d_k)  # (d_k/2,)
        angle = torch.outer(torch.arange(max_seq_len, dtype=torch.float64, device=device), freq)
        self.register_buffer("cos", torch.cos(angle), persistent=False)  # (max_seq_len, d_k/2)
        self.register_buffer("sin", torch.sin(angle), persistent=False)

    def forward(self, x, token_positions):  # x (..., seq_len, d_k), token_positions (..., seq_len)
        cos, sin = self.cos[token_positions].to(x.dtype), self.sin[token_positions].to(x.dtype)
        even, odd = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = even * sin + odd * cos
        return out


def softmax(x, dim):
    e = torch.exp(x - x.max(dim=dim, keepdim=True).values)
    return e / e.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(Q, K, V, mask=None):  # mask: True = attend (the handout's)
    scores = Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return softmax(scores, -1) @ V


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, max_seq_len=None, theta=None, device=None, dtype=None):
        super().__init__()
        self.num_heads, self.d_k = num_heads, d_model // num_heads
        self.q_proj = Linear(d_model, d_model, device, dtype)
        self.k_proj = Linear(d_model, d_model, device, dtype)
        self.v_proj = Linear(d_model, d_model, device, dtype)
        self.output_proj = Linear(d_model, d_model, device, dtype)
        self.rope = RotaryPositionalEmbedding(theta, self.d_k, max_seq_len, device) if theta is not None else None

    def _heads(self, t):  # (..., seq, d_model) -> (..., heads, seq, d_k)
        return t.unflatten(-1, (self.num_heads, self.d_k)).transpose(-3, -2)

    def forward(self, x, token_positions=None):
        seq = x.shape[-2]
        q, k, v = self._heads(self.q_proj(x)), self._heads(self.k_proj(x)), self._heads(self.v_proj(x))
        if self.rope is not None:
            if token_positions is None:
                token_positions = torch.arange(seq, device=x.device)
            pos = token_positions.unsqueeze(-2)  # (..., 1, seq): the same positions for every head
            q, k = self.rope(q, pos), self.rope(k, pos)
        keep = torch.ones(seq, seq, dtype=torch.bool, device=x.device).tril()
        out = scaled_dot_product_attention(q, k, v, keep)  # (..., heads, seq, d_k)
        return self.output_proj(out.transpose(-3, -2).flatten(-2))


class TransformerBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, max_seq_len, theta, device=None, dtype=None):
        super().__init__()
        self.ln1 = RMSNorm(d_model, device=device, dtype=dtype)
        self.attn = MultiHeadSelfAttention(d_model, num_heads, max_seq_len, theta, device, dtype)
        self.ln2 = RMSNorm(d_model, device=device, dtype=dtype)
        self.ffn = SwiGLU(d_model, d_ff, device, dtype)

    def forward(self, x):
        y = x + self.attn(self.ln1(x))
        return y + self.ffn(self.ln2(y))


class TransformerLM(nn.Module):
    def __init__(self, vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta, device=None,
                 dtype=None):
        super().__init__()
        self.token_embeddings = Embedding(vocab_size, d_model, device, dtype)
        self.layers = nn.ModuleList(TransformerBlock(d_model, num_heads, d_ff, context_length, rope_theta, device,
                                                     dtype) for _ in range(num_layers))
        self.ln_final = RMSNorm(d_model, device=device, dtype=dtype)
        self.lm_head = Linear(d_model, vocab_size, device, dtype)

    def forward(self, in_indices):
        x = self.token_embeddings(in_indices)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.ln_final(x))


def cross_entropy(inputs, targets):
    shifted = inputs - inputs.max(dim=-1, keepdim=True).values
    log_z = torch.log(torch.exp(shifted).sum(-1))
    return (log_z - shifted.gather(-1, targets.unsqueeze(-1)).squeeze(-1)).mean()


def gradient_clipping(parameters, max_l2_norm, eps=1e-6):
    grads = [p.grad for p in parameters if p.grad is not None]
    norm = torch.sqrt(sum((g.detach().float() ** 2).sum() for g in grads)) if grads else torch.tensor(0.0)
    if norm > max_l2_norm:
        for g in grads:
            g.mul_(max_l2_norm / (norm + eps))


class AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None if closure is None else closure()
        for group in self.param_groups:
            lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                t = state.get("t", 0) + 1
                m = state.get("m", torch.zeros_like(p)) * b1 + (1 - b1) * p.grad
                v = state.get("v", torch.zeros_like(p)) * b2 + (1 - b2) * p.grad ** 2
                alpha = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
                p -= alpha * m / (torch.sqrt(v) + eps)  # Algorithm 1: the Adam step, then the decay
                p -= lr * wd * p
                state.update(t=t, m=m, v=v)
        return loss


def get_lr_cosine_schedule(it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters):
    if it < warmup_iters:
        return it / warmup_iters * max_learning_rate
    if it > cosine_cycle_iters:
        return min_learning_rate
    cos = math.cos(math.pi * (it - warmup_iters) / (cosine_cycle_iters - warmup_iters))
    return min_learning_rate + 0.5 * (1 + cos) * (max_learning_rate - min_learning_rate)


def get_batch(dataset, batch_size, context_length, device):
    starts = np.random.randint(0, len(dataset) - context_length, size=batch_size)
    x = np.stack([dataset[s:s + context_length] for s in starts]).astype(np.int64)
    y = np.stack([dataset[s + 1:s + 1 + context_length] for s in starts]).astype(np.int64)
    return torch.tensor(x, device=device), torch.tensor(y, device=device)
