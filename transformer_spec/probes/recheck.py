"""Hidden re-checks, the components' side: what a re-check compares, and the helpers its declarations use.

The class grader's own check of what a grading child says passed; its child program and its judgement
are :mod:`transformer_spec.grader.recheck`.

A re-check (:class:`~transformer_spec.contract.registry.Recheck`, declared by its component in
:mod:`transformer_spec.components`) computes some of the contract's outputs on inputs drawn from a
secret seed. The submission's numbers come from a fresh child process with no pytest in it
(``python -m transformer_spec.grader.recheck``), over the authenticated pipe of
:mod:`transformer_spec.grader.isolation`, as raw little-endian arrays in JSON (never pickle). The
reference's numbers and the comparison are computed in the parent, where no submission code runs.

Each re-check mirrors one parameter case of a golden test (its *anchor*): the same shapes, masks,
constructor arguments and dtype (float64), with other random values. A submission that truly
passed the anchor computes the same function, so it passes the re-check too; when the child
claims the anchor passed and the re-check disagrees, the claim is false (``tools.grade`` then
gives the component 0 and the status ``tampering``). A component without re-checks says why in
its declaration (``why_no_rechecks``).

A re-check compares only what the contract fixes for every correct implementation: outputs for
weights set by the contract's names (held to the anchor's tolerance where it is looser than float64
rounding, :class:`Outputs`); greedy tokens up to the first near-tie the reference meets; a law's
residual where the contract leaves the outputs themselves free (Seq2SeqTransformer: zero for every
correct implementation); for bad arguments, whether the anchor's kind of error was raised naming
the argument (bool arrays). ``tests/test_rechecks.py`` holds each to the independent implementation,
every allowed variation and a pitfall of its component, through :func:`disagreement`.
"""

from __future__ import annotations

import numpy as np

from transformer_spec.contract import inputs, registry
from transformer_spec.probes import testing

ORACLE = "spec_tests/test_torch_oracle.py::"
RTOL, ATOL = 1e-6, 1e-8  # float64; gross disagreement only, so an honest float64 pass never fails


# --------------------------------------------------------------------------------------------
# Helpers of the components' re-checks
# --------------------------------------------------------------------------------------------
class Outputs(dict):
    """A re-check's arrays by name, with how :func:`compare` holds a submission's to them.

    Only the expected side's settings count (the reference's, computed in the parent; a child's
    answer arrives as bare arrays): ``rtol``/``atol`` where the anchor allows more than float64
    rounding, and ``first[k] = n`` to compare only the first ``n`` entries of ``k`` (after its
    shape), where later entries are not fixed on these inputs (a greedy choice after a near-tie);
    ``unchecked`` names arrays sent for a re-check's ``law`` only, never compared (a model's own logits).
    """

    def __init__(self, arrays: dict[str, np.ndarray], *, rtol: float = RTOL, atol: float = ATOL,
                 first: dict[str, int] | None = None, unchecked: tuple[str, ...] = ()):
        super().__init__(arrays)
        self.rtol, self.atol, self.first = rtol, atol, dict(first or {})
        self.unchecked = tuple(unchecked)


def as_numpy(**arrays) -> dict[str, np.ndarray]:
    return {k: v.detach().cpu().numpy() for k, v in arrays.items()}


def own_shapes(module) -> dict[str, tuple[int, ...]]:
    """The shapes of every parameter of ``module`` by its own names (tied ones once; no 0-d
    ones), for a module whose contract leaves some names free (``Seq2SeqTransformer``)."""
    return {n: tuple(p.shape) for n, p in module.named_parameters() if p.dim() >= 1}


def with_weights(module, shapes, seed: int, dtype=None):
    """``module`` in ``dtype`` (default float64) and eval mode, with seeded weights under the
    contract's names."""
    import torch

    module = module.double() if dtype in (None, torch.float64) else module.to(dtype)
    return testing.set_parameters(module, testing.seeded_parameters(shapes, seed)).eval()


def with_float32_weights(module, shapes=None, seed: int = 0, params: dict | None = None):
    """``module`` as built (float32) in eval mode, with seeded weights (``params``, else those of ``shapes``
    at ``seed``) cast to float32: as the float32 formula tests set them, which every course profile expresses."""
    params = testing.seeded_parameters(shapes, seed) if params is None else params
    return testing.set_parameters(module, {k: v.float() for k, v in params.items()}).eval()


