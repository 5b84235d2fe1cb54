"""Assertions whose failure messages a student can act on.

Every comparison reports, in this order: a shape mismatch, a dtype mismatch, then the largest
absolute difference with its index and both values, and the seed section the test reproduces.
"""

from __future__ import annotations

import math

import torch

#: Tolerances per dtype, used wherever a test does not state its own. float32 results differ
#: in the last bits between thread counts, CPU instruction sets and the order in which an
#: implementation sums (heads in a loop or batched), so float32 is compared at ~1e-5.
TOLERANCES: dict[torch.dtype, dict[str, float]] = {
    torch.float32: {"rtol": 1e-4, "atol": 1e-5},
    torch.float64: {"rtol": 1e-9, "atol": 1e-11},
}


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    """``{"rtol": ..., "atol": ...}`` for ``dtype`` (float32's for anything else)."""
    return dict(TOLERANCES.get(dtype, TOLERANCES[torch.float32]))


def _context(what: str, seed: str | None) -> str:
    return f"{what}" + (f" [{seed}]" if seed else "")


def _index(flat_index: int, shape) -> tuple[int, ...]:
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat_index), tuple(shape)))


def assert_close(actual, expected, *, rtol: float | None = None, atol: float | None = None,
                 what: str = "output", seed: str | None = None, check_dtype: bool = True) -> None:
    """Assert that tensor ``actual`` equals ``expected`` within tolerances.

    ``expected`` may be a tensor or nested lists of numbers (then it takes ``actual``'s dtype).
    ``what`` names the quantity ("MultiHeadAttention output"), ``seed`` the seed section
    ("seed 001 section 9.5"). Tolerances default to :data:`TOLERANCES` of ``actual``'s dtype.
    """
    where = _context(what, seed)
    if not isinstance(actual, torch.Tensor):
        raise AssertionError(f"{where}: expected a torch.Tensor, got {type(actual).__name__}: {actual!r:.200}")
    if not isinstance(expected, torch.Tensor):
        expected = torch.tensor(expected, dtype=actual.dtype if actual.is_floating_point() else None)
    if tuple(actual.shape) != tuple(expected.shape):
        raise AssertionError(
            f"{where}: wrong shape: expected {tuple(expected.shape)}, got {tuple(actual.shape)}"
        )
    if check_dtype and actual.dtype != expected.dtype:
        raise AssertionError(f"{where}: wrong dtype: expected {expected.dtype}, got {actual.dtype}")
    tol = tolerance(expected.dtype)
    rtol = tol["rtol"] if rtol is None else rtol
    atol = tol["atol"] if atol is None else atol
    if actual.numel() == 0:
        return
    a = actual.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    bad_nan = torch.isnan(a) & ~torch.isnan(e)
    if bad_nan.any():
        i = _index(int(bad_nan.flatten().nonzero()[0]), a.shape)
        raise AssertionError(
            f"{where}: NaN at index {i} where {e[i].item():.6g} was expected "
            f"({int(bad_nan.sum())} NaN value(s) in all)"
        )
    diff = (a - e).abs().nan_to_num(nan=0.0, posinf=math.inf)
    allowed = atol + rtol * e.abs()
    over = diff > allowed
    both_inf = torch.isinf(a) & torch.isinf(e) & (a == e)
    over &= ~both_inf
    if over.any():
        flat = int(torch.where(over, diff, torch.zeros_like(diff)).flatten().argmax())
        i = _index(flat, a.shape)
        raise AssertionError(
            f"{where}: values differ: largest absolute difference {diff[i].item():.3g} at index {i}: "
            f"expected {e[i].item():.6g}, got {a[i].item():.6g} "
            f"({int(over.sum())} of {a.numel()} values outside rtol={rtol:g}, atol={atol:g})"
        )


def assert_equal(actual, expected, *, what: str = "output", seed: str | None = None) -> None:
    """Exact equality (bool masks, token ids), reported like :func:`assert_close`."""
    where = _context(what, seed)
    if not isinstance(actual, torch.Tensor):
        raise AssertionError(f"{where}: expected a torch.Tensor, got {type(actual).__name__}: {actual!r:.200}")
    if not isinstance(expected, torch.Tensor):
        expected = torch.tensor(expected)
    if tuple(actual.shape) != tuple(expected.shape):
        raise AssertionError(
            f"{where}: wrong shape: expected {tuple(expected.shape)}, got {tuple(actual.shape)}"
        )
    if actual.dtype != expected.dtype:
        raise AssertionError(f"{where}: wrong dtype: expected {expected.dtype}, got {actual.dtype}")
    differs = actual.cpu() != expected.cpu()
    if differs.any():
        i = _index(int(differs.flatten().nonzero()[0]), actual.shape)
        raise AssertionError(
            f"{where}: first difference at index {i}: expected {expected.cpu()[i].item()!r}, "
            f"got {actual.cpu()[i].item()!r} ({int(differs.sum())} of {actual.numel()} entries differ)"
        )
