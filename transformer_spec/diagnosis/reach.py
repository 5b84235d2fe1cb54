"""Whether a component's failures reach a part it calls, shown from behaviour, not from the call graph.

A component X calls the parts :func:`registry.upstream` lists. When one of them, U, behaves differently
from a correct implementation, the diagnosis used to tell X's student "fix U first". But U's mistake may
lie where X never goes: a CS336 student's attention that crashes only for ``mask=None`` was blamed for
the failures of their multi-head attention, which always passes a causal mask; fixing attention left
them as they were. So the diagnosis asks the behaviour:

* **recorded** (:func:`record`, with the catalogue's table, where the reference is at hand): X's
  behaviour probes run on a correct implementation (the reference, reached as the submission is: through
  the course's profile when there is one), and every call that the reference's X makes into U's entry
  points (U's contract names: ``scaled_dot_product_attention``, ``RotaryPositionEmbedding.forward``, ...)
  is kept: U's constructor arguments and parameters, its inputs and its output. These are the inputs a
  correct X gives U.
* **replayed** (:func:`reached`, in the grading child, from the table): the submission's own U is built
  with those arguments and parameters and called on those inputs. U's mistake is *reached* by X when the
  submission's U answers one of them differently (or raises where the reference did not).

X's failures are put down to U only when U's mistake is reached; otherwise X is diagnosed on its own
probes. A call that cannot be kept (an argument that is no tensor, number, text or module of the
contract) leaves the pair unknown, and the call graph decides as before.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Callable

import torch
import torch.nn as nn

from transformer_spec import layout
from transformer_spec.contract import registry
from transformer_spec.probes import behaviour, testing

#: calls kept per (component, part it calls): enough to cover its probes' kinds of input, small on disk
MAX_CALLS = 24
TABLE_KEY = "__reach__"


class _Unkept(Exception):
    """A value that the table (``torch.load(weights_only=True)``) cannot hold."""


def _keep(x, classes: dict[type, str]):
    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, torch.dtype):
        return {"__dtype__": str(x).removeprefix("torch.")}
    if isinstance(x, torch.device):
        return str(x)
    if isinstance(x, nn.Module) and type(x) in classes:
        return {"__module__": classes[type(x)], "init": _keep(getattr(x, "_reach_init", {}), classes),
                "params": {k: v.detach().clone() for k, v in x.named_parameters()}, "train": x.training}
    if isinstance(x, (list, tuple)):
        kept = [_keep(v, classes) for v in x]
        return tuple(kept) if isinstance(x, tuple) else kept
    if isinstance(x, dict) and all(isinstance(k, str) for k in x):
        return {k: _keep(v, classes) for k, v in x.items()}
    raise _Unkept(type(x).__name__)


def _contract_only(kwargs: dict, extras: set[str]) -> dict:
    """``kwargs`` without the reference's own keyword-only arguments (beyond the contract: the dropout its
    multi-head attention hands its attention), which must then change nothing (None, or a dropout that
    drops nothing)."""
    for n in extras & set(kwargs):
        v = kwargs[n]
        if not (v is None or isinstance(v, nn.Dropout) and (not v.training or v.p == 0)):
            raise _Unkept(n)
    return {k: v for k, v in kwargs.items() if k not in extras}


def _reference_modules() -> list:
    name = layout.REFERENCE_MODULE
    return [m for n, m in list(sys.modules.items()) if m is not None and (n == name or n.startswith(name + "."))]


def _restore(cls: type, own: dict) -> None:
    """Put back ``cls``'s own ``__init__`` and ``forward``; one it inherited is deleted again (a subclass entry, such
    as ``MultiHeadSelfAttention`` under ``MultiHeadAttention``, must not keep its parent's wrapper)."""
    for attr in ("__init__", "forward"):
        if attr in own:
            setattr(cls, attr, own[attr])
        elif attr in vars(cls):
            delattr(cls, attr)


