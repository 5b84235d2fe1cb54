"""Hypothesis strategies for the laws of attention: shapes, masks, dtypes, tensors, modules.

Everything shrinks towards a small, readable counterexample: dimensions shrink to 1, masks
shrink to "nothing blocked", permutations to the identity, dtypes to float64 (the exact one),
scalars to 0. Tensors are built from one drawn seed (:func:`tensors`): their entries are
multiples of 1/8 in ``[-3, 3]`` (exact in float32, printed exactly), and they shrink in shape
(and to all zeros when zeros fail too), not entry by entry. A failing property therefore shows a
student the smallest shapes and dtype on which it breaks, as tensors printed in full.

Module weights are the exception: they come from a seed (``seeds()``) through
:func:`transformer_spec.probes.testing.seeded_parameters` / :func:`randomize_parameters`, because a
module has too many numbers to draw one by one and they do not need to be read.

Tolerances per dtype (:func:`law_tolerance`): float64 ``rtol=1e-9, atol=1e-10``; float32
``rtol=1e-4, atol=1e-5`` for one attention call and ``rtol=1e-4, atol=1e-4`` for stacks of
layers with LayerNorm (float32 rounding differs between computation orders, thread counts and
CPUs, and LayerNorm amplifies it on nearly constant rows). Never bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from hypothesis import settings
from hypothesis import strategies as st

from transformer_spec import profiles
from transformer_spec.contract import inputs


# --------------------------------------------------------------------------- budget
def budget(fraction: float) -> settings:
    """``@settings`` for an expensive property: ``fraction`` of the profile's examples (at least 3).

    Evaluated when the test module is imported, after the plugin loaded the profile, so
    ``--hypothesis-profile thorough`` scales these too; every other setting (derandomize,
    database, deadline) is the profile's.
    """
    return settings(max_examples=max(3, round(settings.default.max_examples * fraction)))


# --------------------------------------------------------------------------- tolerances
def law_tolerance(dtype: torch.dtype, *, deep: bool = False) -> dict[str, float]:
    """``{"rtol", "atol"}`` for comparing the two sides of a law (see the module docstring)."""
    if dtype == torch.float64:
        return {"rtol": 1e-9, "atol": 1e-10}
    return {"rtol": 1e-4, "atol": 1e-4 if deep else 1e-5}


# --------------------------------------------------------------------------- scalars
#: tensor entries and scalars are multiples of 1/GRID: exact in float32 and float64, and printed exactly by
#: torch's 4 decimals, so a student can copy a counterexample from the message
GRID = 8


def dtypes() -> st.SearchStrategy[torch.dtype]:
    """float64 or float32 (shrinks to float64); float32 only under a profile lacking ``float64``."""
    if profiles.lacks("float64"):
        return st.just(torch.float32)
    return st.sampled_from([torch.float64, torch.float32])


def seeds() -> st.SearchStrategy[int]:
    """A seed for module weights (shrinks to 0)."""
    return st.integers(0, 2**31 - 1)


def values(limit: float = 3.0) -> st.SearchStrategy[float]:
    """Multiples of ``1/GRID`` in ``[-limit, limit]`` (exact in float32 and float64; shrink to 0)."""
    top = math.floor(limit * GRID)
    return st.integers(-top, top).map(lambda step: step / GRID)


def coefficients() -> st.SearchStrategy[float]:
    """Scalars for linear combinations."""
    return values(3.0)


# --------------------------------------------------------------------------- tensors
def tensor_seeds() -> st.SearchStrategy[int]:
    """The seed of one drawn tensor (shrinks to 0, the all-zeros tensor). 1024 seeds are plenty
    for a few dozen examples; a narrow range keeps the shrinker from spending its calls on seeds
    (a smaller seed is no simpler) instead of on shapes."""
    return st.integers(0, 1023)


def seeded_tensor(shape: tuple[int, ...], dtype: torch.dtype, seed: int, limit: float = 3.0) -> torch.Tensor:
    """The tensor of ``shape`` and ``dtype`` that ``seed`` names: all zeros for seed 0, else
    independent uniform multiples of ``1/GRID`` in ``[-limit, limit]``."""
    if seed == 0:
        return torch.zeros(shape, dtype=dtype)
    top = math.floor(limit * GRID)
    gen = torch.Generator().manual_seed(seed)
    steps = torch.randint(-top, top + 1, shape, generator=gen, dtype=torch.int64)
    return (steps.to(torch.float64) / GRID).to(dtype)


@st.composite
def tensors(draw, shape: tuple[int, ...], dtype: torch.dtype, limit: float = 3.0) -> torch.Tensor:
    """A tensor of ``shape`` and ``dtype`` built from one drawn seed (:func:`seeded_tensor`).

    One choice per tensor instead of one per entry: drawing and shrinking cost the same for a
    (2, 2, 5, 4) tensor as for a scalar. The shape still shrinks (the caller draws it), so a
    failing law still shows a small tensor, printed in full; its values do not shrink (a smaller
    seed is no simpler), except to all zeros when zeros fail too.
    """
    return seeded_tensor(shape, dtype, draw(tensor_seeds()), limit)


@st.composite
def bool_tensors(draw, shape: tuple[int, ...]) -> torch.Tensor:
    """A bool tensor of ``shape`` (shrinks to all ``False``: nothing blocked)."""
    n = math.prod(shape)
    flat = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return torch.tensor(flat, dtype=torch.bool).reshape(shape)


def batch_shapes(max_dims: int = 2, max_size: int = 2, min_dims: int = 0) -> st.SearchStrategy[tuple[int, ...]]:
    """Leading ``...`` dimensions of an attention call: ``()``, ``(B,)``, ``(B, H)`` (shrinks to ``()``)."""
    return st.lists(st.integers(1, max_size), min_size=min_dims, max_size=max_dims).map(tuple)


@st.composite
def masks(draw, batch: tuple[int, ...], lq: int, lk: int) -> torch.Tensor:
    """A random bool mask (``True`` = blocked) of a shape that broadcasts to ``batch + (lq, lk)``:
    ``(lq, lk)`` (like a causal mask), ``(1, lk)`` (a row of blocked keys, like padding) or the
    full ``batch + (lq, lk)``. Fully blocked query rows occur (on purpose)."""
    shape = draw(st.sampled_from([(lq, lk), (1, lk), batch + (lq, lk)]))
    mask = draw(bool_tensors(shape))
    if profiles.lacks("blocked_rows"):  # the profile leaves fully blocked rows undefined: key 0 stays allowed
        mask[..., 0] = False
    return mask


#: the causal mask, built independently of the submission: ``True`` where ``j > i``
causal = inputs.causal


def permutations_of(n: int) -> st.SearchStrategy[list[int]]:
    """A permutation of ``range(n)`` (shrinks to the identity)."""
    return st.permutations(list(range(n)))


# --------------------------------------------------------------------------- attention inputs
@dataclass
class AttentionInputs:
    """``q (..., Lq, d_k)``, ``k (..., Lk, d_k)``, ``v (..., Lk, d_v)``, ``mask`` or ``None``."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    mask: torch.Tensor | None

    @property
    def dtype(self) -> torch.dtype:
        return self.q.dtype

    @property
    def batch(self) -> tuple[int, ...]:
        return tuple(self.q.shape[:-2])


