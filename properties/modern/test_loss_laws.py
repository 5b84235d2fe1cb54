"""Laws of softmax and cross-entropy (components ``softmax`` and ``cross_entropy``; docs/contract.md,
"The modern track's training utilities"; CS336 assignment 1, sections 3.5.4 and 4.1).

``softmax(x, dim)`` is ``exp(x) / sum(exp(x), dim)``: it sums to 1 along ``dim``, does not change when a
constant is added along ``dim``, and is finite for inputs of any finite size. ``cross_entropy(logits,
targets)`` is the mean over rows of ``logsumexp(logits) - logits[target]``: invariant to a shift of a
row, finite for large logits, a mean over the batch, with the gradient ``(softmax - onehot) / N``.
The right-hand sides are computed here, in float64, with torch's ``exp`` and ``logsumexp``.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from transformer_spec.probes.assertions import assert_close

from ..strategies import dtypes, law_tolerance, tensors

#: how far a shift reaches: beyond exp's float32 range (88.7), so only a softmax that subtracts the
#: maximum (or uses logsumexp) passes it in float32
SHIFT = 100.0
#: the scale of "large" inputs: rows of 1e4, as the handout's own check of numerical stability
LARGE = 1e4


@st.composite
def _softmax_case(draw):
    """``x`` of 1 to 3 dimensions of sizes 1..5, its dtype, and a dimension ``dim`` (negative or not)."""
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    dim = draw(st.integers(-len(shape), len(shape) - 1), label="dim")
    dtype = draw(dtypes())
    return draw(tensors(shape, dtype)), dim


def _exact_softmax(x, dim):
    e = torch.exp(x.double() - x.double().amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


@pytest.mark.component("softmax")
@given(case=_softmax_case())
def test_softmax_is_exp_over_its_sum_along_dim(impl, case):
    """softmax(x, dim) = exp(x) / sum(exp(x), dim): the input's shape and dtype, summing to 1 along dim."""
    x, dim = case
    out = impl.softmax(x, dim)
    assert_close(out, _exact_softmax(x, dim).to(x.dtype), **law_tolerance(x.dtype),
                 what=f"softmax(x, dim={dim}) vs exp(x) / exp(x).sum({dim}, keepdim=True) computed here")


@pytest.mark.component("softmax")
@given(case=_softmax_case(), data=st.data())
def test_softmax_is_invariant_to_a_shift_along_dim(impl, case, data):
    """Adding a constant c to every entry of a slice along dim changes nothing, even when c is beyond exp's
    float32 range (subtract the maximum first)."""
    x, dim = case
    shape = list(x.shape)
    shape[dim] = 1
    shift = data.draw(tensors(tuple(shape), x.dtype, limit=SHIFT), label="shift (one constant per slice)")
    assert_close(impl.softmax(x + shift, dim), _exact_softmax(x, dim).to(x.dtype), **law_tolerance(x.dtype),
                 what=f"softmax(x + shift, dim={dim}), shift constant along dim (up to ±{SHIFT:g}), vs softmax(x)")


@pytest.mark.component("softmax")
@given(case=_softmax_case())
def test_softmax_is_finite_for_large_inputs(impl, case):
    """Inputs scaled to 1e4 give a finite softmax that still sums to 1 (exp(1e4) overflows: subtract the
    maximum along dim first)."""
    x, dim = case
    big = x * LARGE
    # float32 through logsumexp (allowed) loses about |x| * 2**-24 of the exponent: 1e-3 at 1e4
    tol = law_tolerance(x.dtype) if x.dtype == torch.float64 else {"rtol": 2e-3, "atol": 1e-5}
    assert_close(impl.softmax(big, dim), _exact_softmax(big, dim).to(x.dtype), **tol,
                 what=f"softmax(x * {LARGE:g}, dim={dim}) vs exp(x - max) / sum computed here (must be finite)")


@st.composite
def _loss_case(draw, max_rows: int = 5):
    """``logits (N, V)`` (N 1..max_rows, V 1..6), ``targets (N,)`` int64 in 0 .. V-1."""
    n, v = draw(st.integers(1, max_rows), label="N"), draw(st.integers(1, 6), label="V")
    logits = draw(tensors((n, v), draw(dtypes())))
    targets = torch.tensor(draw(st.lists(st.integers(0, v - 1), min_size=n, max_size=n), label="targets"))
    return logits, targets


def _exact_loss(logits, targets):
    l64 = logits.double()
    return (torch.logsumexp(l64, dim=-1) - l64.gather(-1, targets[:, None]).squeeze(-1)).mean()


