"""The 'softmax' component (modern track, optional: a training utility). softmax(x, dim) =
exp(x - max) / sum(exp(x - max)) along ``dim`` (CS336 assignment 1, section 3.5.4).

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import torch

from transformer_spec.contract.inputs import grid
from transformer_spec.contract.registry import Component, Name, Recheck, pitfall
from transformer_spec.probes import behaviour as bp
from transformer_spec.probes import recheck

NAMES = (
    Name("softmax", "softmax", "function",
         "softmax(x, dim) -> exp(x) / sum(exp(x), dim), x's shape and dtype, stable (finite for rows of 1e4)"),
)

_SHIFT = "shifted = x - x.amax(dim=dim, keepdim=True)  # (...), every entry <= 0 along dim"
_NORMALISE = "return e / e.sum(dim=dim, keepdim=True)"

PITFALLS = (
    pitfall("softmax_without_the_maximum_subtracted", "softmax",
            "exp(x) overflows to inf for x above about 88 in float32 (709 in float64), and inf / inf is nan: "
            "subtract the maximum along dim first (softmax does not change).",
            ("losses.py", _SHIFT, "shifted = x")),
    pitfall("softmax_over_the_last_dim_always", "softmax",
            "The dim argument is ignored (always the last dimension): normalise along the dim given.",
            ("losses.py", _SHIFT, "shifted = x - x.amax(dim=-1, keepdim=True)"),
            ("losses.py", _NORMALISE, "return e / e.sum(dim=-1, keepdim=True)")),
)


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'softmax' (transformer_spec/probes/behaviour.py)."""
    x = grid(2, 3, 4, seed=301)
    bp.capture(f, "last", lambda: impl.softmax(x, -1))
    bp.capture(f, "first", lambda: impl.softmax(x, 0))
    bp.capture(f, "~finite_at_1e4", lambda: bool(torch.isfinite(impl.softmax(x.float() * 1e4, -1)).all()))


def _softmax(mod, seed):
    x = grid(3, 4, 5, seed=seed)
    return recheck.as_numpy(last=mod.softmax(x, -1), middle=mod.softmax(x, 1))


RECHECKS = (
    Recheck("softmax", "softmax", ("properties/modern/test_loss_laws.py::test_softmax_is_exp_over_its_sum_along_dim",),
            _softmax),
)

COMPONENT = Component(
    "softmax", label="smax", points=3, order=28, depends_on=(), tracks=("modern",), optional=True,
    values=(  # the tests of what it computes (rubric.VALUES_SHARE of its points)
        "properties/modern/test_loss_laws.py::test_softmax_is_exp_over_its_sum_along_dim",
    ),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
