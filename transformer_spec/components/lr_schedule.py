"""The 'lr_schedule' component (modern track, optional: a training utility). cosine_lr: linear
warm-up to lr_max, half a cosine down to lr_min, then lr_min (CS336 assignment 1, section 4.4).

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import numpy as np

from transformer_spec.contract.inputs import generator
from transformer_spec.contract.registry import Component, Name, Recheck, pitfall
from transformer_spec.probes import behaviour as bp
from transformer_spec.probes import recheck

NAMES = (
    Name("cosine_lr", "lr_schedule", "function",
         "cosine_lr(t, lr_max, lr_min, warmup_iters, cosine_cycle_iters): t/T_w lr_max, then lr_min + (1 + cos(pi "
         "(t - T_w)/(T_c - T_w)))/2 (lr_max - lr_min) up to T_c, then lr_min"),
)

PITFALLS = (
    pitfall("cosine_lr_without_the_floor", "lr_schedule",
            "After cosine_cycle_iters the cosine goes on and the rate rises again: from there on it stays at lr_min.",
            ("optim.py", "    if t <= cosine_cycle_iters:\n", "    if t >= warmup_iters:\n")),
    pitfall("cosine_lr_decay_counted_from_zero", "lr_schedule",
            "The cosine's progress is t / cosine_cycle_iters: it starts at warmup_iters, so it is (t - T_w) / (T_c - T_w) "
            "(lr_max at the end of the warm-up, lr_min at T_c).",
            ("optim.py", "progress = (t - warmup_iters) / (cosine_cycle_iters - warmup_iters)",
             "progress = t / cosine_cycle_iters")),
    pitfall("cosine_lr_warmup_counted_from_one", "lr_schedule",
            "The warm-up is (t + 1) / warmup_iters * lr_max: it is t / warmup_iters * lr_max (0 at t = 0).",
            ("optim.py", "return t / warmup_iters * lr_max", "return (t + 1) / warmup_iters * lr_max")),
)


def _values(impl, t_range, *schedule):
    return np.array([float(impl.cosine_lr(t, *schedule)) for t in t_range])


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'lr_schedule' (transformer_spec/probes/behaviour.py)."""
    import torch

    schedule = (1.0, 0.1, 5, 20)
    bp.capture(f, "warmup", lambda: torch.tensor(_values(impl, range(0, 5), *schedule)))
    bp.capture(f, "cosine", lambda: torch.tensor(_values(impl, range(5, 21), *schedule)))
    bp.capture(f, "after", lambda: torch.tensor(_values(impl, range(21, 40, 3), *schedule)))


def _cosine(mod, seed):
    import torch

    warmup, length = (int(v) for v in torch.randint(1, 21, (2,), generator=generator(seed)))
    schedule = (0.1, 0.01, warmup, warmup + length)
    return recheck.Outputs({"lr": _values(mod, range(warmup, warmup + length + 1), *schedule)}, rtol=1e-6, atol=1e-12)


RECHECKS = (
    Recheck("lr_schedule", "lr_schedule",
            ("properties/modern/test_optimizer_laws.py::test_cosine_lr_follows_half_a_cosine_to_the_minimum",), _cosine),
)

COMPONENT = Component(
    "lr_schedule", label="lrs", points=3, order=32, depends_on=(), tracks=("modern",), optional=True,
    values=(  # the tests of what it computes (rubric.VALUES_SHARE of its points)
        "properties/modern/test_optimizer_laws.py::test_cosine_lr_follows_half_a_cosine_to_the_minimum",
        "properties/modern/test_optimizer_laws.py::test_cosine_lr_warms_up_linearly",
    ),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