@contextlib.contextmanager
def _recording(parts: tuple[str, ...], log: dict[str, list | None]):
    """The reference's entry points of ``parts`` record their calls into ``log`` (part -> calls; None once
    a call could not be kept)."""
    modules = _reference_modules()
    top = next((m for m in modules if m.__name__ == layout.REFERENCE_MODULE), None)
    classes: dict[type, str] = {}
    entries: list[tuple[str, str, object]] = []  # (part, contract name, the reference's object)
    for part in parts:
        for n in registry.get(part).names:
            obj = getattr(top, n.name, None) if "." not in n.name else None
            if isinstance(obj, type) and issubclass(obj, nn.Module):
                classes[obj] = n.name
                entries.append((part, n.name, obj))
            elif callable(obj):
                entries.append((part, n.name, obj))
    undo: list[Callable[[], None]] = []

    def keep(part: str, call: dict) -> None:
        calls = log.setdefault(part, [])
        if calls is not None and len(calls) < MAX_CALLS:
            calls.append(call)

    def recorded(part: str, name: str, fn):
        extras = {n for n, q in inspect.signature(fn).parameters.items() if q.kind == inspect.Parameter.KEYWORD_ONLY}

        def call(*args, **kwargs):
            out = fn(*args, **kwargs)
            if log.get(part, []) is not None:
                try:
                    keep(part, {"entry": name, "args": _keep(args, classes),
                                "kwargs": _keep(_contract_only(kwargs, extras), classes), "out": _keep(out, classes)})
                except _Unkept:
                    log[part] = None
            return out
        return call

    for part, name, obj in entries:
        if isinstance(obj, type):
            init, forward = obj.__init__, obj.forward

            def wrapped_init(self, *args, __init=init, **kwargs):
                bound = inspect.signature(__init).bind(self, *args, **kwargs)
                self._reach_init = {k: v for k, v in list(bound.arguments.items())[1:]
                                    if inspect.signature(__init).parameters[k].kind
                                    not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)}
                __init(self, *args, **kwargs)

            def wrapped_forward(self, *args, __forward=forward, __part=part, __name=name, **kwargs):
                out = __forward(self, *args, **kwargs)
                if log.get(__part, []) is not None:
                    try:
                        keep(__part, {"entry": __name, "module": _keep(self, classes), "args": _keep(args, classes),
                                      "kwargs": _keep(kwargs, classes), "out": _keep(out, classes)})
                    except _Unkept:
                        log[__part] = None
                return out

            own = {a: vars(obj)[a] for a in ("__init__", "forward") if a in vars(obj)}  # not the inherited ones
            obj.__init__, obj.forward = wrapped_init, wrapped_forward
            undo.append(lambda o=obj, own=own: _restore(o, own))
        else:
            wrapper = recorded(part, name, obj)
            for m in modules:
                for attr, value in list(vars(m).items()):
                    if value is obj:
                        setattr(m, attr, wrapper)
                        undo.append(lambda m=m, a=attr, v=obj: setattr(m, a, v))
    try:
        yield
    finally:
        for u in reversed(undo):
            u()


def record(impl, comp: str, lacks=()) -> dict[str, list | None]:
    """The calls that ``comp``'s behaviour probes, run on ``impl`` (the reference, as the diagnosis probes
    it), make into the reference's entry points of each part ``comp`` calls: part -> calls (None: unknown)."""
    parts = registry.upstream(comp)
    log: dict[str, list | None] = {p: [] for p in parts}
    if not parts:
        return log
    with _recording(parts, log), torch.random.fork_rng():
        torch.manual_seed(0)
        registry.get(comp).behaviour(impl, behaviour.Probes(lacks))
    return log


def _build(kept: dict, impl):
    cls = impl.get(kept["__module__"])
    m = cls(**_back(kept["init"], impl))
    params = kept["params"]
    dtype = next((v.dtype for v in params.values()), None)
    if dtype is not None:
        m = m.to(dtype)
    testing.set_parameters(m, params)
    return m.train(bool(kept["train"]))


def _back(x, impl):
    if isinstance(x, dict) and "__module__" in x:
        return _build(x, impl)
    if isinstance(x, dict) and "__dtype__" in x:
        return getattr(torch, x["__dtype__"])
    if isinstance(x, dict):
        return {k: _back(v, impl) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        back = [_back(v, impl) for v in x]
        return tuple(back) if isinstance(x, tuple) else back
    return x


def _agree(expected, got, tol: behaviour.Tolerance) -> bool:
    """The reference's output and the submission's agree, tensor for tensor (a part the submission's profile
    does not return, such as the attention weights, is not compared; the first must be there)."""
    exp = list(expected) if isinstance(expected, (list, tuple)) else [expected]
    out = list(got) if isinstance(got, (list, tuple)) else [got]
    if isinstance(exp[0], torch.Tensor) and not isinstance(out[0] if out else None, torch.Tensor):
        return False
    return all(behaviour.same(behaviour.value(e), behaviour.value(g), tol) for e, g in zip(exp, out, strict=False)
               if isinstance(e, torch.Tensor) and isinstance(g, torch.Tensor))


def reached(calls: list | None, impl, tol: behaviour.Tolerance) -> bool:
    """Whether the submission ``impl`` (as the diagnosis probes it) answers any of ``calls`` (the reference's
    X's calls into one part, :func:`record`) differently from the reference. ``None`` (unknown): True."""
    if calls is None:
        return True
    for call in calls:
        try:
            with torch.random.fork_rng(), torch.no_grad():
                torch.manual_seed(0)
                if "module" in call:
                    fn = _build(call["module"], impl)
                else:
                    fn = impl.get(call["entry"])
                out = fn(*_back(call["args"], impl), **_back(call["kwargs"], impl))
        except Exception:  # noqa: BLE001 - the submission's part raised where the reference's answered
            return True
        if not _agree(call["out"], out, tol):
            return True
    return False
