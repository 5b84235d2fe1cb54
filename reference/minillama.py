"""MiniLlama: a Llama-style decoder-only language model (Touvron et al. 2023; CS336 assignment 1).

    logits = lm_head(RMSNorm(LlamaBlock_N(... LlamaBlock_1(token_embeddings(tokens)))))

No position table and no embedding scale: every block rotates its queries and keys by the
positions ``0 .. L-1`` (RoPE), under the causal mask. ``d_ff=None`` is SwiGLU's usual width,
about ``8/3 d_model`` rounded up to a multiple of 64. ``tie_weights=True`` makes ``lm_head.weight``
the same tensor as ``token_embeddings.weight``.
"""

from __future__ import annotations

import math
import numbers

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._validation import (
    check_heads,
    check_positive_float,
    check_positive_int,
    check_seed_tokens,
    check_tokens,
)
from .init import init_weights
from .kv_cache import KVCache
from .llama_block import LlamaBlock
from .rmsnorm import RMSNorm


def swiglu_width(d_model: int) -> int:
    """``64 * ceil(8 * d_model / 3 / 64)``: the contract's ``d_ff`` when none is given."""
    return 64 * math.ceil(8 * d_model / 3 / 64)


class MiniLlama(nn.Module):
    """``token_embeddings``, ``layers`` (``LlamaBlock``), ``ln_final`` (``RMSNorm``), ``lm_head``."""

    def __init__(self, vocab_size, d_model=64, num_layers=2, num_heads=4, num_kv_heads=None, d_ff=None,
                 max_len=128, theta=10000.0, eps=1e-5, tie_weights=False):
        super().__init__()
        check_positive_int("vocab_size", vocab_size)
        check_heads(d_model, num_heads)
        check_positive_int("num_layers", num_layers)
        if d_ff is None:
            d_ff = swiglu_width(d_model)
        check_positive_int("d_ff", d_ff)
        check_positive_int("max_len", max_len)
        check_positive_float("theta", theta)
        check_positive_float("eps", eps)
        self.vocab_size, self.d_model, self.max_len = vocab_size, d_model, max_len
        self.token_embeddings = nn.Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList([
            LlamaBlock(d_model, num_heads, d_ff, num_kv_heads, max_len, theta, eps) for _ in range(num_layers)
        ])
        self.ln_final = RMSNorm(d_model, eps)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.apply(init_weights)
        if tie_weights:
            self.lm_head.weight = self.token_embeddings.weight
        self.register_buffer(
            "causal_mask", torch.triu(torch.ones(max_len, max_len, dtype=torch.bool), diagonal=1), persistent=False
        )

    def forward(self, tokens, return_attn=False):
        """``tokens (B, L) long`` -> ``(logits (B, L, vocab), attn_maps)``: a list of ``num_layers``
        tensors ``(B, num_heads, L, L)`` when ``return_attn=True``, else ``None``."""
        check_tokens("tokens", tokens, self.vocab_size, self.max_len)
        ### BEGIN SOLUTION
        L = tokens.size(1)
        mask = self.causal_mask[:L, :L]  # (L, L), True above the diagonal = blocked
        positions = torch.arange(L, device=tokens.device)  # (L,)
        x = self.token_embeddings(tokens)  # (B, L, D), not scaled
        attn_maps = []
        for layer in self.layers:
            x, weights = layer(x, mask, positions)
            attn_maps.append(weights)  # (B, H, L, L)
        logits = self.lm_head(self.ln_final(x))  # (B, L, vocab)
        return logits, (attn_maps if return_attn else None)
        ### END SOLUTION

    def forward_cached(self, tokens, caches, step=None):
        """Logits ``(1, vocab)`` of the last position of ``tokens (1, T)`` after the ``len(caches[0])``
        cached positions: either a causal prefill of the whole window (empty caches) or one new token
        at its absolute position in the window, attending to every cached key and itself. ``step``
        (:meth:`step_weights`): one new token goes through :meth:`_step`, not the modules."""
        start, T = len(caches[0]), tokens.size(1)
        mask = self.causal_mask[:T, :T] if T > 1 else None
        positions = torch.arange(start, start + T, device=tokens.device)  # (T,)
        x = self.token_embeddings(tokens)
        if step is not None and T == 1:
            return self.lm_head(self.ln_final(self._step(x[0], positions, caches, step)))  # (1, vocab)
        for layer, cache in zip(self.layers, caches, strict=True):
            x, _ = layer(x, mask, positions, kv_cache=cache)
        return self.lm_head(self.ln_final(x[:, -1]))  # (1, vocab)

    def step_weights(self):
        """Each layer's tensors for :meth:`_step`, gathered once per ``generate`` call: the RMSNorm
        weights and eps, ``q_proj / sqrt(head_dim)``, ``k_proj`` and ``v_proj`` stacked into one matrix, ``output_proj``,
        SwiGLU's ``w1`` and ``w3`` stacked, ``w2`` (the contract's parameters, fused: a step then makes
        4 matrix products a layer instead of 7, and no module calls)."""
        out = []
        for layer in self.layers:
            attn, ffn = layer.attn, layer.ffn
            out.append((layer.ln1.weight, layer.ln1.eps,  # q_proj / sqrt(d): the scores come out scaled
                        torch.cat([attn.q_proj.weight / math.sqrt(attn.head_dim), attn.k_proj.weight,
                                   attn.v_proj.weight]),  # (D + 2 KV d, D)
                        attn.output_proj.weight, layer.ln2.weight, layer.ln2.eps,
                        torch.cat([ffn.w1.weight, ffn.w3.weight]), ffn.w2.weight))  # (2 d_ff, D), (D, d_ff)
        return out

    def _step(self, x, positions, caches, weights):
        """One new token ``x (1, D)`` at ``positions (1,)`` through every layer, as ``LlamaBlock`` computes
        it (RMSNorm, rotated grouped-query attention over the cache, SwiGLU), in fused arithmetic."""
        attn = self.layers[0].attn
        H, KV, d, D = attn.num_heads, attn.num_kv_heads, attn.head_dim, self.d_model
        cos = attn.rope.cos[positions].to(x.dtype)  # (1, d/2), the rotation of this position
        sin = attn.rope.sin[positions].to(x.dtype)

        def norm(x, weight, eps):  # RMSNorm, in float32 at least
            h = x.to(torch.promote_types(x.dtype, torch.float32))
            return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * weight.to(h.dtype)).to(x.dtype)

        def rotate(v):  # (..., 1, d): the pairs (v[2i], v[2i+1]) rotated
            a, b = v[..., 0::2], v[..., 1::2]
            return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)

        for (n1, eps1, w_qkv, w_o, n2, eps2, w13, w2), cache in zip(weights, caches, strict=True):
            qk, v = F.linear(norm(x, n1, eps1), w_qkv).split([D + KV * d, KV * d], dim=-1)
            qk = rotate(qk.view(H + KV, 1, d))  # the H query heads, then the KV key heads, rotated at once
            q = qk[:H].view(KV, H // KV, 1, d)  # (KV, group, 1, d): query head h in group h // (H/KV)
            keys, values = cache.extend(qk[H:].view(1, KV, 1, d), v.view(1, KV, 1, d))  # (1, KV, T, d)
            scores = q @ keys[0, :, None].transpose(-2, -1)  # (KV, group, 1, T), scaled through w_qkv
            out = torch.softmax(scores, dim=-1) @ values[0, :, None]  # (KV, group, 1, d)
            x = x + F.linear(out.reshape(1, D), w_o)  # heads concatenated in order
            gate, up = F.linear(norm(x, n2, eps2), w13).chunk(2, dim=-1)  # (1, d_ff) each
            x = x + F.linear(F.silu(gate) * up, w2)
        return x  # (1, D)

    def generate(self, seed_tokens, max_new_tokens=50, temperature=0.8, top_k=None, generator=None,
                 use_cache=True):
        """``MiniGPT.generate``'s contract: the last ``max_len`` tokens are the window (positions
        ``0 .. len(window) - 1``), ``temperature=0`` is greedy, ``top_k`` keeps the best ``top_k``,
        sampling draws from ``generator``, eval mode during the call and the caller's mode after.

        ``use_cache=True`` (not in the contract) keeps each layer's rotated keys and values; a new
        token is rotated at its absolute position in the window. Once the sequence outgrows
        ``max_len`` the window slides, every position shifts, and the step recomputes the window.
        """
        tokens = check_seed_tokens(seed_tokens, self.vocab_size)
        check_positive_int("max_new_tokens", max_new_tokens)
        if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) or temperature < 0:
            raise ValueError(f"temperature must be a float >= 0 (0 = greedy), got temperature={temperature!r}")
        if top_k is not None:
            check_positive_int("top_k", top_k)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
        ### BEGIN SOLUTION
        was_training = self.training
        self.eval()
        device = self.token_embeddings.weight.device
        caches = None
        try:
            with torch.inference_mode():
                weights = self.step_weights() if use_cache else None
                for _ in range(max_new_tokens):
                    if use_cache and caches is not None and len(tokens) <= self.max_len:
                        step = torch.tensor([[tokens[-1]]], device=device)  # (1, 1)
                        next_logits = self.forward_cached(step, caches, weights)[0]
                    elif use_cache:  # first step, or the window slid: prefill from the window
                        caches = [KVCache(self.max_len) for _ in self.layers]
                        window = torch.tensor([tokens[-self.max_len:]], device=device)
                        next_logits = self.forward_cached(window, caches)[0]
                    else:
                        window = torch.tensor([tokens[-self.max_len:]], device=device)  # (1, <= max_len)
                        next_logits = self(window)[0][0, -1]  # (vocab,)
                    tokens.append(_sample(next_logits.float(), temperature, top_k, generator))
        finally:
            self.train(was_training)
        return tokens
        ### END SOLUTION


def _sample(logits, temperature, top_k, generator) -> int:
    """One token from ``logits (vocab,)``: the argmax at temperature 0, else a draw from
    ``softmax(logits / temperature)`` restricted to the ``top_k`` best."""
    if temperature == 0:
        return int(logits.argmax())
    logits = logits / temperature
    if top_k is not None and top_k < logits.numel():
        kth_best = torch.topk(logits, top_k).values[-1]
        logits = logits.masked_fill(logits < kth_best, float("-inf"))
    return int(torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator))