@st.composite
def attention_inputs(draw, *, with_mask: bool | None = None, dtype: torch.dtype | None = None,
                     same_length: bool = False, max_len: int = 5, max_dim: int = 4,
                     limit: float = 3.0, min_batch_dims: int = 0, min_keys: int = 1) -> AttentionInputs:
    """Inputs of ``scaled_dot_product_attention``: leading dimensions ``()``/``(B,)``/``(B, H)``,
    lengths 1..``max_len`` (at least ``min_keys`` keys), ``d_k``, ``d_v`` 1..``max_dim``.
    ``with_mask=None`` draws whether to mask (shrinks to no mask); ``same_length`` makes ``Lq == Lk``."""
    dtype = draw(dtypes()) if dtype is None else dtype
    batch = draw(batch_shapes(min_dims=min_batch_dims))
    lq = draw(st.integers(min_keys if same_length else 1, max_len))
    lk = lq if same_length else draw(st.integers(min_keys, max_len))
    dk = draw(st.integers(1, max_dim))
    dv = draw(st.integers(1, max_dim))
    q = draw(tensors(batch + (lq, dk), dtype, limit))
    k = draw(tensors(batch + (lk, dk), dtype, limit))
    v = draw(tensors(batch + (lk, dv), dtype, limit))
    use_mask = draw(st.booleans()) if with_mask is None else with_mask
    mask = draw(masks(batch, lq, lk)) if use_mask else None
    return AttentionInputs(q, k, v, mask)


