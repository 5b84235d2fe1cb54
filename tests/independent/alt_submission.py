"""An independent implementation of the submission contract (``docs/contract.md``, v1).

Written from the contract and the seed tutorials only, in a style that deliberately differs
from ``reference/``: einsum for every product, masks applied with ``torch.where``, heads split
with ``unflatten``/``permute``, and a plain sampling loop in ``MiniGPT.generate``.
"""

from __future__ import annotations

import math
import numbers

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = [
    "scaled_dot_product_attention", "causal_mask", "padding_mask",
    "MultiHeadAttention", "MultiHeadSelfAttention", "FeedForward",
    "TransformerEncoderBlock", "TransformerDecoderBlock",
    "SinusoidalPositionEncoding", "LearnedPositionEmbedding",
    "MiniGPT", "Seq2SeqTransformer",
]


# --------------------------------------------------------------------------------------------
# argument checking
# --------------------------------------------------------------------------------------------

def _int_arg(name, value, low=1):
    """An integer (never a bool) that is at least ``low``; returned as a Python int."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} has to be an integer, but got {type(value).__name__} {value!r}")
    value = int(value)
    if value < low:
        raise ValueError(f"{name} has to be >= {low}, but got {name}={value}")
    return value


def _rate_arg(name, value):
    """A probability in [0, 1] (never a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} has to be a real number in [0, 1], got {type(value).__name__}")
    value = float(value)
    if not (0.0 <= value <= 1.0):  # also rejects NaN
        raise ValueError(f"{name} has to lie in [0, 1], but got {name}={value}")
    return value


def _bool_arg(name, value):
    if not isinstance(value, bool):
        raise TypeError(f"{name} has to be True or False, got {type(value).__name__} {value!r}")
    return value


def _tensor_arg(name, value, ndim=None, min_ndim=None, floating=False, integer=False):
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} has to be a torch.Tensor, got {type(value).__name__}")
    if ndim is not None and value.dim() != ndim:
        raise ValueError(
            f"{name} has to be {ndim}-dimensional, but its shape is {tuple(value.shape)}")
    if min_ndim is not None and value.dim() < min_ndim:
        raise ValueError(f"{name} needs at least {min_ndim} dimensions, "
                         f"but its shape is {tuple(value.shape)}")
    if floating and not value.is_floating_point():
        raise TypeError(f"{name} has to hold floating-point values, got dtype {value.dtype}")
    if integer and (value.is_floating_point() or value.is_complex() or value.dtype == torch.bool):
        raise TypeError(f"{name} has to hold integer token ids, got dtype {value.dtype}")
    return value


def _same_kind(name, value, ref_name, ref):
    if value.dtype != ref.dtype:
        raise TypeError(f"{name} has dtype {value.dtype} but {ref_name} has dtype {ref.dtype}; "
                        f"they have to agree")
    if value.device != ref.device:
        raise ValueError(f"{name} lives on {value.device} but {ref_name} on {ref.device}")


def _feature_arg(name, value, d_model):
    if value.shape[-1] != d_model:
        raise ValueError(f"the last dimension of {name} has to be d_model={d_model}, "
                         f"but {name} has shape {tuple(value.shape)}")


def _mask_arg(name, mask, scores_shape, device):
    """A boolean mask (True = blocked) that broadcasts to ``scores_shape``."""
    if mask is None:
        return None
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} has to be a bool torch.Tensor or None, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(f"{name} has to have dtype torch.bool (True marks a blocked key), "
                        f"got {mask.dtype}")
    scores_shape = torch.Size(scores_shape)
    try:
        joint = torch.broadcast_shapes(mask.shape, scores_shape)
    except RuntimeError:
        joint = None
    if joint != scores_shape:
        raise ValueError(f"{name} of shape {tuple(mask.shape)} cannot be broadcast to the "
                         f"attention scores' shape {tuple(scores_shape)}")
    if mask.device != device:
        raise ValueError(f"{name} lives on {mask.device} but the scores on {device}")
    return mask


def _tokens_arg(name, tokens, vocab_size, max_len):
    _tensor_arg(name, tokens, ndim=2, integer=True)
    length = tokens.shape[1]
    if length < 1:
        raise ValueError(f"{name} has to hold at least one position, got shape {tuple(tokens.shape)}")
    if length > max_len:
        raise ValueError(f"{name} has {length} positions, more than max_len={max_len}")
    if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= vocab_size):
        raise ValueError(f"{name} holds ids outside [0, {vocab_size}) "
                         f"(min {int(tokens.min())}, max {int(tokens.max())})")
    return tokens.long()


