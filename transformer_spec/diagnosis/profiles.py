"""The diagnosis through a course profile: the catalogue's mistakes run through the course's API as a
student's code runs, so that a student of the course is told which known mistake their code makes.

Under the contract's own names the diagnosis probes the submission's modules directly
(:mod:`transformer_spec.diagnosis.diagnose`). Under a course profile the submission is the course's functions
mapped onto the contract's names (:attr:`Profile.build`), and that API cannot express every probe (its
attention returns no weights, its attention is always causal, ...). So the catalogue is made the same
way: the reference and every pitfall the profile can see (the track's, less its catalogue's ``UNSEEN``,
and the catalogue's own ``PITFALLS``), written as the course's functions by the profile's catalogue
(``course_module``: the adapter functions a student fills in, over that copy), then mapped by the
profile. A probe the course cannot express fails alike for every row and is no evidence; one it can
express compares like with like.

A profile whose modules are float32 (it lacks ``float64``) is probed in float32: the course's functions
are called with float32 tensors and their float32 results read as float64 (:func:`float32_view`), and
features agree within float32's tolerance (:data:`FLOAT32`: a pitfall changes its outputs by far more).

Only a shipped profile with a catalogue is diagnosed; under a profile of one's own nothing is named
(the diagnosis cannot know how the course writes the catalogue's mistakes).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable
from pathlib import Path
from types import FunctionType, ModuleType

import torch

from transformer_spec.catalogue.patching import load_patched_reference
from transformer_spec.contract import registry
from transformer_spec.probes import behaviour
from transformer_spec.catalogue import of_profile as catalogue
from transformer_spec.profiles import DEFAULT, Profile, get
from transformer_spec.submission import loader

#: features of float32 modules agree within this (float32's rounding through a few layers, with room)
FLOAT32 = behaviour.Tolerance(rtol=1e-4, atol=1e-5)


def profile_of(profile: Profile | str | None) -> Profile:
    return profile if isinstance(profile, Profile) else get(profile or DEFAULT)


def direct(profile: Profile | str | None) -> bool:
    """Whether the diagnosis probes a submission under ``profile`` as it is, with the contract's own
    catalogue: the contract's names, or a profile that lacks nothing (a renaming expresses every probe)."""
    p = profile_of(profile)
    return p.name == DEFAULT or not p.lacks


def diagnosable(profile: Profile | str | None) -> bool:
    """Whether the diagnosis can name mistakes under ``profile``: probed directly (:func:`direct`), or a
    shipped course profile whose catalogue writes a contract implementation in the course's API."""
    return direct(profile) or hasattr(catalogue(profile_of(profile)), "course_module")


def components(names: Iterable[str], profile: Profile | str | None) -> list[str]:
    """Those of the components ``names`` the diagnosis probes under ``profile``: all, or its track's."""
    p = profile_of(profile)
    if direct(p):
        return list(names)
    from transformer_spec.contract import tracks

    return [c for c in names if c in tracks.component_names(p.track)]


def lacks(profile: Profile | str | None) -> frozenset[str]:
    """What the probes leave out under ``profile`` (:class:`transformer_spec.probes.behaviour.Probes`): what it
    cannot express, unless it is probed directly."""
    return frozenset() if direct(profile) else profile_of(profile).lacks


def tolerance(profile: Profile | str | None) -> behaviour.Tolerance:
    return FLOAT32 if "float64" in profile_of(profile).lacks else behaviour.EXACT


def candidates(comp: str, profile: Profile | str | None = None) -> list[registry.Pitfall]:
    """The pitfalls that can show in component ``comp`` (those of the components it depends on,
    ``registry.affected_by``) and that ``profile`` can see: the registry's, less the catalogue's
    ``UNSEEN``, and the catalogue's own."""
    cat = catalogue(profile_of(profile))
    unseen = getattr(cat, "UNSEEN", {})
    own = tuple(getattr(cat, "PITFALLS", ()))
    return [p for p in (*registry.pitfalls(), *own) if comp in registry.affected_by(p.component) and p.name not in unseen]


def variations(comp: str, profile: Profile | str | None = None) -> list:
    """The allowed variations (correct code in other styles) that can change component ``comp`` under ``profile``:
    the track's (all, for the contract's own names) and the profile's catalogue's own."""
    from transformer_spec.catalogue.variations import CATALOGUE
    from transformer_spec.contract import tracks

    p = profile_of(profile)
    own = [] if direct(p) else list(getattr(catalogue(p), "VARIATIONS", ()))
    track = [v for v in CATALOGUE if direct(p) or tracks.home(v.component) == p.track]
    return [v for v in (*track, *own) if comp in registry.affected_by(v.component)]


