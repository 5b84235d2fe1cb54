"""How much of a rubric the hidden re-checks cover: the bound on what a report forger can gain.

    python -m tools.twins                    # the classic track
    python -m tools.twins --track modern
    python -m tools.twins --profile cs336

The class grader confirms a claimed pass only where the test has a hidden re-check (its *twin*,
docs/class_grading.md "Threat model"). A forger whose code runs and computes something, and that reports
every anchor as its code really does, keeps the passes it claims for twin-less tests: at most the points of
the twin-less tests its code fails, on top of its honest grade. This prints, for the track's (or the
profile's) default rubric, the graded tests, those with a twin, and their points, per component and in all.
"""

from __future__ import annotations

import contextlib
import io

import pytest

from transformer_spec import layout, profiles
from transformer_spec.contract import registry, tracks
from transformer_spec.scoring import rubric
from .cli import Parser, run_main


def collected(track: str, course: str) -> dict[str, str]:
    """Node id -> component of every graded test of ``track`` under ``course`` (an in-process collection)."""
    found: dict[str, str] = {}

    class Collector:
        def pytest_collection_finish(self, session):
            for item in session.items:
                component = rubric.component_of_item(item)
                if component is not None:
                    found[item.nodeid] = component

    args = ["--collect-only", "-q", "-p", "no:cacheprovider", "--impl", "reference",
            *(["--profile", course] if course != profiles.DEFAULT else ["--track", track]),
            str(layout.ROOT / "spec_tests"), str(layout.ROOT / "properties")]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = pytest.main(args, plugins=[Collector()])
    if code != 0:
        raise SystemExit(f"could not collect the suite's tests:\n{out.getvalue()[-2000:]}")
    return found


def coverage(track: str, course: str = profiles.DEFAULT) -> dict[str, tuple[int, int, float, float]]:
    """Component -> (graded tests, tests with a twin, their points, the component's points), for the default
    rubric of ``track`` (of ``course`` under a profile)."""
    profile = profiles.get(course)
    rb = rubric.load_rubric(profile.rubric, track) if profile.rubric is not None else rubric.load_rubric(track=track)
    graded = {n: c for n, c in collected(track, course).items() if rb.components.get(c, 0) > 0}
    points, _ = rubric.assign_points(rb, graded)
    anchors = {a for r in registry.rechecks() for a in r.anchors}
    out: dict[str, tuple[int, int, float, float]] = {}
    for nodeid, p in points.items():
        n, twins, covered, total = out.get(graded[nodeid], (0, 0, 0.0, 0.0))
        has = nodeid in anchors
        out[graded[nodeid]] = (n + 1, twins + has, covered + (p if has else 0.0), total + p)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m tools.twins", description=__doc__.split("\n\n")[0])
    parser.add_argument("--track", choices=tracks.names(), default=tracks.DEFAULT, help="the track (default classic)")
    parser.add_argument("--profile", choices=profiles.names(), default=profiles.DEFAULT,
                        help="a course profile (it implies its track and rubric)")
    args = parser.parse_args(argv)
    track = profiles.get(args.profile).track or args.track
    table = coverage(track, args.profile)
    print(f"{'component':<15} {'tests':>6} {'twins':>6} {'covered':>8} {'points':>7}")
    for c in registry.names():
        if c in table:
            n, twins, covered, total = table[c]
            print(f"{c:<15} {n:>6} {twins:>6} {covered:>8.2f} {total:>7.2f}")
    n, twins, covered, total = (sum(v[i] for v in table.values()) for i in range(4))
    print(f"{'all':<15} {n:>6} {twins:>6} {covered:>8.2f} {total:>7.2f}")
    print(f"a forger whose code runs keeps its claims of twin-less tests: at most {total - covered:.2f} of "
          f"{total:.0f} points above its honest grade")
    return 0


if __name__ == "__main__":
    run_main(main)