def _loss(impl, logits, targets, what):
    out = impl.cross_entropy(logits, targets)
    if not isinstance(out, torch.Tensor) or out.dim() != 0:
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise AssertionError(f"{what}: expected a 0-d tensor (the mean over the rows), got {shape}")
    return out


@pytest.mark.component("cross_entropy")
@given(case=_loss_case())
def test_cross_entropy_is_the_mean_of_logsumexp_minus_the_target_logit(impl, case):
    """cross_entropy(logits, targets) = mean_i(logsumexp(logits[i]) - logits[i, targets[i]]), a 0-d tensor."""
    logits, targets = case
    what = "cross_entropy(logits, targets)"
    out = _loss(impl, logits, targets, what)
    assert_close(out.double(), _exact_loss(logits, targets), **law_tolerance(logits.dtype), check_dtype=False,
                 what=f"{what} vs mean(logsumexp(logits, -1) - logits[i, targets[i]]) computed here")


@pytest.mark.component("cross_entropy")
@given(case=_loss_case(), data=st.data())
def test_cross_entropy_is_invariant_to_a_shift_of_a_row(impl, case, data):
    """Adding a constant to a whole row of logits changes no probability, so not the loss either (even a
    constant beyond exp's float32 range)."""
    logits, targets = case
    shift = data.draw(tensors((logits.shape[0], 1), logits.dtype, limit=SHIFT), label="shift (one constant per row)")
    what = f"cross_entropy(logits + shift, targets), shift constant along each row (up to ±{SHIFT:g})"
    out = _loss(impl, logits + shift, targets, what)
    assert_close(out.double(), _exact_loss(logits, targets), **law_tolerance(logits.dtype), check_dtype=False,
                 what=f"{what} vs cross_entropy(logits, targets)")


@pytest.mark.component("cross_entropy")
@given(case=_loss_case())
def test_cross_entropy_is_finite_for_large_logits(impl, case):
    """Logits scaled to 1e4 give the finite loss logsumexp - target logit (log(softmax) underflows to -inf:
    never form the probabilities)."""
    logits, targets = case
    big = logits * LARGE
    what = f"cross_entropy(logits * {LARGE:g}, targets)"
    out = _loss(impl, big, targets, what)
    tol = {"rtol": 1e-9, "atol": 1e-6} if logits.dtype == torch.float64 else {"rtol": 1e-5, "atol": 1e-2}
    assert_close(out.double(), _exact_loss(big, targets), **tol, check_dtype=False,
                 what=f"{what} vs logsumexp - target logit computed here (must be finite)")


@pytest.mark.component("cross_entropy")
@given(first=_loss_case(max_rows=3), data=st.data())
def test_cross_entropy_of_a_batch_is_the_mean_over_its_rows(impl, first, data):
    """The loss of rows A and B together is (|A| loss(A) + |B| loss(B)) / (|A| + |B|): a mean, not a sum."""
    a, ta = first
    n = data.draw(st.integers(1, 3), label="rows of B")
    b = data.draw(tensors((n, a.shape[1]), a.dtype), label="B")
    tb = torch.tensor(data.draw(st.lists(st.integers(0, a.shape[1] - 1), min_size=n, max_size=n), label="targets of B"))
    both = _loss(impl, torch.cat([a, b]), torch.cat([ta, tb]), "cross_entropy(A and B)").double()
    parts = (len(a) * _loss(impl, a, ta, "cross_entropy(A)").double()
             + n * _loss(impl, b, tb, "cross_entropy(B)").double()) / (len(a) + n)
    assert_close(both, parts, **law_tolerance(a.dtype), check_dtype=False,
                 what=f"cross_entropy of {len(a)} + {n} rows vs the mean of the two batches' losses, weighted by rows")


@pytest.mark.component("cross_entropy")
@given(case=_loss_case())
def test_cross_entropy_gradient_is_softmax_minus_onehot_over_n(impl, case):
    """d loss / d logits = (softmax(logits) - onehot(targets)) / N: the loss is a differentiable function of
    the logits (no .item(), no detach, no in-place change of them)."""
    logits, targets = case
    leaf = logits.clone().requires_grad_(True)
    _loss(impl, leaf, targets, "cross_entropy(logits, targets)").backward()
    assert leaf.grad is not None, "cross_entropy(logits, targets).backward() gave logits no gradient"
    expected = (_exact_softmax(logits, -1) - torch.nn.functional.one_hot(targets, logits.shape[1]).double()) / len(logits)
    assert_close(leaf.grad.double(), expected, **law_tolerance(logits.dtype), check_dtype=False,
                 what="the gradient of cross_entropy(logits, targets) w.r.t. logits vs (softmax - onehot) / N")
