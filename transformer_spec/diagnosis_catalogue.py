"""The catalogue's features: every pitfall's behaviour-probe features, computed once and cached.

For a component, the reference and every pitfall that can show there (:func:`candidates`) are
run through the behaviour probes (:mod:`transformer_spec.behaviour`); a pitfall's *evidence* is
the set of features where it differs from the reference (:func:`evidence`). Computing them
takes a while, so the table is cached in the temp folder (``$TRANSFORMER_SPEC_CACHE``), keyed by
the sources of ``reference/``, the components and the probes.

A sandboxed grading child sees neither ``reference/`` nor a writable cache: the class grader
computes the whole table first (:func:`write_table`) and names the file in
``$TRANSFORMER_SPEC_DIAGNOSIS_TABLE``, which is then read and never recomputed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import torch

from . import behaviour, loader, registry
from .behaviour import Features
from .patching import REFERENCE_DIR, load_patched_reference
from .registry import Pitfall


def _cache_key() -> str:
    h = hashlib.sha256()
    here = Path(__file__).parent
    sources = [*sorted(REFERENCE_DIR.glob("*.py")), *sorted((here / "components").glob("*.py")), Path(__file__),
               *(here / name for name in ("behaviour.py", "inputs.py", "testing.py", "registry.py", "llama_shapes.py"))]
    for path in sources:
        h.update(path.name.encode() + path.read_bytes())
    h.update(torch.__version__.encode())
    return h.hexdigest()[:16]


def _cache_path() -> Path:
    base = Path(os.environ.get("TRANSFORMER_SPEC_CACHE", Path(tempfile.gettempdir()) / "transformer_spec_cache"))
    return base / f"diagnose-{_cache_key()}.pt"


_MEMO: dict[str, dict[str, dict[str, Features]]] = {}


def candidates(comp: str) -> list[Pitfall]:
    """The pitfalls that can show in component ``comp``: those of the components it depends on
    (``registry.affected_by``); errors pitfalls (shared argument checks) only in ``errors``."""
    return [p for p in registry.pitfalls() if comp in registry.affected_by(p.component)]


TABLE_VAR = "TRANSFORMER_SPEC_DIAGNOSIS_TABLE"


def write_table(path: Path) -> Path:
    """The whole table (every component) into ``path``, for children that cannot compute it."""
    table = catalogue_features(registry.names())
    torch.save(table, path)
    return path


def catalogue_features(components: Iterable[str]) -> dict[str, dict[str, Features]]:
    """``{pitfall name or "reference": {component: features}}`` for ``components``, for the
    pitfalls that can show there (:func:`candidates`); computed once, cached on disk."""
    given = os.environ.get(TABLE_VAR)
    if given:
        return torch.load(given, weights_only=True)
    key = _cache_key()
    path = _cache_path()
    table = _MEMO.get(key)
    if table is None and path.exists():
        with contextlib.suppress(Exception):
            table = torch.load(path, weights_only=True)
    table = table if table is not None else {}
    _MEMO[key] = table
    todo = {}
    for comp in components:
        for name in ["reference", *(p.name for p in candidates(comp))]:
            if comp not in table.get(name, {}):
                todo.setdefault(name, []).append(comp)
    if not todo:
        return table
    pitfalls = {p.name: p for p in registry.pitfalls()}
    with tempfile.TemporaryDirectory(prefix="diagnose-") as tmp:
        for name, comps in todo.items():
            impl = loader.load("reference") if name == "reference" else \
                load_patched_reference(Path(tmp), pitfalls[name].patches, f"pitfall_{name}")
            table.setdefault(name, {}).update(behaviour.features(impl, comps))
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp_path = path.with_suffix(f".{os.getpid()}.tmp")
        torch.save(table, tmp_path)
        os.replace(tmp_path, path)
    return table


def evidence(table, name: str, comp: str) -> list[str]:
    """The features of ``comp`` where pitfall ``name`` differs from the reference."""
    ref, mine = table["reference"][comp], table[name][comp]
    return [k for k in sorted(set(ref) | set(mine)) if not behaviour.same(ref.get(k), mine.get(k))]
