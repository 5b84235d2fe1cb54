"""The rubric: points per component and per test, dropped and hidden tests, forbidden APIs.

Read from TOML (``transformer_spec/rubric.toml`` documents every key), checked against the
collected tests, and turned into points per test (:func:`assign_points`) whose parts add up to
each component's points exactly (:func:`round_within`). Used by :mod:`transformer_spec.pytest_plugin.grading`
and ``tools.grade``. A rubric without a ``[components]`` table gives every component its
default points from the registry (:mod:`transformer_spec.contract.registry`); a rubric with one gives
exactly the points it lists (a component it leaves out scores nothing).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from transformer_spec.contract import registry, tracks
from transformer_spec.guard import forbidden, forbidden_names

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

DEFAULT_RUBRIC = tracks.get(tracks.DEFAULT).rubric  # the classic track's; each track has its own (tracks.py)
_RUBRIC_KEYS = {"components", "tests", "drop", "hidden", "forbidden", "values_share"}
#: the share of a component's points (after its [tests] entries) its tests of what it computes share
#: (:attr:`registry.Component.values`); its other tests (laws, shapes, argument checks) share the rest
VALUES_SHARE = 0.8


class RubricError(ValueError):
    """A rubric that cannot be used; the message says which entry and why."""


@dataclass
class Rubric:
    """Points per component, per-test points, dropped and hidden tests, forbidden APIs."""

    components: dict[str, float]
    tests: dict[str, float] = field(default_factory=dict)
    drop: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)
    forbidden: list[str] = field(default_factory=lambda: list(forbidden.DEFAULT_FORBIDDEN))
    source: str = "<rubric>"
    values_share: float = VALUES_SHARE

    @property
    def total(self) -> float:
        return float(sum(self.components.values()))


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise RubricError(f"{where} must be a number >= 0, got {value!r}")
    return float(value)


def _str_list(data: dict, key: str, source: str) -> list[str]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise RubricError(f"rubric {source}: `{key}` must be a list of strings, got {value!r}")
    return list(value)


def parse_rubric(data: dict, source: str = "<rubric>", track: str | None = None) -> Rubric:
    """Check and convert a parsed rubric TOML document; without a ``[components]`` table, the
    components of ``track`` (default: this process's, :func:`tracks.current`) get their default points."""
    unknown = sorted(set(data) - _RUBRIC_KEYS)
    if unknown:
        raise RubricError(
            f"rubric {source}: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"the keys are {', '.join(sorted(_RUBRIC_KEYS))}"
        )
    known = registry.names()
    comps = data.get("components", {c.name: c.points for c in tracks.components(track or tracks.current())
                                    if not c.optional})
    if not isinstance(comps, dict) or not comps:
        raise RubricError(f"rubric {source}: [components] must be a table of points per component "
                          "(or left out: every component then gets its default points)")
    for name in comps:
        if name not in known:
            raise RubricError(
                f"rubric {source}: unknown component {name!r} in [components]; "
                f"the components are {', '.join(known)}"
            )
    components = {c: _number(comps[c], f"rubric {source}: [components] {c}") for c in known if c in comps}
    tests_table = data.get("tests", {})
    if not isinstance(tests_table, dict):
        raise RubricError(f"rubric {source}: [tests] must be a table of test id = points")
    tests = {str(k): _number(v, f"rubric {source}: [tests] {k!r}") for k, v in tests_table.items()}
    hidden = _str_list(data, "hidden", source)
    forbidden_list = _str_list(data, "forbidden", source) if "forbidden" in data else list(forbidden.DEFAULT_FORBIDDEN)
    try:
        forbidden_names.validate(forbidden_list)
    except ValueError as exc:
        raise RubricError(f"rubric {source}: `forbidden`: {exc}") from None
    share = _number(data.get("values_share", VALUES_SHARE), f"rubric {source}: values_share")
    if share > 1:
        raise RubricError(f"rubric {source}: values_share must be a share between 0 and 1, got {share:g}")
    return Rubric(components, tests, _str_list(data, "drop", source), hidden, forbidden_list, source, share)


def load_rubric(path: str | os.PathLike | None = None, track: str | None = None) -> Rubric:
    """Read and check a rubric file (``track``'s default one when ``path`` is None; ``track``
    defaults to this process's, :func:`tracks.current`)."""
    track = tracks.current() if track is None else track
    path = Path(path) if path else tracks.get(track).rubric
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RubricError(f"rubric {path}: cannot be read: {exc.strerror or exc}") from None
    return rubric_from_text(text, str(path), track)


def rubric_from_text(text: str, source: str = "<rubric>", track: str | None = None) -> Rubric:
    """Parse and check a rubric's TOML text (``track``: see :func:`parse_rubric`)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RubricError(f"rubric {source}: not valid TOML: {exc}") from None
    return parse_rubric(data, source, track)


def ungraded_optional(rubric: Rubric) -> tuple[str, ...]:
    """The optional components (:attr:`registry.Component.optional`) ``rubric`` gives no points: the run
    leaves their tests out before sharing the points, as a profile leaves out what it cannot express."""
    return tuple(c.name for c in registry.components() if c.optional and not rubric.components.get(c.name))


def with_optional_text(track: str) -> str | None:
    """The TOML text of ``track``'s default rubric with its optional components added at their default
    points: what grades all of a track (the kill matrix's rows of the training utilities); None for a
    track without optional components (its default rubric grades all of it)."""
    if not any(c.optional for c in tracks.components(track)):
        return None
    base = load_rubric(track=track)
    components = {**base.components, **{c.name: c.points for c in tracks.components(track) if c.optional}}
    quoted = lambda items: "[" + ", ".join(json.dumps(i) for i in items) + "]"  # noqa: E731 - TOML's basic strings
    lines = [f"drop = {quoted(base.drop)}", f"hidden = {quoted(base.hidden)}", f"forbidden = {quoted(base.forbidden)}",
             f"values_share = {base.values_share!r}",
             "[components]", *(f"{c} = {p!r}" for c, p in components.items()),
             "[tests]", *(f"{json.dumps(t)} = {p!r}" for t, p in base.tests.items())]
    return "\n".join(lines) + "\n"


def leave_out_optional(rubric: Rubric, items: list[pytest.Item]) -> dict[str, int]:
    """Remove from ``items`` the tests of :func:`ungraded_optional` components; how many of each were removed."""
    unrated, left_out, kept = ungraded_optional(rubric), {}, []
    for item in items:
        component = component_of_item(item)
        if component in unrated:
            left_out[component] = left_out.get(component, 0) + 1
        else:
            kept.append(item)
    items[:] = kept
    return left_out


def optional_note(left_out: dict[str, int]) -> str | None:
    """One line: the tests of optional components the rubric left out, by component (None: none were)."""
    if not left_out:
        return None
    return (f"{sum(left_out.values())} test(s) of optional components left out, the rubric giving them no points: "
            f"{', '.join(f'{c} ({n})' for c, n in left_out.items())} (docs/contract.md, \"The modern track's "
            "training utilities\"; a rubric's [components] grades them)")


def matches(key: str, nodeid: str) -> bool:
    """A rubric test id matches a node id, its parameter cases, or everything under a file/class."""
    return nodeid == key or nodeid.startswith(key + "[") or nodeid.startswith(key + "::")


def component_of_item(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("component")
    if marker is None:
        return None
    known = registry.names()
    if len(marker.args) != 1 or marker.args[0] not in known:
        raise RubricError(
            f"{item.nodeid}: @pytest.mark.component({', '.join(map(repr, marker.args))}) names no "
            f"component; the components are {', '.join(known)}"
        )
    return marker.args[0]


def check_rubric_against(rubric: Rubric, nodeids: dict[str, str | None], rootdir: Path) -> None:
    """Every test id of the rubric must name collected tests (``nodeids``: id -> component).

    An id whose file exists but was not collected in this run cannot be checked and is accepted.
    """
    collected_files = {n.split("::")[0] for n in nodeids}
    for where, keys in (("[tests]", list(rubric.tests)), ("drop", rubric.drop), ("hidden", rubric.hidden)):
        for key in keys:
            if where == "hidden" and key in registry.names():
                continue
            matched = [n for n in nodeids if matches(key, n)]
            if matched:
                ungraded = [n for n in matched if nodeids[n] is None]
                if ungraded and len(ungraded) == len(matched):
                    raise RubricError(
                        f"rubric {rubric.source}: {where} names {key!r}, which is not a graded test "
                        f"(it has no @pytest.mark.component)"
                    )
                continue
            file = key.split("::")[0].split("[")[0]
            if not (rootdir / file).exists():
                hint = " (nor a component)" if where == "hidden" else ""
                raise RubricError(
                    f"rubric {rubric.source}: {where} names an unknown test {key!r}{hint}: "
                    f"there is no file {file}"
                )
            if file in collected_files:
                raise RubricError(
                    f"rubric {rubric.source}: {where} names an unknown test {key!r}: "
                    f"no test of that name was collected from {file}"
                )


def assign_points(rubric: Rubric, graded: dict[str, str]) -> tuple[dict[str, float], list[str]]:
    """Points per graded test (``graded``: node id -> component) and the list of dropped ids.

    A component's points are shared by its tests; a rubric ``[tests]`` entry gives the tests it
    matches their points (split equally among them) out of the component's share. The rest is shared by
    the component's other tests: ``values_share`` of it equally by its tests of what it computes
    (:func:`is_value_test`), the remainder equally by the others (all of it by one kind when the other
    has no test).
    """
    dropped = [n for n in graded if any(matches(k, n) for k in rubric.drop)]
    live = {n: c for n, c in graded.items() if n not in dropped}
    points: dict[str, float] = {}
    by_component: dict[str, list[str]] = {}
    for n, c in live.items():
        by_component.setdefault(c, []).append(n)
    explicit: dict[str, float] = {}
    # The most specific key wins: longer keys are applied last.
    for key in sorted(rubric.tests, key=len):
        matched = [n for n in live if matches(key, n)]
        for n in matched:
            explicit[n] = rubric.tests[key] / len(matched)
    for comp, ids in by_component.items():
        budget = rubric.components.get(comp, 0.0)
        fixed = sum(explicit[n] for n in ids if n in explicit)
        others = [n for n in ids if n not in explicit]
        if fixed > budget + 1e-9:
            raise RubricError(
                f"rubric {rubric.source}: the [tests] points of component {comp!r} sum to {fixed:g}, "
                f"more than the component's {budget:g}"
            )
        values = [n for n in others if is_value_test(comp, n)]
        share = (rubric.values_share if len(values) < len(others) else 1.0) if values else 0.0
        each = {True: (budget - fixed) * share / max(len(values), 1),
                False: (budget - fixed) * (1 - share) / max(len(others) - len(values), 1)}
        raw = {n: explicit[n] if n in explicit else each[n in values] for n in ids}
        points.update(round_within(raw))
    return points, dropped


def is_value_test(component: str, nodeid: str) -> bool:
    """Whether ``nodeid`` is one of ``component``'s tests of what it computes (:attr:`registry.Component.values`)."""
    known = registry.names()
    return component in known and any(matches(k, nodeid) for k in registry.get(component).values)


POINT_DECIMALS = 4  # results.json's points: Gradescope adds them up as written


def round_within(raw: dict[str, float], decimals: int = POINT_DECIMALS) -> dict[str, float]:
    """``raw`` rounded to ``decimals`` so that the parts add up to their rounded sum exactly
    (largest remainder: the parts rounded down, the missing units to the largest remainders)."""
    unit = 10 ** decimals
    total = round(sum(raw.values()) * unit)
    scaled = {n: v * unit for n, v in raw.items()}
    units = {n: math.floor(v + 1e-9) for n, v in scaled.items()}
    missing = total - sum(units.values())
    order = {n: i for i, n in enumerate(raw)}
    by_remainder = sorted(raw, key=lambda n: (-(scaled[n] - units[n]), order[n]))
    for n in by_remainder[:max(missing, 0)]:
        units[n] += 1
    return {n: units[n] / unit for n in raw}
