"""Softmax and cross-entropy, computed stably (CS336 assignment 1, sections 3.5.4 and 4.1).

    softmax(x)_i      = exp(x_i - max_j x_j) / sum_j exp(x_j - max_j x_j)
    cross_entropy     = mean_n ( logsumexp(logits_n) - logits_n[target_n] )

Subtracting the maximum changes neither (both are invariant to adding a constant along the
normalised dimension) and keeps every ``exp`` at most 1, so inputs of any finite size give finite
results. Cross-entropy never forms the probabilities: ``log(softmax)`` would underflow to
``-inf`` for a target far below the maximum.
"""

from __future__ import annotations


def softmax(x, dim):
    """``x (...)`` -> the same shape and dtype, summing to 1 along ``dim``."""
    ### BEGIN SOLUTION
    shifted = x - x.amax(dim=dim, keepdim=True)  # (...), every entry <= 0 along dim
    e = shifted.exp()
    return e / e.sum(dim=dim, keepdim=True)
    ### END SOLUTION


def cross_entropy(logits, targets):
    """``logits (N, V)``, ``targets (N,)`` integers in ``0 .. V-1`` -> the mean loss, a 0-d tensor."""
    ### BEGIN SOLUTION
    top = logits.amax(dim=-1, keepdim=True)  # (N, 1)
    log_z = (logits - top).exp().sum(dim=-1).log() + top.squeeze(-1)  # (N,) logsumexp
    picked = logits.gather(-1, targets.long().unsqueeze(-1)).squeeze(-1)  # (N,) the targets' logits
    return (log_z - picked).mean()
    ### END SOLUTION
