"""The tracks: which part of the contract a run grades, each with its own rubric.

The **classic** track is the Transformer of the seeds (attention, masks, multi-head attention, FFN,
encoder and decoder blocks, positions, MiniGPT and its ``generate``, Seq2Seq, bad arguments). The
**modern** track is the Llama-style decoder (``docs/contract.md``, "The modern track"): RMSNorm,
rotary positions, SwiGLU, grouped-query attention, the Llama block and MiniLlama, with the
classic ``scaled_dot_product_attention`` and ``causal_mask``. A component declares the tracks it
belongs to (``Component.tracks``); a test may narrow its component's tracks with
``@pytest.mark.track(...)`` (the padding-mask tests of ``masks`` are classic only). A run grades one
track, chosen once: ``pytest --track modern`` (or ``$TRANSFORMER_SPEC_TRACK``), ``tools.grade --track
modern`` (which passes ``--track`` to every child); the default is ``classic``. The project's own test
run uses ``--track all``: every track's tests against the reference, never graded (a rubric's default
in that process is the classic track's).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from transformer_spec.contract import registry

ENV_VAR = "TRANSFORMER_SPEC_TRACK"
DEFAULT = "classic"
ALL = "all"  # every track's tests, for the project's own runs (not a grading track)


@dataclass(frozen=True)
class Track:
    """One graded track: its name, what it covers, and its default rubric."""

    name: str
    summary: str
    rubric: Path
    independent: str  # the independent implementation's file, from the repository's root (a clone only)


_HERE = Path(__file__).resolve().parent.parent  # the package, where the rubrics are
TRACKS = (
    Track("classic", "the Transformer of the seeds: attention, masks, multi-head attention, FFN, encoder and "
                     "decoder blocks, positions, MiniGPT, generate, Seq2Seq", _HERE / "rubric.toml",
          "tests/independent/alt_submission.py"),
    Track("modern", "the Llama-style decoder: RMSNorm, rotary positions, SwiGLU, grouped-query attention, "
                    "LlamaBlock, MiniLlama (with scaled_dot_product_attention and causal_mask)",
          _HERE / "rubric_modern.toml", "tests/independent/alt_modern.py"),
)


def names() -> tuple[str, ...]:
    """The graded tracks' names."""
    return tuple(t.name for t in TRACKS)


def check(name: str, what: str = "--track", allow_all: bool = True) -> str:
    """``name`` if it is a track (or ``all`` when allowed); otherwise a ``ValueError`` naming ``what``."""
    known = names() + ((ALL,) if allow_all else ())
    if name not in known:
        raise ValueError(f"{what} must be one of {', '.join(known)}, got {name!r}")
    return name


def get(name: str) -> Track:
    """The :class:`Track` called ``name``."""
    check(name, allow_all=False)
    return next(t for t in TRACKS if t.name == name)


_RUNS: list[str] = []  # the tracks of this process's pytest runs (plugin.track), the innermost last


def from_environment() -> str:
    """``$TRANSFORMER_SPEC_TRACK``, else classic."""
    return check(os.environ.get(ENV_VAR) or DEFAULT, f"${ENV_VAR}")


def chosen() -> str:
    """The track this process was asked for: its pytest run's ``--track`` (possibly ``all``), else
    :func:`from_environment`."""
    return _RUNS[-1] if _RUNS else from_environment()


def current() -> str:
    """The graded track of this process (a rubric's default components): :func:`chosen`, classic for ``all``."""
    track = chosen()
    return DEFAULT if track == ALL else track


def use(name: str) -> None:
    """Make ``name`` this process's track until :func:`done` (a pytest run's; children get theirs by
    ``--track``, as ``tools.grade`` passes it)."""
    _RUNS.append(check(name))


def done() -> None:
    """The end of the innermost :func:`use`."""
    if _RUNS:
        _RUNS.pop()


def missing_pieces(component: registry.Component) -> list[str]:
    """What ``component`` lacks (:func:`registry.missing_pieces`), an unknown track included."""
    return registry.missing_pieces(component, names())


def components(track: str | None = None) -> tuple[registry.Component, ...]:
    """The components ``track`` grades (every component for ``all``), in report order."""
    track = chosen() if track is None else check(track)
    return tuple(c for c in registry.components() if track == ALL or track in c.tracks)


def component_names(track: str | None = None) -> tuple[str, ...]:
    """The names of :func:`components`."""
    return tuple(c.name for c in components(track))


def keeps(track: str, component: str | None, narrowed: tuple[str, ...] = ()) -> bool:
    """Whether a test of ``component`` (``None``: not graded) runs in ``track``; ``narrowed``: the
    tracks of its ``@pytest.mark.track`` marker, if any. A component no track knows is kept: the
    grading plugin then says it names no component."""
    if track == ALL or component is None or component not in registry.names():
        return True
    if narrowed and track not in narrowed:
        return False
    return component in component_names(track)


def home(component: str) -> str:
    """The track whose kill matrix has the rows of ``component``'s mistakes and variations: the first it
    belongs to (attention and masks are classic: the modern track runs the same tests on them)."""
    return registry.get(component).tracks[0]
