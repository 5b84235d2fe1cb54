"""An independent implementation of the contract's modern track (``docs/contract.md``, v1).

Written from the contract text only (section "The modern track"), in a style that deliberately
differs from ``reference/`` while staying inside the contract's free choices:

* ``scaled_dot_product_attention`` uses a hand-written, stable softmax whose masking is done
  with ``torch.where`` (no ``-inf`` ever reaches ``exp``), einsum for both products;
* the rotary embedding works with complex numbers (``torch.polar`` / ``view_as_complex``) and
  computes its angles per call in float64 (no tables, no buffers);
* RMSNorm divides by ``sqrt`` instead of multiplying by ``rsqrt``;
* grouped-query attention expands keys/values with ``expand`` + ``reshape``;
* every projection is applied through ``F.linear`` with the weight cast to the input's dtype,
  so a float32 module also runs float64 input in float64;
* ``MiniLlama.generate`` has no KV cache: it re-runs the whole window every step, runs under
  ``torch.inference_mode`` and samples by inverse CDF from one uniform draw of ``generator``.

The optional training utilities (section "The modern track's training utilities") take the
other side of each free choice where there is one: softmax and cross-entropy through
``logsumexp`` (no max subtraction), the gradient norm as a float64 sum of squares with no ``eps``
in the clipping factor, AdamW's decoupled decay applied *after* the Adam step (CS336's
Algorithm 1) with state created lazily under its own names, ``get_batch`` drawing from torch's
global generator and gathering rows with one index matrix.

There is no dropout anywhere (the track has none).
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = [
    "scaled_dot_product_attention", "causal_mask",
    "RMSNorm", "RotaryPositionEmbedding", "SwiGLU", "GroupedQueryAttention",
    "LlamaBlock", "MiniLlama",
    "softmax", "cross_entropy", "clip_grad_norm", "AdamW", "cosine_lr", "get_batch",
]


# ============================================================================================
# argument checks (each error names the argument identifier)
# ============================================================================================

def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a positive int, got {value!r} ({type(value).__name__})")
    if int(value) <= 0:
        raise ValueError(f"{name} must be a positive int, got {name}={value!r}")
    return int(value)


def _optional_positive_int(name, value):
    return None if value is None else _positive_int(name, value)


def _positive_number(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a positive number, got {value!r} ({type(value).__name__})")
    value = float(value)
    if not (value > 0.0) or math.isinf(value):  # rejects 0, negatives, NaN and inf
        raise ValueError(f"{name} must be a positive (finite) number, got {name}={value!r}")
    return value


def _float_tensor(name, value, ndim=None, min_ndim=None):
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if not value.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {value.dtype}")
    if ndim is not None and value.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(value.shape)}")
    if min_ndim is not None and value.dim() < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimensions, "
                         f"got shape {tuple(value.shape)}")
    return value


def _features(name, value, size, size_name="d_model"):
    if value.shape[-1] != size:
        raise ValueError(f"the last dimension of {name} must be {size_name}={size}, "
                         f"got shape {tuple(value.shape)}")


def _is_integer_dtype(t):
    return not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)


def _linear(layer, x):
    """``layer(x)`` for a bias-free ``nn.Linear``, computed in ``x``'s dtype."""
    return F.linear(x, layer.weight.to(dtype=x.dtype))


# ============================================================================================
# functions
# ============================================================================================

