"""Laws of what updates the parameters: gradient clipping, AdamW and the cosine schedule (components
``grad_clip``, ``adamw`` and ``lr_schedule``; docs/contract.md, "The modern track's training utilities";
CS336 assignment 1, sections 4.3 - 4.5).

Gradients are drawn as multiples of 1/8 (none zero where a direction or a sign matters); parameters are
float32, as a model's are in training. ``torch.optim.AdamW`` is the oracle of AdamW's steps (the
contract allows the two orders of the decay and the two places of ``eps``: they differ by far less
than :data:`ADAM_TOL`).
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from transformer_spec.probes.assertions import assert_close

from ..strategies import tensors

ADAM_TOL = {"rtol": 1e-5, "atol": 1e-6}  # float32 steps


def _adam_tolerance(settings: dict, steps: int) -> dict:
    """:data:`ADAM_TOL`, plus what the contract's two orders of the decay may differ by: at most about
    lr · weight_decay · (one Adam step, about lr) per step, allowed twice over."""
    return {"rtol": ADAM_TOL["rtol"], "atol": ADAM_TOL["atol"] + 2 * steps * settings["lr"] ** 2 * settings["weight_decay"]}
CLIP_TOL = {"rtol": 1e-5, "atol": 1e-7}
CLIP_EPS = 1e-6  # the contract's: max_norm / (total + 1e-6)


@st.composite
def _gradients(draw, nonzero: bool = True):
    """1 to 3 float32 parameters of 1 to 2 dimensions (sizes 1..4), each with a drawn gradient."""
    shapes = draw(st.lists(st.lists(st.integers(1, 4), min_size=1, max_size=2).map(tuple), min_size=1, max_size=3),
                  label="parameter shapes")
    grads = [draw(tensors(s, torch.float32)) for s in shapes]
    if nonzero and all(float(g.abs().sum()) == 0 for g in grads):
        grads[0] = grads[0] + 0.125
    return grads


def _parameters(grads, values_seed: int = 0):
    gen = torch.Generator().manual_seed(values_seed)
    params = [torch.nn.Parameter(torch.randn(g.shape, generator=gen)) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    return params


def _norm(grads) -> float:
    return math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads))


@pytest.mark.component("grad_clip")
@given(grads=_gradients(), fraction=st.floats(0.05, 0.95), one_pass=st.booleans())
def test_clipping_scales_every_gradient_to_the_maximum_norm(impl, grads, fraction, one_pass):
    """Above the bound, every gradient is multiplied by max_norm / total norm (one factor for all: the
    direction is kept, the total norm becomes max_norm), in place; parameters given as a one-pass iterable
    (model.parameters() is a generator) are clipped as a list is."""
    params = _parameters(grads)
    total = _norm(grads)
    max_norm = fraction * total
    impl.clip_grad_norm(iter(params) if one_pass else params, max_norm)
    given_as = "a generator" if one_pass else "a list"
    for i, (p, g) in enumerate(zip(params, grads)):
        assert_close(p.grad, g * (max_norm / total), **CLIP_TOL,
                     what=f"gradient {i} after clip_grad_norm(parameters as {given_as}, max_norm={max_norm:.6g}) of "
                          f"total norm {total:.6g} vs gradient * max_norm / total norm")


@pytest.mark.component("grad_clip")
@given(grads=_gradients(nonzero=False), factor=st.floats(1.0, 3.0))
def test_gradients_within_the_bound_are_untouched(impl, grads, factor):
    """A total norm at most max_norm leaves every gradient as it was: exactly, or (the contract's free
    choice, as torch.nn.utils.clip_grad_norm_) multiplied by min(1, max_norm / (total + eps)), which
    differs from 1 only within eps of the bound."""
    params = _parameters(grads)
    total = _norm(grads)
    max_norm = max(factor * total, 1e-3)
    impl.clip_grad_norm(params, max_norm)
    lowest = min(1.0, max_norm / (total + CLIP_EPS))  # the smallest factor allowed
    for i, (p, g) in enumerate(zip(params, grads)):
        ratio_ok = torch.all((p.grad.double() - g.double()).abs() <= (1 - lowest + 2 ** -23) * g.double().abs())
        if not bool(ratio_ok):
            raise AssertionError(f"gradient {i} changed by clip_grad_norm(parameters, max_norm={max_norm:.6g}) although "
                                 f"the total norm {total:.6g} is within it: expected {g.tolist()} (times a factor "
                                 f"from {lowest:.9g} to 1), got {p.grad.tolist()}")


@pytest.mark.component("grad_clip")
@given(grads=_gradients(), fraction=st.floats(0.05, 0.95))
def test_clipping_skips_gradients_of_none_and_scales_the_others_by_one_factor(impl, grads, fraction):
    """A parameter whose .grad is None (frozen, or unused by the loss) counts for nothing and stays None, and the
    others are scaled by max_norm / (their total norm): both, so its name says both (issue 44: a repository that did
    skip them failed it on the scaling, with eps inside the root, and its old name sent the student elsewhere)."""
    params = _parameters(grads)
    frozen = torch.nn.Parameter(torch.ones(3))
    total = _norm(grads)
    impl.clip_grad_norm([frozen, *params], fraction * total)
    assert frozen.grad is None, "clip_grad_norm gave a gradient to a parameter that had none"
    for i, (p, g) in enumerate(zip(params, grads)):
        assert_close(p.grad, g * fraction, **CLIP_TOL,
                     what=f"gradient {i} after clip_grad_norm([a parameter without gradient, ...], "
                          f"max_norm={fraction * total:.6g}) vs gradient * max_norm / total norm of the others")


@st.composite
def _adam_settings(draw):
    lr = draw(st.sampled_from([1e-3, 1e-2, 0.1]), label="lr")
    betas = draw(st.sampled_from([(0.9, 0.999), (0.9, 0.95), (0.5, 0.9)]), label="betas")
    decay = draw(st.sampled_from([0.0, 0.01, 0.1]), label="weight_decay")
    return dict(lr=lr, betas=betas, eps=1e-8, weight_decay=decay)


def _run(make, grads_per_step, settings, lrs=None, values_seed=0):
    """The parameters after one step per entry of ``grads_per_step`` by the optimizer ``make(params, **settings)``;
    ``lrs``: the lr written to every param group before each step (a schedule)."""
    params = _parameters(grads_per_step[0], values_seed)
    opt = make(params, **settings)
    if not isinstance(opt, torch.optim.Optimizer):
        raise AssertionError(f"AdamW(params, ...) is a {type(opt).__name__}, not a torch.optim.Optimizer")
    for step, grads in enumerate(grads_per_step):
        for p, g in zip(params, grads):
            p.grad = g.clone()
        if lrs is not None:
            for group in opt.param_groups:
                group["lr"] = lrs[step]
        opt.step()
    return [p.detach().clone() for p in params]


@st.composite
def _steps(draw):
    first = draw(_gradients())
    count = draw(st.integers(1, 4), label="steps")
    return [first] + [[draw(tensors(tuple(g.shape), torch.float32)) for g in first] for _ in range(count - 1)]


def _torch_adamw(params, **settings):
    return torch.optim.AdamW(params, **settings)


@pytest.mark.component("adamw")
@given(steps=_steps(), settings=_adam_settings(), seed=st.integers(0, 99))
def test_adamw_takes_torchs_adamw_steps(impl, steps, settings, seed):
    """AdamW(params, lr, betas, eps, weight_decay) takes the same steps as torch.optim.AdamW: moments, bias
    corrections, the decoupled decay, state kept per parameter across steps."""
    got = _run(impl.AdamW, steps, settings, values_seed=seed)
    want = _run(_torch_adamw, steps, settings, values_seed=seed)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, **_adam_tolerance(settings, len(steps)),
                     what=f"parameter {i} after {len(steps)} AdamW step(s) with {settings} vs "
                                            f"torch.optim.AdamW's")


@pytest.mark.component("adamw")
@given(grads=_gradients(), lr=st.sampled_from([1e-3, 1e-2, 0.1]))
def test_adamw_first_step_moves_each_weight_by_lr_against_its_gradient(impl, grads, lr):
    """Without decay, the first step is lr * g / (|g| + eps) per entry (about lr * sign(g)): the bias
    corrections undo the moments' (1 - beta) factors."""
    params = _parameters(grads)
    before = [p.detach().clone() for p in params]
    opt = impl.AdamW(params, lr=lr, weight_decay=0.0)
    opt.step()
    for i, (p, b, g) in enumerate(zip(params, before, grads)):
        assert_close(p.detach(), b - lr * g / (g.abs() + 1e-8), rtol=1e-5, atol=lr * 1e-4,
                     what=f"parameter {i} after one AdamW(lr={lr:g}, weight_decay=0) step vs θ - lr * g / (|g| + eps)")