# --------------------------------------------------------------------------------------------
# helpers that let a float32 module run on float64 input (and the other way round)
# --------------------------------------------------------------------------------------------

def _apply_linear(layer, x):
    if layer.weight.dtype == x.dtype:
        return layer(x)
    bias = None if layer.bias is None else layer.bias.to(x.dtype)
    return F.linear(x, layer.weight.to(x.dtype), bias)


def _apply_norm(norm, x):
    if norm.weight is None or norm.weight.dtype == x.dtype:
        return norm(x)
    return F.layer_norm(x, norm.normalized_shape, norm.weight.to(x.dtype),
                        None if norm.bias is None else norm.bias.to(x.dtype), norm.eps)


# --------------------------------------------------------------------------------------------
# functions
# --------------------------------------------------------------------------------------------

def _attend(q, k, mask, factor):
    """The attention weights once everything is checked (fully blocked rows are all zero)."""
    scores = torch.einsum("...id,...jd->...ij", q, k) * factor
    if mask is not None:
        blocked = mask.expand(scores.shape)
        dead_row = blocked.all(dim=-1, keepdim=True)
        neg_inf = torch.full((), float("-inf"), dtype=scores.dtype, device=scores.device)
        zero = torch.zeros((), dtype=scores.dtype, device=scores.device)
        scores = torch.where(blocked, neg_inf, scores)
        # A row with every key blocked would be softmax(-inf, ..., -inf) = NaN: feed it zeros
        # instead (finite forward and backward) and zero its weights afterwards.
        scores = torch.where(dead_row, zero, scores)
        weights = torch.where(dead_row, zero, scores.softmax(dim=-1))
    else:
        weights = scores.softmax(dim=-1)
    return weights


def scaled_dot_product_attention(q, k, v, mask=None, scale=None):
    """softmax(q k^T * scale, masked) v  ->  (output (..., Lq, d_v), weights (..., Lq, Lk))."""
    _tensor_arg("q", q, min_ndim=2, floating=True)
    _tensor_arg("k", k, min_ndim=2, floating=True)
    _tensor_arg("v", v, min_ndim=2, floating=True)
    _same_kind("k", k, "q", q)
    _same_kind("v", v, "q", q)
    d_k = q.shape[-1]
    if d_k == 0:
        raise ValueError(f"q has an empty feature dimension (shape {tuple(q.shape)})")
    if k.shape[-1] != d_k:
        raise ValueError(f"q and k need the same last dimension d_k, "
                         f"got q {tuple(q.shape)} and k {tuple(k.shape)}")
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(f"k and v need the same length (dimension -2), "
                         f"got k {tuple(k.shape)} and v {tuple(v.shape)}")
    try:
        lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(f"the leading (batch) dimensions of q {tuple(q.shape)}, "
                         f"k {tuple(k.shape)} and v {tuple(v.shape)} do not broadcast") from None
    if scale is None:
        factor = 1.0 / math.sqrt(d_k)
    else:
        if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
            raise TypeError(f"scale has to be None or a real number, got {type(scale).__name__}")
        factor = float(scale)
        if not math.isfinite(factor):
            raise ValueError(f"scale has to be finite, got scale={factor}")
    scores_shape = tuple(lead) + (q.shape[-2], k.shape[-2])
    _mask_arg("mask", mask, scores_shape, q.device)
    weights = _attend(q, k, mask, factor)
    output = torch.einsum("...ij,...jd->...id", weights, v)
    return output, weights


def causal_mask(seq_len, device=None):
    """Bool (seq_len, seq_len), True strictly above the diagonal (the future is blocked)."""
    seq_len = _int_arg("seq_len", seq_len, low=1)
    if device is not None and not isinstance(device, (str, torch.device, int)):
        raise TypeError(f"device has to be None, a str or a torch.device, "
                        f"got {type(device).__name__}")
    try:
        device = None if device is None else torch.device(device)
    except (RuntimeError, ValueError, TypeError) as exc:
        raise ValueError(f"device {device!r} is not a valid torch device: {exc}") from None
    return torch.ones(seq_len, seq_len, device=device).triu(1).bool()


