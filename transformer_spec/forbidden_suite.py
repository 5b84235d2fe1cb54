"""The suite's own packages out of the submission's reach: its laws, formulas, oracles and snapshots.

``spec_tests`` and ``properties`` are imported by pytest while it collects the suite; from then on a
submission could take the grader's answers from them (issue 45: adapters calling ``spec_tests.modern.formulas``
scored what the formulas earn). The import guard's finder sees only first imports, and a Python-level
``__import__`` hook would slow every import statement of the run (12 %). So, once the collection is over,
:func:`protect` puts a stand-in for each of those modules in ``sys.modules``: every import of them (``from
spec_tests.modern.formulas import rms_norm``, ``importlib.import_module``, a package's attribute) goes through
it, and an attribute read with the submission's own code on the stack is a forbidden use (the suite's own
frames read freely). The suite's test modules keep the real modules they imported.
"""

from __future__ import annotations

import sys
from types import ModuleType

from . import layout

#: The suite's own packages (laws, formulas, oracles, snapshots), refused to the submission's code whatever the
#: rubric; the suite uses them freely.
SUITE_MODULES: tuple[str, ...] = tuple(layout.PREFIX + m for m in ("spec_tests", "properties"))


def is_suite_module(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in SUITE_MODULES)


class _Stand(ModuleType):
    """A module of the suite as ``sys.modules`` shows it: its attributes for the suite, a forbidden import for the
    submission's code."""

    def __init__(self, real: ModuleType, guard):
        super().__init__(real.__name__, real.__doc__)
        object.__setattr__(self, "_ts_real", real)
        object.__setattr__(self, "_ts_guard", guard)

    def __getattribute__(self, name):
        if name in ("_ts_real", "_ts_guard", "__class__", "__dict__"):
            return object.__getattribute__(self, name)
        real, guard = object.__getattribute__(self, "_ts_real"), object.__getattribute__(self, "_ts_guard")
        frame = guard.caller_in_submission()
        if frame is not None:
            guard.refuse_import(real.__name__, frame)
        return getattr(real, name)

    def __setattr__(self, name, value):
        setattr(object.__getattribute__(self, "_ts_real"), name, value)


def protect(guard) -> callable:
    """Stand-ins for every module of the suite imported now; returns what puts the real ones back."""
    real = {n: m for n, m in list(sys.modules.items()) if isinstance(m, ModuleType) and not isinstance(m, _Stand)
            and is_suite_module(n)}
    for name, module in real.items():
        sys.modules[name] = _Stand(module, guard)

    def undo():
        for name, module in real.items():
            if isinstance(sys.modules.get(name), _Stand):
                sys.modules[name] = module

    return undo
