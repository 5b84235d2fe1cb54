"""The 'masks' component. The causal and padding masks: bool, True = blocked (seed 000, section 7.1).

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import torch

from transformer_spec.contract import inputs
from transformer_spec.contract.registry import Component, Name, Recheck, pitfall
from transformer_spec.probes import behaviour as bp
from transformer_spec.probes import recheck

NAMES = (
    Name("causal_mask", "masks", "function",
         "causal_mask(seq_len, device=None) -> bool (seq_len, seq_len), True strictly above the diagonal"),
    Name("padding_mask", "masks", "function",
         "padding_mask(tokens, pad_id) -> bool (B, 1, 1, L), True where tokens == pad_id", tracks=("classic",)),
)

PITFALLS = (
    pitfall("causal_mask_blocks_diagonal", "masks",
            "Your causal mask also blocks the diagonal: a token must see itself (`triu(..., diagonal=1)`).",
            ("masks.py", "torch.triu(ones, diagonal=1)", "torch.triu(ones, diagonal=0)")),
    pitfall("causal_mask_leaks_next_token", "masks",
            "Your causal mask lets each token see the next one (`diagonal=2`): only positions j > i "
            "must be blocked (`triu(..., diagonal=1)`).",
            ("masks.py", "torch.triu(ones, diagonal=1)", "torch.triu(ones, diagonal=2)")),
    pitfall("causal_mask_transposed", "masks",
            "Your causal mask is transposed: it blocks the past (below the diagonal) instead of the future.",
            ("masks.py", "torch.triu(ones, diagonal=1)", "torch.tril(ones, diagonal=-1)")),
    pitfall("causal_mask_inverted", "masks",
            "Your causal mask marks the ALLOWED positions (torch's convention, `tril`): here True means blocked.",
            ("masks.py", "torch.triu(ones, diagonal=1)", "torch.tril(ones)")),
    pitfall("causal_mask_not_bool", "masks",
            "Your causal mask is a float tensor: the contract's masks are bool (True = blocked).",
            ("masks.py", "return torch.triu(ones, diagonal=1)", "return torch.triu(ones, diagonal=1).float()")),
    pitfall("padding_mask_blocks_queries", "masks",
            "Your padding mask has shape (B, 1, L, 1): it blocks padded QUERIES; it must be (B, 1, 1, L) "
            "to block padded keys.",
            ("masks.py", "(tokens == pad_id)[:, None, None, :]", "(tokens == pad_id)[:, None, :, None]")),
    pitfall("padding_mask_inverted", "masks",
            "Your padding mask is True at the real tokens: it must be True (blocked) where tokens == pad_id.",
            ("masks.py", "(tokens == pad_id)[:, None, None, :]", "(tokens != pad_id)[:, None, None, :]")),
    # mined from public implementations (issue 27): each cites where the mistake was made
    pitfall('padding_mask_pad_id_hardcoded_zero', 'masks',
            'The padding mask compares the tokens with 0 instead of pad_id: with any other pad id the '
        "real pads are attended and every token 0 is blocked. Use tokens == pad_id.",
            ('masks.py', 'return (tokens == pad_id)[:, None, None, :]  # (B, 1, 1, L)',
             'return (tokens == 0)[:, None, None, :]  # (B, 1, 1, L), pad id hard-coded'),
            source='graykode/nlp-tutorial 5-1.Transformer/Transformer-Torch.py@0e67ef8d1f55ab8ae6acbde709e23c32ff63115d'),
)


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'masks' (transformer_spec/probes/behaviour.py)."""
    bp.capture(f, "causal_mask", lambda: impl.causal_mask(5))
    tokens = torch.tensor([[4, 2, 7, 0, 0], [3, 0, 5, 9, 1]])
    bp.capture(f, "padding_mask", lambda: impl.padding_mask(tokens, 0))
    bp.capture(f, "padding_mask_pad_9", lambda: impl.padding_mask(tokens, 9))


def _causal_mask(mod, seed):
    return recheck.as_numpy(mask=mod.causal_mask(3 + seed % 7))


def _padding_mask(mod, seed):
    tokens = torch.randint(0, 4, (3, 6), generator=inputs.generator(seed))
    return recheck.as_numpy(mask0=mod.padding_mask(tokens, 0), mask3=mod.padding_mask(tokens, 3))


RECHECKS = (
    Recheck("causal_mask", "masks", ("spec_tests/test_seed000_facts.py::test_causal_mask_4_as_printed_in_7_1",),
            _causal_mask),
    Recheck("padding_mask", "masks", ("spec_tests/test_behaviours.py::test_padding_mask_is_true_at_pad_tokens",),
            _padding_mask),
)


COMPONENT = Component(
    "masks", label="mask", points=6, order=2, depends_on=(), tracks=("classic", "modern"),
    values=(  # the tests of what it computes (rubric.VALUES_SHARE of its points)
        "spec_tests/test_behaviours.py::test_padding_mask_is_true_at_pad_tokens",
        "spec_tests/test_seed000_facts.py::test_causal_mask_4_as_printed_in_7_1",
        "properties/test_position_and_mask_laws.py::test_causal_mask_blocks_exactly_the_future",
        "properties/test_position_and_mask_laws.py::test_padding_mask_blocks_exactly_the_padded_keys",
    ),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
