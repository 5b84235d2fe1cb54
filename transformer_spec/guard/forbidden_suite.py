"""The suite's own packages out of the submission's reach: its laws, formulas, oracles and snapshots.

``spec_tests`` and ``properties`` are imported by pytest while it collects the suite; from then on a
submission could take the grader's answers from them (issue 45: adapters calling ``spec_tests.modern.formulas``
scored what the formulas earn). The import guard's finder sees only first imports, and a Python-level
``__import__`` hook would slow every import statement of the run (12 %). So, once the collection is over,
:func:`protect` puts a stand-in for each of those modules in ``sys.modules``: every import of them (``from
spec_tests.modern.formulas import rms_norm``, ``importlib.import_module``, a package's attribute) goes through
it, and an attribute read or written with the submission's own code on the stack is a forbidden use (the suite's own
frames read freely). The suite's test modules keep the real modules they imported.
"""

from __future__ import annotations

import sys
from types import ModuleType

from transformer_spec import layout

#: The suite's own packages (laws, formulas, oracles, snapshots), refused to the submission's code whatever the
#: rubric; the suite uses them freely.
SUITE_MODULES: tuple[str, ...] = tuple(layout.PREFIX + m for m in ("spec_tests", "properties"))


def is_suite_module(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in SUITE_MODULES)


class _SuiteModule(ModuleType):
    """The type of every stand-in (each is of its own subclass, closing over its real module)."""


def _stand_in(real: ModuleType, guard) -> ModuleType:
    """A module of the suite as ``sys.modules`` shows it: its attributes for the suite, a forbidden import for the
    submission's code. Its dunder attributes (``__file__``, ``__spec__``: what ``inspect`` and ``torch.library``
    read of every module in ``sys.modules``) are metadata, not answers, and read freely; its ``__dict__`` is its
    own, empty one. The real module is held in a closure, not in an attribute one could name."""

    class Stand(_SuiteModule):
        def __getattribute__(self, name):
            if name in ("__class__", "__dict__"):
                return object.__getattribute__(self, name)
            if not (name.startswith("__") and name.endswith("__")):
                frame = guard.caller_in_submission()
                if frame is not None:
                    guard.refuse_import(real.__name__, frame)
            return getattr(real, name)

        def __setattr__(self, name, value):  # a write from the submission's code: the same forbidden use
            frame = guard.caller_in_submission()
            if frame is not None:
                guard.refuse_import(real.__name__, frame)
            setattr(real, name, value)

        def __delattr__(self, name):
            frame = guard.caller_in_submission()
            if frame is not None:
                guard.refuse_import(real.__name__, frame)
            delattr(real, name)

    return Stand(real.__name__, real.__doc__)


def _is_stand_in(module) -> bool:
    return isinstance(module, _SuiteModule)


def protect(guard) -> callable:
    """Stand-ins for every module of the suite imported now; returns what puts the real ones back."""
    real = {n: m for n, m in list(sys.modules.items()) if isinstance(m, ModuleType) and not _is_stand_in(m)
            and is_suite_module(n)}
    for name, module in real.items():
        sys.modules[name] = _stand_in(module, guard)

    def undo():
        for name, module in real.items():
            if _is_stand_in(sys.modules.get(name)):
                sys.modules[name] = module

    return undo