def padding_mask(tokens, pad_id):
    """Bool (B, 1, 1, L), True where ``tokens == pad_id`` (those keys are blocked)."""
    _tensor_arg("tokens", tokens, ndim=2, integer=True)
    if isinstance(pad_id, bool) or not isinstance(pad_id, numbers.Integral):
        raise TypeError(f"pad_id has to be an integer, got {type(pad_id).__name__} {pad_id!r}")
    return tokens.eq(int(pad_id))[:, None, None, :]


# --------------------------------------------------------------------------------------------
# attention modules
# --------------------------------------------------------------------------------------------

class _ProjectedAttention(nn.Module):
    """Shared body of the two multi-head attention modules."""

    def __init__(self, d_model=512, num_heads=8, dropout=0.1):
        super().__init__()
        d_model = _int_arg("d_model", d_model)
        num_heads = _int_arg("num_heads", num_heads)
        dropout = _rate_arg("dropout", dropout)
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not a multiple of num_heads={num_heads}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.W_Q = nn.Linear(d_model, d_model, bias=False)
        self.W_K = nn.Linear(d_model, d_model, bias=False)
        self.W_V = nn.Linear(d_model, d_model, bias=False)
        self.W_O = nn.Linear(d_model, d_model, bias=False)
        self.attn_drop = nn.Dropout(dropout)

    def _heads(self, t):
        # (B, L, D) -> (B, L, H, d_k) -> (B, H, L, d_k)
        return t.unflatten(-1, (self.num_heads, self.d_k)).permute(0, 2, 1, 3)

    def _run(self, query, key, value, mask, names, mask_name="mask"):
        qn, kn, vn = names
        _tensor_arg(qn, query, ndim=3, floating=True)
        _tensor_arg(kn, key, ndim=3, floating=True)
        _tensor_arg(vn, value, ndim=3, floating=True)
        if kn != qn:
            _same_kind(kn, key, qn, query)
        if vn != qn:
            _same_kind(vn, value, qn, query)
        for name, t in ((qn, query), (kn, key), (vn, value)):
            _feature_arg(name, t, self.d_model)
        batch = query.shape[0]
        if key.shape[0] != batch or value.shape[0] != batch:
            raise ValueError(f"{qn}, {kn} and {vn} need the same batch size, got "
                             f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
        if key.shape[1] != value.shape[1]:
            raise ValueError(f"{kn} and {vn} need the same length, "
                             f"got {tuple(key.shape)} and {tuple(value.shape)}")
        shape = (batch, self.num_heads, query.shape[1], key.shape[1])
        _mask_arg(mask_name, mask, shape, query.device)

        q = self._heads(_apply_linear(self.W_Q, query))
        k = self._heads(_apply_linear(self.W_K, key))
        v = self._heads(_apply_linear(self.W_V, value))
        weights = _attend(q, k, mask, 1.0 / math.sqrt(self.d_k))
        mixed = torch.einsum("bhij,bhjd->bhid", self.attn_drop(weights), v)
        merged = mixed.permute(0, 2, 1, 3).flatten(2)  # (B, Lq, D)
        return _apply_linear(self.W_O, merged), weights


class MultiHeadAttention(_ProjectedAttention):
    """Attention with separate query / key / value inputs (used for cross-attention)."""

    def forward(self, query, key, value, mask=None):
        return self._run(query, key, value, mask, ("query", "key", "value"))


class MultiHeadSelfAttention(_ProjectedAttention):
    """Self-attention: ``forward(x, mask)`` equals ``MultiHeadAttention(x, x, x, mask)``."""

    def forward(self, x, mask=None):
        return self._run(x, x, x, mask, ("x", "x", "x"))


# --------------------------------------------------------------------------------------------
# feed-forward and blocks
# --------------------------------------------------------------------------------------------

class FeedForward(nn.Module):
    """Position-wise MLP: linear2(dropout(gelu(linear1(x)))) with the exact (erf) GELU."""

    def __init__(self, d_model=512, d_ff=2048, dropout=0.1):
        super().__init__()
        d_model = _int_arg("d_model", d_model)
        d_ff = _int_arg("d_ff", d_ff)
        dropout = _rate_arg("dropout", dropout)
        self.d_model = d_model
        self.d_ff = d_ff
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        _tensor_arg("x", x, min_ndim=1, floating=True)
        _feature_arg("x", x, self.d_model)
        hidden = F.gelu(_apply_linear(self.linear1, x), approximate="none")
        return _apply_linear(self.linear2, self.dropout(hidden))


def _block_args(d_model, num_heads, d_ff, dropout, norm_first):
    d_model = _int_arg("d_model", d_model)
    num_heads = _int_arg("num_heads", num_heads)
    d_ff = _int_arg("d_ff", d_ff)
    dropout = _rate_arg("dropout", dropout)
    norm_first = _bool_arg("norm_first", norm_first)
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not a multiple of num_heads={num_heads}")
    return d_model, num_heads, d_ff, dropout, norm_first


def _sequence_arg(name, x, d_model):
    _tensor_arg(name, x, ndim=3, floating=True)
    _feature_arg(name, x, d_model)


class TransformerEncoderBlock(nn.Module):
    """Self-attention and feed-forward sub-layers, Pre-LN (default) or Post-LN."""

    def __init__(self, d_model=512, num_heads=8, d_ff=2048, dropout=0.1, norm_first=True):
        super().__init__()
        d_model, num_heads, d_ff, dropout, norm_first = _block_args(
            d_model, num_heads, d_ff, dropout, norm_first)
        self.d_model = d_model
        self.norm_first = norm_first
        self.self_attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        _sequence_arg("x", x, self.d_model)
        if self.norm_first:
            attended, weights = self.self_attn(_apply_norm(self.norm1, x), mask)
            x = x + self.dropout(attended)
            x = x + self.dropout(self.ffn(_apply_norm(self.norm2, x)))
        else:
            attended, weights = self.self_attn(x, mask)
            x = _apply_norm(self.norm1, x + self.dropout(attended))
            x = _apply_norm(self.norm2, x + self.dropout(self.ffn(x)))
        return x, weights


class TransformerDecoderBlock(nn.Module):
    """Masked self-attention, cross-attention over ``memory``, feed-forward."""

    def __init__(self, d_model=512, num_heads=8, d_ff=2048, dropout=0.1, norm_first=True):
        super().__init__()
        d_model, num_heads, d_ff, dropout, norm_first = _block_args(
            d_model, num_heads, d_ff, dropout, norm_first)
        self.d_model = d_model
        self.num_heads = num_heads
        self.norm_first = norm_first
        self.self_attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        _sequence_arg("x", x, self.d_model)
        _sequence_arg("memory", memory, self.d_model)
        _same_kind("memory", memory, "x", x)
        if memory.shape[0] != x.shape[0]:
            raise ValueError(f"x and memory need the same batch size, "
                             f"got {tuple(x.shape)} and {tuple(memory.shape)}")
        b, lt, lm = x.shape[0], x.shape[1], memory.shape[1]
        _mask_arg("tgt_mask", tgt_mask, (b, self.num_heads, lt, lt), x.device)
        _mask_arg("memory_mask", memory_mask, (b, self.num_heads, lt, lm), x.device)

        if self.norm_first:
            h, self_w = self.self_attn(_apply_norm(self.norm1, x), tgt_mask)
            x = x + self.dropout(h)
            h, cross_w = self.cross_attn(_apply_norm(self.norm2, x), memory, memory, memory_mask)
            x = x + self.dropout(h)
            x = x + self.dropout(self.ffn(_apply_norm(self.norm3, x)))
        else:
            h, self_w = self.self_attn(x, tgt_mask)
            x = _apply_norm(self.norm1, x + self.dropout(h))
            h, cross_w = self.cross_attn(x, memory, memory, memory_mask)
            x = _apply_norm(self.norm2, x + self.dropout(h))
            x = _apply_norm(self.norm3, x + self.dropout(self.ffn(x)))
        return x, self_w, cross_w


# --------------------------------------------------------------------------------------------
# position information
# --------------------------------------------------------------------------------------------

class SinusoidalPositionEncoding(nn.Module):
    """Adds the fixed sin/cos table ``pe`` (1, max_len, d_model)."""

    def __init__(self, d_model, max_len=5000):
        super().__init__()
        d_model = _int_arg("d_model", d_model)
        max_len = _int_arg("max_len", max_len)
        self.d_model = d_model
        self.max_len = max_len
        position = torch.arange(0, max_len).unsqueeze(1)                       # (max_len, 1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float()
                             * (-math.log(10000.0) / d_model))               # (ceil(D/2),)
        angles = position * div_term                                         # float32
        table = torch.zeros(max_len, d_model)
        table[:, 0::2] = torch.sin(angles)
        table[:, 1::2] = torch.cos(angles[:, : d_model // 2])
        self.register_buffer("pe", table.unsqueeze(0))

    def forward(self, x):
        _sequence_arg("x", x, self.d_model)
        length = x.shape[1]
        if length > self.max_len:
            raise ValueError(f"x has {length} positions, more than max_len={self.max_len}")
        return x + self.pe[:, :length].to(dtype=x.dtype, device=x.device)


class LearnedPositionEmbedding(nn.Module):
    """Adds a trainable vector per position: ``x + embedding(arange(L))``."""

    def __init__(self, d_model, max_len):
        super().__init__()
        d_model = _int_arg("d_model", d_model)
        max_len = _int_arg("max_len", max_len)
        self.d_model = d_model
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x):
        _sequence_arg("x", x, self.d_model)
        length = x.shape[1]
        if length > self.max_len:
            raise ValueError(f"x has {length} positions, more than max_len={self.max_len}")
        where = torch.arange(length, device=self.embedding.weight.device)
        return x + self.embedding(where).to(dtype=x.dtype, device=x.device)


# --------------------------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------------------------

class MiniGPT(nn.Module):
    """Decoder-only language model with tied input/output embeddings."""

    def __init__(self, vocab_size, d_model=128, num_heads=4, num_layers=4, d_ff=512,
                 max_len=128, dropout=0.1):
        super().__init__()
        vocab_size = _int_arg("vocab_size", vocab_size)
        num_layers = _int_arg("num_layers", num_layers)
        max_len = _int_arg("max_len", max_len)
        d_model, num_heads, d_ff, dropout, _ = _block_args(d_model, num_heads, d_ff, dropout, True)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.num_heads = num_heads
        self.num_layers = num_layers
        self.max_len = max_len

        self.token_embed = nn.Embedding(vocab_size, d_model)
        self.pos_encoding = SinusoidalPositionEncoding(d_model, max_len)
        self.blocks = nn.ModuleList(
            TransformerEncoderBlock(d_model, num_heads, d_ff, dropout, norm_first=True)
            for _ in range(num_layers))
        self.final_norm = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.token_embed.weight
        self.register_buffer("causal_mask", torch.ones(max_len, max_len).triu(1).bool())

    def forward(self, tokens, return_attn=False):
        tokens = _tokens_arg("tokens", tokens, self.vocab_size, self.max_len)
        _bool_arg("return_attn", return_attn)
        length = tokens.shape[1]
        future = self.causal_mask[:length, :length].to(tokens.device)[None, None]
        hidden = self.pos_encoding(self.token_embed(tokens) * math.sqrt(self.d_model))
        maps = []
        for block in self.blocks:
            hidden, weights = block(hidden, future)
            maps.append(weights)
        logits = self.lm_head(self.final_norm(hidden))
        return logits, (maps if return_attn else None)

    def _seed_list(self, seed_tokens):
        if isinstance(seed_tokens, torch.Tensor):
            _tensor_arg("seed_tokens", seed_tokens, integer=True)
            if seed_tokens.dim() == 2 and seed_tokens.shape[0] == 1:
                seed_tokens = seed_tokens[0]
            if seed_tokens.dim() != 1:
                raise ValueError(f"seed_tokens has to be one sequence (1-D), "
                                 f"got shape {tuple(seed_tokens.shape)}")
            ids = [int(t) for t in seed_tokens.tolist()]
        elif isinstance(seed_tokens, (list, tuple)):
            ids = []
            for t in seed_tokens:
                if isinstance(t, bool) or not isinstance(t, numbers.Integral):
                    raise TypeError(f"seed_tokens has to contain integers, "
                                    f"found {type(t).__name__} {t!r}")
                ids.append(int(t))
        else:
            raise TypeError(f"seed_tokens has to be a list of ints or a 1-D integer tensor, "
                            f"got {type(seed_tokens).__name__}")
        if not ids:
            raise ValueError("seed_tokens is empty; generation needs at least one token")
        bad = [t for t in ids if not 0 <= t < self.vocab_size]
        if bad:
            raise ValueError(f"seed_tokens holds ids outside [0, {self.vocab_size}): {bad[:5]}")
        return ids

    def generate(self, seed_tokens, max_new_tokens=50, temperature=0.8, top_k=None,
                 generator=None):
        ids = self._seed_list(seed_tokens)
        max_new_tokens = _int_arg("max_new_tokens", max_new_tokens, low=1)
        if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
            raise TypeError(f"temperature has to be a real number, "
                            f"got {type(temperature).__name__}")
        temperature = float(temperature)
        if not math.isfinite(temperature) or temperature < 0:
            raise ValueError(f"temperature has to be finite and >= 0, got {temperature}")
        if top_k is not None:
            top_k = _int_arg("top_k", top_k, low=1)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator has to be a torch.Generator or None, "
                            f"got {type(generator).__name__}")

        device = self.token_embed.weight.device
        was_training = self.training
        self.eval()
        try:
            with torch.no_grad():
                for _ in range(max_new_tokens):
                    window = torch.tensor([ids[-self.max_len:]], dtype=torch.long, device=device)
                    logits, _ = self(window)
                    last = logits[0, -1].double()
                    if temperature == 0:
                        ids.append(int(last.argmax()))
                        continue
                    if top_k is not None and top_k < last.numel():
                        keep = torch.zeros_like(last, dtype=torch.bool)
                        keep[last.topk(top_k).indices] = True
                        last = torch.where(keep, last, torch.full_like(last, float("-inf")))
                    shifted = (last - last.max()) / temperature
                    probs = shifted.softmax(dim=-1)
                    pick = torch.multinomial(probs, 1, generator=generator)
                    ids.append(int(pick))
        finally:
            self.train(was_training)
        return ids


