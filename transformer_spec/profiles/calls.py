"""The calls a profile makes into a course's API, kept so that a failure is shown in the course's words.

Under a course profile the laws call the contract's names, and the profile's modules call the
course's functions (``run_rmsnorm(d_model, eps, weights, in_features)``). A counterexample in the
contract's terms (``LlamaConfig(... num_kv_heads=1 ...)``, a mask in the contract's *blocked*
convention) is not what a student of the course wrote. :func:`recording` wraps the course's module so
that every call of one of its functions is kept (:data:`LOG`: the function, its arguments bound to the
student's own parameter names, tensors copied as they were passed, the last :data:`KEEP`), and
:func:`format_calls` shows them: the arguments the course's function was given, the keep mask as the
course means it.

A property's failing example is one call of its test body: :func:`mark` before it, :func:`since` after
it (``failures.wrap_inner_test``); a plain test's calls are those since its setup.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from types import ModuleType

#: the calls kept (the last ones of a test or an example: what it failed on)
KEEP = 4
#: tensors of up to this many elements are shown whole; larger ones by shape, dtype and first values
WHOLE = 32
MAX_LINE = 400


@dataclass
class Call:
    function: str
    arguments: list[tuple[str, object]]  # (parameter name, value as passed: tensors copied)


@dataclass
class CallLog:
    calls: list[Call] = field(default_factory=list)
    count: int = 0  # calls ever made (a mark is a count)

    def record(self, call: Call) -> None:
        self.calls.append(call)
        self.count += 1
        del self.calls[:-KEEP]


LOG = CallLog()


def mark() -> int:
    """The point from which :func:`since` counts."""
    return LOG.count


def since(start: int) -> list[Call]:
    """The kept calls made after :func:`mark` returned ``start`` (at most :data:`KEEP`, the last)."""
    made = LOG.count - start
    return list(LOG.calls[-made:]) if made > 0 else []


def _snapshot(value):
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: _snapshot(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and len(value) <= 64:
        return type(value)(_snapshot(v) for v in value) if isinstance(value, tuple) else [_snapshot(v) for v in value]
    return value


class _Recording(ModuleType):
    """The course's module, each function call of which is kept in :data:`LOG`."""

    def __init__(self, api: ModuleType):
        super().__init__(getattr(api, "__name__", "course"))
        self.__dict__["_api"] = api
        self.__file__ = getattr(api, "__file__", None)

    def __getattr__(self, name):
        value = getattr(self.__dict__["_api"], name)
        if not callable(value) or name.startswith("_") or isinstance(value, type):
            return value

        def call(*args, **kwargs):
            LOG.record(Call(name, _bound(value, args, kwargs)))
            return value(*args, **kwargs)

        return call


_SIGNATURES: dict[object, inspect.Signature | None] = {}


def _signature(function) -> inspect.Signature | None:
    if function not in _SIGNATURES:
        try:
            _SIGNATURES[function] = inspect.signature(function)
        except (TypeError, ValueError):
            _SIGNATURES[function] = None
    return _SIGNATURES[function]


def _bound(function, args, kwargs) -> list[tuple[str, object]]:
    try:
        signature = _signature(function)
        if signature is None:
            raise TypeError
        bound = signature.bind(*args, **kwargs)
        pairs = list(bound.arguments.items())
    except (TypeError, ValueError):  # a signature that does not fit is the test's error to report
        pairs = [(f"argument {i + 1}", a) for i, a in enumerate(args)] + list(kwargs.items())
    return [(n, _snapshot(v)) for n, v in pairs]


def recording(api: ModuleType) -> ModuleType:
    """``api`` with every call of its public functions kept in :data:`LOG`."""
    return _Recording(api)


def _show(value) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        if value.numel() <= WHOLE:
            return re.sub(r"\s+", " ", repr(value))
        first = ", ".join(f"{x:.4g}" if value.is_floating_point() else str(int(x))
                          for x in value.flatten()[:6].tolist())
        return f"tensor of shape {tuple(value.shape)}, {dtype}, starting [{first}, ...]"
    if isinstance(value, dict):
        inner = ", ".join(f"{k!r}: {_show(v)}" for k, v in list(value.items())[:4])
        more = f", ... ({len(value) - 4} more)" if len(value) > 4 else ""
        return "{" + inner + more + "}"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a student's object may fail to print
        text = f"<{type(value).__name__}>"
    return text


def format_calls(calls: list[Call], heading: str) -> list[str]:
    """``heading``, then one line per call: ``run_rmsnorm(d_model=4, eps=1e-05, ...)``."""
    if not calls:
        return []
    lines = [heading]
    for c in calls:
        args = ", ".join(f"{n}={_show(v)}" for n, v in c.arguments)
        text = f"  {c.function}({args})"
        lines.append(text if len(text) <= MAX_LINE else text[:MAX_LINE] + " ...)")
    return lines
