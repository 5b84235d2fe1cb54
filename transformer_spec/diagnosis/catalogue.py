"""The catalogue's features: every pitfall's behaviour-probe features, computed once and cached.

For a component, the reference and every pitfall that can show there (:func:`candidates`) are
run through the behaviour probes (:mod:`transformer_spec.probes.behaviour`); a pitfall's *evidence* is
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
import math
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import torch

from transformer_spec.catalogue.patching import REFERENCE_DIR
from transformer_spec.contract import registry
from transformer_spec.contract.registry import Pitfall
from transformer_spec.diagnosis import profiles as through
from transformer_spec.diagnosis import reach
from transformer_spec.probes import behaviour
from transformer_spec.probes.behaviour import Features


def _cache_key(profile=None) -> str:
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent.parent  # the package
    sources = [*sorted(REFERENCE_DIR.glob("*.py")), *sorted((here / "components").glob("*.py")), Path(__file__),
               *(here / name for name in ("probes/behaviour.py", "contract/inputs.py", "probes/testing.py",
                                          "contract/registry.py", "probes/llama_shapes.py", "diagnosis/reach.py"))]
    for path in sources:
        h.update(path.name.encode() + path.read_bytes())
    h.update(torch.__version__.encode())
    h.update(through.source_key(profile))
    return h.hexdigest()[:16]


def _cache_path(key: str) -> Path:
    base = Path(os.environ.get("TRANSFORMER_SPEC_CACHE", Path(tempfile.gettempdir()) / "transformer_spec_cache"))
    return base / f"diagnose-{key}.pt"


_MEMO: dict[str, dict[str, dict[str, Features]]] = {}


def candidates(comp: str, profile=None) -> list[Pitfall]:
    """The pitfalls that can show in component ``comp``: those of the components it depends on
    (``registry.affected_by``); errors pitfalls (shared argument checks) only in ``errors``. Under a
    course profile, those it can see and its catalogue's own (:func:`transformer_spec.diagnosis.profiles.candidates`)."""
    return through.candidates(comp, profile)


TABLE_VAR = "TRANSFORMER_SPEC_DIAGNOSIS_TABLE"


def write_table(path: Path, profile=None) -> Path:
    """The whole table (every component) into ``path``, for children that cannot compute it (under the
    course profile ``profile`` their submissions are graded through)."""
    table = catalogue_features(registry.names(), profile)
    save(table, path)
    return path


def catalogue_features(components: Iterable[str], profile=None) -> dict[str, dict[str, Features]]:
    """``{pitfall name or "reference": {component: features}}`` for ``components``, for the
    pitfalls that can show there (:func:`candidates`); computed once, cached on disk. Under a course
    profile, each row is written in the course's API and probed through it, as a student's code is
    (:mod:`transformer_spec.diagnosis.profiles`)."""
    if not through.diagnosable(profile):
        return {}  # nothing is named under it (transformer_spec.diagnosis.diagnose.annotate)
    given = os.environ.get(TABLE_VAR)
    if given:
        return load(given)
    key = _cache_key(profile)
    path = _cache_path(key)
    table = _MEMO.get(key)
    if table is None and path.exists():
        with contextlib.suppress(Exception):
            table = load(path)
    table = table if table is not None else {}
    _MEMO[key] = table
    todo, free = {}, table.get(FREE_KEY, {})
    for comp in through.components(components, profile):
        for name in ["reference", *(p.name for p in candidates(comp, profile))]:
            if comp not in table.get(name, {}):
                todo.setdefault(name, []).append(comp)
        if comp not in free:
            for v in through.variations(comp, profile):
                todo.setdefault(VARIATION + v.name, []).append(comp)
    if not todo:
        return table
    with tempfile.TemporaryDirectory(prefix="diagnose-") as tmp:
        variations = {v.name: v for comp in todo.get("reference", []) for v in through.variations(comp, profile)}
        for name, comps in sorted(todo.items(), key=lambda kv: kv[0] != "reference"):  # the reference first
            if name.startswith(VARIATION):
                _free(table, variations.get(name[len(VARIATION):]) or _variation(name, profile), comps, profile, tmp)
                continue
            patches = () if name == "reference" else through.pitfall(name, profile).patches
            impl = through.implementation(profile, Path(tmp), f"pitfall_{name}", patches)
            table.setdefault(name, {}).update(behaviour.features(impl, comps, through.lacks(profile)))
            if name == "reference":  # the calls a correct component makes into the parts it calls (reach.py)
                for comp in comps:
                    table.setdefault(reach.TABLE_KEY, {})[comp] = reach.record(impl, comp, through.lacks(profile))
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp_path = path.with_suffix(f".{os.getpid()}.tmp")
        save(table, tmp_path)
        os.replace(tmp_path, path)
    return table


