"""How a graded record is held to its ``Expect`` (``corpus.Expect``): one function, shared."""

from __future__ import annotations

from transformer_spec.contract import registry
from transformer_spec.results.results_file import nodeid_of

from .corpus import Expect


def unchecked_points(base) -> dict[str, float]:
    """component -> the points of the tests ``base`` (a Record) fails that no hidden re-check has as
    its anchor: what a forged report can still claim for code that runs (docs/class_grading.md)."""
    anchors = {a for r in registry.rechecks() for a in r.anchors}
    out: dict[str, float] = {}
    for t in base.tests:
        if t["status"] != "passed" and nodeid_of(t) not in anchors:
            out[t["tags"][0]] = out.get(t["tags"][0], 0.0) + t["max_score"]
    return out


def problems(student: str, e: Expect, records: dict, buggy: str) -> list[str]:
    """What differs between ``records[student]`` (a ``tools.grade`` Record) and ``e``; [] when it
    got exactly the grade it deserves. ``buggy``: the buggy baseline's name (``e.extra["baseline"]``, when
    given, names the student's own control instead)."""
    buggy = e.extra.get("baseline", buggy)
    r = records.get(student)
    if r is None:
        return [f"{student}: no record (not in the output folder)"]
    context = f"{student}: status {r.status!r} ({r.detail}), total {r.total}/{r.possible}, points {r.components}"
    out = []
    statuses = e.status if isinstance(e.status, tuple) else (e.status,)
    if r.status not in statuses:
        out.append(f"{context}: status should be {' or '.join(statuses)}")
    base = records.get(buggy)
    unchecked = {} if base is None else unchecked_points(base)
    if e.points == "full" and not (r.total == r.possible > 0):
        out.append(f"{context}: should score full points")
    elif e.points == "zero" and r.total != 0:
        out.append(f"{context}: should score 0")
    elif e.points == "buggy" and (base is None or r.components != base.components):
        out.append(f"{context}: should score exactly the buggy baseline "
                   f"{None if base is None else base.components}")
    elif e.points == "at_most_buggy" and (base is None or any(r.components.get(c, 0) > base.components[c] + 1e-9
                                                              for c in base.components)):
        out.append(f"{context}: should score at most the buggy baseline {None if base is None else base.components}")
    elif e.points == "at_most_buggy_and_unchecked" and (base is None or any(
            r.components.get(c, 0) > base.components[c] + unchecked.get(c, 0.0) + 1e-9 for c in base.components)):
        out.append(f"{context}: should score at most the buggy baseline {None if base is None else base.components} "
                   f"plus the tests without a hidden re-check {unchecked}")
    elif e.points == "partial" and not (0 < r.total < r.possible):
        out.append(f"{context}: should score some points but not all")
    full = {}
    for t in r.tests:
        full[t["tags"][0]] = full.get(t["tags"][0], 0.0) + t["max_score"]
    for c in e.zero:
        if r.components.get(c, 0.0) != 0:
            out.append(f"{context}: {c} should score 0")
    for c in e.full:
        if abs(r.components.get(c, 0.0) - full.get(c, -1.0)) > 0.01:
            out.append(f"{context}: {c} should score its full {full.get(c)}")
    same = e.extra.get("same_as")
    if same is not None:
        other = records.get(same)
        if other is None or (r.status, r.components) != (other.status, other.components):
            out.append(f"{context}: should get what {same} gets: "
                       f"{None if other is None else (other.status, other.components)}")
    return out
