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
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable
from pathlib import Path

from transformer_spec.catalogue.patching import PatchError
from transformer_spec.catalogue.variations import Variation

#: the prefix of a group's name (a row name no catalogue entry has)
PREFIX = "(variations_"
#: the most variations in one group: a group that is not clean costs its members' rows again, and the fewer
#: members, the fewer pairs that could interact
MAX_MEMBERS = 8


def is_group(item) -> bool:
    return isinstance(item, Variation) and item.name.startswith(PREFIX)


def group(variations: list[Variation], fits: Callable[[Variation], bool]) -> tuple[list[Variation], dict[str, list[Variation]]]:
    """``variations`` packed greedily, in catalogue order, into groups whose patches ``fits`` can write:
    (the rows to grade: each group of two or more as one combined :class:`Variation`, a lone variation as
    itself; group name -> its members)."""
    packs: list[list[Variation]] = []
    for v in variations:
        for pack in packs:
            if len(pack) < MAX_MEMBERS and _apart(v, pack) and fits(_combined("(trial)", [*pack, v])):
                pack.append(v)
                break
        else:
            packs.append([v])
    rows, members = [], {}
    for i, pack in enumerate(packs, 1):
        if len(pack) == 1:
            rows.append(pack[0])
            continue
        g = _combined(f"{PREFIX}{i})", pack)
        rows.append(g)
        members[g.name] = pack
    return rows, members


def _apart(v: Variation, pack: list[Variation]) -> bool:
    """Whether ``v`` rewrites other files than ``pack`` does, patches they all share (the plain-generate one) aside."""
    shared = set(v.patches).intersection(*(set(o.patches) for o in pack))
    files = lambda vs: {p[0] for o in vs for p in o.patches if p not in shared}  # noqa: E731
    return not files([v]) & files(pack)


def _combined(name: str, pack: list[Variation]) -> Variation:
    patches: list = []
    for v in pack:
        patches += [p for p in v.patches if p not in patches]
    return Variation(name, pack[0].component, "; ".join(v.name for v in pack), tuple(patches))


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


def spread(row, pack: list[Variation]) -> list:
    """The rows of ``pack``'s members from their clean group's ``row`` (a ``tools.mutants.Row``)."""
    return [dataclasses.replace(row, name=v.name, component=v.component, seconds=row.seconds / len(pack),
                                group=row.name) for v in pack]
