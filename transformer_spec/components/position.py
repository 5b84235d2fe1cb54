"""The 'position' component. Sinusoidal position encoding and learned position embeddings (seed 000).

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import torch

from transformer_spec.contract import inputs
from transformer_spec.contract.registry import Component, Name, Recheck, pitfall
from transformer_spec.probes import behaviour as bp
from transformer_spec.probes import recheck

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
    # mined from public implementations (issue 27): each cites where the mistake was made
    pitfall('pe_indexed_by_batch', 'position',
            'The position encoding is sliced by the batch size, pe[:B], with a (max_len, 1, D) layout '
            'made for (L, B, D) inputs: with batch-first (B, L, D) inputs every token of sequence b '
        "gets PE[b]. Slice the positions by the length, x + pe[:, :L].",
            ('position.py', 'return x + self.pe[:, start : start + x.size(1)].to(x.dtype)',
             'return x + self.pe[0, start : start + x.size(0)].unsqueeze(1).to(x.dtype)  # (B, 1, D)'),
            source='cmu-l3/anlp-fall2025-code#1'),
    pitfall('pe_single_position_added_to_all_tokens', 'position',
            'The encoding indexes the table with the length instead of slicing it, pe[:, L] instead '
            'of pe[:, :L]: every token gets the one vector of position L (and L = max_len is out of '
        "range). Add pe[:, :L], one row per position.",
            ('position.py', 'return x + self.pe[:, start : start + x.size(1)].to(x.dtype)',
             'return x + self.pe[:, start + x.size(1), :].to(x.dtype)  # one row, broadcast to every token'),
            source='DiffPoseTalk/DiffPoseTalk#20'),
    pitfall('pe_exponent_from_feature_index', 'position',
            'The frequency uses the feature index j itself, 10000^(2j/D), so sin at 2i gets exponent '
            '4i/D and cos at 2i+1 gets (4i+2)/D: a sin/cos pair must share one frequency, '
        "10000^(2i/D) with i the pair index (j // 2).",
            ('position.py', '        pe[:, 0::2] = torch.sin(position * div_term)  # even features: sin\n        pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])  # odd features: cos\n',
             '        feature = torch.arange(d_model, dtype=torch.float64)  # j = 0 .. D-1\n        angle = position / torch.pow(10000.0, 2 * feature / d_model)  # exponent 2j/D, j the feature\n        pe[:, 0::2] = torch.sin(angle[:, 0::2])\n        pe[:, 1::2] = torch.cos(angle[:, 1::2])\n'),
            source='jadore801120/attention-is-all-you-need-pytorch#32'),
    pitfall('pe_cos_frequency_from_odd_index', 'position',
            'The cosines use their own odd feature index in the exponent, 10000^((2i+1)/D), so each '
            'cos has a different frequency from its sin: PE[pos, 2i+1] = cos(pos / 10000^(2i/D)), the '
        "same frequency as PE[pos, 2i].",
            ('position.py', 'pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])',
             'pe[:, 1::2] = torch.cos(position / torch.pow(10000.0, torch.arange(1, d_model, 2, dtype=torch.float64) / d_model))'),
            source='maxjcohen/transformer#62'),
    pitfall('pe_odd_d_model_crashes', 'position',
            'With an odd d_model the cos columns (1::2) are one fewer than the sin columns, so '
            'assigning cos(position * div_term) raises a size mismatch: use div_term[:d_model // 2] '
        "for the cosines.",
            ('position.py', 'pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])',
             'pe[:, 1::2] = torch.cos(position * div_term)'),
            source='codertimo/BERT-pytorch#78'),
    pitfall('pe_table_is_a_parameter', 'position',
            'The fixed sinusoidal table is stored as an nn.Parameter, so it is trained, counted among '
            'the parameters and moved by the optimizer: register it as a buffer, '
            "self.register_buffer('pe', pe).",
            ('position.py', 'self.register_buffer("pe", pe.to(torch.float32).unsqueeze(0))  # (1, max_len, D)',
             'self.pe = nn.Parameter(pe.to(torch.float32).unsqueeze(0))  # (1, max_len, D), trainable'),
            source='henry9zhr/QANet-pytorch#3'),
    pitfall("pe_concatenated", "position",
            "The encoding is concatenated to x along the features, torch.cat([x, pe], -1): it is added, x + pe, and the "
            "output keeps x's shape (B, L, d_model).",
            ("position.py", "return x + self.pe[:, start : start + x.size(1)].to(x.dtype)",
             "pe = self.pe[:, start : start + x.size(1)].to(x.dtype).expand(x.size(0), -1, -1)\n"
             "        return torch.cat((x, pe), dim=-1)  # concatenated"),
            source="ml-explore/mlx#147, ml-explore/mlx#321"),
)


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'position' (transformer_spec/probes/behaviour.py)."""
    bp.capture(f, "sinusoidal", lambda: impl.SinusoidalPositionEncoding(d_model=6, max_len=10).to(bp.DTYPE)(
        torch.zeros(1, 7, 6, dtype=bp.DTYPE)))
    p = {"embedding.weight": inputs.randn(10, 6, seed=41)}
    bp.capture(f, "learned", lambda: bp.module(impl.LearnedPositionEmbedding, p, d_model=6, max_len=10)(
        torch.zeros(2, 4, 6, dtype=bp.DTYPE)))
    bp.capture(f, "sinusoidal_odd_d_model", lambda: impl.SinusoidalPositionEncoding(d_model=5, max_len=10).to(bp.DTYPE)(
        torch.zeros(1, 3, 5, dtype=bp.DTYPE)))
    bp.capture(f, "sinusoidal_trainable_parameters",
               lambda: sum(p.numel() for p in impl.SinusoidalPositionEncoding(d_model=6, max_len=10).parameters()))


def _sinusoidal(mod, seed):
    d_model, length = 8, 5 + seed % 11
    pe = mod.SinusoidalPositionEncoding(d_model, max_len=128).double()
    return recheck.as_numpy(out=pe(torch.zeros(1, length, d_model, dtype=torch.float64)))


RECHECKS = (Recheck("sinusoidal", "position",
                    ("spec_tests/test_seed000_facts.py::test_sinusoidal_hand_computed_entries[float64]",), _sinusoidal),)


COMPONENT = Component(
    "position", label="pos", points=8, order=7, depends_on=(),
    values=(  # the tests of what it computes (rubric.VALUES_SHARE of its points)
        "spec_tests/test_learned_position_embedding.py",
        "spec_tests/test_seed000_facts.py::test_sinusoidal_position_0_is_0_1_0_1",
        "spec_tests/test_seed000_facts.py::test_sinusoidal_hand_computed_entries",
        "spec_tests/test_seed000_facts.py::test_sinusoidal_wavelengths_run_from_2pi_to_10000_2pi",
    ),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