def scaled_dot_product_attention(q, k, v, mask=None, scale=None):
    """weights = softmax(q kᵀ · scale) over the keys (blocked keys get exactly 0), out = weights v.

    ``mask`` is bool with True = blocked, broadcastable to the scores ``(..., Lq, Lk)``; a row
    whose keys are all blocked gets zero weights, a zero output and zero gradients.
    ``scale=None`` means ``1 / sqrt(d_k)``.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        _float_tensor(name, t, min_ndim=2)
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise TypeError(f"{name} has dtype {t.dtype}, q has {q.dtype}: they must agree")
    if k.shape[-1] != q.shape[-1]:
        raise ValueError(f"q and k must have the same d_k (last dimension), "
                         f"got q {tuple(q.shape)} and k {tuple(k.shape)}")
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(f"k and v must have the same length Lk, "
                         f"got k {tuple(k.shape)} and v {tuple(v.shape)}")
    try:
        batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(f"the batch dimensions of q {tuple(q.shape)}, k {tuple(k.shape)} "
                         f"and v {tuple(v.shape)} do not broadcast") from None

    if scale is None:
        factor = 1.0 / math.sqrt(q.shape[-1])
    elif isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"scale must be None or a number, got {type(scale).__name__}")
    else:
        factor = float(scale)

    scores = torch.einsum("...qd,...kd->...qk", q, k) * factor
    scores_shape = torch.Size(tuple(batch) + (q.shape[-2], k.shape[-2]))

    if mask is None:
        blocked = torch.zeros((), dtype=torch.bool, device=scores.device)
    else:
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            raise TypeError("mask must be a bool torch.Tensor (True = blocked) or None, got "
                            + (str(mask.dtype) if isinstance(mask, torch.Tensor)
                               else type(mask).__name__))
        try:
            ok = torch.broadcast_shapes(mask.shape, scores_shape) == scores_shape
        except RuntimeError:
            ok = False
        if not ok:
            raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to the "
                             f"scores' shape {tuple(scores_shape)}")
        blocked = mask.to(scores.device)

    # Stable softmax by hand.  The shift is the largest *allowed* score (it cancels, so it is
    # detached); blocked entries are replaced by 0 before exp and by 0 after it, so neither
    # the forward nor the backward pass ever sees inf or NaN, even in fully blocked rows.
    zero = torch.zeros((), dtype=scores.dtype, device=scores.device)
    neg_inf = torch.full((), float("-inf"), dtype=scores.dtype, device=scores.device)
    shift = torch.where(blocked, neg_inf, scores).amax(dim=-1, keepdim=True).detach()
    shift = torch.where(torch.isfinite(shift), shift, zero)
    exps = torch.where(blocked, zero, torch.exp(torch.where(blocked, zero, scores - shift)))
    total = exps.sum(dim=-1, keepdim=True)
    weights = exps / torch.where(total > 0, total, torch.ones_like(total))

    output = torch.einsum("...qk,...kd->...qd", weights, v)
    return output, weights


def causal_mask(seq_len, device=None):
    """Bool ``(seq_len, seq_len)``: entry ``(i, j)`` is True (blocked) exactly when ``j > i``."""
    seq_len = _positive_int("seq_len", seq_len)
    idx = torch.arange(seq_len, device=device)
    return idx.unsqueeze(0) > idx.unsqueeze(1)


# ============================================================================================
# modules
# ============================================================================================

class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x², last dim) + eps) · weight   (Zhang & Sennrich 2019).

    ``eps`` is inside the root; float16/bfloat16 input is computed in float32 and returned in
    its own dtype.
    """

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.d_model = _positive_int("d_model", d_model)
        self.eps = _positive_number("eps", eps)
        self.weight = nn.Parameter(torch.ones(self.d_model))

    def forward(self, x):
        _float_tensor("x", x, min_ndim=1)
        _features("x", x, self.d_model)
        work = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
        xw = x.to(work)
        root = torch.sqrt(xw.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (xw / root * self.weight.to(work)).to(x.dtype)


class RotaryPositionEmbedding(nn.Module):
    """RoPE with adjacent pairs (RoFormer eq. 34), written as a complex product.

    The pair (x[2i], x[2i+1]) of the token at position p is read as z = x[2i] + i·x[2i+1] and
    becomes z · e^{iφ}, φ = p · theta^(-2i / head_dim), i.e.
    (a cos φ - b sin φ, a sin φ + b cos φ).  The angles are computed per call in float64.
    """

    def __init__(self, head_dim, max_len, theta=10000.0):
        super().__init__()
        head_dim = _positive_int("head_dim", head_dim)
        if head_dim % 2:
            raise ValueError(f"head_dim must be even (it is rotated in pairs), got {head_dim}")
        self.head_dim = head_dim
        self.max_len = _positive_int("max_len", max_len)
        self.theta = _positive_number("theta", theta)

    def forward(self, x, positions=None):
        _float_tensor("x", x, min_ndim=2)
        _features("x", x, self.head_dim, "head_dim")
        length = x.shape[-2]
        if positions is None:
            if length > self.max_len:
                raise ValueError(f"the sequence has {length} positions, but max_len="
                                 f"{self.max_len} (positions must lie in [0, max_len))")
            positions = torch.arange(length, device=x.device)
        else:
            if not isinstance(positions, torch.Tensor) or not _is_integer_dtype(positions):
                raise TypeError("positions must be an integer torch.Tensor, got "
                                + (str(positions.dtype) if isinstance(positions, torch.Tensor)
                                   else type(positions).__name__))
            target = x.shape[:-1]
            try:
                ok = torch.broadcast_shapes(positions.shape, target) == target
            except RuntimeError:
                ok = False
            if not ok:
                raise ValueError(f"positions of shape {tuple(positions.shape)} does not "
                                 f"broadcast to x.shape[:-1] = {tuple(target)}")
            if positions.numel() and (int(positions.min()) < 0
                                      or int(positions.max()) >= self.max_len):
                raise ValueError(f"positions must lie in [0, max_len={self.max_len}), got "
                                 f"min {int(positions.min())}, max {int(positions.max())}")
            positions = positions.to(x.device)

        half = self.head_dim // 2
        exponents = torch.arange(half, dtype=torch.float64, device=x.device) * (-2.0 / self.head_dim)
        inv_freq = torch.pow(torch.tensor(self.theta, dtype=torch.float64, device=x.device),
                             exponents)
        angles = positions.to(torch.float64).unsqueeze(-1) * inv_freq        # (..., half)
        turn = torch.polar(torch.ones_like(angles), angles)                  # e^{iφ}, complex128

        work = torch.float64 if x.dtype == torch.float64 else torch.float32
        pairs = x.to(work).reshape(*x.shape[:-1], half, 2).contiguous()
        z = torch.view_as_complex(pairs)
        rotated = torch.view_as_real(z * turn.to(z.dtype))
        return rotated.reshape(x.shape).to(x.dtype)


class SwiGLU(nn.Module):
    """y = w2( silu(w1 x) ⊙ w3 x ),  silu(z) = z · sigmoid(z)   (Shazeer 2020); no biases."""

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.d_model = _positive_int("d_model", d_model)
        self.d_ff = _positive_int("d_ff", d_ff)
        self.w1 = nn.Linear(self.d_model, self.d_ff, bias=False)
        self.w2 = nn.Linear(self.d_ff, self.d_model, bias=False)
        self.w3 = nn.Linear(self.d_model, self.d_ff, bias=False)

    def forward(self, x):
        _float_tensor("x", x, min_ndim=1)
        _features("x", x, self.d_model)
        gate = _linear(self.w1, x)
        value = _linear(self.w3, x)
        return _linear(self.w2, value * (gate * torch.sigmoid(gate)))


class GroupedQueryAttention(nn.Module):
    """Grouped-query self-attention (Ainslie et al. 2023).

    q = x W_qᵀ split into num_heads heads, k = x W_kᵀ and v = x W_vᵀ into num_kv_heads heads
    (head h = features h·head_dim … (h+1)·head_dim − 1); q and k rotated by ``rope`` at
    ``positions`` when it is given; query head h uses key/value head h // (num_heads //
    num_kv_heads);  head_h = softmax(q_h k_gᵀ / sqrt(head_dim), mask) v_g;
    out = output_proj(concat_h head_h).
    """

    def __init__(self, d_model, num_heads, num_kv_heads=None, rope=None):
        super().__init__()
        d_model = _positive_int("d_model", d_model)
        num_heads = _positive_int("num_heads", num_heads)
        num_kv_heads = num_heads if num_kv_heads is None else _positive_int("num_kv_heads",
                                                                           num_kv_heads)
        if d_model % num_heads:
            raise ValueError(f"num_heads={num_heads} must divide d_model={d_model}")
        if num_heads % num_kv_heads:
            raise ValueError(f"num_kv_heads={num_kv_heads} must divide num_heads={num_heads}")
        head_dim = d_model // num_heads
        if rope is not None:
            if not isinstance(rope, nn.Module):
                raise TypeError(f"rope must be a RotaryPositionEmbedding or None, "
                                f"got {type(rope).__name__}")
            rope_dim = getattr(rope, "head_dim", head_dim)
            if rope_dim != head_dim:
                raise ValueError(f"rope has head_dim={rope_dim}, but d_model // num_heads = "
                                 f"{head_dim}: the rope's head_dim must match")
        self.d_model = d_model
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, num_kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(d_model, num_kv_heads * head_dim, bias=False)
        self.output_proj = nn.Linear(d_model, d_model, bias=False)
        self.rope = rope

    def _split(self, t, heads):
        """(B, L, heads·head_dim) -> (B, heads, L, head_dim)."""
        b, length, _ = t.shape
        return t.view(b, length, heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x, mask=None, positions=None):
        _float_tensor("x", x, ndim=3)
        _features("x", x, self.d_model)
        b, length, _ = x.shape

        q = self._split(_linear(self.q_proj, x), self.num_heads)
        k = self._split(_linear(self.k_proj, x), self.num_kv_heads)
        v = self._split(_linear(self.v_proj, x), self.num_kv_heads)

        if self.rope is not None:
            if isinstance(positions, torch.Tensor) and positions.dim() == 2:
                positions = positions.unsqueeze(-2)       # (B, L) -> (B, 1, L) over the heads
            q = self.rope(q, positions=positions)
            k = self.rope(k, positions=positions)

        group = self.num_heads // self.num_kv_heads
        if group > 1:
            shape = (b, self.num_kv_heads, group, length, self.head_dim)
            k = k.unsqueeze(2).expand(shape).reshape(b, self.num_heads, length, self.head_dim)
            v = v.unsqueeze(2).expand(shape).reshape(b, self.num_heads, length, self.head_dim)

        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        merged = heads.permute(0, 2, 1, 3).reshape(b, length, self.d_model)
        return _linear(self.output_proj, merged), weights


class LlamaBlock(nn.Module):
    """Pre-norm Llama block:  h = x + attn(ln1(x), mask, positions);  out = h + ffn(ln2(h)).

    ``attn`` is grouped-query attention with a rotary embedding for head_dim = d_model //
    num_heads, ``ffn`` is SwiGLU, ``ln1``/``ln2`` are RMSNorm.
    """

    def __init__(self, d_model, num_heads, d_ff, num_kv_heads=None, max_len=2048,
                 theta=10000.0, eps=1e-5):
        super().__init__()
        d_model = _positive_int("d_model", d_model)
        num_heads = _positive_int("num_heads", num_heads)
        d_ff = _positive_int("d_ff", d_ff)
        num_kv_heads = _optional_positive_int("num_kv_heads", num_kv_heads)
        max_len = _positive_int("max_len", max_len)
        theta = _positive_number("theta", theta)
        eps = _positive_number("eps", eps)
        if d_model % num_heads:
            raise ValueError(f"num_heads={num_heads} must divide d_model={d_model}")
        head_dim = d_model // num_heads
        if head_dim % 2:
            raise ValueError(f"head_dim = d_model // num_heads = {head_dim} must be even "
                             f"for the rotary embedding")
        self.ln1 = RMSNorm(d_model, eps)
        self.attn = GroupedQueryAttention(d_model, num_heads, num_kv_heads,
                                          rope=RotaryPositionEmbedding(head_dim, max_len, theta))
        self.ln2 = RMSNorm(d_model, eps)
        self.ffn = SwiGLU(d_model, d_ff)

    def forward(self, x, mask=None, positions=None):
        attended, weights = self.attn(self.ln1(x), mask=mask, positions=positions)
        h = attended + x
        return self.ffn(self.ln2(h)) + h, weights


class MiniLlama(nn.Module):
    """logits = lm_head(ln_final(layers(token_embeddings(tokens)))), causal, RoPE positions 0..L-1.

    No embedding scale and no position table; ``d_ff=None`` means 64·ceil(8·d_model / 3 / 64);
    with ``tie_weights=True`` ``lm_head.weight`` is ``token_embeddings.weight``.
    """

    def __init__(self, vocab_size, d_model=64, num_layers=2, num_heads=4, num_kv_heads=None,
                 d_ff=None, max_len=128, theta=10000.0, eps=1e-5, tie_weights=False):
        super().__init__()
        vocab_size = _positive_int("vocab_size", vocab_size)
        d_model = _positive_int("d_model", d_model)
        num_layers = _positive_int("num_layers", num_layers)
        num_heads = _positive_int("num_heads", num_heads)
        num_kv_heads = _optional_positive_int("num_kv_heads", num_kv_heads)
        d_ff = _optional_positive_int("d_ff", d_ff)
        max_len = _positive_int("max_len", max_len)
        theta = _positive_number("theta", theta)
        eps = _positive_number("eps", eps)
        if d_ff is None:
            d_ff = 64 * (-(-8 * d_model // (3 * 64)))     # integer ceil of 8·d_model / 192
        self.vocab_size = vocab_size
        self.max_len = max_len
        self.token_embeddings = nn.Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList(
            LlamaBlock(d_model, num_heads, d_ff, num_kv_heads, max_len, theta, eps)
            for _ in range(num_layers))
        self.ln_final = RMSNorm(d_model, eps)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        if tie_weights:
            self.lm_head.weight = self.token_embeddings.weight

    def _check_tokens(self, tokens):
        if not isinstance(tokens, torch.Tensor):
            raise TypeError(f"tokens must be a (B, L) integer torch.Tensor, "
                            f"got {type(tokens).__name__}")
        if not _is_integer_dtype(tokens):
            raise TypeError(f"tokens must hold integer ids, got dtype {tokens.dtype}")
        if tokens.dim() != 2:
            raise ValueError(f"tokens must be 2-D (B, L), got shape {tuple(tokens.shape)}")
        if tokens.shape[0] < 1 or tokens.shape[1] < 1:
            raise ValueError(f"tokens must not be empty, got shape {tuple(tokens.shape)}")
        if tokens.shape[1] > self.max_len:
            raise ValueError(f"tokens has {tokens.shape[1]} positions, more than "
                             f"max_len={self.max_len}")
        low, high = int(tokens.min()), int(tokens.max())
        if low < 0 or high >= self.vocab_size:
            raise ValueError(f"tokens must lie in [0, vocab_size={self.vocab_size}), "
                             f"got min {low}, max {high}")

    def forward(self, tokens, return_attn=False):
        self._check_tokens(tokens)
        length = tokens.shape[1]
        x = self.token_embeddings(tokens.long())
        mask = causal_mask(length, device=tokens.device)
        positions = torch.arange(length, device=tokens.device)
        maps = []
        for layer in self.layers:
            x, weights = layer(x, mask=mask, positions=positions)
            maps.append(weights)
        logits = self.lm_head(self.ln_final(x))
        return logits, (maps if return_attn else None)

    def _seed_list(self, seed_tokens):
        if isinstance(seed_tokens, (str, bytes)):
            raise TypeError("seed_tokens must be a list of ints or a 1-D integer tensor, "
                            "not a string")
        if isinstance(seed_tokens, torch.Tensor):
            if not _is_integer_dtype(seed_tokens):
                raise TypeError(f"seed_tokens must hold integers, got dtype {seed_tokens.dtype}")
            if seed_tokens.dim() == 2 and seed_tokens.shape[0] == 1:
                seed_tokens = seed_tokens[0]
            if seed_tokens.dim() != 1:
                raise ValueError(f"seed_tokens must be one sequence (1-D), "
                                 f"got shape {tuple(seed_tokens.shape)}")
            seq = [int(t) for t in seed_tokens.tolist()]
        else:
            try:
                items = list(seed_tokens)
            except TypeError:
                raise TypeError(f"seed_tokens must be a list of ints or a 1-D integer tensor, "
                                f"got {type(seed_tokens).__name__}") from None
            seq = []
            for t in items:
                if isinstance(t, torch.Tensor) and t.dim() == 0 and _is_integer_dtype(t):
                    t = int(t)
                if isinstance(t, bool) or not isinstance(t, numbers.Integral):
                    raise TypeError(f"seed_tokens must hold ints, got {t!r} "
                                    f"({type(t).__name__})")
                seq.append(int(t))
        if not seq:
            raise ValueError("seed_tokens must not be empty")
        if min(seq) < 0 or max(seq) >= self.vocab_size:
            raise ValueError(f"seed_tokens must lie in [0, vocab_size={self.vocab_size}), "
                             f"got min {min(seq)}, max {max(seq)}")
        return seq

    def generate(self, seed_tokens, max_new_tokens=50, temperature=0.8, top_k=None,
                 generator=None):
        """Autoregressive sampling without a KV cache.

        Every step runs the last ``max_len`` tokens (positions 0 .. len(window) - 1) and takes
        the last position's logits: ``temperature=0`` picks the argmax; otherwise logits /
        temperature, restricted to the ``top_k`` largest if given, sampled by inverse CDF with
        one uniform draw from ``generator``.
        """
        seq = self._seed_list(seed_tokens)
        steps = _positive_int("max_new_tokens", max_new_tokens)
        if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
            raise TypeError(f"temperature must be a number >= 0, got {type(temperature).__name__}")
        temperature = float(temperature)
        if not temperature >= 0.0:
            raise ValueError(f"temperature must be >= 0, got temperature={temperature}")
        if top_k is not None:
            top_k = _positive_int("top_k", top_k)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator or None, "
                            f"got {type(generator).__name__}")

        device = self.token_embeddings.weight.device
        was_training = self.training
        self.eval()
        try:
            with torch.inference_mode():
                for _ in range(steps):
                    window = torch.tensor([seq[-self.max_len:]], dtype=torch.long, device=device)
                    last = self(window)[0][0, -1].to(torch.float64).cpu()
                    if temperature == 0.0:
                        seq.append(int(torch.argmax(last)))
                        continue
                    scaled = last / temperature
                    if top_k is not None and top_k < scaled.numel():
                        keep = torch.topk(scaled, top_k).indices
                        kept = torch.full_like(scaled, float("-inf"))
                        kept[keep] = scaled[keep]
                        scaled = kept
                    probs = torch.softmax(scaled, dim=-1)
                    cdf = torch.cumsum(probs, dim=0)
                    u = torch.rand((), generator=generator, dtype=torch.float64)
                    choice = int(torch.searchsorted(cdf, u * cdf[-1], right=True))
                    allowed = torch.nonzero(probs > 0).flatten()
                    choice = min(max(choice, int(allowed[0])), int(allowed[-1]))
                    seq.append(choice)
        finally:
            self.train(was_training)
        return seq


# ============================================================================================
# training utilities (optional; docs/contract.md, "The modern track's training utilities")
# ============================================================================================

def softmax(x, dim):
    """softmax(x)_i = exp(x_i - logsumexp(x, dim)), same shape and dtype as ``x``.

    Stable through ``logsumexp`` instead of subtracting the maximum (a free choice of
    docs/contract.md, 'The modern track's training utilities').
    """
    _float_tensor("x", x)
    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))


