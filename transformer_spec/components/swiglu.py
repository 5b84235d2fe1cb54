"""The 'swiglu' component (modern track). SwiGLU: w2(silu(w1 x) * w3 x), bias-free (Shazeer 2020;
CS336 assignment 1).

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import torch

from transformer_spec.contract import inputs
from transformer_spec.contract.registry import Component, Name, Recheck, pitfall
from transformer_spec.probes import behaviour as bp
from transformer_spec.probes import recheck, testing
from transformer_spec.probes.llama_shapes import swiglu_shapes

NAMES = (
    Name("SwiGLU", "swiglu", "module",
         "SwiGLU(d_model, d_ff) with w1 (d_ff, d_model), w2 (d_model, d_ff), w3 (d_ff, d_model), nn.Linear "
         "bias=False; forward(x) = w2(silu(w1(x)) * w3(x))"),
)

_FWD = "return self.w2(F.silu(self.w1(x)) * self.w3(x))  # (..., d_ff) -> (..., D)"

PITFALLS = (
    pitfall("swiglu_silu_on_the_product", "swiglu",
            "SiLU is applied to the product: SwiGLU is w2(silu(w1 x) * w3 x), the gate alone goes through SiLU.",
            ("swiglu.py", _FWD, "return self.w2(F.silu(self.w1(x) * self.w3(x)))"),
            source="Nijikadesu/breakdown-minimind#3"),
    pitfall("swiglu_gate_on_w3", "swiglu",
            "The gate is the wrong branch: SiLU goes on w1(x), and w3(x) is the value it multiplies.",
            ("swiglu.py", _FWD, "return self.w2(self.w1(x) * F.silu(self.w3(x)))"),
            source="ml-explore/mlx-lm#767"),
    pitfall("swiglu_gelu_gate", "swiglu",
            "The gate uses GELU (GeGLU): SwiGLU's gate is SiLU, z * sigmoid(z).",
            ("swiglu.py", _FWD, "return self.w2(F.gelu(self.w1(x)) * self.w3(x))")),
    pitfall("swiglu_sigmoid_gate", "swiglu",
            "The gate is sigmoid(w1 x) (GLU): SwiGLU's is silu(w1 x) = w1 x * sigmoid(w1 x).",
            ("swiglu.py", _FWD, "return self.w2(torch.sigmoid(self.w1(x)) * self.w3(x))"),
            ("swiglu.py", "import torch.nn as nn\n", "import torch\nimport torch.nn as nn\n")),
    pitfall("swiglu_no_gate", "swiglu",
            "w3 is never used: without the gated product this is an ordinary SiLU feed-forward, w2(silu(w1 x)).",
            ("swiglu.py", _FWD, "return self.w2(F.silu(self.w1(x)))")),
    pitfall("swiglu_with_biases", "swiglu",
            "The three projections carry biases: Llama's and CS336's SwiGLU has none (nn.Linear(..., bias=False)).",
            ("swiglu.py", "self.w1 = nn.Linear(d_model, d_ff, bias=False)", "self.w1 = nn.Linear(d_model, d_ff)"),
            ("swiglu.py", "self.w2 = nn.Linear(d_ff, d_model, bias=False)", "self.w2 = nn.Linear(d_ff, d_model)"),
            ("swiglu.py", "self.w3 = nn.Linear(d_model, d_ff, bias=False)", "self.w3 = nn.Linear(d_model, d_ff)"),
            source="bkitano/llama-from-scratch#7"),
)

D, FF = 8, 12


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'swiglu' (transformer_spec/probes/behaviour.py)."""
    p = testing.seeded_parameters(swiglu_shapes(D, FF), seed=91)
    x = inputs.randn(2, 3, D, seed=92) * 2

    def ffn(params=p):
        return bp.module(impl.SwiGLU, params, d_model=D, d_ff=FF)

    bp.capture(f, "out", lambda: ffn()(x))
    bp.capture(f, "params", lambda: sum(t.numel() for t in impl.SwiGLU(D, FF).parameters()), needs=("parameters",))
    bp.capture(f, "~zero_w3_gives_zero", lambda: bool((ffn(bp.zeroed(p, "w3.weight"))(x) == 0).all()))
    bp.capture(f, "~zero_w1_gives_zero", lambda: bool((ffn(bp.zeroed(p, "w1.weight"))(x) == 0).all()))


def _swiglu(mod, seed):
    m = recheck.with_weights(mod.SwiGLU(d_model=12, d_ff=20), swiglu_shapes(12, 20), seed, torch.float64)
    return recheck.as_numpy(out=m(inputs.randn(2, 5, 12, seed=seed + 1) * 2))


RECHECKS = (
    Recheck("swiglu", "swiglu", ("spec_tests/modern/test_oracles.py::test_swiglu_matches_its_formula_with_torch_silu",),
            _swiglu, public=73),
)


COMPONENT = Component(
    "swiglu", label="swig", points=8, order=23, depends_on=(), tracks=("modern",),
    values=(  # the tests of what it computes (rubric.VALUES_SHARE of its points)
        "spec_tests/modern/test_golden.py::test_swiglu_on_integer_weights",
        "spec_tests/modern/test_oracles.py::test_swiglu_matches_its_formula_with_torch_silu",
        "properties/modern/test_swiglu_laws.py::test_swiglu_gates_w3_x_with_silu_of_w1_x",
    ),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
