"""Forbidden APIs at the operator level: torch's attention operators, in every thread.

Every route to torch's attention (``F.scaled_dot_product_attention``, the C binding
``torch._C._nn.scaled_dot_product_attention``, ``torch.ops.aten.*``, ``nn.MultiheadAttention``'s
fast path, ``nn.TransformerEncoderLayer``'s fused kernel, from any thread, from code compiled
under any file name) ends in one of the aten operators of :data:`OPERATORS`. While someone
:func:`watch` es them, a guard kernel is registered for each (``torch.library``, namespace
``aten``, kind ``IMPL``) at two dispatch keys:

* ``BackendSelect``, which is in every thread's default dispatch key set: every call reaches it
  (after autograd has recorded the call, so gradients are unchanged), ``torch.inference_mode``
  included;
* ``AutogradCPU`` for the operators that are ``CompositeImplicitAutograd`` (they decompose at
  the autograd key and would never reach ``BackendSelect``).

The kernel asks the watchers (:class:`Watch`) whether the call is forbidden (they raise), then
redispatches to the keys below it. Other operators are untouched: the guard costs nothing to a
matmul or a softmax. The suite's own oracle values are computed inside :func:`oracle`, which
allows the operators for the thread that entered it only (a submission's thread cannot use the
window).

Limits: torch's private dispatcher entry points (``OpOverload.redispatch``/``decompose``,
``torch._C._ExcludeDispatchKeyGuard``, a kernel of one's own registered with ``torch.library``)
can skip the guard kernel, and code that reaches the grader's own modules can open
:func:`oracle` itself; the class grader's re-checks and review are the answer to those.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator

import torch

_SDPA = ("scaled_dot_product_attention", "_scaled_dot_product_attention_math",
         "_scaled_dot_product_flash_attention_for_cpu")
_MHA = ("_native_multi_head_attention",)
_LAYER = ("_transformer_encoder_layer_fwd", "_native_multi_head_attention")

#: Python-level forbidden API -> the aten operators (every overload) that compute it.
OPERATORS: dict[str, tuple[str, ...]] = {
    "torch.nn.functional.scaled_dot_product_attention": _SDPA,
    "torch.nn.MultiheadAttention": _MHA,
    "torch.nn.functional.multi_head_attention_forward": _MHA,
    "torch.nn.Transformer": _LAYER,
    "torch.nn.TransformerEncoder": _LAYER,
    "torch.nn.TransformerDecoder": _LAYER,
    "torch.nn.TransformerEncoderLayer": _LAYER,
    "torch.nn.TransformerDecoderLayer": _LAYER,
}

_ALLOWED: dict[int, int] = {}  # thread ident -> depth of oracle() regions it is in
_WATCHES: list[Watch] = []
_LOCK = threading.Lock()
_LIBRARY: list[torch.library.Library] = []  # the registration, while anyone watches
_KERNELS: list[tuple[str, str]] = []  # (operator overload, dispatch key) of each guard kernel registered


_SEALED: list[bool] = []  # seal() was called: oracle() allows nothing in this process


def seal() -> None:
    """From now on :func:`oracle` allows nothing: for a process with no oracle of its own (the
    class grader's re-check child), so a submission cannot open the window itself."""
    _SEALED.append(True)


@contextlib.contextmanager
def oracle() -> Iterator[None]:
    """The suite computes an oracle value with torch's own attention: allowed in this thread, for
    the duration of the block. Never call submission code inside it."""
    if _SEALED:
        yield
        return
    ident = threading.get_ident()
    _ALLOWED[ident] = _ALLOWED.get(ident, 0) + 1
    try:
        yield
    finally:
        if _ALLOWED[ident] == 1:
            del _ALLOWED[ident]
        else:
            _ALLOWED[ident] -= 1


def allowed() -> bool:
    """Whether the calling thread is inside :func:`oracle`."""
    return threading.get_ident() in _ALLOWED


class Watch:
    """One watcher: ``on_use(api, operator)`` is called (and should raise) for a call of an
    operator of ``apis`` outside :func:`oracle` while ``armed()`` is true."""

    def __init__(self, apis: Iterable[str], on_use: Callable[[str, str], None], armed: Callable[[], bool]):
        self.api_of: dict[str, str] = {}
        for api in apis:
            for op in OPERATORS.get(api, ()):
                self.api_of.setdefault(f"aten::{op}", api)
        self.on_use = on_use
        self.armed = armed

    def check(self, operator: str) -> None:
        api = self.api_of.get(operator)
        if api is not None and self.armed():
            self.on_use(api, operator)


def watch(apis: Iterable[str], on_use: Callable[[str, str], None], armed: Callable[[], bool]) -> Watch | None:
    """Start watching the operators of ``apis`` (None if none of them has any); :func:`unwatch` ends it."""
    w = Watch(apis, on_use, armed)
    if not w.api_of:
        return None
    with _LOCK:
        if _LIBRARY and not _registered():  # destroyed from inside: registered again
            _LIBRARY.pop()._destroy()
        if not _LIBRARY:
            _LIBRARY.append(_register())
        _WATCHES.append(w)
    return w


def watching(w: Watch | None) -> bool:
    """Whether ``w`` (from :func:`watch`) still watches: it is a watcher and every guard kernel is
    registered. False proves that code in this process removed it (only :func:`unwatch` does, and
    the harness never calls it while a test runs)."""
    if w is None:
        return True
    with _LOCK:
        return w in _WATCHES and bool(_LIBRARY) and _registered()


def _registered() -> bool:
    """Every guard kernel is in the dispatcher."""
    return all(torch._C._dispatch_has_kernel_for_dispatch_key(name, key) for name, key in tuple(_KERNELS))


def unwatch(w: Watch | None) -> None:
    with _LOCK:
        if w in _WATCHES:
            _WATCHES.remove(w)
        if not _WATCHES and _LIBRARY:
            _LIBRARY.pop()._destroy()


def _guard_kernel(op, after: torch._C.DispatchKeySet):
    name = op.name().split(".")[0]  # aten::op, whatever the overload

    def kernel(keyset, *args, **kwargs):
        if threading.get_ident() not in _ALLOWED:
            for w in tuple(_WATCHES):
                w.check(name)
        return op.redispatch(keyset & after, *args, **kwargs)

    return kernel


def _register() -> torch.library.Library:
    lib = torch.library.Library("aten", "IMPL")
    kernels: list[tuple[str, str]] = []
    below_backend_select = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.BackendSelect)
    for op_name in sorted({op for ops in OPERATORS.values() for op in ops}):
        packet = getattr(torch.ops.aten, op_name)
        for overload in packet.overloads():
            op = getattr(packet, overload)
            qualified = op_name if overload == "default" else f"{op_name}.{overload}"
            lib.impl(qualified, _guard_kernel(op, below_backend_select), "BackendSelect", with_keyset=True)
            kernels.append((op.name(), "BackendSelect"))
            if torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd"):
                lib.impl(qualified, _guard_kernel(op, torch._C._after_autograd_keyset), "AutogradCPU",
                         with_keyset=True)
                kernels.append((op.name(), "AutogradCPU"))
    _KERNELS[:] = kernels
    return lib
