"""Profiles: a course's own API, mapped onto the contract's names, so the laws written once for the
contract grade it.

A profile says what each part of the suite calls in a course's API (:attr:`Profile.build` turns the
course's module into a module of contract names) and what that API cannot express
(:attr:`Profile.lacks`, drawn from :data:`CAPABILITIES`). A test that needs a capability says so with
``@pytest.mark.needs(NAME, ...)``; under a profile that lacks one of them the test is *not
applicable*: it is left out of the run before the rubric shares out the points (so it costs nothing
and earns nothing), and the run says once how many tests were left out and why
(:func:`transformer_spec.plugin.pytest_collection_modifyitems`). The default profile, ``contract``,
lacks nothing and builds nothing: the submission defines the contract's names itself.

Choose one with ``pytest --profile NAME`` (or ``$TRANSFORMER_SPEC_PROFILE``). A profile belongs to
one track (:attr:`Profile.track`): its names are that track's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

ENV_VAR = "TRANSFORMER_SPEC_PROFILE"
DEFAULT = "contract"

#: What the contract's API offers that a course's may not: the ``needs`` marker's vocabulary, one
#: line each (what a run says about a test left out for it).
CAPABILITIES: dict[str, str] = {
    "weights": "the attention weights (the contract's attention returns them; the course's returns the output only)",
    "scale": "a scale other than 1/sqrt(d_k) for scaled_dot_product_attention",
    "blocked_rows": "query rows whose keys are all blocked (the contract defines them as zeros)",
    "mask": "a mask other than the causal one for multi-head attention, a block or the model",
    "non_causal": "multi-head attention or a block without a mask (the course's is always causal)",
    "gqa": "fewer key/value heads than query heads (num_kv_heads < num_heads)",
    "block_positions": "positions other than 0 .. L-1 for a Transformer block",
    "eps": "an RMSNorm eps other than 1e-5 inside a block or the model",
    "parameters": "the modules' own constructors and parameters: defaults, names, shapes, counts, initial "
                  "values (the course's functions take the weights as arguments; the profile holds them)",
    "names": "the contract's names defined by the submission itself (a profile defines them)",
    "float64": "inputs and weights in float64 (the course's modules are float32: the laws run in float32 there)",
    "default_positions": "positions=None meaning 0 .. L-1 (the course's rotation takes the positions)",
    "errors": "constructor arguments checked by the submission (the profile constructs the modules)",
    "causal_mask": "a causal_mask function of the submission's own",
    "generate": "generation (MiniLlama.generate)",
}


@dataclass(frozen=True)
class Profile:
    """One course's API: its name, the track whose names it maps onto, what it cannot express, where
    its functions live inside a submission, and how they become the contract's names."""

    name: str
    summary: str
    track: str
    lacks: frozenset[str] = frozenset()
    #: the file, relative to the submission's folder, that defines the course's functions (None: the
    #: submission itself defines the contract's names)
    adapter: str | None = None
    #: the course's module -> a module of contract names (None: the submission is used as it is)
    build: Callable[[ModuleType], ModuleType] | None = field(default=None, compare=False)
    #: its default rubric (None: the track's)
    rubric: Path | None = None
    #: component -> the course's functions that reach it (what a student's feedback names beside the component)
    functions: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False)

    def label(self, component: str) -> str:
        """``component`` as a student of this course reads it: with the functions they wrote for it."""
        names = self.functions.get(component)
        return f"{component} ({', '.join(names)})" if names else component

    def rerun(self) -> str:
        """What a re-run command adds to choose this profile ('' for the contract's own names)."""
        return "" if self.name == DEFAULT else f" --profile {self.name}"

    def applies_to(self, needs: Iterable[str]) -> list[str]:
        """The capabilities among ``needs`` this profile lacks (empty: the test applies)."""
        return sorted(set(needs) & self.lacks)


def _profiles() -> tuple[Profile, ...]:
    from . import cs336  # the course profiles, each in its own module

    return (Profile(DEFAULT, "the contract's own names (docs/contract.md): nothing is mapped", track=""),
            cs336.PROFILE)


def names() -> tuple[str, ...]:
    return tuple(p.name for p in _profiles())


def get(name: str | None, what: str = "--profile") -> Profile:
    """The profile called ``name`` (None: ``$TRANSFORMER_SPEC_PROFILE``, else the default); an unknown
    name is a ``ValueError`` naming ``what`` and the known profiles."""
    if name is None:
        name = os.environ.get(ENV_VAR) or DEFAULT
    for p in _profiles():
        if p.name == name:
            return p
    raise ValueError(f"{what} must be one of {', '.join(names())}, got {name!r}")


_RUNS: list[Profile] = []  # the profiles of the pytest runs in this process, innermost last


def use(profile: Profile) -> None:
    """Make ``profile`` this process's until :func:`done` (a pytest run's, set by the plugin)."""
    _RUNS.append(profile)


def done() -> None:
    if _RUNS:
        _RUNS.pop()


def current() -> Profile:
    """This process's profile: its pytest run's, else :data:`DEFAULT`'s."""
    return _RUNS[-1] if _RUNS else get(DEFAULT)


def lacks(capability: str) -> bool:
    """Whether this process's profile cannot express ``capability`` (what a strategy or shared model
    consults to draw only what the profile can express)."""
    return capability in current().lacks


def expresses(capability: str) -> bool:
    """Whether this process's profile can express ``capability``: a law checks that part only then
    (its other parts still run), as the attention weights of a law about outputs and weights."""
    return not lacks(capability)


def check_capabilities(needs: Iterable[str], where: str) -> None:
    """A ``needs`` marker may name only :data:`CAPABILITIES` (a typo would silently apply everywhere)."""
    unknown = sorted(set(needs) - set(CAPABILITIES))
    if unknown:
        raise ValueError(f"{where}: needs({', '.join(map(repr, unknown))}) names no capability; "
                         f"the capabilities are {', '.join(CAPABILITIES)} (transformer_spec/profiles/__init__.py)")