# --------------------------------------------------------------------------- module configs
@dataclass(frozen=True)
class Config:
    """Sizes of a module under test (``d_model = num_heads * d_k``)."""

    d_model: int
    num_heads: int
    d_ff: int
    seed: int
    dtype: torch.dtype

    @property
    def d_k(self) -> int:
        return self.d_model // self.num_heads


@st.composite
def configs(draw, *, max_heads: int = 2, max_dk: int = 3, min_dk: int = 1, max_ff: int = 8,
            dtype: torch.dtype | None = None) -> Config:
    """Small sizes for MultiHeadAttention, FeedForward and the blocks (shrink to one head)."""
    heads = draw(st.integers(1, max_heads))
    dk = draw(st.integers(min_dk, max_dk))
    d_ff = draw(st.integers(1, max_ff))
    seed = draw(seeds())
    dtype = draw(dtypes()) if dtype is None else dtype
    return Config(heads * dk, heads, d_ff, seed, dtype)


@st.composite
def sequences(draw, config: Config, *, batch: int | None = None, length: int | None = None,
              max_batch: int = 2, max_len: int = 5) -> torch.Tensor:
    """An input ``x (B, L, d_model)`` for a module built from ``config``."""
    b = draw(st.integers(1, max_batch)) if batch is None else batch
    n = draw(st.integers(1, max_len)) if length is None else length
    return draw(tensors((b, n, config.d_model), config.dtype))


@st.composite
def token_batches(draw, vocab_size: int, *, batch: int | None = None, length: int | None = None,
                  max_batch: int = 2, min_len: int = 1, max_len: int = 6) -> torch.Tensor:
    """Token ids ``(B, L)`` in ``[0, vocab_size)`` (shrink to all zeros)."""
    b = draw(st.integers(1, max_batch)) if batch is None else batch
    n = draw(st.integers(min_len, max_len)) if length is None else length
    flat = draw(st.lists(st.integers(0, vocab_size - 1), min_size=b * n, max_size=b * n))
    return torch.tensor(flat, dtype=torch.long).reshape(b, n)


# --------------------------------------------------------------------------- module weights
def randomize_parameters(module: nn.Module, seed: int) -> nn.Module:
    """Overwrite every parameter of ``module`` with seeded values, whatever its names.

    For modules whose contract leaves some names free (``Seq2SeqTransformer``) and for laws that
    hold for any weights; visits ``named_parameters()`` (tied weights once). Matrices get
    ``N(0, 1) / sqrt(fan_in)``, LayerNorm-like weights ``1 + 0.2 N(0, 1)``, other vectors
    ``0.2 N(0, 1)``. Never relies on the implementation's own initialisation.
    """
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            r = torch.randn(tuple(p.shape), generator=gen, dtype=torch.float64)
            if p.dim() >= 2:
                value = r / math.sqrt(p.shape[-1])
            elif name.endswith("weight"):
                value = 1.0 + 0.2 * r
            else:
                value = 0.2 * r
            p.copy_(value.to(p.dtype))
    return module


def build(cls, config: Config, **kwargs) -> nn.Module:
    """``cls(**kwargs)`` in ``config.dtype``, every parameter seeded from ``config.seed``, in ``eval()``.

    The default dropout (0.1) is kept on purpose: in ``eval()`` it must not act.
    """
    module = cls(**kwargs)
    module = module.to(config.dtype)
    randomize_parameters(module, config.seed)
    return module.eval()
