"""The 'position' component. Sinusoidal position encoding and learned position embeddings (seed 000).

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/registry.py)."""

from __future__ import annotations

import torch

from .. import behaviour as bp
from .. import inputs, recheck
from ..registry import Component, Name, Recheck, pitfall

NAMES = (
    Name("SinusoidalPositionEncoding", "position", "module",
         "SinusoidalPositionEncoding(d_model, max_len=5000) with buffer pe (1, max_len, D); "
         "forward(x) = x + pe[:, :L]"),
    Name("LearnedPositionEmbedding", "position", "module",
         "LearnedPositionEmbedding(d_model, max_len) with embedding; forward(x) = x + embedding(arange(L))"),
)

PITFALLS = (
    pitfall("sin_cos_swapped", "position",
            "sin and cos are swapped: PE[pos, 2i] = sin(...), PE[pos, 2i+1] = cos(...) (position 0 is 0, 1, 0, 1, ...).",
            ("position.py", "pe[:, 0::2] = torch.sin(position * div_term)", "pe[:, 0::2] = torch.cos(position * div_term)"),
            ("position.py", "pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])",
             "pe[:, 1::2] = torch.sin(position * div_term[: d_model // 2])")),
    pitfall("wrong_exponent", "position",
            "The frequencies use 10000^(i/d_model): the exponent is 2i/d_model, i the index of the sin/cos pair.",
            ("position.py", "torch.arange(0, d_model, 2, dtype=torch.float64) * (",
             "torch.arange(0, d_model, 2, dtype=torch.float64) / 2 * (")),
    pitfall("positions_start_at_1", "position",
            "The positions start at 1: the first token is position 0 (its encoding is 0, 1, 0, 1, ...).",
            ("position.py", "torch.arange(max_len, dtype=torch.float64)",
             "torch.arange(1, max_len + 1, dtype=torch.float64)")),
    pitfall("sin_cos_halves_not_interleaved", "position",
            "The encoding puts all sines in the first half and all cosines in the second: they alternate, "
            "sin at even features, cos at odd ones.",
            ("position.py", "pe[:, 0::2] = torch.sin(position * div_term)",
             "pe[:, : (d_model + 1) // 2] = torch.sin(position * div_term)"),
            ("position.py", "pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])",
             "pe[:, (d_model + 1) // 2 :] = torch.cos(position * div_term[: d_model // 2])")),
)


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'position' (transformer_spec/behaviour.py)."""
    bp.capture(f, "sinusoidal", lambda: impl.SinusoidalPositionEncoding(d_model=6, max_len=10).to(bp.DTYPE)(
        torch.zeros(1, 7, 6, dtype=bp.DTYPE)))
    p = {"embedding.weight": inputs.randn(10, 6, seed=41)}
    bp.capture(f, "learned", lambda: bp.module(impl.LearnedPositionEmbedding, p, d_model=6, max_len=10)(
        torch.zeros(2, 4, 6, dtype=bp.DTYPE)))


def _sinusoidal(mod, seed):
    d_model, length = 8, 5 + seed % 11
    pe = mod.SinusoidalPositionEncoding(d_model, max_len=128).double()
    return recheck.as_numpy(out=pe(torch.zeros(1, length, d_model, dtype=torch.float64)))


RECHECKS = (Recheck("sinusoidal", "position",
                    ("spec_tests/test_seed000_facts.py::test_sinusoidal_hand_computed_entries[float64]",), _sinusoidal),)


COMPONENT = Component(
    "position", label="pos", points=8, order=7, depends_on=(),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