def pitfall(name: str, profile: Profile | str | None = None) -> registry.Pitfall:
    cat = catalogue(profile_of(profile))
    return {p.name: p for p in (*registry.pitfalls(), *getattr(cat, "PITFALLS", ()))}[name]


def explanation(p: registry.Pitfall, profile: Profile | str | None = None) -> str:
    """What a student of ``profile`` reads about the pitfall ``p``: its catalogue's words for it (``EXPLANATIONS``),
    else the pitfall's own."""
    words = getattr(catalogue(profile_of(profile)), "EXPLANATIONS", {})
    return words.get(p.name, p.explanation)


def every_pitfall() -> dict[str, registry.Pitfall]:
    """Every pitfall a diagnosis can name, by name: the registry's and every shipped course profile's
    own (what a class report counts, whatever profile its class was graded through)."""
    from transformer_spec.profiles import names

    own = [p for name in names() for p in getattr(catalogue(get(name)), "PITFALLS", ())]
    return {p.name: p for p in (*registry.pitfalls(), *own)}


def source_key(profile: Profile | str | None) -> bytes:
    """What the catalogue's features under ``profile`` depend on besides the reference and the probes:
    the profile's own files (its build and catalogue, and the adapter functions they write)."""
    p = profile_of(profile)
    if direct(p):
        return b""
    cat = catalogue(p)
    parts = [p.name.encode()]
    for file in (__file__, inspect.getsourcefile(p.build), getattr(cat, "__file__", None)):
        if file:
            parts.append(Path(file).read_bytes())
    if hasattr(cat, "adapter_text"):
        parts.append(cat.adapter_text().encode())
    return b"\0".join(parts)


def float32_view(course: ModuleType) -> ModuleType:
    """``course`` (a course's module of functions) with each public function called in float32: float64
    tensors among its arguments (or in a dict argument) become float32, and then its float32
    tensor results float64 again. Other arguments, parameters and results pass unchanged."""
    view = ModuleType(f"{getattr(course, '__name__', 'course')}_in_float32")
    view.__file__ = getattr(course, "__file__", None)
    for name, value in vars(course).items():
        if not name.startswith("_") and isinstance(value, FunctionType):
            value = _in_float32(value)
        setattr(view, name, value)
    return view


def _down(x):
    """``x`` in float32 if it is a float64 tensor or a dict of them (a state dict), and whether it was.
    A list (the parameters clipped in place) passes unchanged."""
    if isinstance(x, torch.Tensor) and x.dtype == torch.float64:
        return x.detach().to(torch.float32), True
    if isinstance(x, dict):
        items = {k: _down(v) for k, v in x.items()}
        return {k: v for k, (v, _) in items.items()}, any(c for _, c in items.values())
    return x, False


def _up(x):
    if isinstance(x, torch.Tensor) and x.dtype == torch.float32:
        return x.to(torch.float64)
    if isinstance(x, tuple):
        return tuple(_up(v) for v in x)
    return x


def _in_float32(fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        args_, cast = zip(*(_down(a) for a in args)) if args else ((), ())
        kw = {k: _down(v) for k, v in kwargs.items()}
        out = fn(*args_, **{k: v for k, (v, _) in kw.items()})
        return _up(out) if any(cast) or any(c for _, c in kw.values()) else out

    return call


def _probed(profile: Profile, course: ModuleType, target: str) -> loader.Submission:
    """The course's module ``course`` as the diagnosis probes it: in float32 where the profile's modules
    are, mapped onto the contract's names."""
    course = float32_view(course) if "float64" in profile.lacks else course
    return loader.Submission(target, profile.build(course), None)


def submission(sub: loader.Submission, profile: Profile | str | None) -> loader.Submission:
    """A graded submission (``sub``, loaded through ``profile``) as the diagnosis probes it."""
    p = profile_of(profile)
    course = getattr(sub.module, "__course__", None)
    if direct(p) or course is None:
        return sub
    return _probed(p, course, sub.target)


def implementation(profile: Profile | str | None, folder: Path, name: str, patches: Iterable = (),
                   base: str = "reference") -> loader.Submission:
    """A row of the catalogue as a student of ``profile`` hands it in: ``base`` (the reference, or another
    contract implementation to load) with the patches of its files applied, written in the course's API by
    the profile's catalogue with the patches of the adapter file applied, as the diagnosis probes it."""
    p = profile_of(profile)
    patches = tuple(patches)
    if direct(p):
        return loader.load(base) if not patches else load_patched_reference(folder, patches, f"row_{_safe(name)}")
    cat = catalogue(p)
    own = tuple(x for x in patches if x[0] != cat.ADAPTER_FILE)
    impl = loader.load(base) if not own else load_patched_reference(folder, own, f"row_{_safe(name)}")
    return _probed(p, cat.course_module(impl, patches, f"{p.name}_adapters_of_{_safe(name)}"), f"{name} ({p.name})")


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)
