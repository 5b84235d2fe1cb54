"""The ``cs336`` profile: Stanford CS336's assignment 1, reached through a student's filled-in
``tests/adapters.py``, graded by the modern track's laws.

The handout's conventions are the modern track's (adjacent pairs rotated, RMSNorm's eps inside the
root, SwiGLU's ``w1``, ``w2``, ``w3``, bias-free projections, ``token_positions``), and its state-dict
names are the contract's (``attn.q_proj.weight``, ``ffn.w1.weight``, ``ln1.weight``,
``token_embeddings.weight``, ``layers.{i}....``, ``ln_final.weight``, ``lm_head.weight``). What it
cannot express is :data:`LACKS`: its attention returns no weights and takes no scale, its masks mean
*keep* (the profile passes ``~mask``), its multi-head attention is always causal and has as many
key/value heads as query heads, its block takes no eps and no positions, it has no ``generate``, and
its functions take the weights as arguments (the modules here hold them, so their parameters and
constructor checks are the profile's, not the student's), and its modules are float32 (the handout's
tests run in float32; a float64 input meets float32 weights).

Each module below holds the contract's parameters and, in ``forward``, calls the adapter function
of the same concept with them; nothing here computes a result itself. Only the function names and
signatures of CS336's public handout are used (``run_rmsnorm(d_model, eps, weights, in_features)``
and so on), never its tests or fixtures.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import ModuleType

import torch
import torch.nn as nn

from transformer_spec.profiles import InputRank, Profile, calls, contract_module, lifted

LACKS = frozenset({"weights", "scale", "blocked_rows", "mask", "non_causal", "gqa", "block_positions", "eps",
                   "parameters", "names", "default_positions", "float64", "errors", "causal_mask", "generate",
                   "submodules"})

#: the adapter functions the profile calls, by the component each one is graded in (what a student's
#: feedback names beside the component)
FUNCTIONS = {
    "attention": ("run_scaled_dot_product_attention",),
    "rmsnorm": ("run_rmsnorm",),
    "rotary": ("run_rope",),
    "swiglu": ("run_swiglu",),
    "gqa": ("run_multihead_self_attention", "run_multihead_self_attention_with_rope"),
    "llama_block": ("run_transformer_block",),
    "minillama": ("run_transformer_lm",),
    "softmax": ("run_softmax",),
    "cross_entropy": ("run_cross_entropy",),
    "grad_clip": ("run_gradient_clipping",),
    "adamw": ("get_adamw_cls",),
    "lr_schedule": ("run_get_lr_cosine_schedule",),
    "get_batch": ("run_get_batch",),
}

DEFAULT_EPS = 1e-5  # the handout's RMSNorm eps, the one its block and model use

#: What the handout's text fixes of its functions' inputs (the CS336 spring 2025 handout of assignment 1,
#: quoted): the laws draw 1-D to 4-D inputs for the contract, and the profile gives these functions only
#: the ranks promised them (:func:`transformer_spec.profiles.lifted`). The other functions take "..." in
#: the handout (any leading dimensions: RoPE, SwiGLU, multi-head attention, softmax, cross-entropy).
RANKS = {
    "run_rmsnorm": InputRank(3, 3, "def forward(self, x: torch.Tensor) -> torch.Tensor Process an input tensor of "
                                   "shape (batch_size, sequence_length, d_model) and return a tensor of the same "
                                   "shape.", "§3.5.1, Problem (rmsnorm)"),
    "run_scaled_dot_product_attention": InputRank(
        3, None, "Your implementation should handle keys and queries of shape (batch_size, ..., seq_len, d_k) and "
                 "values of shape (batch_size, ..., seq_len, d_v), where ... represents any number of other "
                 "batch-like dimensions (if provided).", "§3.5.4, Problem (scaled_dot_product_attention)"),
    "run_transformer_block": InputRank(3, 3, "Each Transformer block takes in an input of shape (batch_size, "
                                             "sequence_length, d_model)", "§3.1.2"),
    "run_transformer_lm": InputRank(2, 2, "Each embedding layer takes in a tensor of integers of shape (batch_size, "
                                          "sequence_length)", "§3.1.1"),
}


class NotExpressible(Exception):
    """The test asked for something the course's API cannot express: the test lacks a ``needs``
    marker (a bug of the suite, never the student's)."""


class _NoWeights:
    """What stands for the attention weights the course's functions do not return."""

    def __getattr__(self, name):
        raise NotExpressible("the cs336 profile's attention returns no weights (the test needs 'weights')")

    def __repr__(self):
        return "<no attention weights: the cs336 profile's attention returns the output only>"


NO_WEIGHTS = _NoWeights()


def _causal(L: int, device=None) -> torch.Tensor:
    return torch.triu(torch.ones(L, L, dtype=torch.bool, device=device), diagonal=1)  # True = blocked


def _only_causal(mask, L: int, what: str) -> None:
    """The course's attention is causal: ``mask`` must be the causal mask (in any broadcast shape)."""
    if mask is None:
        raise NotExpressible(f"{what} without a mask is not expressible in cs336 (always causal; needs 'non_causal')")
    stacked = mask.reshape(-1, *mask.shape[-2:]) if mask.dim() >= 2 else None
    if stacked is None or tuple(stacked.shape[-2:]) != (L, L) or not bool((stacked.cpu() == _causal(L)).all()):
        raise NotExpressible(f"{what} with a mask other than the causal one is not expressible in cs336 (needs 'mask')")


def _arange_positions(positions, L: int, what: str):
    if positions is not None and not torch.equal(positions.expand(*positions.shape[:-1], L).reshape(-1, L).cpu(),
                                                 torch.arange(L).expand(positions.numel() // L, L)):
        raise NotExpressible(f"{what} with positions other than 0 .. L-1 is not expressible in cs336 "
                             f"(needs 'block_positions')")


def build(api: ModuleType) -> ModuleType:
    """The contract's modern-track names, each calling ``api``'s adapter function (a student's
    ``tests/adapters.py``; every call kept for the failure messages, :mod:`.calls`)."""
    course, api = api, calls.recording(api)

    class RMSNorm(nn.Module):
        def __init__(self, d_model, eps=DEFAULT_EPS):
            super().__init__()
            self.d_model, self.eps = d_model, eps
            self.weight = nn.Parameter(torch.ones(d_model))

        def forward(self, x):
            (x,), lower = lifted(RANKS["run_rmsnorm"], x)
            return lower(api.run_rmsnorm(self.d_model, self.eps, self.weight.to(x.dtype), x))

    class RotaryPositionEmbedding(nn.Module):
        def __init__(self, head_dim, max_len, theta=10000.0):
            super().__init__()
            self.head_dim, self.max_len, self.theta = head_dim, max_len, theta

        def forward(self, x, positions=None):
            if positions is None:
                positions = torch.arange(x.size(-2), device=x.device)
            return api.run_rope(self.head_dim, self.theta, self.max_len, x, positions)

    class SwiGLU(nn.Module):
        def __init__(self, d_model, d_ff):
            super().__init__()
            self.d_model, self.d_ff = d_model, d_ff
            self.w1 = nn.Linear(d_model, d_ff, bias=False)
            self.w2 = nn.Linear(d_ff, d_model, bias=False)
            self.w3 = nn.Linear(d_model, d_ff, bias=False)

        def forward(self, x):
            w = [m.weight.to(x.dtype) for m in (self.w1, self.w2, self.w3)]
            return api.run_swiglu(self.d_model, self.d_ff, *w, x)

    def scaled_dot_product_attention(q, k, v, mask=None, scale=None):
        if scale is not None and not math.isclose(scale, 1 / math.sqrt(q.size(-1))):
            raise NotExpressible("cs336's attention takes no scale (needs 'scale')")
        keep = None if mask is None else ~mask.expand(*q.shape[:-1], k.size(-2))  # cs336: True = keep
        rank = RANKS["run_scaled_dot_product_attention"]
        if keep is None:
            (q, k, v), lower = lifted(rank, q, k, v)
        else:
            (q, k, v, keep), lower = lifted(rank, q, k, v, keep)
        return lower(api.run_scaled_dot_product_attention(q, k, v, keep)), NO_WEIGHTS

    def causal_mask(L, device=None):
        return _causal(L, device)

    class GroupedQueryAttention(nn.Module):
        def __init__(self, d_model, num_heads, num_kv_heads=None, rope=None):
            super().__init__()
            if num_kv_heads not in (None, num_heads):
                raise NotExpressible("cs336's attention has as many key/value heads as query heads (needs 'gqa')")
            self.d_model, self.num_heads, self.num_kv_heads = d_model, num_heads, num_heads
            self.head_dim = d_model // num_heads
            for name in ("q_proj", "k_proj", "v_proj", "output_proj"):
                setattr(self, name, nn.Linear(d_model, d_model, bias=False))
            self.rope = rope

        def _weights(self, dtype):
            return [getattr(self, n).weight.to(dtype) for n in ("q_proj", "k_proj", "v_proj", "output_proj")]

        def forward(self, x, mask=None, positions=None):
            _only_causal(mask, x.size(1), "multi-head attention")
            if self.rope is None:
                out = api.run_multihead_self_attention(self.d_model, self.num_heads, *self._weights(x.dtype), x)
            else:
                if positions is None:
                    positions = torch.arange(x.size(1), device=x.device)
                out = api.run_multihead_self_attention_with_rope(
                    self.d_model, self.num_heads, self.rope.max_len, self.rope.theta, *self._weights(x.dtype), x,
                    positions)
            return out, NO_WEIGHTS

    class LlamaBlock(nn.Module):
        def __init__(self, d_model, num_heads, d_ff, num_kv_heads=None, max_len=2048, theta=10000.0,
                     eps=DEFAULT_EPS):
            super().__init__()
            if eps != DEFAULT_EPS:
                raise NotExpressible(f"cs336's block takes no eps (it uses {DEFAULT_EPS}; needs 'eps')")
            self.d_model, self.num_heads, self.d_ff, self.max_len, self.theta = d_model, num_heads, d_ff, max_len, theta
            self.ln1, self.ln2 = RMSNorm(d_model, eps), RMSNorm(d_model, eps)
            self.attn = GroupedQueryAttention(d_model, num_heads, num_kv_heads,
                                              rope=RotaryPositionEmbedding(d_model // num_heads, max_len, theta))
            self.ffn = SwiGLU(d_model, d_ff)

        def forward(self, x, mask=None, positions=None):
            _only_causal(mask, x.size(1), "a block")
            _arange_positions(positions, x.size(1), "a block")
            weights = {k: v.to(x.dtype) for k, v in self.state_dict().items()}
            (x,), lower = lifted(RANKS["run_transformer_block"], x)
            out = api.run_transformer_block(self.d_model, self.num_heads, self.d_ff, self.max_len, self.theta,
                                            weights, x)
            return lower(out), NO_WEIGHTS

    class MiniLlama(nn.Module):
        def __init__(self, vocab_size, d_model=64, num_layers=2, num_heads=4, num_kv_heads=None, d_ff=None,
                     max_len=128, theta=10000.0, eps=DEFAULT_EPS, tie_weights=False):
            super().__init__()
            if eps != DEFAULT_EPS:
                raise NotExpressible(f"cs336's model takes no eps (it uses {DEFAULT_EPS}; needs 'eps')")
            if d_ff is None:
                d_ff = 64 * math.ceil(8 * d_model / 3 / 64)
            self.sizes = dict(vocab_size=vocab_size, context_length=max_len, d_model=d_model, num_layers=num_layers,
                              num_heads=num_heads, d_ff=d_ff, rope_theta=theta)
            self.vocab_size, self.d_model, self.max_len = vocab_size, d_model, max_len
            self.token_embeddings = nn.Embedding(vocab_size, d_model)
            self.layers = nn.ModuleList([LlamaBlock(d_model, num_heads, d_ff, num_kv_heads, max_len, theta, eps)
                                         for _ in range(num_layers)])
            self.ln_final = RMSNorm(d_model, eps)
            self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
            if tie_weights:
                self.lm_head.weight = self.token_embeddings.weight

        def forward(self, tokens, return_attn=False):
            dtype = self.lm_head.weight.dtype
            weights = {k: v.to(dtype) for k, v in self.state_dict().items()}
            weights["lm_head.weight"] = self.lm_head.weight.to(dtype)  # present when tied as well
            (tokens,), lower = lifted(RANKS["run_transformer_lm"], tokens)
            logits = lower(api.run_transformer_lm(**self.sizes, weights=weights, in_indices=tokens))
            return logits, ([NO_WEIGHTS] * len(self.layers) if return_attn else None)

        def generate(self, *args, **kwargs):
            raise NotExpressible("cs336 has no generate (needs 'generate')")

    # the training utilities: each the adapter function of the same concept, called with the contract's arguments
    def softmax(x, dim):
        return api.run_softmax(x, dim)

    def cross_entropy(logits, targets):
        return api.run_cross_entropy(logits, targets)

    def clip_grad_norm(parameters, max_norm):
        return api.run_gradient_clipping(parameters, max_norm)

    def AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):  # noqa: N802 - the contract's name
        return api.get_adamw_cls()(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)

    def cosine_lr(t, lr_max, lr_min, warmup_iters, cosine_cycle_iters):
        return api.run_get_lr_cosine_schedule(t, lr_max, lr_min, warmup_iters, cosine_cycle_iters)

    def get_batch(data, batch_size, context_length, device):
        return api.run_get_batch(data, batch_size, context_length, device)

    names = dict(RMSNorm=RMSNorm, RotaryPositionEmbedding=RotaryPositionEmbedding, SwiGLU=SwiGLU,
                 scaled_dot_product_attention=scaled_dot_product_attention, causal_mask=causal_mask,
                 GroupedQueryAttention=GroupedQueryAttention, LlamaBlock=LlamaBlock, MiniLlama=MiniLlama,
                 softmax=softmax, cross_entropy=cross_entropy, clip_grad_norm=clip_grad_norm, AdamW=AdamW,
                 cosine_lr=cosine_lr, get_batch=get_batch)
    return contract_module(names, course, "cs336")


PROFILE = Profile(
    "cs336", "Stanford CS336 assignment 1: a student's repository, reached through its tests/adapters.py",
    track="modern", lacks=LACKS, adapter="tests/adapters.py", build=build,
    rubric=Path(__file__).resolve().parent.parent / "rubric_cs336.toml", functions=FUNCTIONS, ranks=RANKS)
