"""The 'cross_entropy' component (modern track, optional: a training utility). cross_entropy(logits,
targets) = mean over rows of logsumexp(logits) - logits[target] (CS336 assignment 1, section 4.1).

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import torch

from transformer_spec.contract.inputs import grid
from transformer_spec.contract.registry import Component, Name, Recheck, pitfall
from transformer_spec.probes import behaviour as bp
from transformer_spec.probes import recheck

NAMES = (
    Name("cross_entropy", "cross_entropy", "function",
         "cross_entropy(logits (N, V), targets (N,)) -> 0-d mean of logsumexp(logits[i]) - logits[i, targets[i]], stable"),
)

_LOG_Z = "log_z = (logits - top).exp().sum(dim=-1).log() + top.squeeze(-1)  # (N,) logsumexp"
_MEAN = "return (log_z - picked).mean()"

PITFALLS = (
    pitfall("cross_entropy_summed_over_the_batch", "cross_entropy",
            "The losses of the rows are summed: cross-entropy is their mean (the loss must not grow with the batch).",
            ("losses.py", _MEAN, "return (log_z - picked).sum()")),
    pitfall("cross_entropy_logsumexp_without_the_maximum", "cross_entropy",
            "logsumexp computed as log(sum(exp(logits))): exp overflows for large logits. Subtract the row's maximum "
            "first and add it back (logsumexp(x) = m + log(sum(exp(x - m)))).",
            ("losses.py", _LOG_Z, "log_z = logits.exp().sum(dim=-1).log()")),
    pitfall("cross_entropy_log_of_softmax", "cross_entropy",
            "The loss is -log(softmax(logits)[target]): for large logits the target's probability underflows to 0 "
            "and its log to -inf. Compute logsumexp(logits) - logits[target] without forming the probabilities.",
            ("losses.py", _MEAN, "return -(picked - log_z).exp().log().mean()")),
    pitfall("cross_entropy_changes_its_logits", "cross_entropy",
            "The maximum is subtracted from the logits in place (`x -= max`): the caller's logits change, and "
            "backward through the loss fails (a leaf, or a tensor autograd needs, modified in place). Compute "
            "`x - max` into a new tensor.",
            ("losses.py", "log_z = (logits - top).exp().sum(dim=-1).log() + top.squeeze(-1)  # (N,) logsumexp",
             "logits = logits.sub_(top)  # in place\n    log_z = logits.exp().sum(dim=-1).log()  # (N,) logsumexp of the shifted logits"),
            source="AS-NOVA/assignment1-basics@73e16b6 cs336_basics/mymodule.py:399"),
)


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'cross_entropy' (transformer_spec/probes/behaviour.py)."""
    logits = grid(4, 5, seed=311)
    targets = torch.tensor([0, 3, 4, 1])
    bp.capture(f, "loss", lambda: impl.cross_entropy(logits, targets))
    bp.capture(f, "one_row", lambda: impl.cross_entropy(logits[:1], targets[:1]))
    bp.capture(f, "~finite_at_1e4", lambda: bool(torch.isfinite(impl.cross_entropy(logits.float() * 1e4, targets))))
    bp.capture(f, "~finite_shifted_100", lambda: bool(torch.isfinite(impl.cross_entropy(logits.float() + 100, targets))))

    def logits_kept():  # the caller's logits unchanged (float32: a course profile's float32 view passes them as they are)
        mine, kept = grid(4, 5, seed=311).float(), grid(4, 5, seed=311).float()  # fresh: a call above may change it
        impl.cross_entropy(mine, targets)
        return bool(torch.equal(mine, kept))

    bp.capture(f, "~logits_kept", logits_kept)


def _cross_entropy(mod, seed):
    gen = torch.Generator().manual_seed(seed + 1)
    loss = mod.cross_entropy(grid(5, 6, seed=seed), torch.randint(0, 6, (5,), generator=gen))
    return recheck.as_numpy(loss=loss.reshape(1))  # the re-check's arrays have at least one dimension


RECHECKS = (
    Recheck("cross_entropy", "cross_entropy",
            ("properties/modern/test_loss_laws.py::test_cross_entropy_is_the_mean_of_logsumexp_minus_the_target_logit",),
            _cross_entropy),
)

COMPONENT = Component(
    "cross_entropy", label="xent", points=5, order=29, depends_on=(), tracks=("modern",), optional=True,
    values=(  # the tests of what it computes (rubric.VALUES_SHARE of its points)
        "properties/modern/test_loss_laws.py::test_cross_entropy_is_the_mean_of_logsumexp_minus_the_target_logit",
        "properties/modern/test_loss_laws.py::test_cross_entropy_gradient_is_softmax_minus_onehot_over_n",
    ),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
