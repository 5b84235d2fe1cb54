"""The 'rmsnorm' component (modern track). RMSNorm: x * rsqrt(mean(x**2, -1) + eps) * weight, in
float32 for half inputs (Zhang & Sennrich 2019; CS336 assignment 1).

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import torch

from transformer_spec.contract import inputs
from transformer_spec.contract.registry import Component, Name, Recheck, pitfall
from transformer_spec.probes import behaviour as bp
from transformer_spec.probes import recheck, testing
from transformer_spec.probes.llama_shapes import rmsnorm_shapes

NAMES = (
    Name("RMSNorm", "rmsnorm", "module",
         "RMSNorm(d_model, eps=1e-5) with weight (d_model,), ones at init; forward(x (..., d_model)) = "
         "x * rsqrt(mean(x**2, -1, keepdim=True) + eps) * weight, in float32 for float16/bfloat16 x, returned in x.dtype"),
)

_NORM = "h = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + self.eps)  # unit RMS"
_OUT = "return (h * self.weight.to(h.dtype)).to(in_dtype)"
_UPCAST = "h = x.float() if in_dtype in _HALF else x  # (..., D), float32 for half inputs"

PITFALLS = (
    pitfall("rmsnorm_subtracts_mean", "rmsnorm",
            "RMSNorm does not centre: it divides x by sqrt(mean(x**2) + eps). Subtracting the mean first makes "
            "it LayerNorm without a bias.",
            ("rmsnorm.py", _NORM, "h = h - h.mean(dim=-1, keepdim=True)\n        " + _NORM),
            source="ggml-org/llama.cpp#173"),
    pitfall("rmsnorm_eps_outside_sqrt", "rmsnorm",
            "eps goes inside the root, rsqrt(mean(x**2) + eps); adding it to the root mean square after the sqrt "
            "gives other values for small inputs.",
            ("rmsnorm.py", _NORM, "h = h / (torch.sqrt(h.pow(2).mean(dim=-1, keepdim=True)) + self.eps)"),
            source="allenai/OLMo#281"),
    pitfall("rmsnorm_divides_by_rsqrt", "rmsnorm",
            "rsqrt already is 1 / RMS: multiply by it. Dividing by it multiplies x by its RMS.",
            ("rmsnorm.py", _NORM, "h = h / torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + self.eps)"),
            source="mosaicml/llm-foundry#371"),
    pitfall("rmsnorm_weight_applied_twice", "rmsnorm",
            "The gain weight is applied twice; a test that keeps weight at its initial ones cannot see it, a "
            "trained weight can.",
            ("rmsnorm.py", _OUT, "return (h * self.weight.to(h.dtype) * self.weight.to(h.dtype)).to(in_dtype)"),
            source="meta-pytorch/torchtune#11"),
    pitfall("rmsnorm_weight_ignored", "rmsnorm",
            "The learned gain `weight` is never used: the output must be multiplied by it.",
            ("rmsnorm.py", _OUT, "return h.to(in_dtype)")),
    pitfall("rmsnorm_over_sequence_and_features", "rmsnorm",
            "The mean of squares runs over the sequence and the features (dims -2 and -1): RMSNorm normalises "
            "each token's vector on its own, over the last dimension only.",
            ("rmsnorm.py", _NORM, "h = h * torch.rsqrt(h.pow(2).mean(dim=(-2, -1), keepdim=True) + self.eps)"),
            source="bkitano/llama-from-scratch#4"),
    pitfall("rmsnorm_no_float32_upcast", "rmsnorm",
            "float16 and bfloat16 inputs are normalised in their own precision: mean(x**2) overflows float16 "
            "(above 65504) and loses digits in bfloat16. Compute in float32 and cast the result back.",
            ("rmsnorm.py", _UPCAST, "h = x  # no upcast"),
            source="pytorch/pytorch#189581"),
    pitfall("rmsnorm_eps_hardcoded", "rmsnorm",
            "The `eps` argument is ignored (a fixed 1e-6 is used): use the eps the module was built with.",
            ("rmsnorm.py", _NORM, "h = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + 1e-6)"),
            source="srush/llama2.rs#21"),
    pitfall("rmsnorm_normalises_input_in_place", "rmsnorm",
            "forward normalises its input in place (`mul_`): the caller's x, the residual stream, is changed. "
            "x.float() is x itself for float32 input; compute a new tensor.",
            ("rmsnorm.py", _NORM, "h = h.mul_(torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + self.eps))"),
            source="GeeeekExplorer/nano-vllm#170"),
    pitfall("rmsnorm_result_not_cast_back", "rmsnorm",
            "The result stays in float32 (or the module's dtype) for a float16 or bfloat16 input: compute in "
            "float32, then return the result in the input's dtype (the handout's `result.to(in_dtype)`).",
            ("rmsnorm.py", _OUT, "return h * self.weight.to(h.dtype)  # float32 for half inputs"),
            source="kzaher/assignment1-basics@4fae799 cs336_basics/nn/rms_norm.py:28 (.to(self.dtype)); "
                   "vimeto/assignment1-basics@f598851 cs336_basics/modules/rms_norm.py:20 (a float32 gain)"),
)

D = 8


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'rmsnorm' (transformer_spec/probes/behaviour.py)."""
    p = testing.seeded_parameters(rmsnorm_shapes(D), seed=61)
    x = inputs.randn(2, 3, D, seed=62) + 0.5

    def norm(eps=1e-5, params=p):
        return bp.module(impl.RMSNorm, params, d_model=D, eps=eps)

    bp.capture(f, "out", lambda: norm()(x))
    bp.capture(f, "tiny_eps_1", lambda: norm(eps=1.0)(x * 1e-2))
    ones = {"weight": torch.ones(D, dtype=torch.float64)}
    unit = torch.ones(2, 3, dtype=torch.float64)
    # a symptom of any wrong formula, not the signature of one mistake: raw, not behavioural
    bp.capture(f, "unit_rms", lambda: bool(torch.allclose(norm(params=ones)(x).pow(2).mean(-1), unit, atol=1e-4)))
    bp.capture(f, "~centred", lambda: bool(torch.allclose(norm(params=ones)(x).mean(-1), 0 * unit, atol=1e-6)))

    def input_kept():  # float32: a course profile's float32 view passes it as it is, so a change in place shows
        y, kept = x.float().clone(), x.float().clone()
        norm()(y)
        return bool(torch.equal(y, kept))

    bp.capture(f, "~input_kept", input_kept)

    def half_large():  # mean(x**2) above float16's largest number: only a float32 computation is right
        big = (x * 300).to(torch.float16)
        out = impl.RMSNorm(D).to(torch.float16)(big)
        # against the code's own float32 result on the same numbers: the precision, whatever the formula
        own = impl.RMSNorm(D).to(torch.float32)(big.float()).double()
        return f"{out.dtype}, {'close' if torch.allclose(out.double(), own, rtol=1e-2, atol=1e-2) else 'far'}"

    bp.capture(f, "~float16_large", half_large)