class Seq2SeqTransformer(nn.Module):
    """Encoder-decoder Transformer (Pre-LN blocks, final norms on both stacks)."""

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=128, num_heads=4,
                 num_encoder_layers=2, num_decoder_layers=2, d_ff=512, max_len=128,
                 dropout=0.1, pad_id=0):
        super().__init__()
        src_vocab_size = _int_arg("src_vocab_size", src_vocab_size)
        tgt_vocab_size = _int_arg("tgt_vocab_size", tgt_vocab_size)
        num_encoder_layers = _int_arg("num_encoder_layers", num_encoder_layers)
        num_decoder_layers = _int_arg("num_decoder_layers", num_decoder_layers)
        max_len = _int_arg("max_len", max_len)
        d_model, num_heads, d_ff, dropout, _ = _block_args(d_model, num_heads, d_ff, dropout, True)
        pad_id = _int_arg("pad_id", pad_id, low=0)
        if pad_id >= src_vocab_size:
            raise ValueError(f"pad_id={pad_id} is not a source id (src_vocab_size={src_vocab_size})")
        self.src_vocab_size = src_vocab_size
        self.tgt_vocab_size = tgt_vocab_size
        self.d_model = d_model
        self.num_heads = num_heads
        self.max_len = max_len
        self.pad_id = pad_id

        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
        self.position = SinusoidalPositionEncoding(d_model, max_len)
        self.encoder = nn.ModuleList(
            TransformerEncoderBlock(d_model, num_heads, d_ff, dropout, norm_first=True)
            for _ in range(num_encoder_layers))
        self.decoder = nn.ModuleList(
            TransformerDecoderBlock(d_model, num_heads, d_ff, dropout, norm_first=True)
            for _ in range(num_decoder_layers))
        self.encoder_norm = nn.LayerNorm(d_model)
        self.decoder_norm = nn.LayerNorm(d_model)
        self.generator_head = nn.Linear(d_model, tgt_vocab_size)

    def encode(self, src):
        """Returns (memory, source mask)."""
        src_blocked = padding_mask(src, self.pad_id)
        h = self.position(self.src_embed(src) * math.sqrt(self.d_model))
        for block in self.encoder:
            h, _ = block(h, src_blocked)
        return self.encoder_norm(h), src_blocked

    def forward(self, src, tgt):
        src = _tokens_arg("src", src, self.src_vocab_size, self.max_len)
        tgt = _tokens_arg("tgt", tgt, self.tgt_vocab_size, self.max_len)
        if src.shape[0] != tgt.shape[0]:
            raise ValueError(f"src and tgt need the same batch size, "
                             f"got {tuple(src.shape)} and {tuple(tgt.shape)}")
        memory, src_blocked = self.encode(src)
        length = tgt.shape[1]
        future = causal_mask(length, device=tgt.device)[None, None]
        y = self.position(self.tgt_embed(tgt) * math.sqrt(self.d_model))
        for block in self.decoder:
            y, _, _ = block(y, memory, tgt_mask=future, memory_mask=src_blocked)
        return self.generator_head(self.decoder_norm(y))