@pytest.mark.component("adamw")
@given(grads=_gradients(nonzero=False), settings=_adam_settings(), seed=st.integers(0, 99))
def test_adamw_decay_is_decoupled_from_the_gradient(impl, grads, settings, seed):
    """With every gradient 0 a step only decays: θ ← θ (1 - lr · weight_decay). (L2 regularisation, which
    adds weight_decay · θ to the gradient, would move θ by about lr instead.)"""
    zeros = [torch.zeros_like(g) for g in grads]
    got = _run(impl.AdamW, [zeros], settings, values_seed=seed)
    start = _parameters(zeros, seed)
    for i, (g, p) in enumerate(zip(got, start)):
        assert_close(g, p.detach() * (1 - settings["lr"] * settings["weight_decay"]), **ADAM_TOL,
                     what=f"parameter {i} after one AdamW step with {settings} and a zero gradient vs "
                          "θ (1 - lr · weight_decay)")


@pytest.mark.component("adamw")
@given(steps=_steps(), settings=_adam_settings(), data=st.data())
def test_adamw_reads_the_learning_rate_from_its_param_groups(impl, steps, settings, data):
    """A schedule writes group["lr"] before each step; the step uses it (not the lr given at construction)."""
    lrs = data.draw(st.lists(st.sampled_from([1e-3, 3e-3, 1e-2, 3e-2]), min_size=len(steps), max_size=len(steps)),
                    label="lr of each step")
    got = _run(impl.AdamW, steps, settings, lrs)
    want = _run(_torch_adamw, steps, settings, lrs)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, **_adam_tolerance({**settings, "lr": max(lrs)}, len(steps)),
                     what=f"parameter {i} after AdamW steps with group['lr'] set to {lrs} vs "
                                            f"torch.optim.AdamW's")


