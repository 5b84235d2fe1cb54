"""The 'rotary' component (modern track). Rotary position embedding: adjacent pairs (x[2i], x[2i+1])
rotated by p * theta ** (-2i / head_dim) (RoFormer eq. 34; CS336 assignment 1).

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import torch

from transformer_spec.contract import inputs
from transformer_spec.contract.registry import Component, Name, Recheck, pitfall
from transformer_spec.probes import behaviour as bp
from transformer_spec.probes import recheck

NAMES = (
    Name("RotaryPositionEmbedding", "rotary", "module",
         "RotaryPositionEmbedding(head_dim, max_len, theta=10000.0), no parameters; forward(x (..., L, head_dim), "
         "positions=None): the pair (x[2i], x[2i+1]) at position p rotated by p * theta ** (-2i / head_dim); "
         "positions broadcastable to x.shape[:-1], None = arange(L)"),
)

_FREQ = "inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)  # (head_dim/2,)"
_ANGLES = "angles = torch.arange(max_len, dtype=torch.float64)[:, None] * inv_freq  # (max_len, head_dim/2)"
_PAIRS = "a, b = x[..., 0::2], x[..., 1::2]  # the pairs (x[2i], x[2i+1]): (..., L, head_dim/2) each"
_ROT = "rotated = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1)  # (..., L, head_dim/2, 2)"
_OUT = "return rotated.flatten(-2)  # (..., L, head_dim), pairs back in place"
_TABLES = "cos = self.cos[positions].to(x.dtype)  # (..., L, head_dim/2)\n        sin = self.sin[positions].to(x.dtype)"

PITFALLS = (
    pitfall("rope_half_split_pairs", "rotary",
            "The features are paired as (x[i], x[i + head_dim/2]) (the NeoX `rotate_half` layout): the contract "
            "rotates adjacent pairs (x[2i], x[2i+1]), as RoFormer and CS336 do.",
            ("rotary.py", _PAIRS, "a, b = x[..., : self.head_dim // 2], x[..., self.head_dim // 2:]  # halves"),
            ("rotary.py", _OUT, "return torch.cat((rotated[..., 0], rotated[..., 1]), dim=-1)  # halves back"),
            source="karpathy/nanochat#264"),
    pitfall("rope_rotated_pairs_concatenated", "rotary",
            "The rotated pairs are not put back in place: the new x[2i] and x[2i+1] must stay adjacent, not go to "
            "the first and second halves.",
            ("rotary.py", _OUT, "return torch.cat((rotated[..., 0], rotated[..., 1]), dim=-1)  # halves")),
    pitfall("rope_frequency_index_off_by_one", "rotary",
            "Pair i (counted from 0) turns at theta ** (-2i / head_dim): writing 2(i - 1) shifts every frequency.",
            ("rotary.py", _FREQ,
             "inv_freq = theta ** (-(torch.arange(0, head_dim, 2, dtype=torch.float64) - 2) / head_dim)"),
            source="bkitano/llama-from-scratch#8"),
    pitfall("rope_exponent_i_over_d", "rotary",
            "The exponent is i / head_dim instead of 2i / head_dim: the frequencies fall half as fast.",
            ("rotary.py", _FREQ,
             "inv_freq = theta ** (-torch.arange(0, head_dim // 2, dtype=torch.float64) / head_dim)")),
    pitfall("rope_theta_ignored", "rotary",
            "The base `theta` is ignored (10000 is used): a model built with another theta must turn at its own rate.",
            ("rotary.py", _FREQ,
             "inv_freq = 10000.0 ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)")),
    pitfall("rope_rotation_reversed", "rotary",
            "The pairs turn the wrong way (by -angle): (a, b) -> (a cos + b sin, -a sin + b cos).",
            ("rotary.py", _ROT, "rotated = torch.stack((a * cos + b * sin, -a * sin + b * cos), dim=-1)")),
    pitfall("rope_cos_sin_swapped", "rotary",
            "cos and sin are swapped: at position 0 the rotation must be the identity (cos 0 = 1, sin 0 = 0).",
            ("rotary.py", _TABLES,
             "cos = self.sin[positions].to(x.dtype)  # swapped\n        sin = self.cos[positions].to(x.dtype)")),
    pitfall("rope_positions_ignored", "rotary",
            "The `positions` argument is ignored (arange(L) always): packed or cached inputs must be rotated at "
            "the positions given.",
            ("rotary.py", _TABLES,
             "positions = torch.arange(x.size(-2))  # the argument is ignored\n        " + _TABLES),
            source="NVIDIA/Megatron-LM#453"),
    pitfall("rope_positions_start_at_1", "rotary",
            "Positions count from 1: the token at position p must turn by p * theta_i, and position 0 not at all.",
            ("rotary.py", _ANGLES,
             "angles = torch.arange(1, max_len + 1, dtype=torch.float64)[:, None] * inv_freq")),
    pitfall("rope_tables_shaped_for_four_dimensions", "rotary",
            "The cos/sin tables are kept as (1, 1, max_len, head_dim/2), for (batch, heads, L, head_dim) inputs (squeezed "
            "back for 3-D ones only), and indexed with the positions flattened: a (L, head_dim) input comes back as "
            "(1, 1, L, head_dim), and (B, L) positions no longer line up with the batch. Index (max_len, head_dim/2) "
            "tables with the positions as they are: the result broadcasts against x of any rank.",
            ("rotary.py", _TABLES,
             "cos = self.cos[None, None][:, :, positions.flatten()].to(x.dtype)  # (1, 1, L, head_dim/2)\n"
             "        sin = self.sin[None, None][:, :, positions.flatten()].to(x.dtype)\n"
             "        if x.dim() == 3:\n"
             "            cos, sin = cos[0, 0], sin[0, 0]"),
            source="0Chris5R/StanfordCS336-Own-Transformer@439c6c6 cs336_basics/model.py:117-118"),
)

HEAD_DIM, MAX_LEN = 4, 16


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'rotary' (transformer_spec/probes/behaviour.py)."""
    def rope(theta=10000.0, head_dim=HEAD_DIM):
        return impl.RotaryPositionEmbedding(head_dim, MAX_LEN, theta)

    x = inputs.randn(2, 5, HEAD_DIM, seed=81)
    positions = torch.tensor([[3, 0, 7, 15, 1], [2, 2, 9, 4, 11]])
    bp.capture(f, "out", lambda: rope()(x))
    bp.capture(f, "out_positions", lambda: rope()(x, positions))
    bp.capture(f, "out_theta_100", lambda: rope(100.0)(x))
    bp.capture(f, "out_head_dim_8", lambda: rope(head_dim=8)(inputs.randn(5, 8, seed=82)))
    unit = torch.eye(HEAD_DIM, dtype=torch.float64)[:, None, :].expand(HEAD_DIM, 3, HEAD_DIM)  # e_j at 3 positions
    bp.capture(f, "~which_features_turn", lambda: (rope()(unit).abs() > 1e-9).to(torch.int64))
    bp.capture(f, "~identity_at_0", lambda: bool(torch.allclose(rope()(x[:, :1]), x[:, :1])))
    bp.capture(f, "~norms_kept", lambda: bool(torch.allclose(rope()(x).norm(dim=-1), x.norm(dim=-1))))

    def relative():
        q, k = inputs.randn(HEAD_DIM, seed=83), inputs.randn(HEAD_DIM, seed=84)
        r = rope()

        def score(m, n):
            return float((r(q[None], torch.tensor([m])) * r(k[None], torch.tensor([n]))).sum())
        return abs(score(5, 2) - score(9, 6)) < 1e-9

    bp.capture(f, "~relative", relative)