def cross_entropy(logits, targets):
    """loss = mean_i ( logsumexp(logits[i]) - logits[i, targets[i]] ), a 0-d tensor.

    ``logits (N, V)``, ``targets (N,)`` integer ids; the picked logits are read with
    ``gather`` (docs/contract.md, 'The modern track's training utilities').
    """
    _float_tensor("logits", logits, min_ndim=1)
    if not isinstance(targets, torch.Tensor) or not _is_integer_dtype(targets):
        raise TypeError("targets must be an integer torch.Tensor, got "
                        + (str(targets.dtype) if isinstance(targets, torch.Tensor)
                           else type(targets).__name__))
    if tuple(targets.shape) != tuple(logits.shape[:-1]):
        raise ValueError(f"targets must have shape {tuple(logits.shape[:-1])} (logits without "
                         f"its last dimension), got {tuple(targets.shape)}")
    index = targets.to(device=logits.device, dtype=torch.long).unsqueeze(-1)
    picked = torch.gather(logits, -1, index).squeeze(-1)
    return (torch.logsumexp(logits, dim=-1) - picked).mean()


def clip_grad_norm(parameters, max_norm):
    """g = sqrt(Σ_p Σ grad_p²) over the parameters that have a gradient; if g > max_norm, every
    such gradient is multiplied in place by max_norm / g (no eps: the contract allows any
    eps <= 1e-6 or none).  Returns g as a Python float.

    The norm is a float64 sum of squares, one parameter at a time
    (docs/contract.md, 'The modern track's training utilities').
    """
    if isinstance(parameters, torch.Tensor):
        parameters = [parameters]
    grads = [p.grad for p in list(parameters) if p.grad is not None]   # a generator is read once
    if isinstance(max_norm, bool) or not isinstance(max_norm, numbers.Real):
        raise TypeError(f"max_norm must be a number, got {type(max_norm).__name__}")
    max_norm = float(max_norm)
    if not max_norm >= 0.0:
        raise ValueError(f"max_norm must be >= 0, got max_norm={max_norm}")
    squares = 0.0
    for g in grads:
        squares += float(g.detach().to(torch.float64).pow(2).sum())
    total = math.sqrt(squares)
    if total > max_norm:
        factor = max_norm / total
        for g in grads:
            g.mul_(factor)
    return total


