"""The 'adamw' component (modern track, optional: a training utility). AdamW (Loshchilov & Hutter
2019, Algorithm 2; CS336 assignment 1, Algorithm 1): Adam's bias-corrected step and a decoupled
weight decay, hyperparameters read from ``param_groups`` at every step.

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import torch

from transformer_spec.contract.inputs import grid, randn
from transformer_spec.contract.registry import Component, Name, Recheck, pitfall
from transformer_spec.probes import behaviour as bp
from transformer_spec.probes import recheck

NAMES = (
    Name("AdamW", "adamw", "module",
         "AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01), a torch.optim.Optimizer: step() as "
         "torch.optim.AdamW, lr read from param_groups at every step"),
)

_HYPER = 'lr, (beta1, beta2), eps, decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]'
_MOMENTS = ("m.mul_(beta1).add_(p.grad, alpha=1 - beta1)\n"
            "                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)\n"
            "                p.mul_(1 - lr * decay)  # decoupled decay, from the old θ")
_STEP = "step_size = lr * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)"

PITFALLS = (
    pitfall("adamw_without_bias_correction", "adamw",
            "The moments are used without their bias corrections: m and v start at 0, so the early steps are off by "
            "(1 - beta1) / sqrt(1 - beta2) (about 3x at the first). Scale the step by sqrt(1 - beta2^t) / (1 - beta1^t).",
            ("optim.py", _STEP, "step_size = lr")),
    pitfall("adamw_decay_as_l2_regularisation", "adamw",
            "weight_decay * θ is added to the gradient (Adam with L2 regularisation): AdamW decays the weights "
            "directly, θ -= lr * weight_decay * θ, outside the moments.",
            ("optim.py", _MOMENTS, "g = p.grad + decay * p  # L2: the decay joins the gradient\n"
                                   "                m.mul_(beta1).add_(g, alpha=1 - beta1)\n"
                                   "                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)")),
    pitfall("adamw_decay_without_the_learning_rate", "adamw",
            "The decay is θ -= weight_decay * θ: it is scaled by the learning rate too, θ -= lr * weight_decay * θ.",
            ("optim.py", "p.mul_(1 - lr * decay)", "p.mul_(1 - decay)")),
    pitfall("adamw_decays_parameters_without_gradients", "adamw",
            "Parameters whose .grad is None (frozen, or unused by this loss) are decayed too: a step leaves them "
            "alone entirely.",
            ("optim.py", "                if p.grad is None:\n                    continue\n",
             "                if p.grad is None:\n                    p.mul_(1 - lr * decay)  # decayed like the others\n"
             "                    continue\n")),
    pitfall("adamw_learning_rate_fixed_at_construction", "adamw",
            "The step uses the lr given to the constructor: a schedule writes group['lr'] before each step, so read "
            "the hyperparameters from the param group at every step.",
            ("optim.py", _HYPER, _HYPER.replace('group["lr"]', 'self.defaults["lr"]'))),
    pitfall("adamw_learning_rate_overwritten_by_the_step_size", "adamw",
            "The bias-corrected step size is written back into lr inside the loop over parameters, so every later "
            "parameter's step is corrected again (with two parameters the second moves about 3e-4 instead of 1e-3 "
            "at the first step): keep lr and compute the step size in a variable of its own.",
            ("optim.py", _STEP, "lr = lr * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)  # lr overwritten\n"
                                "                step_size = lr"),
            source="Atle18/assignment1-basics@b3841fe cs336_basics/adamw.py:68"),
    pitfall("adamw_step_crashes_on_parameters_without_gradients", "adamw",
            "step() crashes on a parameter whose .grad is None (frozen, or unused by this loss): skip it, as "
            "torch.optim.AdamW and the handout's example optimizer do.",
            ("optim.py", "                if p.grad is None:\n                    continue\n", ""),
            source="kzaher/assignment1-basics@4fae799 (AttributeError); chillcharlie357/assignment1-basics@25014d2 "
                   "cs336_basics/training/adamW.py:45 (TypeError)"),
)

SETTINGS = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)


def _steps(make, seed, steps=3, lrs=None, zero=False, settings=SETTINGS):
    params = [torch.nn.Parameter(randn(*s, seed=seed + i, dtype=torch.float32)) for i, s in enumerate([(3,), (2, 4)])]
    opt = make(params, **settings)
    for step in range(steps):
        for i, p in enumerate(params):
            p.grad = torch.zeros_like(p) if zero else grid(*p.shape, seed=seed + 10 * step + i + 5, dtype=torch.float32)
        if lrs is not None:
            for group in opt.param_groups:
                group["lr"] = lrs[step]
        opt.step()
    return torch.cat([p.detach().flatten() for p in params])


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'adamw' (transformer_spec/probes/behaviour.py)."""
    bp.capture(f, "one_step", lambda: _steps(impl.AdamW, 331, steps=1, settings={**SETTINGS, "weight_decay": 0.0}))
    bp.capture(f, "three_steps", lambda: _steps(impl.AdamW, 331))
    bp.capture(f, "zero_gradient", lambda: _steps(impl.AdamW, 331, steps=1, zero=True))
    bp.capture(f, "scheduled", lambda: _steps(impl.AdamW, 331, lrs=[1e-3, 3e-2, 1e-2]))
    # without decay: what the two allowed orders of the decay leave alone (those above are free features)
    no_decay = {**SETTINGS, "weight_decay": 0.0}
    bp.capture(f, "three_steps_no_decay", lambda: _steps(impl.AdamW, 331, settings=no_decay))
    bp.capture(f, "scheduled_no_decay", lambda: _steps(impl.AdamW, 331, lrs=[1e-3, 3e-2, 1e-2], settings=no_decay))

    def frozen_kept():
        frozen, live = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(2))
        live.grad = torch.ones(2)
        impl.AdamW([frozen, live], **SETTINGS).step()
        return bool(torch.equal(frozen.detach(), torch.ones(3)))

    bp.capture(f, "~frozen_kept", frozen_kept)

    def moves_as_alone():  # a parameter's step does not depend on the parameters before it in the group
        grads = [grid(3, seed=341, dtype=torch.float32), grid(2, seed=342, dtype=torch.float32)]
        pair = [torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(2))]
        alone = torch.nn.Parameter(torch.ones(2))
        for p, g in zip([*pair, alone], [*grads, grads[1]], strict=True):
            p.grad = g.clone()
        impl.AdamW(pair, **SETTINGS).step()
        impl.AdamW([alone], **SETTINGS).step()
        return bool(torch.allclose(pair[1].detach(), alone.detach(), rtol=1e-6, atol=1e-7))

    bp.capture(f, "~second_parameter_steps_as_alone", moves_as_alone)


def _adamw(mod, seed):
    return recheck.Outputs(recheck.as_numpy(params=_steps(mod.AdamW, seed)), rtol=1e-5, atol=1e-6 + 2 * 3 * 1e-4 * 0.1)


RECHECKS = (
    Recheck("adamw", "adamw", ("properties/modern/test_optimizer_laws.py::test_adamw_takes_torchs_adamw_steps",), _adamw),
)

COMPONENT = Component(
    "adamw", label="adamw", points=6, order=31, depends_on=(), tracks=("modern",), optional=True,
    values=(  # the tests of what it computes (rubric.VALUES_SHARE of its points)
        "properties/modern/test_optimizer_laws.py::test_adamw_takes_torchs_adamw_steps",
        "properties/modern/test_optimizer_laws.py::test_adamw_first_step_moves_each_weight_by_lr_against_its_gradient",
    ),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
