"""What updates the parameters during training (CS336 assignment 1, sections 4.3 - 4.5).

**Gradient clipping.** With ``g`` the L2 norm of all gradients together, gradients with
``g > max_norm`` are scaled in place by ``max_norm / (g + 1e-6)`` (the ``1e-6`` as in torch's
``clip_grad_norm_``); smaller ones are left alone.

**AdamW** (Loshchilov & Hutter 2019, Algorithm 2; CS336's Algorithm 1). For each parameter ``θ``
with gradient ``g``, at its step ``t = 1, 2, ...``::

    m  = β1 m + (1 - β1) g                 first moment
    v  = β2 v + (1 - β2) g²                second moment
    θ -= lr · weight_decay · θ             decoupled weight decay (from the old θ, as torch's AdamW)
    θ -= lr · sqrt(1 - β2^t) / (1 - β1^t) · m / (sqrt(v) + eps)

The hyperparameters are read from ``param_groups`` at every step, so a schedule that writes
``group["lr"]`` takes effect at the next one.

**The cosine schedule with warm-up**: ``t / T_w · lr_max`` while warming up (``t < T_w``), then
``lr_min + (1 + cos(π (t - T_w) / (T_c - T_w))) / 2 · (lr_max - lr_min)`` up to ``T_c``, then ``lr_min``.
"""

from __future__ import annotations

import math

import torch


def clip_grad_norm(parameters, max_norm):
    """Scale the gradients of ``parameters`` in place so their total L2 norm is at most ``max_norm``;
    returns the norm before clipping."""
    ### BEGIN SOLUTION
    grads = [p.grad for p in parameters if p.grad is not None]
    total = math.sqrt(sum(float(g.detach().pow(2).sum()) for g in grads))
    if total > max_norm:
        for g in grads:
            g.mul_(max_norm / (total + 1e-6))
    return total
    ### END SOLUTION


class AdamW(torch.optim.Optimizer):
    """``AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)``; ``step()``."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        ### BEGIN SOLUTION
        for group in self.param_groups:
            lr, (beta1, beta2), eps, decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["t"] = 0
                    state["m"] = torch.zeros_like(p)
                    state["v"] = torch.zeros_like(p)
                state["t"] += 1
                t, m, v = state["t"], state["m"], state["v"]
                m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                p.mul_(1 - lr * decay)  # decoupled decay, from the old θ
                step_size = lr * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
                p.addcdiv_(m, v.sqrt().add_(eps), value=-step_size)
        ### END SOLUTION
        return loss


def cosine_lr(t, lr_max, lr_min, warmup_iters, cosine_cycle_iters):
    """The learning rate at iteration ``t`` (a float)."""
    ### BEGIN SOLUTION
    if t < warmup_iters:
        return t / warmup_iters * lr_max
    if t <= cosine_cycle_iters:
        progress = (t - warmup_iters) / (cosine_cycle_iters - warmup_iters)
        return lr_min + (1 + math.cos(math.pi * progress)) / 2 * (lr_max - lr_min)
    return lr_min
    ### END SOLUTION