# ---- the table's file ----------------------------------------------------------------------------
# Thousands of small tensors (6473 in the classic table) cost torch.load(weights_only=True) 1.5 s, one
# at a time, and every sandboxed child that diagnoses reads the table; packed into one flat tensor per
# dtype they cost 0.5 s. The file stays a weights-only torch file (no pickled code: a shared cache
# folder is not trusted).
_TENSOR = "\x00tensor"  # a tensor's place in the packed tree: (_TENSOR, dtype, index); no feature is such a triple


def save(table, path) -> None:
    """Write ``table`` to ``path`` packed (:func:`load` reads it): per dtype, every tensor flattened into one,
    and an int64 index of rows ``(start, ndim, *shape)``."""
    groups: dict[str, list[torch.Tensor]] = {}

    def strip(o):
        if isinstance(o, torch.Tensor):
            key = str(o.dtype).removeprefix("torch.")
            groups.setdefault(key, []).append(o.detach().cpu())
            return (_TENSOR, key, len(groups[key]) - 1)
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return type(o)(strip(v) for v in o)
        return o

    tree = strip(table)
    flat, index = {}, {}
    for key, ts in groups.items():
        width = 2 + max(t.dim() for t in ts)
        rows, start = [], 0
        for t in ts:
            rows.append([start, t.dim(), *t.shape] + [0] * (width - 2 - t.dim()))
            start += t.numel()
        flat[key] = torch.cat([t.reshape(-1) for t in ts])
        index[key] = torch.tensor(rows, dtype=torch.int64)
    torch.save({"tree": tree, "flat": flat, "index": index}, path)


def load(path):
    """The table :func:`save` wrote to ``path``."""
    packed = torch.load(path, weights_only=True)
    flat = packed["flat"]
    index = {key: rows.tolist() for key, rows in packed["index"].items()}

    def tensor(key: str, i: int) -> torch.Tensor:
        start, ndim, *dims = index[key][i]
        shape = dims[:ndim]
        return flat[key][start:start + math.prod(shape)].view(shape)

    def fill(o):
        if isinstance(o, dict):
            return {k: fill(v) for k, v in o.items()}
        if isinstance(o, tuple) and len(o) == 3 and o[0] == _TENSOR:
            return tensor(o[1], o[2])
        if isinstance(o, (list, tuple)):
            return type(o)(fill(v) for v in o)
        return o

    return fill(packed["tree"])


#: the table's key for each component's *free* features: those an allowed variation changes (correct code in
#: another style), so that a difference there is no evidence of a mistake (:func:`free_features`)
FREE_KEY = "__free__"
VARIATION = "variation:"


def _variation(name: str, profile):
    from transformer_spec.catalogue.variations import BY_NAME

    own = {v.name: v for v in getattr(through.catalogue(through.profile_of(profile)), "VARIATIONS", ())}
    return {**BY_NAME, **own}[name[len(VARIATION):]]


def _free(table, variation, comps: list[str], profile, tmp: str) -> None:
    """Add to each of ``comps``'s free features those where ``variation`` differs from the reference."""
    impl = through.implementation(profile, Path(tmp), f"variation_{variation.name}", variation.patches)
    found = behaviour.features(impl, comps, through.lacks(profile))
    tol = through.tolerance(profile)
    for comp in comps:
        ref, theirs = table["reference"][comp], found[comp]
        keys = set(table.setdefault(FREE_KEY, {}).get(comp, ()))
        keys |= {k for k in set(ref) | set(theirs) if not behaviour.same(ref.get(k), theirs.get(k), tol)}
        table[FREE_KEY][comp] = sorted(keys)


def free_features(table, comp: str) -> set[str]:
    """The features of ``comp`` that an allowed variation changes: a difference there is a free choice."""
    return set(table.get(FREE_KEY, {}).get(comp, ()))


def evidence(table, name: str, comp: str, tol: behaviour.Tolerance = behaviour.EXACT) -> list[str]:
    """The features of ``comp`` where pitfall ``name`` differs from the reference."""
    ref, mine = table["reference"][comp], table[name][comp]
    return [k for k in sorted(set(ref) | set(mine)) if not behaviour.same(ref.get(k), mine.get(k), tol)]
