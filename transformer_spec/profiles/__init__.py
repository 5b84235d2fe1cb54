"""Profiles: a course's own API, mapped onto the contract's names, so the laws written once for the
contract grade it.

A profile says what each part of the suite calls in a course's API (:attr:`Profile.build` turns the
course's module into a module of contract names) and what that API cannot express
(:attr:`Profile.lacks`, drawn from :data:`CAPABILITIES`). A test that needs a capability says so with
``@pytest.mark.needs(NAME, ...)``; under a profile that lacks one of them the test is *not
applicable*: it is left out of the run before the rubric shares out the points (so it costs nothing
and earns nothing), and the run says once how many tests were left out and why
(:func:`transformer_spec.pytest_plugin.plugin.pytest_collection_modifyitems`). The default profile, ``contract``,
lacks nothing and builds nothing: the submission defines the contract's names itself.

Choose one with ``pytest --profile NAME`` (or ``$TRANSFORMER_SPEC_PROFILE``). A profile belongs to
one track (:attr:`Profile.track`): its names are that track's. A course's own profile is a Python file
that defines ``PROFILE``; ``--profile path/to/file.py`` chooses it (:func:`from_file`; docs/adapters.md,
"A profile of one's own").

May use: the contract's tracks only (a profile sits low: the loader, the probes and the failure text
read it). A profile's catalogue is :mod:`transformer_spec.catalogue`, its diagnosis
:mod:`transformer_spec.diagnosis.profiles`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import importlib.util
import os
import shlex
import sys
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
    "submodules": "a model computed by its own submodules (a course's model function need not call its layer "
                  "functions: composing those would grade them, not the model)",
}


@dataclass(frozen=True)
class InputRank:
    """The ranks a course's text promises one of its functions takes, quoted: a law never gives that
    function an input it was not promised. The profile lifts a lower-rank input to ``least`` dimensions
    (leading dimensions of size 1) and folds a higher-rank one's leading dimensions into one (down to
    ``most``), then gives the output back in the input's own leading shape (:func:`lifted`)."""

    least: int
    most: int | None
    quote: str  # the course's own words
    where: str  # where they are (the handout's section)


def lifted(rank: InputRank | None, *tensors):
    """``(tensors at a rank ``rank`` allows, lower)``: ``lower(output)`` gives an output computed on them
    the leading shape of the first of ``tensors`` again. The tensors share their leading dimensions (the
    dimensions before the last two, or before the last one for a rank-2 ``least``)."""
    first = tensors[0]
    if rank is None or first.dim() >= rank.least and (rank.most is None or first.dim() <= rank.most):
        return tensors, lambda out: out
    kept = rank.least - 1 if rank.most is None else rank.most - 1  # trailing dimensions each tensor keeps
    if first.dim() < rank.least:
        pad = rank.least - first.dim()
        out = tuple(t.reshape((1,) * pad + tuple(t.shape)) for t in tensors)
        return out, lambda y: y.reshape(tuple(y.shape[pad:]))
    lead = tuple(first.shape[:first.dim() - kept])
    out = tuple(t.reshape((-1,) + tuple(t.shape[t.dim() - kept:])) for t in tensors)
    return out, lambda y: y.reshape(lead + tuple(y.shape[1:]))


@dataclass(frozen=True)
class Profile:
    """One course's API: its name, the track whose names it maps onto, what it cannot express, where
    its functions live inside a submission, and how they become the contract's names."""

    name: str
    summary: str
    track: str
    lacks: frozenset[str] = frozenset()
    #: the file, relative to the submission's folder, that defines the course's functions (None: the
    #: submission itself is the course's module, loaded as any submission)
    adapter: str | None = None
    #: the course's module -> a module of contract names (None: the submission is used as it is, and
    #: defines the contract's names itself)
    build: Callable[[ModuleType], ModuleType] | None = field(default=None, compare=False)
    #: its default rubric (None: the track's)
    rubric: Path | None = None
    #: component -> the course's functions that reach it (what a student's feedback names beside the component)
    functions: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False)
    #: the contract's argument identifiers the course renamed -> its own: a law that a bad argument's error
    #: names it accepts either (:meth:`argument_names_of`)
    renamed_arguments: dict[str, str] = field(default_factory=dict, compare=False)
    #: the course's function -> the ranks its text promises it takes (:class:`InputRank`); ``build`` keeps to them
    ranks: dict[str, InputRank] = field(default_factory=dict, compare=False)
    #: the file that defined it, for a profile of one's own (None: a shipped profile, chosen by name)
    origin: str | None = field(default=None, compare=False)

    def label(self, component: str) -> str:
        """``component`` as a student of this course reads it: with the functions they wrote for it."""
        names = self.functions.get(component)
        return f"{component} ({', '.join(names)})" if names else component

    def rerun(self) -> str:
        """What a re-run command adds to choose this profile ('' for the contract's own names); a profile
        of one's own is named by its file's name, the file the course hands its students."""
        if self.origin:
            return f" --profile {shlex.quote(Path(self.origin).name)}"
        return "" if self.name == DEFAULT else f" --profile {self.name}"

    def argument_names_of(self, names: Iterable[str]) -> tuple[str, ...]:
        """``names`` (the contract's argument identifiers) and, after them, the course's own for the
        ones it renamed: what an error message about that argument may name."""
        names = tuple(names)
        return names + tuple(self.renamed_arguments[n] for n in names if n in self.renamed_arguments)

    def applies_to(self, needs: Iterable[str]) -> list[str]:
        """The capabilities among ``needs`` this profile lacks (empty: the test applies)."""
        return sorted(set(needs) & self.lacks)


