"""The modern track's formulas, written from ``docs/contract.md`` ("The modern track") with torch's
primitives: the golden tests' oracle where torch has no module of its own (rotary positions, the
Llama block, MiniLlama). Independent of ``reference/``: each function is the contract row's formula,
taking the weights by the contract's names from a plain ``dict``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

#: Tolerances of a float64 result that went through a rotation: the contract lets the angle tables be
#: float32 (as Llama's are), which holds a rotation at positions below ~100 to about 1e-7 of float64's;
#: ``FAR`` is for positions in the thousands, where a float32 angle p * theta_i is off by up to p * 6e-8.
ROPE_TOL = {"rtol": 1e-6, "atol": 1e-6}
ROPE_TOL_FAR = {"rtol": 1e-5, "atol": 5e-5}


def rms_norm(x, weight, eps=1e-5):
    """``x * rsqrt(mean(x**2, -1) + eps) * weight`` (Zhang & Sennrich 2019)."""
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rotate(x, positions, theta=10000.0):
    """RoFormer eq. 34 with complex numbers: the pair ``(x[2i], x[2i+1])`` is ``x[2i] + 1j x[2i+1]``,
    multiplied by ``exp(1j p theta ** (-2i / d))``; ``positions`` broadcast to ``x.shape[:-1]``."""
    d = x.size(-1)
    freqs = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    angles = positions.to(torch.float64)[..., None] * freqs  # (..., L, d/2)
    pairs = torch.view_as_complex(x.to(torch.float64).reshape(*x.shape[:-1], d // 2, 2).contiguous())
    turned = pairs * torch.polar(torch.ones_like(angles), angles)
    return torch.view_as_real(turned).reshape(x.shape).to(x.dtype)


def swiglu(x, p, prefix=""):
    """``w2(silu(w1 x) * w3 x)`` (Shazeer 2020)."""
    return F.linear(F.silu(F.linear(x, p[f"{prefix}w1.weight"])) * F.linear(x, p[f"{prefix}w3.weight"]),
                    p[f"{prefix}w2.weight"])


def gqa(x, p, num_heads, num_kv_heads, mask=None, positions=None, theta=10000.0, rope=True, prefix=""):
    """Grouped-query attention head by head: query head ``h`` uses key/value head
    ``h // (num_heads // num_kv_heads)``; q and k rotated (never v); ``True`` in ``mask`` = blocked."""
    B, L, D = x.shape
    d = D // num_heads
    group = num_heads // num_kv_heads
    q = F.linear(x, p[f"{prefix}q_proj.weight"]).view(B, L, num_heads, d)
    k = F.linear(x, p[f"{prefix}k_proj.weight"]).view(B, L, num_kv_heads, d)
    v = F.linear(x, p[f"{prefix}v_proj.weight"]).view(B, L, num_kv_heads, d)
    pos = torch.arange(L) if positions is None else positions
    heads, weights = [], []
    for h in range(num_heads):
        qh, kh, vh = q[:, :, h], k[:, :, h // group], v[:, :, h // group]  # (B, L, d)
        if rope:
            qh, kh = rotate(qh, pos, theta), rotate(kh, pos, theta)
        scores = qh @ kh.transpose(-2, -1) / d ** 0.5  # (B, L, L)
        if mask is not None:
            m = torch.broadcast_to(mask, (B, num_heads, L, L))[:, h]
            scores = scores.masked_fill(m, float("-inf"))
        w = torch.softmax(scores, dim=-1)
        heads.append(w @ vh)
        weights.append(w)
    out = F.linear(torch.cat(heads, dim=-1), p[f"{prefix}output_proj.weight"])
    return out, torch.stack(weights, dim=1)  # (B, L, D), (B, H, L, L)


def llama_block(x, p, num_heads, num_kv_heads, mask=None, positions=None, theta=10000.0, eps=1e-5, prefix=""):
    """Pre-norm: ``h = x + attn(ln1(x))``, ``out = h + ffn(ln2(h))``."""
    a, w = gqa(rms_norm(x, p[f"{prefix}ln1.weight"], eps), p, num_heads, num_kv_heads, mask, positions, theta,
               prefix=f"{prefix}attn.")
    h = x + a
    return h + swiglu(rms_norm(h, p[f"{prefix}ln2.weight"], eps), p, prefix=f"{prefix}ffn."), w


def minillama(tokens, p, num_layers, num_heads, num_kv_heads, theta=10000.0, eps=1e-5):
    """``lm_head(ln_final(layers(token_embeddings(tokens))))``, causal, positions ``0 .. L-1``."""
    L = tokens.size(1)
    x = p["token_embeddings.weight"][tokens]
    mask = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)
    for i in range(num_layers):
        x, _ = llama_block(x, p, num_heads, num_kv_heads, mask, None, theta, eps, prefix=f"layers.{i}.")
    return F.linear(rms_norm(x, p["ln_final.weight"], eps), p["lm_head.weight"])
