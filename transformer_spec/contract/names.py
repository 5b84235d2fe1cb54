"""The contract (``docs/contract.md``) in machine-readable form.

Every name a submission defines, the component it is graded under, and the row of the contract
that describes it (quoted in "not submitted" failures so a student knows what to write). Each
component declares its names in its module of :mod:`transformer_spec.components`; the loader,
the tests and the grading harness read them through the functions here, which derive them from
the :mod:`~transformer_spec.contract.registry` on each call.
"""

from __future__ import annotations

from transformer_spec.contract import registry, tracks
from transformer_spec.contract.registry import Name

__all__ = ["Name", "names", "by_name", "top_level", "of_track"]


def names() -> tuple[Name, ...]:
    """Every name of the contract, component by component in report order."""
    return tuple(n for c in registry.components() for n in c.names)


_BY_NAME: dict[tuple, dict[str, Name]] = {}


def by_name() -> dict[str, Name]:
    """``{name: Name}``; ``"MiniGPT.generate"`` is the method of ``MiniGPT`` (one table per set of
    components: it is looked up on every use of a submission's name)."""
    key = tuple(id(c) for c in registry.components())
    if key not in _BY_NAME:
        _BY_NAME.clear()
        _BY_NAME[key] = {n.name: n for n in names()}
    return _BY_NAME[key]


def top_level() -> tuple[str, ...]:
    """The top-level names a complete submission defines (``MiniGPT.generate`` is a method)."""
    return tuple(n.name for n in names() if n.kind != "method")



def of_track(track: str) -> tuple[Name, ...]:
    """The names a complete submission of ``track`` defines (``padding_mask`` is classic only)."""
    comps = set(tracks.component_names(track))
    return tuple(n for n in names() if n.component in comps and (not n.tracks or track in n.tracks))
