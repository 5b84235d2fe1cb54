"""The catalogues: the mistakes the suite must catch (pitfalls) and the free choices it must spare
(variations), as patches of the reference; a course profile's own catalogue; the placeholders
(a component's output replaced by zeros) the kill matrix grades.

May use: the components, the probes, the scoring (which components a course's rubric grades), the
submission loader (a patch is loaded as a submission), the profiles, the contract. Used by the
diagnosis and the kill matrix (tools).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from transformer_spec.profiles import DEFAULT, Profile


def of_profile(profile: Profile) -> ModuleType | None:
    """A shipped course profile's catalogue (``transformer_spec.catalogue.<name>``: its own
    pitfalls and variations, the track's pitfalls it cannot see, and how a contract implementation is
    written in the course's API), or None (the contract's own names, or a profile of one's own)."""
    if profile.name == DEFAULT or profile.origin is not None:
        return None
    return importlib.import_module(f"{__name__}.{profile.name}")