@pytest.mark.component("adamw")
@given(grads=_gradients(), settings=_adam_settings())
def test_adamw_skips_parameters_without_gradients(impl, grads, settings):
    """A parameter whose .grad is None is not updated (not even decayed)."""
    params = _parameters(grads)
    frozen = torch.nn.Parameter(torch.ones(3))
    opt = impl.AdamW([frozen, *params], **settings)
    opt.step()
    if not torch.equal(frozen.detach(), torch.ones(3)):
        raise AssertionError(f"AdamW.step() with {settings} changed a parameter without gradient: "
                             f"expected [1.0, 1.0, 1.0], got {frozen.detach().tolist()}")


@st.composite
def _schedule(draw):
    warmup = draw(st.integers(1, 20), label="warmup_iters")
    cycle = draw(st.integers(warmup + 1, warmup + 50), label="cosine_cycle_iters")
    lr_max = draw(st.sampled_from([1e-3, 6e-4, 0.1, 1.0]), label="lr_max")
    lr_min = draw(st.sampled_from([0.0, 0.1, 0.5]), label="lr_min / lr_max") * lr_max
    return lr_max, lr_min, warmup, cycle


def _lr(impl, t, lr_max, lr_min, warmup, cycle) -> float:
    return float(impl.cosine_lr(t, lr_max, lr_min, warmup, cycle))


def _check_lr(got, want, call, rule):
    if not math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-12):
        raise AssertionError(f"{call} = {got!r}, expected {want!r} ({rule})")


@pytest.mark.component("lr_schedule")
@given(schedule=_schedule(), data=st.data())
def test_cosine_lr_warms_up_linearly(impl, schedule, data):
    """For t < warmup_iters the rate is t / warmup_iters · lr_max (0 at t = 0)."""
    lr_max, lr_min, warmup, cycle = schedule
    t = data.draw(st.integers(0, warmup - 1), label="t")
    _check_lr(_lr(impl, t, *schedule), t / warmup * lr_max, f"cosine_lr({t}, {lr_max}, {lr_min}, {warmup}, {cycle})",
              "t / warmup_iters · lr_max while warming up")


@pytest.mark.component("lr_schedule")
@given(schedule=_schedule(), data=st.data())
def test_cosine_lr_follows_half_a_cosine_to_the_minimum(impl, schedule, data):
    """From warmup_iters to cosine_cycle_iters: lr_min + (1 + cos(π (t - T_w) / (T_c - T_w))) / 2 · (lr_max - lr_min):
    lr_max at T_w, halfway between at the middle, lr_min at T_c."""
    lr_max, lr_min, warmup, cycle = schedule
    t = data.draw(st.sampled_from([warmup, cycle, (warmup + cycle) // 2]) | st.integers(warmup, cycle), label="t")
    want = lr_min + (1 + math.cos(math.pi * (t - warmup) / (cycle - warmup))) / 2 * (lr_max - lr_min)
    _check_lr(_lr(impl, t, *schedule), want, f"cosine_lr({t}, {lr_max}, {lr_min}, {warmup}, {cycle})",
              "the cosine decay from lr_max at warmup_iters to lr_min at cosine_cycle_iters")


@pytest.mark.component("lr_schedule")
@given(schedule=_schedule(), after=st.integers(1, 1000))
def test_cosine_lr_stays_at_the_minimum_after_the_cycle(impl, schedule, after):
    """After cosine_cycle_iters the rate is lr_min (the cosine does not rise again)."""
    lr_max, lr_min, warmup, cycle = schedule
    t = cycle + after
    _check_lr(_lr(impl, t, *schedule), lr_min, f"cosine_lr({t}, {lr_max}, {lr_min}, {warmup}, {cycle})",
              "lr_min after cosine_cycle_iters")
