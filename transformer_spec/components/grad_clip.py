"""The 'grad_clip' component (modern track, optional: a training utility). clip_grad_norm(parameters,
max_norm): gradients of total L2 norm g > max_norm are scaled in place by max_norm / (g + 1e-6)
(CS336 assignment 1, section 4.5).

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import torch

from transformer_spec.contract.inputs import grid
from transformer_spec.contract.registry import Component, Name, Recheck, pitfall
from transformer_spec.probes import behaviour as bp
from transformer_spec.probes import recheck

NAMES = (
    Name("clip_grad_norm", "grad_clip", "function",
         "clip_grad_norm(parameters, max_norm): total gradient norm g > max_norm -> every .grad *= max_norm / (g + 1e-6) "
         "in place; .grad None skipped"),
)

_GRADS = ("grads = [p.grad for p in parameters if p.grad is not None]\n"
          "    total = math.sqrt(sum(float(g.detach().pow(2).sum()) for g in grads))")
_SCALE = ("    if total > max_norm:\n        for g in grads:\n            g.mul_(max_norm / (total + 1e-6))")

PITFALLS = (
    pitfall("grad_clip_each_parameter_on_its_own", "grad_clip",
            "Each gradient is clipped by its own norm: the bound is on the norm of all gradients together (one "
            "factor for all, so the update keeps its direction).",
            ("optim.py", _SCALE, "    for g in grads:\n        norm = float(g.detach().norm())\n"
                                 "        if norm > max_norm:\n            g.mul_(max_norm / (norm + 1e-6))")),
    pitfall("grad_clip_reads_the_parameters_twice", "grad_clip",
            "The parameters are iterated twice (once for the norm, once to scale): model.parameters() is a generator, "
            "empty the second time, so nothing is clipped. Make a list of the gradients once.",
            ("optim.py", _GRADS, "total = math.sqrt(sum(float(p.grad.detach().pow(2).sum()) for p in parameters "
                                 "if p.grad is not None))\n    grads = [p.grad for p in parameters if p.grad is not None]")),
    pitfall("grad_clip_scales_below_the_bound", "grad_clip",
            "Gradients are scaled to max_norm even when their norm is already below it (that enlarges them): "
            "clip only when the total norm exceeds max_norm.",
            ("optim.py", "    if total > max_norm:\n", "    if total >= 0:\n")),
    pitfall("grad_clip_eps_inside_the_root", "grad_clip",
            "The norm is sqrt(sum of g**2 + eps): eps belongs outside it, in max_norm / (g + eps). Inside, tiny "
            "gradients get a norm of about sqrt(eps) = 1e-3 and are cut although they are within the bound.",
            ("optim.py", "total = math.sqrt(sum(float(g.detach().pow(2).sum()) for g in grads))",
             "total = math.sqrt(sum(float(g.detach().pow(2).sum()) for g in grads) + 1e-6)"),
            source="AdnanElAssadi56/assignment1-basics@280d1ac cs336_basics/training.py:42"),
)


def _parameters(seed, *shapes):
    params = [torch.nn.Parameter(torch.zeros(s)) for s in shapes]
    for i, p in enumerate(params):
        p.grad = grid(*p.shape, seed=seed + i, dtype=torch.float32)
    return params


def _total(params):
    return float(sum(p.grad.double().pow(2).sum() for p in params)) ** 0.5


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'grad_clip' (transformer_spec/probes/behaviour.py)."""
    def clipped(one_pass=False, fraction=0.4):
        params = _parameters(321, (3,), (2, 4))
        impl.clip_grad_norm(iter(params) if one_pass else params, fraction * _total(params))
        return [p.grad for p in params]

    bp.capture(f, "clipped", lambda: torch.cat([g.flatten() for g in clipped()]))
    bp.capture(f, "~generator_clipped", lambda: bool(torch.equal(torch.cat([g.flatten() for g in clipped(True)]),
                                                                  torch.cat([g.flatten() for g in clipped()]))))
    unclipped = torch.cat([p.grad.flatten() for p in _parameters(321, (3,), (2, 4))])
    bp.capture(f, "~below_untouched", lambda: bool(torch.equal(torch.cat([g.flatten() for g in clipped(fraction=2.0)]),
                                                                unclipped)))

    def tiny_untouched():  # a total norm of 1e-4 within a bound of 2e-4 (beyond the free 1e-6): nothing to clip
        p = torch.nn.Parameter(torch.zeros(1))
        p.grad = torch.full((1,), 1e-4)
        impl.clip_grad_norm([p], 2e-4)
        return bool(torch.equal(p.grad, torch.full((1,), 1e-4)))

    bp.capture(f, "~tiny_within_bound_untouched", tiny_untouched)


def _clip(mod, seed):
    params = _parameters(seed, (3,), (2, 4), (5,))
    mod.clip_grad_norm(params, 0.4 * _total(params))
    return recheck.Outputs(recheck.as_numpy(**{f"grad{i}": p.grad for i, p in enumerate(params)}), rtol=1e-5, atol=1e-7)


RECHECKS = (
    Recheck("grad_clip", "grad_clip",
            ("properties/modern/test_optimizer_laws.py::test_clipping_scales_every_gradient_to_the_maximum_norm",), _clip),
)

COMPONENT = Component(
    "grad_clip", label="clip", points=4, order=30, depends_on=(), tracks=("modern",), optional=True,
    values=(  # the tests of what it computes (rubric.VALUES_SHARE of its points)
        "properties/modern/test_optimizer_laws.py::test_clipping_scales_every_gradient_to_the_maximum_norm",
    ),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
