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

There is no dropout anywhere (the track has none).
"""

from __future__ import annotations

import math
import numbers

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = [
    "scaled_dot_product_attention", "causal_mask",
    "RMSNorm", "RotaryPositionEmbedding", "SwiGLU", "GroupedQueryAttention",
    "LlamaBlock", "MiniLlama",
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
