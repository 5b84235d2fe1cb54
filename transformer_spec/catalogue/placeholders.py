"""Placeholders: a component whose code computes nothing, written as a kill-matrix row (issue 45).

A placeholder keeps the component's constructor, its argument checks and every other component of the
reference untouched, and replaces what the component returns by

- ``zeros``: zeros of the right shape and dtype (token ids 0, masks all False, a float 0.0);
- ``input``: its input, where one of its tensor arguments has the output's shape and dtype (zeros where
  none has);
- ``constant``: ones of the right shape (a float 1.0).

It is made by wrapping the component's graded names (:attr:`registry.Component.names`: a module's
``forward``, a function, a method such as ``MiniGPT.generate``) in the written copy's ``__init__.py``: the
real code still runs first, so the checks it makes and the shapes it returns are the real ones, and only
its values are thrown away. The kill matrix (``python -m tools.mutants --placeholders``) grades each
placeholder as a student and reports the share of its own component's points it keeps; a test that a
constant passes (a law such as causality, an invariance, a shape) is necessary, not sufficient, so that
share must stay at most :data:`MAX_KEPT` (docs/grading.md, "What a placeholder keeps").

The training utilities whose work is a side effect (``AdamW``'s step, ``clip_grad_norm``'s clipping in
place) have no output to replace: their placeholder is the step that does nothing (:data:`NO_OP`).
"""

from __future__ import annotations

from transformer_spec.contract import registry
from transformer_spec.contract.registry import Pitfall, pitfall

KINDS: tuple[str, ...] = ("zeros", "input", "constant")
#: the kind graded in CI's kill matrices; ``--every`` grades every kind
DEFAULT_KINDS: tuple[str, ...] = ("zeros",)
#: the start of every placeholder row's name
PREFIX = "placeholder_"
#: the most a placeholder may keep of its component's points (a share)
MAX_KEPT = 0.20
#: components whose work is a side effect: (the name, the attribute that does it)
NO_OP: dict[str, tuple[str, str]] = {"adamw": ("AdamW", "step"), "grad_clip": ("clip_grad_norm", "")}

#: the anchor of every patch: the last entry of the reference's ``__all__``
_ANCHOR = '    "get_batch",\n]\n'

_HELPER = '''

def _placeholder(owner, attr, kind):  # a placeholder (transformer_spec/catalogue/placeholders.py): computes nothing
    import functools
    import torch
    real = getattr(owner, attr)

    def fill(out, args):
        if isinstance(out, torch.Tensor):
            if kind == "input":
                same = [a for a in args if isinstance(a, torch.Tensor) and a.shape == out.shape
                        and a.dtype == out.dtype]
                return same[0] if same else torch.zeros_like(out)
            return torch.ones_like(out) if kind == "constant" else torch.zeros_like(out)
        if isinstance(out, tuple) and hasattr(out, "_fields"):
            return type(out)(*(fill(o, args) for o in out))
        if isinstance(out, (tuple, list)):
            return type(out)(fill(o, args) for o in out)
        if isinstance(out, float):
            return 1.0 if kind == "constant" else 0.0
        if isinstance(out, int) and not isinstance(out, bool):  # a token id
            return 1 if kind == "constant" else 0
        return out

    @functools.wraps(real)
    def placeholder(*args, **kwargs):
        return fill(real(*args, **kwargs), args[1:] if isinstance(owner, type) else args)

    setattr(owner, attr, placeholder)


def _no_op(owner, attr):  # a placeholder whose step does nothing
    import functools
    real = getattr(owner, attr)

    @functools.wraps(real)
    def placeholder(*args, **kwargs):
        closure = kwargs.get("closure", args[1] if isinstance(owner, type) and len(args) > 1 else None)
        return closure() if callable(closure) else None

    setattr(owner, attr, placeholder)
'''


def _targets(component: registry.Component) -> list[tuple[str, str]]:
    """(owner, attribute) pairs, as code in the package's ``__init__.py``: what the component returns."""
    found = []
    for name in component.names:
        if name.kind == "module":
            found.append((name.name, '"forward"'))
        elif name.kind == "method":
            owner, attr = name.name.split(".")
            found.append((owner, f'"{attr}"'))
        else:
            found.append(("__import__('sys').modules[__name__]", f'"{name.name}"'))
    return found


