"""The 'attention' component. Scaled dot-product attention: softmax(Q K^T / sqrt(d_k)) V with a bool
mask (seed 001, sections 3-4 and 9).

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import torch

from transformer_spec.contract import inputs
from transformer_spec.contract.registry import Component, Name, Recheck, pitfall
from transformer_spec.probes import behaviour as bp
from transformer_spec.probes import recheck

NAMES = (
    Name("scaled_dot_product_attention", "attention", "function",
         "scaled_dot_product_attention(q, k, v, mask=None, scale=None) -> (output (..., Lq, d_v), "
         "weights (..., Lq, Lk)); scale=None means 1/sqrt(d_k)"),
)

PITFALLS = (
    pitfall("no_scaling", "attention",
            "The scores are not divided by sqrt(d_k): softmax(QK^T) V saturates for large d_k "
            "(seed 000: `scores / math.sqrt(d_k)`).",
            ("attention.py", "scale = 1.0 / math.sqrt(q.size(-1))", "scale = 1.0")),
    pitfall("scaled_by_d_k", "attention",
            "The scores are divided by d_k instead of sqrt(d_k).",
            ("attention.py", "scale = 1.0 / math.sqrt(q.size(-1))", "scale = 1.0 / q.size(-1)")),
    pitfall("multiplied_by_sqrt_d_k", "attention",
            "The scores are multiplied by sqrt(d_k) instead of divided by it.",
            ("attention.py", "scale = 1.0 / math.sqrt(q.size(-1))", "scale = math.sqrt(q.size(-1))")),
    pitfall("scale_argument_ignored", "attention",
            "A given `scale` is ignored: `scale=None` means 1/sqrt(d_k), but a float must multiply the scores.",
            ("attention.py", "scores = torch.matmul(q * scale, k.transpose(-2, -1))",
             "scores = torch.matmul(q / math.sqrt(q.size(-1)), k.transpose(-2, -1))")),
    pitfall("softmax_over_queries", "attention",
            "softmax runs over the wrong dimension (the queries, dim=-2): it must normalise over the "
            "keys, dim=-1, so each query's weights sum to 1 (seed 001 section 10).",
            ("attention.py", "weights = F.softmax(scores, dim=-1)", "weights = F.softmax(scores, dim=-2)")),
    pitfall("mask_ignored", "attention",
            "The mask is never applied: blocked keys (padding, the future) still get attention "
            "(seed 001 section 10, 'mask forgotten').",
            ("attention.py", "if mask is not None:", "if False:  # the mask is forgotten")),
    pitfall("mask_inverted", "attention",
            "The boolean mask is read the wrong way round: in this contract True means BLOCKED "
            "(`masked_fill(mask, -inf)`), the opposite of torch's SDPA `attn_mask`.",
            ("attention.py", 'scores.masked_fill_(mask, float("-inf"))', 'scores.masked_fill_(~mask, float("-inf"))')),
    pitfall("masked_with_zero", "attention",
            "Blocked scores are set to 0 instead of -inf: exp(0) = 1, so blocked keys still get weight.",
            ("attention.py", 'scores.masked_fill_(mask, float("-inf"))', "scores.masked_fill_(mask, 0.0)")),
    pitfall("nan_on_fully_blocked_rows", "attention",
            "A query whose keys are all blocked gets softmax(-inf, ..., -inf) = NaN: such rows must give "
            "all-zero weights and an all-zero output.",
            ("attention.py", "if blocked_rows.any():", "if False:  # no special case")),
    pitfall("keys_not_transposed", "attention",
            "The scores are q @ k instead of q @ k^T (`k.transpose(-2, -1)`): the shapes are mixed up.",
            ("attention.py", "scores = torch.matmul(q * scale, k.transpose(-2, -1))",
             "scores = torch.matmul(q * scale, k)")),
    pitfall("finite_mask_fill", "attention",
            "Blocked scores are filled with -1e9 (seed 001 section 11's exercise) instead of -inf: once the "
            "allowed scores are below -1e9 the blocked keys take the weight; blocked keys must get exactly 0.",
            ("attention.py", 'scores.masked_fill_(mask, float("-inf"))', "scores.masked_fill_(mask, -1e9)")),
    pitfall("finite_mask_fill_1e4", "attention",
            "Blocked scores are filled with -10000 (seed 001 section 8.1's 'sufficiently small negative number') "
            "instead of -inf: an allowed score of -20000 loses to the blocked keys; blocked keys must get exactly 0.",
            ("attention.py", 'scores.masked_fill_(mask, float("-inf"))', "scores.masked_fill_(mask, -10000.0)")),
    pitfall("softmax_without_max_subtraction", "attention",
            "softmax written as exp(s) / sum(exp(s)) without subtracting the row maximum first: exp "
            "overflows to inf for scores above ~88 in float32, and inf / inf is NaN. Subtract "
            "`scores.amax(-1, keepdim=True)` before exp, or use F.softmax.",
            ("attention.py", "weights = F.softmax(scores, dim=-1)  # over the keys: each row sums to 1",
             "exp = scores.exp()\n    weights = exp / exp.sum(dim=-1, keepdim=True)")),
    # mined from public implementations (issue 27): each cites where the mistake was made
    pitfall('mask_applied_after_softmax', 'attention',
            'The mask is applied to the weights after the softmax: blocked keys already took part in '
            'the normalisation, and a -inf weight turns the output into -inf/NaN. Fill the scores '
        "with -inf before the softmax.",
            ('attention.py', 'scores.masked_fill_(mask, float("-inf"))',
             'pass  # the mask is applied to the weights, after the softmax'),
            ('attention.py', 'weights = F.softmax(scores, dim=-1)  # over the keys: each row sums to 1',
             'weights = F.softmax(scores, dim=-1)\n    if mask is not None:\n        weights = weights.masked_fill(mask, float("-inf"))'),
            source='huggingface/pytorch-image-models#2236'),
    pitfall('softmax_without_dim', 'attention',
            "softmax is called without dim: PyTorch's legacy choice normalises over dim 0 for 3-D "
            'scores (the batch) and dim 1 for 4-D ones (the heads), only 2-D inputs happen to work. '
        "Always pass dim=-1 (the keys).",
            ('attention.py', 'weights = F.softmax(scores, dim=-1)  # over the keys: each row sums to 1',
             'weights = F.softmax(scores)  # implicit dim'),
            source='OpenNMT/OpenNMT-py#487'),
    pitfall("mask_none_crashes", "attention",
            "mask=None crashes: the mask is optional (None means no key is blocked), so check for None before "
            "inverting, indexing or broadcasting it.",
            ("attention.py", "if mask is not None:\n        check_mask", "if True:  # a mask is assumed\n        check_mask"),
            source="AndyShaw01/assignment1-basics@92460df cs336_basics/scaled_dot_product_attention.py:16 (~mask); "
                   "Ashside/assignment1-basics@4388da1 cs336_basics/LMArchitecture.py:157 (mask.shape); "
                   "roeehendel/cs336-assignment1-basics@d67e05c cs336_basics/models/transformer_lm.py:266"),
)


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'attention' (transformer_spec/probes/behaviour.py)."""
    sdpa = lambda *a, **k: impl.scaled_dot_product_attention(*a, **k)  # noqa: E731
    q, k, v = inputs.randn(2, 3, 4, seed=1), inputs.randn(2, 5, 4, seed=2), inputs.randn(2, 5, 6, seed=3)
    bp.capture(f, "plain", lambda: sdpa(q * 2, k * 2, v))
    bp.capture(f, "scale_0.3", lambda: sdpa(q, k, v, scale=0.3))
    x = inputs.randn(2, 4, 4, seed=4) * 2
    bp.capture(f, "causal", lambda: sdpa(x, x, x, inputs.causal(4)))
    mask = torch.zeros(2, 3, 5, dtype=torch.bool)
    mask[0, :, 3:] = True
    mask[1, 1, 1:] = True  # only key 0 allowed
    bp.capture(f, "blocked_some", lambda: sdpa(q, k, v, mask))
    mask = mask.clone()
    mask[1, 1, 0] = True  # a fully blocked row: zeros by the contract, undefined where a course lacks it
    bp.capture(f, "blocked", lambda: sdpa(q, k, v, mask), needs=("blocked_rows",))
    # Which keys get weight in rows that block some keys and allow others: a behaviour any code with
    # the same mistake shares, whatever it does with the other rows (issue 27; behaviour.BEHAVIOURAL).
    bp.capture(f, "~keys_weighted_blocked", lambda: (sdpa(q, k, v, mask)[1][0] > 0).double())
    bp.capture(f, "~keys_weighted_causal", lambda: (sdpa(x, x, x, inputs.causal(4))[1][:, :3] > 0).double())
    # Allowed scores far below zero: a finite fill (-1e9, -1e4) gives the blocked key the weight.
    one, values = torch.ones(1, 1, 1, dtype=bp.DTYPE), torch.tensor([[[1.0], [2.0]]], dtype=bp.DTYPE)
    second_blocked = torch.tensor([[[False, True]]])
    for low in (-2e4, -2e9):
        keys = torch.tensor([[[low], [0.0]]], dtype=bp.DTYPE)
        bp.capture(f, f"blocked_after_{low:g}", lambda keys=keys: sdpa(one, keys, values, second_blocked))


