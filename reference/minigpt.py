"""MiniGPT: a decoder-only Transformer language model (seed 000 step 7).

    logits = lm_head(final_norm(blocks(pos_encoding(token_embed(tokens) * sqrt(d_model)))))

with a causal mask in every block and ``lm_head.weight`` tied to ``token_embed.weight``.
"""

from __future__ import annotations

import math
import numbers

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._validation import check_dropout, check_heads, check_positive_int, check_seed_tokens, check_tokens
from .blocks import TransformerEncoderBlock
from .init import init_weights
from .kv_cache import KVCache, step_weights
from .position import SinusoidalPositionEncoding


class MiniGPT(nn.Module):
    """Token embedding + sinusoidal positions, ``num_layers`` Pre-LN blocks, LayerNorm, LM head."""

    def __init__(self, vocab_size, d_model=128, num_heads=4, num_layers=4, d_ff=512,
                 max_len=128, dropout=0.1):
        super().__init__()
        check_positive_int("vocab_size", vocab_size)
        check_heads(d_model, num_heads)
        check_positive_int("num_layers", num_layers)
        check_positive_int("d_ff", d_ff)
        check_positive_int("max_len", max_len)
        check_dropout(dropout)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.max_len = max_len
        self.token_embed = nn.Embedding(vocab_size, d_model)
        self.pos_encoding = SinusoidalPositionEncoding(d_model, max_len)
        self.blocks = nn.ModuleList(
            [TransformerEncoderBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)]
        )
        self.final_norm = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.apply(init_weights)
        # Weight tying: one (vocab, D) matrix both embeds tokens and scores them.
        self.lm_head.weight = self.token_embed.weight
        # Built once for max_len and cropped per call, True above the diagonal = blocked.
        self.register_buffer(
            "causal_mask", torch.triu(torch.ones(max_len, max_len, dtype=torch.bool), diagonal=1)
        )

    def forward(self, tokens, return_attn=False):
        """``tokens (B, L) long`` -> ``(logits (B, L, vocab), attn_maps)``.

        ``attn_maps`` is a list of ``num_layers`` tensors ``(B, H, L, L)`` when
        ``return_attn=True``, else ``None``.
        """
        check_tokens("tokens", tokens, self.vocab_size, self.max_len)
        ### BEGIN SOLUTION
        L = tokens.size(1)
        mask = self.causal_mask[:L, :L]  # (L, L), broadcasts to (B, H, L, L)
        x = self.token_embed(tokens) * math.sqrt(self.d_model)  # (B, L, D)
        x = self.pos_encoding(x)
        attn_maps = []
        for block in self.blocks:
            x, weights = block(x, mask)
            attn_maps.append(weights)  # (B, H, L, L)
        logits = self.lm_head(self.final_norm(x))  # (B, L, vocab)
        return logits, (attn_maps if return_attn else None)
        ### END SOLUTION

    def forward_cached(self, tokens, caches):
        """Logits of the last position of ``tokens (1, T)`` given ``caches`` of the earlier ones.

        ``caches`` is a list of one :class:`KVCache` per block holding the keys and values of
        the ``len(caches[0])`` positions before ``tokens``. Either the caches are empty and
        ``tokens`` is the whole window (a causal prefill), or ``tokens`` is one new token that
        attends to all cached positions and itself (no mask needed). Returns ``(1, vocab)``.
        """
        start = len(caches[0])
        T = tokens.size(1)
        mask = self.causal_mask[:T, :T] if T > 1 else None  # T > 1 only when start == 0
        x = self.pos_encoding(self.token_embed(tokens) * math.sqrt(self.d_model), start)  # (1, T, D)
        for block, cache in zip(self.blocks, caches, strict=True):
            x, _ = block(x, mask, kv_cache=cache)
        return self.lm_head(self.final_norm(x[:, -1]))  # (1, vocab)

    def forward_step(self, token, caches, weights):
        """``forward_cached`` for one new ``token`` (an int) after the ``len(caches[0])`` cached
        positions, written for a single position: ``(1, vocab)`` logits.

        The same arithmetic in fewer operations: the three projections in one matrix-vector
        product with ``1/sqrt(d_k)`` folded into ``W_Q``, no mask (one query sees every cached key
        and itself), no dropout (``generate`` runs in eval mode), no argument checks, and each
        block's tensors read from ``weights`` (one :func:`.kv_cache.step_weights` per block).
        """
        D, position = self.d_model, len(caches[0])
        x = torch.add(self.pos_encoding.pe[0, position], self.token_embed.weight[token], alpha=math.sqrt(D))  # (D,)
        for cache, (norm1, w_qkv, H, d_k, w_o, norm2, w_1, b_1, w_2, b_2) in zip(caches, weights, strict=True):
            h = F.layer_norm(x, (D,), *norm1)
            q, k, v = torch.mv(w_qkv, h).view(3, 1, H, 1, d_k).unbind(0)  # (1, H, 1, d_k) each
            K, V = cache.extend(k, v)  # (1, H, T, d_k)
            attn = torch.softmax(torch.bmm(q[0], K[0].transpose(1, 2)), dim=-1)  # (H, 1, T)
            heads = torch.bmm(attn, V[0]).view(D)  # (H, 1, d_k) -> (D,): the heads concatenated
            x = torch.addmv(x, w_o, heads)  # x + W_O heads
            h = F.layer_norm(x, (D,), *norm2)
            x = x + torch.addmv(b_2, w_2, F.gelu(torch.addmv(b_1, w_1, h)))  # x + FFN(h)
        norm = self.final_norm
        return self.lm_head(F.layer_norm(x, (D,), norm.weight, norm.bias, norm.eps).view(1, D))  # (1, vocab)

    def generate(self, seed_tokens, max_new_tokens=50, temperature=0.8, top_k=None, generator=None,
                 use_cache=True):
        """Sample ``max_new_tokens`` tokens one at a time after ``seed_tokens``.

        Each step feeds the last ``max_len`` tokens, takes the logits of the last position,
        divides them by ``temperature`` (``0`` = greedy argmax), keeps the ``top_k`` most likely
        if given, and samples from ``softmax`` with ``generator``. Runs under ``no_grad`` in eval
        mode and restores the previous train/eval mode. Returns a list of ints: the seed tokens
        followed by the new ones.

        ``use_cache=True`` (not part of the contract) keeps each layer's keys and values between
        steps, so a step costs one position instead of the whole window (:meth:`forward_step`). Positions are absolute
        (sinusoidal), so once the sequence outgrows ``max_len`` and the window slides, every
        cached key is stale: each such step recomputes its window, exactly as ``use_cache=False``.
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
        caches = None
        self.eval()
        device = self.token_embed.weight.device
        try:
            # inference_mode is no_grad that also skips autograd's version counters and view
            # tracking: ~10% of a cached step, whose cost is per-op overhead, not arithmetic.
            # Nothing made inside escapes (the result is a list of ints).
            with torch.inference_mode():
                for _ in range(max_new_tokens):
                    if not use_cache:
                        window = torch.tensor([tokens[-self.max_len:]], device=device)  # (1, <=max_len)
                        next_logits = self(window)[0][0, -1]  # (vocab,)
                    elif caches is not None and len(tokens) <= self.max_len:
                        next_logits = self.forward_step(tokens[-1], caches, weights)[0]
                    else:  # first step, or the window slid: prefill the caches from the window
                        caches = [KVCache(self.max_len) for _ in self.blocks]
                        weights = [step_weights(block) for block in self.blocks]
                        window = torch.tensor([tokens[-self.max_len:]], device=device)
                        next_logits = self.forward_cached(window, caches)[0]
                    next_logits = next_logits.float()
                    if temperature == 0:
                        next_token = int(next_logits.argmax())
                    else:
                        next_logits = next_logits / temperature
                        if top_k is not None and top_k < next_logits.numel():
                            kth_best = torch.topk(next_logits, top_k).values[-1]
                            next_logits = next_logits.masked_fill(next_logits < kth_best, float("-inf"))
                        probs = F.softmax(next_logits, dim=-1)
                        next_token = int(torch.multinomial(probs, 1, generator=generator))
                    tokens.append(next_token)
        finally:
            self.train(was_training)
        return tokens
        ### END SOLUTION