def _rmsnorm(mod, seed):
    m = recheck.with_weights(mod.RMSNorm(d_model=12), rmsnorm_shapes(12), seed, torch.float64)
    return recheck.as_numpy(out=m(inputs.randn(2, 5, 12, seed=seed + 1)))


def _rmsnorm_half(half: str):
    def run(mod, seed):  # 300 * N(0, 1) in half precision: its anchor's tolerance (1e-2) times 5, in float32
        dt = getattr(torch, half)
        out = mod.RMSNorm(16).to(dt)((inputs.randn(2, 3, 16, seed=seed) * 300).to(dt))
        return recheck.Outputs(recheck.as_numpy(out=out.float()), rtol=5e-2, atol=5e-2)
    return run


RECHECKS = (
    Recheck("rmsnorm", "rmsnorm", ("spec_tests/modern/test_oracles.py::test_rmsnorm_matches_torch_rms_norm",),
            _rmsnorm, public=71),
    *(Recheck(f"rmsnorm[{half}]", "rmsnorm",
              (f"spec_tests/modern/test_behaviours.py::test_rmsnorm_computes_half_inputs_in_float32[torch.{half}]",),
              _rmsnorm_half(half), public=5) for half in ("float16", "bfloat16")),
)


COMPONENT = Component(
    "rmsnorm", label="rms", points=10, order=21, depends_on=(), tracks=("modern",),
    values=(  # the tests of what it computes (rubric.VALUES_SHARE of its points)
        "spec_tests/modern/test_golden.py::test_rmsnorm_of_1_2_2_4_with_eps_2_75",
        "spec_tests/modern/test_oracles.py::test_rmsnorm_matches_torch_rms_norm",
        "spec_tests/modern/test_behaviours.py::test_rmsnorm_computes_half_inputs_in_float32",
        "properties/modern/test_rmsnorm_laws.py::test_rmsnorm_with_unit_weight_keeps_each_direction_at_root_mean_square_one",
    ),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
