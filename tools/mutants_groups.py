"""The kill matrix's allowed variations graded in groups (``python -m tools.mutants``).

A variation's row must be clean: every test passes, the class grade is the child's pytest report. So
variations whose patches apply together share one row (group testing): a clean group spares each of its
members, and a group with any failure, difference or error is graded again one member at a time, so each
failure is named by the variation that causes it. A member's row in the matrix is its group's (the same
failures, none; the group's time, shared) with ``group`` naming the group.

What a group cannot show: two variations that each fail a test alone and pass it together (one undoing
the other's observable change). Every variation is written to change nothing a test may observe, so that
would take two catalogue mistakes that cancel exactly.

Patches that fit: the members rewrite different files (a patch every member carries, such as the
plain-generate one of every catalogue copy, aside: it is applied once), so no member rewrites what another's
code relies on in the same file (a KV-cache generate beside a rewritten model forward failed together and
passed apart), and the group must be writable as a student's folder of the matrix (each patch's text found
exactly once, :class:`transformer_spec.catalogue.patching.PatchError` otherwise).

Pitfalls are graded in groups too (:func:`group_pitfalls`), when the row's verdict can be read from a group:
a pitfall's verdict is whether a test of its own component fails, so its members are pitfalls of components
none of which can change another's tests. What each component can change is what the contract's composition
says (:func:`transformer_spec.contract.registry.affected_by`) and what its placeholder showed in the same run
(the components whose tests failed when its output was zeros; graded first, so a call the composition
does not declare, a course's attention calling the student's own softmax, keeps the two apart); a component
without a placeholder row (``errors``: validation in every class) is graded alone. A group whose every
member is killed in its own component, with no error, difference or unreadable message, gives each member
its own component's failures; any other group is graded again one member at a time, so a survivor, a pitfall
killed only elsewhere or a message a student cannot read is named by the pitfall that causes it. What a
group cannot show: the components beyond its own that a member breaks (they are the composition's, and
``--no-groups`` lists them), and a test of one member's component failing only through another member's
code by a path neither the composition nor the placeholders show.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable
from pathlib import Path

from transformer_spec.catalogue.patching import PatchError
from transformer_spec.contract.registry import Pitfall, affected_by
from transformer_spec.catalogue.variations import Variation
from transformer_spec.results.results_file import nodeid_of

#: the prefix of a group's name (a row name no catalogue entry has)
PREFIX = "(variations_"
#: the most variations in one group: a group that is not clean costs its members' rows again, and the fewer
#: members, the fewer pairs that could interact
MAX_MEMBERS = 8
#: the most pitfalls in one group (each of another component: the classic track has four that touch no other's
#: tests, attention, masks, ffn and position)
MAX_PITFALLS = 4
#: the prefix of a pitfall group's name
PITFALL_PREFIX = "(pitfalls_"


def is_group(item) -> bool:
    return isinstance(item, Pitfall) and item.name.startswith((PREFIX, PITFALL_PREFIX))


def group(variations: list[Variation], fits: Callable[[Variation], bool]) -> tuple[list[Variation], dict[str, list[Variation]]]:
    """``variations`` packed greedily, in catalogue order, into groups whose patches ``fits`` can write:
    (the rows to grade: each group of two or more as one combined :class:`Variation`, a lone variation as
    itself; group name -> its members)."""
    return _pack(variations, MAX_MEMBERS, PREFIX,
                 lambda v, pack: _apart(v, pack) and fits(_combined("(trial)", [*pack, v])))


def _pack(items: list[Pitfall], most: int, prefix: str,
          joins: Callable[[Pitfall, list[Pitfall]], bool]) -> tuple[list[Pitfall], dict[str, list[Pitfall]]]:
    """``items`` packed greedily, in order: each into the first pack of fewer than ``most`` that it ``joins``, else
    a pack of its own. Returns (the rows to grade: each pack of two or more as one combined item named
    ``prefix`` + its number, a lone item as itself; pack name -> its members)."""
    packs: list[list[Pitfall]] = []
    for item in items:
        for pack in packs:
            if len(pack) < most and joins(item, pack):
                pack.append(item)
                break
        else:
            packs.append([item])
    rows, members = [], {}
    for i, pack in enumerate(packs, 1):
        if len(pack) == 1:
            rows.append(pack[0])
            continue
        g = _combined(f"{prefix}{i})", pack)
        rows.append(g)
        members[g.name] = pack
    return rows, members


def _apart(v: Variation, pack: list[Variation]) -> bool:
    """Whether ``v`` rewrites other files than ``pack`` does, patches they all share (the plain-generate one) aside."""
    shared = set(v.patches).intersection(*(set(o.patches) for o in pack))
    files = lambda vs: {p[0] for o in vs for p in o.patches if p not in shared}  # noqa: E731
    return not files([v]) & files(pack)


def _combined(name: str, pack: list[Pitfall]) -> Pitfall:
    patches: list = []
    for v in pack:
        patches += [p for p in v.patches if p not in patches]
    return type(pack[0])(name, pack[0].component, "; ".join(v.name for v in pack), tuple(patches))


def affects(placeholder_rows: dict[str, list]) -> Callable[[str], frozenset[str] | None]:
    """What a mistake in a component can change: ``placeholder_rows`` maps each component to its placeholders'
    matrix rows (``tools.mutants.Row``: the components whose tests failed); the answer is those components
    with the composition's (:func:`affected_by`), or None for a component without a graded placeholder."""
    def of(component: str) -> frozenset[str] | None:
        rows = placeholder_rows.get(component)
        if not rows or any(r.error for r in rows):
            return None
        return frozenset(affected_by(component)).union(*(r.failed for r in rows))
    return of