class AdamW(torch.optim.Optimizer):
    """AdamW (Loshchilov & Hutter 2019), in the order of CS336's Algorithm 1.

    For each parameter θ with a gradient g, at its own step t = 1, 2, ...:
        m = β1·m + (1-β1)·g,   v = β2·v + (1-β2)·g²,
        θ ← θ - α_t · m / (sqrt(v) + eps),   α_t = lr · sqrt(1-β2^t) / (1-β1^t),
        θ ← θ - lr · weight_decay · θ        (decay after the Adam step, from the new θ).
    ``lr``, ``betas``, ``eps``, ``weight_decay`` are read from the group at every step; state is
    created at the first step (docs/contract.md, 'The modern track's training utilities').
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        for name, value in (("lr", lr), ("eps", eps), ("weight_decay", weight_decay)):
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"{name} must be a number, got {type(value).__name__}")
            if not float(value) >= 0.0:
                raise ValueError(f"{name} must be >= 0, got {name}={value!r}")
        try:
            beta1, beta2 = betas
        except (TypeError, ValueError):
            raise TypeError(f"betas must be a pair of numbers, got {betas!r}") from None
        for beta in (beta1, beta2):
            if isinstance(beta, bool) or not isinstance(beta, numbers.Real):
                raise TypeError(f"betas must be a pair of numbers, got {betas!r}")
            if not 0.0 <= float(beta) < 1.0:
                raise ValueError(f"betas must lie in [0, 1), got betas={betas!r}")
        defaults = {"lr": lr, "betas": (beta1, beta2), "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr = float(group["lr"])
            beta1, beta2 = (float(b) for b in group["betas"])
            eps = float(group["eps"])
            decay = float(group["weight_decay"])
            for theta in group["params"]:
                grad = theta.grad
                if grad is None:
                    continue
                if grad.is_sparse:
                    raise RuntimeError("AdamW does not support sparse gradients")
                state = self.state[theta]
                if not state:
                    state["n_updates"] = 0
                    state["first_moment"] = torch.zeros_like(theta)
                    state["second_moment"] = torch.zeros_like(theta)
                state["n_updates"] += 1
                t = state["n_updates"]
                m, v = state["first_moment"], state["second_moment"]
                m.mul_(beta1).add_(grad, alpha=1.0 - beta1)
                v.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
                alpha_t = lr * math.sqrt(1.0 - beta2 ** t) / (1.0 - beta1 ** t)
                theta.addcdiv_(m, v.sqrt().add_(eps), value=-alpha_t)
                if decay:
                    theta.mul_(1.0 - lr * decay)
        return loss


def cosine_lr(t, lr_max, lr_min, warmup_iters, cosine_cycle_iters):
    """Linear warm-up, cosine decay, then flat, as a Python float:

        t < warmup_iters:                      t / warmup_iters · lr_max
        warmup_iters <= t <= cosine_cycle_iters: lr_min + (1 + cos(π · (t - warmup_iters) /
                                               (cosine_cycle_iters - warmup_iters))) / 2 · (lr_max - lr_min)
        t > cosine_cycle_iters:                lr_min
    (docs/contract.md, 'The modern track's training utilities').
    """
    t = float(t)
    lr_max, lr_min = float(lr_max), float(lr_min)
    if t < warmup_iters:
        return t / float(warmup_iters) * lr_max
    if t > cosine_cycle_iters:
        return lr_min
    span = float(cosine_cycle_iters - warmup_iters)
    if span <= 0.0:                        # warmup_iters == cosine_cycle_iters == t
        return lr_max
    progress = (t - warmup_iters) / span
    return lr_min + (1.0 + math.cos(math.pi * progress)) / 2.0 * (lr_max - lr_min)


def get_batch(data, batch_size, context_length, device):
    """x[b] = data[s_b : s_b + context_length], y[b] = data[s_b + 1 : s_b + context_length + 1],
    s_b uniform on 0 .. len(data) - context_length - 1, drawn with ``torch.randint`` (torch's
    global generator); both ``torch.long (batch_size, context_length)`` on ``device``.

    The rows are gathered with one index matrix ``starts[:, None] + arange(context_length + 1)``
    straight from ``data`` (a memmap reads only those rows) and converted to int64 afterwards
    (docs/contract.md, 'The modern track's training utilities').
    """
    batch_size = _positive_int("batch_size", batch_size)
    context_length = _positive_int("context_length", context_length)
    tokens = np.asarray(data)
    if tokens.ndim != 1:
        raise ValueError(f"data must be a 1-D array of token ids, got shape {tokens.shape}")
    if not np.issubdtype(tokens.dtype, np.integer):
        raise TypeError(f"data must hold integer token ids, got dtype {tokens.dtype}")
    n_starts = tokens.shape[0] - context_length
    if n_starts < 1:
        raise ValueError(f"data has {tokens.shape[0]} tokens, too few for context_length="
                         f"{context_length} (it needs at least context_length + 1)")
    starts = torch.randint(0, n_starts, (batch_size,))
    index = starts[:, None] + torch.arange(context_length + 1)
    rows = torch.from_numpy(np.asarray(tokens[index.numpy()], dtype=np.int64))
    x = rows[:, :-1].contiguous().to(device)
    y = rows[:, 1:].contiguous().to(device)
    return x, y