def _sdpa(mask_kind: str, scale, dtype: str):
    def run(mod, seed):
        s, dt = inputs.ORACLE, getattr(torch, dtype)
        q, k, v = (inputs.randn(s.b, s.h, s.lq, 4, seed=seed + 1, dtype=dt),
                   inputs.randn(s.b, s.h, s.lk, 4, seed=seed + 2, dtype=dt), inputs.randn(s.b, s.h, s.lk, 6, seed=seed + 3, dtype=dt))
        mask = recheck.sdpa_masks()[mask_kind]  # the anchor's own masks: only the values are secret
        out, weights = mod.scaled_dot_product_attention(q, k, v, mask=mask, scale=scale)
        return recheck.oracle_outputs(dtype, out=out, weights=weights)
    return run


RECHECKS = tuple(
    Recheck(recheck.oracle_name("sdpa", dtype, f"{sid}-{mask_kind}"), "attention",
            (f"{recheck.ORACLE}test_sdpa_matches_torch[{dtype}-{sid}-{mask_kind}]",), _sdpa(mask_kind, scale, dtype),
            public=0)  # q, k, v from seeds 1, 2, 3 as in the anchor
    for dtype in recheck.ORACLE_DTYPES
    for scale, sid in ((None, "scale_none"), (0.3, "scale_0.3"))
    for mask_kind in ("none", "random", "broadcast_lq_lk", "padding")
)


