"""The pitfall catalogue: mistakes students really make, each a small patch of the reference.

Every :class:`~transformer_spec.contract.registry.Pitfall` is a list of :mod:`transformer_spec.catalogue.patching`
patches ``(file, old, new)`` of ``reference/``, the component whose code it breaks, a short name
and a one-line explanation addressed to a student. Each component declares its own pitfalls in its
module of :mod:`transformer_spec.components`; this module is the catalogue of all of them, in
report order. Because each patch names the exact text it replaces, a patch that no longer applies
after the reference changes raises ``PatchError`` (``tests/test_pitfalls.py`` applies every one)
instead of silently testing nothing.

Uses: ``python -m tools.mutants`` runs the whole suite on each pitfall (the kill matrix), and
:mod:`transformer_spec.diagnosis.diagnose` recognises a pitfall in a failing submission by its behaviour.

Sources: seed 001 section 10 (the mask forgotten, shapes mixed up, softmax over the wrong
dimension), seed 000 (the sqrt(d_k) scaling, the sqrt(d_model) embedding scale), issue 6, and
issue 13 (a finite mask fill as in seed 001 sections 8.1 and 11; source padding from lengths).
"""

from __future__ import annotations

from transformer_spec.contract import registry
from transformer_spec.contract.registry import Pitfall

__all__ = ["Pitfall", "by_name", "catalogue", "check_catalogue"]


def catalogue() -> tuple[Pitfall, ...]:
    """Every pitfall, component by component in report order."""
    return registry.pitfalls()


def by_name() -> dict[str, Pitfall]:
    return {p.name: p for p in catalogue()}


def check_catalogue() -> None:
    """Raise ``ValueError`` if the catalogue is malformed (names, components, patches)."""
    if len(by_name()) != len(catalogue()):
        raise ValueError("duplicate pitfall names")
    for p in catalogue():
        if p.component not in registry.names():
            raise ValueError(f"pitfall {p.name}: unknown component {p.component!r}")
        if not p.patches or not p.explanation.strip() or "\n" in p.explanation:
            raise ValueError(f"pitfall {p.name}: needs patches and a one-line explanation")