def group_pitfalls(pitfalls: list[Pitfall], fits: Callable[[Pitfall], bool],
                   reach: Callable[[str], frozenset[str] | None],
                   together: Callable[[Pitfall], object] = lambda p: None) -> tuple[list[Pitfall], dict[str, list[Pitfall]]]:
    """``pitfalls`` packed greedily, in catalogue order, into groups of at most :data:`MAX_PITFALLS` whose
    components cannot change one another's tests (``reach``: :func:`affects`; a component it does not know
    stays alone), whose patches rewrite different files and ``fits`` can write, and whose ``together`` key is
    equal (the class settings they need). Returns (the rows to grade, group name -> its members)."""
    return _pack(pitfalls, MAX_PITFALLS, PITFALL_PREFIX, lambda p, pack: (
        all(_unrelated(p.component, q.component, reach) for q in pack) and together(p) == together(pack[0])
        and _apart(p, pack) and fits(_combined("(trial)", [*pack, p]))))


def tests_by_function(records: list) -> dict[str, set[str]]:
    """Each test function of the suite (its node id without parameters) -> the components of its tests, read
    from ``records`` (class-grader records of whole-suite runs: the placeholders')."""
    table: dict[str, set[str]] = {}
    for record in records:
        for t in getattr(record, "tests", None) or ():
            if t.get("tags"):
                table.setdefault(nodeid_of(t).split("[")[0], set()).add(t["tags"][0])
    return table


def reach_tests(components: list[str], reach: Callable[[str], frozenset[str] | None],
                table: dict[str, set[str]], named: set[str] = frozenset()) -> tuple[str, ...] | None:
    """The test functions a row whose mistakes lie in ``components`` must run: those with a test of a
    component any of them can change (every test of its own components among them); None (the whole
    suite) when a component's reach is not known. The other tests run only code the row leaves as the
    reference's, so they pass as on the reference. ``named``: test functions every such run includes (the
    rubric's, which it checks against the tests collected from their files)."""
    within: set[str] = set()
    for c in components:
        r = reach(c)
        if r is None:
            return None
        within |= r
    chosen = {f for f, cs in table.items() if cs & within}
    return tuple(sorted(chosen | set(named))) if chosen else None


def _unrelated(a: str, b: str, reach: Callable[[str], frozenset[str] | None]) -> bool:
    ra, rb = reach(a), reach(b)
    return a != b and ra is not None and rb is not None and b not in ra and a not in rb


def writable(write: Callable[[Variation, Path], None]) -> Callable[[Variation], bool]:
    """A ``fits`` for :func:`group`: whether ``write(item, folder)`` (the matrix's ``write_row``) writes it."""
    def fits(item: Variation) -> bool:
        with tempfile.TemporaryDirectory(prefix="mutants-fit-") as tmp:
            try:
                write(item, Path(tmp))
            except PatchError:
                return False
            return True
    return fits


def spread(row, pack: list[Pitfall]) -> list | None:
    """The rows of ``pack``'s members from their group's ``row`` (a ``tools.mutants.Row``), or None when the
    group must be graded again one member at a time: a group of variations that is not clean; a group of
    pitfalls with an error, a status other than ``ok``, a grade that differs from pytest's, an unreadable
    message, or a member whose own component no test of which failed."""
    if isinstance(pack[0], Variation):
        if row.verdict != "clean":
            return None
        return [dataclasses.replace(row, name=v.name, component=v.component, seconds=row.seconds / len(pack),
                                    group=row.name) for v in pack]
    if row.error or row.status != "ok" or not row.same_as_pytest or row.unreadable \
            or any(p.component not in row.failed for p in pack):
        return None
    return [dataclasses.replace(row, name=p.name, component=p.component, seconds=row.seconds / len(pack),
                                failed={p.component: row.failed[p.component]}, group=row.name) for p in pack]
