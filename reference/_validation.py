"""Argument checks shared by the reference modules.

Every check raises ``ValueError`` or ``TypeError`` with a message that names the argument,
shows the value that came in and says how to fix it (the contract's "never a bare assert").
"""

from __future__ import annotations

import numbers

import torch


def check_positive_int(name: str, value) -> int:
    """``value`` must be an ``int`` (not a bool) greater than zero."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a positive int, got {value!r} ({type(value).__name__})")
    if value <= 0:
        raise ValueError(f"{name} must be a positive int, got {name}={value}")
    return value


def check_dropout(value) -> float:
    """Dropout is a probability in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"dropout must be a float in [0, 1), got {value!r} ({type(value).__name__})")
    if not 0.0 <= value < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got dropout={value}")
    return float(value)


def check_heads(d_model, num_heads) -> int:
    """``d_model`` must split evenly into ``num_heads`` heads; returns ``d_k``."""
    check_positive_int("d_model", d_model)
    check_positive_int("num_heads", num_heads)
    if d_model % num_heads != 0:
        raise ValueError(
            f"d_model={d_model} is not divisible by num_heads={num_heads}: each head gets "
            f"d_k = d_model // num_heads features, so choose num_heads that divides d_model"
        )
    return d_model // num_heads


def check_tensor(name: str, value, dim: int | None = None, min_dim: int | None = None) -> torch.Tensor:
    """``value`` must be a tensor with exactly ``dim`` (or at least ``min_dim``) dimensions."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if dim is not None and value.dim() != dim:
        raise ValueError(f"{name} must have {dim} dimensions, got shape {tuple(value.shape)}")
    if min_dim is not None and value.dim() < min_dim:
        raise ValueError(
            f"{name} must have at least {min_dim} dimensions, got shape {tuple(value.shape)}"
        )
    return value


def check_features(name: str, x: torch.Tensor, d_model: int) -> None:
    """A ``(B, L, D)`` input whose last dimension must be ``d_model``."""
    check_tensor(name, x, dim=3)
    if x.size(-1) != d_model:
        raise ValueError(
            f"{name} has {x.size(-1)} features in its last dimension (shape {tuple(x.shape)}) "
            f"but the module was built with d_model={d_model}"
        )


def check_mask(mask, scores_shape: torch.Size, what: str = "mask") -> torch.Tensor:
    """A boolean mask (``True`` = blocked) that broadcasts to ``scores_shape``."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{what} must be a bool torch.Tensor (True = blocked), got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"{what} must have dtype torch.bool (True = blocked), got {mask.dtype}; "
            f"convert it with `{what}.bool()` or build it with causal_mask/padding_mask"
        )
    # torch's broadcasting rule, aligned from the right, without growing the scores (in Python:
    # torch.broadcast_shapes goes through torch._refs, whose first call imports sympy, ~1 s)
    fits = len(mask.shape) <= len(scores_shape) and all(
        m in (1, s) for m, s in zip(reversed(mask.shape), reversed(scores_shape)))
    if not fits:
        raise ValueError(
            f"{what} of shape {tuple(mask.shape)} does not broadcast to the attention scores' "
            f"shape {tuple(scores_shape)} (..., Lq, Lk); a causal mask is (Lq, Lk), a padding "
            f"mask is (B, 1, 1, Lk)"
        )
    return mask


def check_tokens(name: str, tokens, vocab_size: int, max_len: int | None = None) -> torch.Tensor:
    """Token ids: an integer tensor ``(B, L)`` with values in ``[0, vocab_size)``."""
    check_tensor(name, tokens, dim=2)
    if tokens.dtype.is_floating_point or tokens.dtype == torch.bool or tokens.is_complex():
        raise TypeError(f"{name} must hold integer token ids (torch.long), got dtype {tokens.dtype}")
    if tokens.size(1) == 0:
        raise ValueError(f"{name} must hold at least one token per sequence, got shape {tuple(tokens.shape)}")
    if max_len is not None and tokens.size(1) > max_len:
        raise ValueError(
            f"{name} has length {tokens.size(1)} but max_len={max_len}; "
            f"crop the sequence to its last {max_len} tokens or build the model with a larger max_len"
        )
    if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= vocab_size):
        raise ValueError(
            f"{name} holds ids from {int(tokens.min())} to {int(tokens.max())}, "
            f"outside the vocabulary [0, {vocab_size - 1}] (vocab_size={vocab_size})"
        )
    return tokens


def check_positive_float(name: str, value) -> float:
    """``value`` must be a finite real number greater than zero (``eps``, ``theta``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a positive float, got {value!r} ({type(value).__name__})")
    if not 0.0 < value < float("inf"):
        raise ValueError(f"{name} must be a positive finite float, got {name}={value}")
    return float(value)


def check_last_dim(name: str, x, size: int, what: str) -> torch.Tensor:
    """A tensor whose last dimension is ``size`` (``what`` names the constructor argument)."""
    check_tensor(name, x, min_dim=1)
    if x.size(-1) != size:
        raise ValueError(
            f"{name} has {x.size(-1)} features in its last dimension (shape {tuple(x.shape)}) "
            f"but the module was built with {what}={size}"
        )
    return x


def check_seed_tokens(seed_tokens, vocab_size: int) -> list[int]:
    """A non-empty list (or 1-D tensor) of ids in ``[0, vocab_size)`` -> a fresh list of ints."""
    if isinstance(seed_tokens, torch.Tensor):
        if seed_tokens.dim() != 1 or seed_tokens.dtype.is_floating_point:
            raise ValueError(
                f"seed_tokens must be a list of ints or a 1-D integer tensor, "
                f"got a tensor of shape {tuple(seed_tokens.shape)} and dtype {seed_tokens.dtype}"
            )
        seed_tokens = seed_tokens.tolist()
    if isinstance(seed_tokens, (str, bytes)) or not hasattr(seed_tokens, "__iter__"):
        raise TypeError(f"seed_tokens must be a list of ints, got {type(seed_tokens).__name__}")
    tokens = list(seed_tokens)
    if not tokens:
        raise ValueError("seed_tokens must hold at least one token id, got an empty sequence")
    for t in tokens:
        if isinstance(t, bool) or not isinstance(t, numbers.Integral):
            raise TypeError(f"seed_tokens must hold ints, got {t!r} ({type(t).__name__})")
        if not 0 <= t < vocab_size:
            raise ValueError(f"seed_tokens holds id {t}, outside the vocabulary [0, {vocab_size - 1}]")
    return [int(t) for t in tokens]
