"""The 'errors' component. Argument checks: a clear ValueError (or TypeError) naming the argument to
fix.

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/registry.py)."""

from __future__ import annotations

import torch

from .. import behaviour as bp
from ..registry import Component, pitfall

NAMES = (

)

PITFALLS = (
    pitfall("heads_divisibility_not_checked", "errors",
            "d_model not divisible by num_heads is not rejected: raise ValueError naming d_model and num_heads.",
            ("_validation.py", "if d_model % num_heads != 0:", "if False:")),
    pitfall("positive_ints_not_checked", "errors",
            "Sizes such as d_model, num_heads or max_new_tokens are not checked: raise ValueError/TypeError "
            "naming the argument for 0, negatives and non-ints.",
            ("_validation.py", '"""``value`` must be an ``int`` (not a bool) greater than zero."""',
             '"""``value`` must be an ``int`` (not a bool) greater than zero."""\n    return value')),
    pitfall("max_len_not_checked", "errors",
            "A sequence longer than max_len is not rejected with a ValueError naming max_len.",
            ("position.py", "    if start + x.size(1) > max_len:", "    if False:")),
    pitfall("mask_dtype_not_checked", "errors",
            "A mask that is not bool is accepted: raise TypeError saying masks are bool (True = blocked).",
            ("_validation.py", "if mask.dtype != torch.bool:", "if False:")),
    pitfall("error_message_without_argument_name", "errors",
            "The error message does not name the argument: say which argument is wrong and its value.",
            ("_validation.py", 'raise ValueError(f"{name} must be a positive int, got {name}={value}")',
             'raise ValueError(f"must be a positive int, got {value}")')),
)


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'errors' (transformer_spec/behaviour.py)."""
    f["mha_10_4"] = bp.names_arg(lambda: impl.MultiHeadAttention(d_model=10, num_heads=4), "num_heads")
    f["ffn_d_model_0"] = bp.names_arg(lambda: impl.FeedForward(d_model=0, d_ff=4), "d_model")
    f["minigpt_vocab_0"] = bp.names_arg(lambda: impl.MiniGPT(0, d_model=8, num_heads=2, num_layers=1, d_ff=8,
                                                           max_len=4), "vocab_size")
    f["generate_max_new_tokens_0"] = bp.names_arg(lambda: bp.small_minigpt(impl).generate([1], max_new_tokens=0),
                                                "max_new_tokens")
    f["position_too_long"] = bp.names_arg(lambda: impl.SinusoidalPositionEncoding(6, max_len=4)(
        torch.zeros(1, 5, 6)), "max_len")
    f["float_mask"] = bp.names_arg(lambda: impl.scaled_dot_product_attention(
        torch.zeros(1, 2, 4), torch.zeros(1, 2, 4), torch.zeros(1, 2, 4), torch.zeros(2, 2)), "mask")
    f["causal_mask_0"] = bp.names_arg(lambda: impl.causal_mask(0), "seq_len")


COMPONENT = Component(
    "errors", label="err", points=6, order=11, depends_on=(),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour,
    why_no_names="the argument checks belong to the other components' names; their tests are graded here",
    why_no_rechecks=(
        "argument checks raise errors instead of returning arrays to compare"
    ),
)
