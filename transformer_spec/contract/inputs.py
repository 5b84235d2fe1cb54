"""Seeded inputs and masks, shared by the golden tests, the hidden re-checks and the diagnosis.

Every tensor is drawn from ``torch.Generator().manual_seed(seed)`` in float64, so the same call
gives the same numbers in every process (a re-check in the class grader's parent computes the
reference's side of what the submission's process computes on its side).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Sizes:
    """Batch, query and key lengths, model width, heads and feed-forward width."""

    b: int
    lq: int
    lk: int
    d: int
    h: int
    ff: int


#: the sizes of the torch-oracle tests (``spec_tests/test_torch_oracle.py``), mirrored by the re-checks
ORACLE = Sizes(b=2, lq=5, lk=7, d=12, h=3, ff=20)


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(*shape: int, seed: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Standard normal values drawn in float64, then cast to ``dtype``."""
    return torch.randn(*shape, generator=generator(seed), dtype=torch.float64).to(dtype)


def grid(*shape: int, seed: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Multiples of 1/8 in [-3, 3], as the laws draw their tensors (properties/strategies.py): the domain a
    training utility's re-check shares with its anchor law."""
    return (torch.randint(-24, 25, shape, generator=generator(seed)).to(torch.float64) / 8).to(dtype)


def random_mask(*shape: int, seed: int, p: float = 0.35) -> torch.Tensor:
    """A random bool mask (True = blocked) in which every row keeps at least its first key."""
    m = torch.rand(*shape, generator=generator(seed)) < p
    m[..., 0] = False
    return m


def causal(length: int) -> torch.Tensor:
    """``(L, L)``, True strictly above the diagonal (the future), built without the submission."""
    return torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)


def padding(length: int, lengths: list[int]) -> torch.Tensor:
    """``(B, 1, 1, L)``, True at the positions >= each sequence's length."""
    return (torch.arange(length)[None, :] >= torch.tensor(lengths)[:, None])[:, None, None, :]