def has_placeholder(component: str) -> bool:
    """Whether ``component`` has placeholder rows (every component with graded names)."""
    return bool(registry.get(component).names)


def kinds_of(component: str) -> tuple[str, ...]:
    """The kinds ``component``'s placeholder takes: one no-op step for a side-effect utility, else :data:`KINDS`."""
    return ("no_op",) if component in NO_OP else KINDS


def placeholder(component: str, kind: str) -> Pitfall:
    """The kill-matrix row of ``component`` computing nothing (``kind``: one of :func:`kinds_of`)."""
    c = registry.get(component)
    if kind not in kinds_of(component):
        raise ValueError(f"placeholder kind {kind!r} of {component}: the kinds are {', '.join(kinds_of(component))}")
    if kind == "no_op":  # a method that does nothing, or a function that returns without doing its work
        owner, attr = NO_OP[component]
        calls = [f"_no_op({owner}, {attr!r})" if attr else f"globals()[{owner!r}] = lambda *args, **kwargs: None"]
    else:
        calls = [f"_placeholder({owner}, {attr}, {kind!r})" for owner, attr in _targets(c)]
    text = _ANCHOR + _HELPER + "\n\n" + "\n".join(calls) + "\n"
    return pitfall(f"{PREFIX}{kind}_{component}", component,
                   f"{component} computes nothing: what it returns is replaced by "
                   + {"zeros": "zeros of the right shape", "input": "its input (zeros where no input has the shape)",
                      "constant": "ones of the right shape", "no_op": "nothing: its step does nothing"}[kind] + ".",
                   ("__init__.py", _ANCHOR, text))


def rows(components: list[str] | tuple[str, ...], every: bool = False) -> list[Pitfall]:
    """The placeholder rows of ``components`` (the default kinds, or every kind)."""
    return [placeholder(c, k) for c in components if has_placeholder(c)
            for k in kinds_of(c) if every or k in DEFAULT_KINDS or k == "no_op"]


def kept(record_tests: list[dict], component: str) -> float | None:
    """The share of ``component``'s points a graded row keeps (``record_tests``: its results' tests, each
    tagged with its component first); None when the rubric gives the component no points."""
    own = [t for t in record_tests if t.get("tags") and t["tags"][0] == component]
    most = sum(float(t.get("max_score") or 0) for t in own)
    if most <= 0:
        return None
    return sum(float(t.get("score") or 0) for t in own) / most


def components_of(track: str, course: str, every: bool = False) -> list[str]:
    """The components whose placeholders a kill matrix grades: those its rubric gives points, of the track
    whose home it is (under a course profile: every component the course's rubric grades)."""
    from transformer_spec import profiles
    from transformer_spec.contract import tracks
    from transformer_spec.scoring import rubric

    profile = profiles.get(course)
    if profile.rubric is not None:
        graded = rubric.load_rubric(profile.rubric, track).components
        return [c for c in graded if graded[c] > 0 and has_placeholder(c)]
    return [c.name for c in tracks.components(track) if tracks.home(c.name) == track and (every or not c.optional)
            and has_placeholder(c.name)]


def within(kept: float) -> bool:
    """Whether a placeholder keeping the share ``kept`` of its component stays within :data:`MAX_KEPT`
    (points are rounded to 4 decimals, so a share at the limit may be a hair above it)."""
    return kept <= MAX_KEPT + 1e-6


def summary(kept: list[tuple[str, float]]) -> str:
    """Two lines: what each placeholder row (name, share kept) keeps, and how many stay within the limit."""
    return ("what each placeholder keeps of its component's points: "
            + "; ".join(f"{name.removeprefix(PREFIX)} {share:.0%}" for name, share in kept)
            + f"\n{sum(within(share) for _, share in kept)} / {len(kept)} placeholders keep at most {MAX_KEPT:.0%} of "
              "their component")
