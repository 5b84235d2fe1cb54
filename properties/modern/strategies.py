"""Strategies and builders for the modern track's laws (``docs/contract.md``, "The modern track").

The classic track's strategies (:mod:`properties.strategies`) draw the tensors, seeds, dtypes,
masks and tokens: entries are multiples of 1/8 in ``[-3, 3]`` built from one drawn seed, and
everything shrinks to the smallest sizes. This module adds what the Llama-style decoder needs:
sizes with key/value heads (:class:`LlamaConfig`), integer positions, and one builder per contract
class that gives the module known weights by the contract's names
(:mod:`transformer_spec.probes.llama_shapes`, :func:`~transformer_spec.probes.testing.seeded_parameters`), in
``eval()``. Never the implementation's own initialisation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
from hypothesis import strategies as st

from transformer_spec import profiles
from transformer_spec.probes.llama_shapes import (
    gqa_shapes,
    llama_block_shapes,
    minillama_parameters,
    rmsnorm_shapes,
)
from transformer_spec.probes.testing import seeded_parameters, set_parameters

from ..strategies import causal, law_tolerance, seeds, tensors

#: ``max_len`` of the rotary tables in the laws: every drawn position lies below it
MAX_LEN = 16


# --------------------------------------------------------------------------- sizes
@dataclass(frozen=True)
class LlamaConfig:
    """Sizes of a modern-track module (``d_model = num_heads * head_dim``, ``head_dim`` even)."""

    d_model: int
    num_heads: int
    num_kv_heads: int
    d_ff: int
    seed: int
    dtype: torch.dtype

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads

    @property
    def group(self) -> int:
        """Query heads per key/value head."""
        return self.num_heads // self.num_kv_heads


def _divisors(n: int) -> list[int]:
    return [k for k in range(n, 0, -1) if n % k == 0]  # n first: shrinks to multi-head attention


@st.composite
def llama_configs(draw, *, kv: str = "any", max_heads: int = 4, max_head_dim: int = 4, max_ff: int = 8,
                  dtype: torch.dtype | None = None) -> LlamaConfig:
    """Small sizes (shrink to one head of 2 features). ``kv``: ``"any"`` draws ``num_kv_heads``
    among the divisors of ``num_heads``, ``"mha"`` is ``num_heads``, ``"mqa"`` is 1, ``"grouped"``
    has groups of 2 or more query heads sharing each of 2 or more kv heads (4 or 6 heads, 2 or 3
    kv heads; ``max_heads`` does not apply). ``dtype=None``: float64, or float32 under a profile lacking
    ``float64``."""
    heads = draw(st.sampled_from([4, 6]) if kv == "grouped" else st.integers(1, max_heads))
    head_dim = 2 * draw(st.integers(1, max_head_dim // 2))
    if kv == "any" and profiles.lacks("gqa"):
        kv = "mha"  # the profile's attention has as many key/value heads as query heads
    choices = {"any": _divisors(heads), "mha": [heads], "mqa": [1], "grouped": _divisors(heads)[1:-1]}[kv]
    kv_heads = draw(st.sampled_from(choices))
    d_ff = draw(st.integers(1, max_ff))
    if dtype is None:
        dtype = torch.float32 if profiles.lacks("float64") else torch.float64
    return LlamaConfig(heads * head_dim, heads, kv_heads, d_ff, draw(seeds()), dtype)


# --------------------------------------------------------------------------- tolerances
def rope_tolerance(dtype: torch.dtype, scale: float = 1.0) -> dict[str, float]:
    """``{"rtol", "atol"}`` for the two sides of a law that went through rotations at different
    positions. The contract lets the angle tables be float32 even for float64 input (as Llama's), which
    holds a rotation at positions below 16 to about 1e-7 of float64's (``spec_tests/modern/formulas.py``:
    ``ROPE_TOL``): float64 ``rtol=1e-6, atol=1e-5 * scale``; float32 :func:`law_tolerance`'s ``deep``
    one, ``atol`` times ``scale`` too. ``scale``: how large the compared values grow (scores, outputs)."""
    if dtype == torch.float64:
        return {"rtol": 1e-6, "atol": 1e-5 * scale}
    tol = law_tolerance(dtype, deep=True)
    return {"rtol": tol["rtol"], "atol": tol["atol"] * scale}


# --------------------------------------------------------------------------- positions
@st.composite
def positions(draw, shape: tuple[int, ...], max_len: int = MAX_LEN) -> torch.Tensor:
    """Integer positions of ``shape`` in ``[0, max_len)`` (shrink to all zeros)."""
    n = 1
    for s in shape:
        n *= s
    flat = draw(st.lists(st.integers(0, max_len - 1), min_size=n, max_size=n))
    return torch.tensor(flat, dtype=torch.long).reshape(shape)


def causal_or_none(L: int):
    """The causal mask or no mask, or only the causal mask under a profile whose attention is always
    causal (:mod:`transformer_spec.profiles`)."""
    return st.just(causal(L)) if profiles.lacks("non_causal") else st.none() | st.just(causal(L))


def new_future(data, x: torch.Tensor, t: int) -> torch.Tensor:
    """``x (B, L, ...)`` with its positions after ``t`` replaced by freshly drawn values (label "new x")."""
    x2 = x.clone()
    x2[:, t + 1 :] = data.draw(tensors(tuple(x.shape), x.dtype), label="new x")[:, t + 1 :]
    return x2


# --------------------------------------------------------------------------- builders
def with_weights(module: nn.Module, params: dict, dtype: torch.dtype) -> nn.Module:
    """``module`` in ``dtype`` and ``eval()``, holding the named weights ``params``."""
    return set_parameters(module.to(dtype), params).eval()


def rmsnorm(impl, d_model: int, seed: int, dtype: torch.dtype, eps: float = 1e-5) -> nn.Module:
    """``RMSNorm(d_model, eps)`` with a seeded ``weight``."""
    return with_weights(impl.RMSNorm(d_model, eps=eps), seeded_parameters(rmsnorm_shapes(d_model), seed), dtype)


def gqa(impl, config: LlamaConfig, *, rope: bool = True, max_len: int = MAX_LEN, seed: int | None = None) -> nn.Module:
    """``GroupedQueryAttention`` of ``config``'s sizes, with ``RotaryPositionEmbedding(head_dim, max_len)``
    or ``rope=None``; weights seeded from ``seed`` (default ``config.seed``)."""
    r = impl.RotaryPositionEmbedding(config.head_dim, max_len) if rope else None
    m = impl.GroupedQueryAttention(d_model=config.d_model, num_heads=config.num_heads,
                                   num_kv_heads=config.num_kv_heads, rope=r)
    shapes = gqa_shapes(config.d_model, config.num_heads, config.num_kv_heads)
    return with_weights(m, seeded_parameters(shapes, config.seed if seed is None else seed), config.dtype)


def llama_block(impl, config: LlamaConfig, max_len: int = MAX_LEN) -> nn.Module:
    m = impl.LlamaBlock(d_model=config.d_model, num_heads=config.num_heads, d_ff=config.d_ff,
                        num_kv_heads=config.num_kv_heads, max_len=max_len)
    shapes = llama_block_shapes(config.d_model, config.num_heads, config.d_ff, config.num_kv_heads)
    return with_weights(m, seeded_parameters(shapes, config.seed), config.dtype)


def minillama(impl, config: LlamaConfig, vocab: int, *, layers: int = 1, max_len: int = 8) -> nn.Module:
    """``MiniLlama`` (untied head) of ``config``'s sizes with ``layers`` blocks."""
    m = impl.MiniLlama(vocab_size=vocab, d_model=config.d_model, num_layers=layers, num_heads=config.num_heads,
                       num_kv_heads=config.num_kv_heads, d_ff=config.d_ff, max_len=max_len)
    params = minillama_parameters(vocab, config.d_model, layers, config.num_heads, config.d_ff, config.seed,
                                  num_kv_heads=config.num_kv_heads)
    return with_weights(m, params, config.dtype)


# --------------------------------------------------------------------------- calls
def accepted(call, what: str):
    """``call()``, whose arguments the contract accepts: a ``ValueError`` or ``TypeError`` it raises
    is this law's failure (an argument check that rejects valid arguments), said as such."""
    try:
        return call()
    except (ValueError, TypeError) as exc:
        raise AssertionError(f"{what} raised {type(exc).__name__}({str(exc)!r}), but the contract accepts "
                             f"these arguments") from None