def contract_module(names: dict, course: ModuleType, profile: str) -> ModuleType:
    """What a profile's ``build`` returns: a module holding ``names`` (the contract's names, mapped onto
    the course's module ``course``), whose file is the course's (the student's, in messages)."""
    module = ModuleType(f"{profile}_profile_of_{getattr(course, '__name__', 'submission')}")
    module.__file__ = getattr(course, "__file__", None)
    module.__dict__.update(names)
    module.__course__ = course  # what the diagnosis maps again, probing it as it probes the catalogue
    return module


@functools.cache
def _profiles() -> tuple[Profile, ...]:
    """The contract's own names, then the shipped course profiles: every module of this package that
    defines ``PROFILE`` (one a course), in name order."""
    import pkgutil

    shipped = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if isinstance(getattr(module, "PROFILE", None), Profile):
            shipped.append(module.PROFILE)
    return (Profile(DEFAULT, "the contract's own names (docs/contract.md): nothing is mapped", track=""), *shipped)


def names() -> tuple[str, ...]:
    return tuple(p.name for p in _profiles())


def is_file(name: str) -> bool:
    """Whether ``--profile name`` names a file (a profile of one's own) rather than a shipped profile."""
    return name.endswith(".py") or os.sep in name or "/" in name


def get(name: str | None, what: str = "--profile") -> Profile:
    """The profile called ``name`` (None: ``$TRANSFORMER_SPEC_PROFILE``, else the default), or the one a
    file defines (:func:`from_file`); an unknown name is a ``ValueError`` naming ``what`` and the known
    profiles."""
    if name is None:
        name = os.environ.get(ENV_VAR) or DEFAULT
    for p in _profiles():
        if p.name == name:
            return p
    if is_file(name):
        return from_file(name, what)
    raise ValueError(f"{what} must be one of {', '.join(names())} or a profile's .py file, got {name!r}")


_FILES: dict[str, Profile] = {}  # a profile file's resolved path -> its profile, loaded once a process


def from_file(path: str, what: str = "--profile") -> Profile:
    """The ``PROFILE`` that the Python file ``path`` defines: a course's profile of its own. Every
    mistake in it is a ``ValueError`` of one line naming ``what`` and the fix."""
    file = Path(path).expanduser()
    hint = "(docs/adapters.md, 'A profile of one's own')"
    if not file.is_file():
        raise ValueError(f"{what} {path}: no such file; give {', '.join(names())} or a .py file that defines PROFILE {hint}")
    key = str(file.resolve())
    if key in _FILES:
        return _FILES[key]
    module_name = f"transformer_spec_course_profile_{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the course's file: its error in one line, not a traceback
        del sys.modules[module_name]
        raise ValueError(f"{what} {path}: importing it failed: {type(exc).__name__}: {exc}") from None
    profile = getattr(module, "PROFILE", None)
    if not isinstance(profile, Profile):
        raise ValueError(f"{what} {path}: it must define PROFILE = transformer_spec.profiles.Profile(...) {hint}")
    from transformer_spec.contract import tracks

    problems = []
    if profile.name in names():
        problems.append(f"its name {profile.name!r} is a shipped profile's; choose another")
    if profile.track not in tracks.names():
        problems.append(f"its track must be one of {', '.join(tracks.names())}, got {profile.track!r}")
    unknown = sorted(set(profile.lacks) - set(CAPABILITIES))
    if unknown:
        problems.append(f"lacks names no capability: {', '.join(unknown)} (the capabilities: CAPABILITIES in "
                        "transformer_spec/profiles/__init__.py)")
    if profile.adapter is not None and profile.build is None:
        problems.append("an adapter file needs a build function (the course's names -> the contract's)")
    if profile.rubric is not None and not Path(profile.rubric).is_file():
        problems.append(f"its rubric {profile.rubric} is no file")
    if problems:
        raise ValueError(f"{what} {path}: " + "; ".join(problems))
    _FILES[key] = profile = dataclasses.replace(profile, origin=key)
    return profile


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
