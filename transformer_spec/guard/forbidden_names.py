"""The names a forbidden list holds: each dotted name resolved to what it names (a module, a class or
a function), and a list checked before any run (:mod:`.rubric` refuses a name that names nothing)."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterable


def resolve(api: str):
    """``(owner, attribute, object)`` for a dotted name; ``object`` is None for a module."""
    parts = api.split(".")
    for i in range(len(parts), 0, -1):
        module_name = ".".join(parts[:i])
        try:
            spec = importlib.util.find_spec(module_name)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            continue
        if i == len(parts):
            return None, "", None
        owner = importlib.import_module(module_name)
        for part in parts[i:-1]:
            owner = getattr(owner, part)
        if not hasattr(owner, parts[-1]):
            break
        return owner, parts[-1], getattr(owner, parts[-1])
    if "." not in api:
        return None, "", None  # a module not present here (the class grader's sandbox hides reference/): guarded by name
    raise ValueError(f"forbidden API {api!r}: no module, class or function of that name")


def validate(apis: Iterable[str]) -> None:
    """Raise ``ValueError`` naming the first entry of ``apis`` that resolves to nothing."""
    for api in apis:
        if not isinstance(api, str) or not api:
            raise ValueError(f"forbidden API entries must be dotted names, got {api!r}")
        resolve(api)
