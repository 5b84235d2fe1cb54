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

    def forward_cached(self, tokens, caches):
        """Logits ``(1, vocab)`` of the last position of ``tokens (1, T)`` after the ``len(caches[0])``
        cached positions: either a causal prefill of the whole window (empty caches) or one new token
        at its absolute position in the window, attending to every cached key and itself."""
        start, T = len(caches[0]), tokens.size(1)
        mask = self.causal_mask[:T, :T] if T > 1 else None
        positions = torch.arange(start, start + T, device=tokens.device)  # (T,)
        x = self.token_embeddings(tokens)
        for layer, cache in zip(self.layers, caches, strict=True):
            x, _ = layer(x, mask, positions, kv_cache=cache)
        return self.lm_head(self.ln_final(x[:, -1]))  # (1, vocab)

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
                for _ in range(max_new_tokens):
                    if use_cache and caches is not None and len(tokens) <= self.max_len:
                        step = torch.tensor([[tokens[-1]]], device=device)  # (1, 1)
                        next_logits = self.forward_cached(step, caches)[0]
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