def _sdpa_2d(dtype: str):
    def run(mod, seed):  # (Lq, d_k) inputs with no leading dimension: the output only, as its anchor checks
        s, dt = inputs.ORACLE, getattr(torch, dtype)
        q, k, v = (inputs.randn(s.lq, 3, seed=seed, dtype=dt), inputs.randn(s.lk, 3, seed=seed + 1, dtype=dt),
                   inputs.randn(s.lk, 2, seed=seed + 2, dtype=dt))
        return recheck.oracle_outputs(dtype, out=mod.scaled_dot_product_attention(q, k, v)[0])
    return run


RECHECKS += tuple(
    Recheck("sdpa_2d" if dtype == "float64" else f"sdpa_2d[{dtype}]", "attention",
            (f"{recheck.ORACLE}test_sdpa_matches_torch_unbatched_2d[{dtype}]",), _sdpa_2d(dtype),
            public=4)  # q, k, v from seeds 4, 5, 6 as in the anchor
    for dtype in recheck.ORACLE_DTYPES
)


COMPONENT = Component(
    "attention", label="attn", points=14, order=1, depends_on=(), tracks=("classic", "modern"),
    values=(  # the tests of what it computes (rubric.VALUES_SHARE of its points)
        "spec_tests/test_seed001_worked_example.py::test_unscaled_logits_9_4",
        "spec_tests/test_seed001_worked_example.py::test_softmax_weights_9_5",
        "spec_tests/test_seed001_worked_example.py::test_output_9_6",
        "spec_tests/test_seed001_worked_example.py::test_weighted_values_9_6",
        "spec_tests/test_seed001_worked_example.py::test_exercise_11_1_scaled_by_sqrt_dk",
        "spec_tests/test_seed001_worked_example.py::test_exercise_11_2_causal_mask",
        "spec_tests/test_seed001_worked_example.py::test_exercise_11_3_doubling_values_doubles_output",
        "spec_tests/test_torch_oracle.py::test_sdpa_matches_torch",
        "spec_tests/test_torch_oracle.py::test_sdpa_matches_torch_unbatched_2d",
        "spec_tests/test_seed000_facts.py::test_sqrt_dk_experiment_of_step_8",
        "spec_tests/test_behaviours.py::test_float64_is_computed_in_float64",
    ),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
