"""The 'ffn' component. The position-wise feed-forward network: linear2(dropout(gelu(linear1(x))))
(seed 000).

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import torch

from transformer_spec.contract import inputs
from transformer_spec.contract.registry import Component, Name, Recheck, pitfall
from transformer_spec.probes import behaviour as bp
from transformer_spec.probes import recheck, testing

NAMES = (
    Name("FeedForward", "ffn", "module",
         "FeedForward(d_model=512, d_ff=2048, dropout=0.1) with linear1, linear2, dropout; "
         "forward(x) = linear2(dropout(gelu(linear1(x)))) with exact erf GELU"),
)

PITFALLS = (
    pitfall("relu_instead_of_gelu", "ffn",
            "The feed-forward uses ReLU: the contract asks for the exact (erf) GELU, F.gelu(x).",
            ("feedforward.py", "F.gelu(self.linear1(x))", "F.relu(self.linear1(x))")),
    pitfall("tanh_gelu", "ffn",
            "The feed-forward uses the tanh approximation of GELU: the contract asks for the exact erf GELU.",
            ("feedforward.py", "F.gelu(self.linear1(x))", 'F.gelu(self.linear1(x), approximate="tanh")')),
    pitfall("no_activation", "ffn",
            "The feed-forward has no activation between linear1 and linear2: it collapses to one linear map.",
            ("feedforward.py", "F.gelu(self.linear1(x))", "self.linear1(x)")),
    pitfall("ffn_dropout_after_linear2", "ffn",
            "Dropout is applied after linear2: the contract's FFN is linear2(dropout(gelu(linear1(x)))).",
            ("feedforward.py", "return self.linear2(self.dropout(F.gelu(self.linear1(x))))",
             "return self.dropout(self.linear2(F.gelu(self.linear1(x))))")),
    pitfall("ffn_dropout_in_eval", "ffn",
            "Dropout stays active in eval(): use self.dropout (nn.Dropout), which acts only in train() mode.",
            ("feedforward.py", "self.linear2(self.dropout(F.gelu(self.linear1(x))))",
             "self.linear2(F.dropout(F.gelu(self.linear1(x)), self.dropout.p, training=True))")),
    # mined from public implementations (issue 27): each cites where the mistake was made
    pitfall('ffn_hidden_size_ignores_d_ff', 'ffn',
            'The feed-forward never uses d_ff: its hidden layer has d_model units. The first linear '
            'widens to d_ff and the second maps back, Linear(d_model, d_ff) then Linear(d_ff, '
        "d_model).",
            ('feedforward.py', 'self.linear1 = nn.Linear(d_model, d_ff)  # widen, usually 4x',
             'self.linear1 = nn.Linear(d_model, d_model)  # d_ff unused'),
            ('feedforward.py', 'self.linear2 = nn.Linear(d_ff, d_model)  # back to d_model',
             'self.linear2 = nn.Linear(d_model, d_model)'),
            source='brightmart/text_classification#86'),
)


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'ffn' (transformer_spec/probes/behaviour.py)."""
    p = testing.seeded_parameters(testing.ffn_shapes(bp.D, bp.FF), seed=21)
    x = inputs.randn(2, 3, bp.D, seed=22) * 2

    def ffn(dropout=0.0, params=p, train=False):
        return bp.module(impl.FeedForward, params, train, d_model=bp.D, d_ff=bp.FF, dropout=dropout)

    bp.capture(f, "out", lambda: ffn()(x))
    bp.capture(f, "eval_deterministic", lambda: bp.deterministic(lambda: ffn(0.5)(x)))
    zero = bp.zeroed(p, "linear2.weight")

    def train_zero_linear2_gives_bias():
        torch.manual_seed(3)
        out = ffn(0.5, zero, train=True)(x)
        return bool(torch.allclose(out, zero["linear2.bias"].expand_as(out)))

    bp.capture(f, "train_zero_linear2_gives_bias", train_zero_linear2_gives_bias)


def _ffn(dtype: str):
    def run(mod, seed):
        s, dt = inputs.ORACLE, getattr(torch, dtype)
        m = recheck.with_weights(mod.FeedForward(d_model=s.d, d_ff=s.ff, dropout=0.0), testing.ffn_shapes(s.d, s.ff),
                                 seed, dt)
        return recheck.oracle_outputs(dtype, out=m(inputs.randn(s.b, s.lq, s.d, seed=seed + 1, dtype=dt) * 2))
    return run


RECHECKS = tuple(Recheck("ffn" if dtype == "float64" else f"ffn[{dtype}]", "ffn",
                         (f"{recheck.ORACLE}test_feed_forward_matches_torch[{dtype}]",), _ffn(dtype),
                         public=51)  # weights 51, x 52 as in the anchor
                 for dtype in recheck.ORACLE_DTYPES)


COMPONENT = Component(
    "ffn", label="ffn", points=6, order=4, depends_on=(),
    values=(  # the tests of what it computes (rubric.VALUES_SHARE of its points)
        "spec_tests/test_torch_oracle.py::test_feed_forward_matches_torch",
    ),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