def _rotary(mod, seed):
    x = inputs.randn(2, 3, 6, 8, seed=seed)
    positions = torch.randint(0, 64, (2, 1, 6), generator=inputs.generator(seed + 1))
    return recheck.Outputs(recheck.as_numpy(out=mod.RotaryPositionEmbedding(8, 64)(x, positions)), **recheck.ROTATED)


def _rotary_far(mod, seed):  # float32 input at positions up to 2047: its anchor's tolerance (1e-4, 2e-4) times 10
    out = mod.RotaryPositionEmbedding(16, 2048)(inputs.randn(1, 6, 16, seed=seed).float(),
                                                torch.tensor([0, 1, 1000, 2047, 1500, 3]))
    return recheck.Outputs(recheck.as_numpy(out=out), rtol=1e-3, atol=2e-3)


def _rotary_by_sequence(mod, seed):  # (B, L) positions up to 499: its anchor's tolerance (1e-5, 5e-5) times 10
    out = mod.RotaryPositionEmbedding(8, 512)(inputs.randn(2, 4, 8, seed=seed),
                                              torch.tensor([[0, 499, 7, 250], [3, 3, 100, 1]]))
    return recheck.Outputs(recheck.as_numpy(out=out), rtol=1e-4, atol=5e-4)


RECHECKS = (
    Recheck("rotary[by_sequence]", "rotary",
            ("spec_tests/modern/test_behaviours.py::test_rotary_positions_by_sequence_and_far_from_0",),
            _rotary_by_sequence, public=11),
    Recheck("rotary", "rotary", ("spec_tests/modern/test_oracles.py::test_rotary_matches_the_complex_rotation",),
            _rotary, public=77),
    Recheck("rotary[float32-far]", "rotary",
            ("spec_tests/modern/test_behaviours.py::test_rotary_float32_input_at_large_positions",), _rotary_far, public=12),
)


COMPONENT = Component(
    "rotary", label="rope", points=16, order=22, depends_on=(), tracks=("modern",),
    values=(  # the tests of what it computes (rubric.VALUES_SHARE of its points)
        "spec_tests/modern/test_golden.py::test_rotary_turns_a_4_dim_vector_at_positions_0_1_2",
        "spec_tests/modern/test_golden.py::test_rotary_uses_its_theta_and_the_positions_given",
        "spec_tests/modern/test_oracles.py::test_rotary_matches_the_complex_rotation",
        "spec_tests/modern/test_behaviours.py::test_rotary_positions_by_sequence_and_far_from_0",
        "spec_tests/modern/test_behaviours.py::test_rotary_float32_input_at_large_positions",
        "properties/modern/test_rotary_laws.py::test_rotary_pair_i_turns_by_p_times_theta_to_the_minus_2i_over_head_dim",
    ),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