def float32_outputs(**tensors) -> Outputs:
    """A float32 formula test's twin: the submission's float32 outputs held to the reference's within 10x the
    test's tolerance against the formula (rtol 1e-4, atol 1e-5): a pass of it puts both within twice that."""
    return Outputs(as_numpy(**tensors), rtol=1e-3, atol=1e-4)


#: How a modern-track output that went through a rotation is held to the reference's: the contract lets the
#: angle tables be float32 (as Llama's), so such a float64 result may differ by about float32's precision
#: (the golden tests allow the same: spec_tests/modern/formulas.py).
ROTATED = {"rtol": 1e-5, "atol": 1e-6}

#: the dtypes of the oracle tests' parameter cases, each with its own twin and replay
ORACLE_DTYPES = ("float64", "float32")


def oracle_outputs(dtype: str, **tensors) -> Outputs:
    """An oracle re-check's arrays, held in float32 to 10x the float32 test's tolerance (rtol 1e-4,
    atol 2e-5): a submission within it of torch's answer, as the reference is, is within this of
    the reference's; in float64 to :data:`RTOL`, :data:`ATOL`."""
    return Outputs(as_numpy(**tensors), **({"rtol": 1e-3, "atol": 2e-4} if dtype == "float32" else {}))


def oracle_name(base: str, dtype: str, case: str) -> str:
    """``sdpa[scale_none-none]`` for float64 (the names re-checks had before float32 joined),
    ``sdpa[float32-scale_none-none]`` for float32."""
    return f"{base}[{case}]" if dtype == "float64" else f"{base}[{dtype}-{case}]"


#: the MiniGPT of the snapshot tests (spec_tests/test_snapshots.py, spec_tests/snapshots/regenerate.py)
SNAPSHOT_MINIGPT = dict(vocab_size=13, d_model=16, num_heads=4, num_layers=2, d_ff=32, max_len=8, dropout=0.1)
SNAPSHOT_BLOCK_GAIN = 8.0  # W_O and ffn.linear2 scaled up, as in the snapshot, so the blocks decide


def snapshot_minigpt(mod, seed: int, **changes):
    """``mod.MiniGPT`` of the snapshot's configuration (``changes`` applied, e.g. ``dropout``) in
    float64 and eval mode, with weights drawn from ``seed`` as the snapshot's are (the tied
    ``lm_head.weight`` set with ``token_embed``)."""
    c = {**SNAPSHOT_MINIGPT, **changes}
    params = testing.minigpt_parameters(c["vocab_size"], c["d_model"], c["num_layers"], c["d_ff"], seed)
    for name in params:
        if name.endswith(("W_O.weight", "linear2.weight")):
            params[name] = params[name] * SNAPSHOT_BLOCK_GAIN
    return testing.set_parameters(mod.MiniGPT(**c).double(), params).eval()


def sdpa_masks() -> dict:
    """The masks of spec_tests/test_torch_oracle.py::test_sdpa_matches_torch, by name. A re-check
    keeps its anchor's masks (a twin differs only in its values): another random mask could block a
    whole row, where a mistake the public test does not show (a fill of -1e9) would show."""
    s = inputs.ORACLE
    return {"none": None, "random": inputs.random_mask(s.b, s.h, s.lq, s.lk, seed=11),
            "broadcast_lq_lk": inputs.random_mask(s.lq, s.lk, seed=12), "padding": inputs.padding(s.lk, [s.lk, 4])}


def mha_masks(length: int, self_attention: bool) -> dict:
    """The oracle tests' masks of multi-head attention, by name (causal only for self-attention)."""
    s = inputs.ORACLE
    return {"none": None, "lq_lk": inputs.random_mask(s.lq, length, seed=21),
            "padding": inputs.padding(length, [length, 3]),
            "causal": inputs.causal(s.lq) if self_attention else None}


def law_residual(actual, expected):
    """``actual - expected``, 0 where :func:`transformer_spec.probes.assertions.assert_close` (what the law's
    property test asserts, ``assert_close(actual, expected)``) accepts any value: where ``expected``
    is not finite. So a twin is judged by its anchor's own rule, no stricter."""
    import torch

    return torch.where(torch.isfinite(expected), actual - expected, torch.zeros_like(actual))


def by_name() -> dict[str, registry.Recheck]:
    return {r.name: r for r in registry.rechecks()}
