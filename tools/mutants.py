"""The kill matrix: grade every pitfall of the catalogue and every allowed variation through the class grader.

    python -m tools.mutants                     # the classic rows, 2 in parallel; exit 1 on a gap
    python -m tools.mutants --track modern      # the modern track's rows (the Llama-style decoder)
    python -m tools.mutants --track modern --every  # also the rows a default run leaves out
    python -m tools.mutants --only no_scaling tanh_gelu --show-tests
    python -m tools.mutants --only handwritten_softmax generate_under_no_grad   # variations too
    python -m tools.mutants --json kill_matrix.json
    python -m tools.mutants --diagnose-accuracy # how often diagnose.py names each pitfall
    python -m tools.mutants --diagnose-accuracy --profile cs336   # the same, through the course's API

Each pitfall of :mod:`transformer_spec.catalogue.pitfalls` is applied to a fresh copy of ``reference/``,
and every row is graded as one class by the class grader (``tools.grade``: a sandboxed pytest
child per row running ``spec_tests properties`` with hypothesis profile ``grading``, what a student
is graded with: derandomised examples and a bounded shrink, one torch thread; then the hidden
re-checks; ``--hypothesis-profile mutation`` runs it without shrinking). The failing
tests the child's pytest reports, grouped by their component, make one row of the matrix. Every
row is honest code, so its class grade must be exactly that pytest report, with status ``ok``: a
row whose hidden re-check costs a test, or that is called ``tampering``, is a ``GRADER DIFFERS``
(issue 25: the path instructors use gives honest code what pytest gives it). The unpatched reference
runs too, and so does an independently written correct implementation (``tests/independent/``,
written from the contract alone in another style): a test that fails it over-specifies (one that
uses a name it does not define yet is listed as not covered instead). So does every allowed
variation of :mod:`transformer_spec.catalogue.variations` (the reference rewritten in a way the contract leaves
free: a tied head through ``F.linear``, a hand-written LayerNorm, ...): a row that must be clean. The
variations are graded in groups that rewrite different files (``tools/mutants_groups.py``; ``--no-groups``:
one row each); a group that is not clean is graded again one variation at a time. With ``--placeholders``
the pitfalls are graded in groups too, of components that cannot change one another's tests (the contract's
composition and what each placeholder broke, graded first); a group in which a member is not killed in its
own component, or anything else is amiss, is graded again one pitfall at a time.

Exit status 1 if the reference, the independent implementation or a variation fails any test, if a pitfall
survives (no test fails), if a pitfall is killed only outside its own component (the grade
would blame the wrong part), if the class grade of any row differs from its pytest report, or if
a failure message is one a student cannot read (issue 27: it holds one of hypothesis's own errors,
or a property that failed does not show its smallest failing example).
No early stop: every run goes to the end, so the matrix shows every component that notices.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

from hypothesis import Phase, settings
from transformer_spec.catalogue import of_profile as catalogue_of
from transformer_spec.contract.registry import Pitfall

from tools import mutants_groups
from tools.mutants_rows import CORRECT, INDEPENDENT, REFERENCE, Row, row_of, unreadable  # noqa: F401 (the matrix's API)
from tools.mutants_table import format_matrix, matrix_json, print_row
from transformer_spec import layout, profiles
from transformer_spec.catalogue import placeholders
from transformer_spec.catalogue.patching import write_patched_reference
from transformer_spec.catalogue.variations import BY_NAME as VARIATIONS_BY_NAME
from transformer_spec.catalogue.variations import CATALOGUE as VARIATIONS
from transformer_spec.catalogue.variations import Variation
from transformer_spec.contract import registry, tracks
from transformer_spec.grader.batch import grade_class
from transformer_spec.grader.settings import DEFAULT_TESTS, Limits, Settings
from transformer_spec.scoring import rubric
from transformer_spec.pytest_plugin.hypothesis_profiles import GRADING_PROFILE, NO_SHRINK_PROFILE, PROFILES
from .cli import Parser, run_main

PROFILE = GRADING_PROFILE


def grader_settings(profile: str = PROFILE, track: str = tracks.DEFAULT, course: str = profiles.DEFAULT,
                    optional: bool = False, tests: tuple[str, ...] | None = None) -> Settings:
    """How the kill matrix grades a row: as ``tools.grade`` grades a student (sandbox, limits, hidden
    re-checks, the ``grading`` hypothesis profile, the track's tests and rubric, the course profile),
    with one torch thread and no named diagnosis. ``optional``: the contract's rubric gives the optional
    components points (a course profile's rubric is its own)."""
    whole = rubric.with_optional_text(track) if course == profiles.DEFAULT and optional else None
    return Settings(list(tests or DEFAULT_TESTS), whole, Limits(threads=1), hypothesis_profile=profile,
                    diagnose=False, track=track, profile=course)


def optional(item: Pitfall | Variation | str) -> bool:
    """Whether ``item`` is a row of an optional component (the modern track's training utilities)."""
    return not isinstance(item, str) and registry.get(item.component).optional


def rows_of_track(track: str, course: str = profiles.DEFAULT, every: bool = False) -> tuple[list[Variation], list[Pitfall]]:
    """The allowed variations and pitfalls of ``track``'s kill matrix: those of the components whose home it
    is (:func:`transformer_spec.contract.tracks.home`), and the course profile's own catalogue. Unless ``every``, for
    CI's budget: under the contract's names no optional component's rows (the track's rubric gives them no
    points; the cs336 matrix, whose rubric does, grades each with the same laws), and under a course profile
    none of the pitfalls its catalogue lists as ones it cannot see (``UNSEEN``; ``every`` checks the list)."""
    unseen = getattr(cat := _catalogue(course), "UNSEEN", {})
    keep = lambda r: every or (not optional(r) if course == profiles.DEFAULT else r.name not in unseen)  # noqa: E731
    return ([v for v in VARIATIONS if tracks.home(v.component) == track and keep(v)] + list(getattr(cat, "VARIATIONS", ())),
            [p for p in registry.pitfalls() if tracks.home(p.component) == track and keep(p)]
            + list(getattr(cat, "PITFALLS", ())))


def _catalogue(course: str):
    """The course profile's kill-matrix catalogue module (None for the contract's own names)."""
    return catalogue_of(profiles.get(course))


def write_row(item: Pitfall | Variation | str, folder: Path, track: str = tracks.DEFAULT,
              course: str = profiles.DEFAULT) -> None:
    """``item`` as a student's folder ``folder/<its name>``: a patched copy of the reference, or a
    correct implementation (the independent one of ``track``); under a course profile, a repository
    of the course (its catalogue's ``write_repository``)."""
    name = item if isinstance(item, str) else item.name
    dest = folder / name
    catalogue = _catalogue(course)
    if catalogue is not None:
        independent = layout.ROOT / tracks.get(track).independent if name == INDEPENDENT else None
        catalogue.write_repository(dest, f"mutant_{_folder(name)}", () if isinstance(item, str) else item.patches,
                                   independent)
    elif name == INDEPENDENT:
        dest.mkdir(parents=True)
        independent = layout.ROOT / tracks.get(track).independent
        shutil.copyfile(independent, dest / independent.name)
    else:
        write_patched_reference(dest, [] if name == REFERENCE else item.patches, f"mutant_{_folder(name)}")


def _folder(name: str) -> str:
    return name.strip("()")


def _graded(items: list, profile: str, track: str, course: str, jobs: int,
            tests: tuple[str, ...] | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="mutants-") as tmp:
        (folder := Path(tmp) / "class").mkdir()
        for item in items:
            write_row(item, folder, track, course)
        how = grader_settings(profile, track, course, optional=any(optional(item) for item in items),
                              tests=tests)
        return dict(grade_class(folder, Path(tmp) / "grades", how, jobs=jobs, progress=False, class_report=False))


def _rubric_tests(profile: str, track: str, course: str) -> set[str]:
    """The test functions the rubric names (its per-test points, drops and hidden tests): a run of part of the
    suite includes them, as the rubric is checked against the tests collected from each file."""
    named = set()
    for opt in (False, True):
        r = grader_settings(profile, track, course, optional=opt).rubric_object()
        named |= {k.split("[")[0] for k in [*r.tests, *r.drop, *r.hidden] if "::" in k}
    return named


def run_all(pitfalls: list[Pitfall | Variation], jobs: int = 2, progress=None, profile: str = PROFILE,
            track: str = tracks.DEFAULT, course: str = profiles.DEFAULT, placeholder_rows=(),
            grouped: bool = True) -> list[Row]:
    """Grade the correct implementations and each pitfall or variation of ``pitfalls`` as one class of
    ``track`` through ``tools.grade`` (``jobs`` students at a time), under the course profile ``course``;
    the variations in groups unless not ``grouped`` (tools/mutants_groups.py: a group that is not clean is
    graded again one member at a time), and with ``placeholder_rows`` the pitfalls too, in groups of
    components that cannot change one another's tests (each graded again alone unless every member is
    killed in its own component). ``placeholder_rows`` (each row's ``kept``) are graded first, a class of
    their own under ``no-shrink`` if ``profile`` shrinks: their verdict is each test's pass or fail, which
    shrinking does not change, and shrinking the properties a placeholder fails made each cost 2.5 rows;
    what each breaks keeps the pitfall groups apart, and a pitfall row runs only the tests of the components
    its mistakes can change (the others run only the reference's code), each set of tests a class of its own.
    The rows: the correct implementations, then ``pitfalls`` in their order, then the placeholders."""
    records = {}
    if placeholder_rows:
        shrinks = Phase.shrink in settings.get_profile(profile).phases
        records.update(_graded(placeholder_rows, NO_SHRINK_PROFILE if shrinks else profile, track, course, jobs))
    unseen = getattr(_catalogue(course), "UNSEEN", {})
    variations = [p for p in pitfalls if isinstance(p, Variation)]
    mistakes = [p for p in pitfalls if not isinstance(p, Variation)]
    fits = mutants_groups.writable(lambda item, folder: write_row(item, folder, track, course))
    graded, members = mutants_groups.group(variations, fits) if grouped else (variations, {})
    to_grade = {None: [*CORRECT, *graded]}  # the tests a row runs (None: the whole suite) -> its rows

    def grade_each_set(by_tests: dict) -> None:  # each set of tests a class of its own
        for tests, items in by_tests.items():
            records.update(_graded(items, profile, track, course, jobs, tests))
    tests_of = lambda item: None  # noqa: E731
    if grouped and placeholder_rows:
        shown: dict[str, list[Row]] = {}
        for item in placeholder_rows:
            shown.setdefault(item.component, []).append(row_of(item, records.get(item.name)))
        reach = mutants_groups.affects(shown)
        table = mutants_groups.tests_by_function([records.get(p.name) for p in placeholder_rows])
        alone = lambda p: p.name in unseen  # noqa: E731 (a pitfall its course cannot see must survive: graded alone)
        groups, more = mutants_groups.group_pitfalls([p for p in mistakes if not alone(p)], fits, reach,
                                                     together=optional)
        members.update(more)
        mistakes = groups + [p for p in mistakes if alone(p)]
        named = _rubric_tests(profile, track, course)
        tests_of = lambda item: mutants_groups.reach_tests(  # noqa: E731
            [m.component for m in members.get(item.name, [item])], reach, table, named)
    for item in mistakes:
        to_grade.setdefault(tests_of(item), []).append(item)
    grade_each_set(to_grade)
    spread, again = {}, []
    for item in [*graded, *mistakes]:
        if item.name in members:
            shared = mutants_groups.spread(row_of(item, records.get(item.name)), members[item.name])
            if shared is None:
                again += members[item.name]
            else:
                spread.update((r.name, r) for r in shared)
    regrade: dict = {}
    for item in again:
        regrade.setdefault(tests_of(item), []).append(item)
    grade_each_set(regrade)
    rows = []
    for item in [*CORRECT, *pitfalls, *placeholder_rows]:
        name = item if isinstance(item, str) else item.name
        rows.append(spread.get(name) or row_of(item, records.get(name)))
        if not isinstance(item, str) and not rows[-1].must_pass:
            rows[-1].unseen = unseen.get(item.name, "")
        if item in placeholder_rows and records.get(item.name) is not None:
            rows[-1].kept = placeholders.kept(records[item.name].tests, item.component)
        if progress:
            progress(rows[-1])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m tools.mutants", description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", "-j", type=int, default=2, help="rows graded in parallel (default 2)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these pitfalls or variations")
    parser.add_argument("--show-tests", action="store_true",
                        help="list every failing test of each pitfall (default: up to 3 of its own component)")
    parser.add_argument("--json", metavar="PATH", help="also write the matrix as JSON")
    parser.add_argument("--hypothesis-profile", default=PROFILE, choices=PROFILES,
                        help=f"the hypothesis profile of every row (default {PROFILE!r}, what a student is graded with)")
    parser.add_argument("--profile", default=profiles.DEFAULT, choices=profiles.names(),
                        help="the course profile: each row a repository of that course, graded through its adapter "
                             "(its track's rows and the profile's own catalogue); it implies its track")
    parser.add_argument("--track", choices=tracks.names(), default=tracks.DEFAULT,
                        help=f"the track whose rows are graded (default {tracks.DEFAULT}): the pitfalls and variations of "
                             "its components, its reference and independent implementation, its tests and rubric")
    parser.add_argument("--every", action="store_true",
                        help="also grade the rows a default run leaves out: the optional components' (the training "
                             "utilities) under the contract's names, the pitfalls a course profile lists as unseen")
    parser.add_argument("--placeholders", action="store_true",
                        help="also grade a placeholder of each graded component (its output replaced by zeros; with "
                             "--every also by its input and by ones) and report the share of its component's points "
                             f"each keeps: more than {round(placeholders.MAX_KEPT * 100)}%% fails the run")
    parser.add_argument("--no-groups", action="store_true",
                        help="grade each allowed variation and each pitfall in a row of its own (default: variations in "
                             "groups whose patches apply together, a group that is not clean graded again one "
                             "variation at a time; with --placeholders, pitfalls in groups of components that cannot "
                             "change one another's tests, graded again alone unless each is killed in its own, each "
                             "row on the tests of the components it can change)")
    parser.add_argument("--list", action="store_true", help="list the pitfalls and the variations, and exit")
    parser.add_argument("--diagnose-accuracy", action="store_true",
                        help="measure how often transformer_spec.diagnosis.diagnose names each pitfall (with --profile: "
                             "through that course's API), and exit")
    args = parser.parse_args(argv)
    course = profiles.get(args.profile)
    if course.track and args.track not in (tracks.DEFAULT, course.track):
        parser.error(f"--profile {course.name} grades the {course.track} track; leave out --track {args.track}")
    args.track = course.track or args.track

    track_variations, pitfalls = rows_of_track(args.track, course.name, every=args.every)
    placeholder_rows = placeholders.rows(placeholders.components_of(args.track, course.name, args.every), args.every)
    by_name = {p.name: p for p in [*registry.pitfalls(), *pitfalls, *track_variations,
                                   *placeholders.rows(placeholders.components_of(args.track, course.name, True), True)]}
    if args.list:
        for p in pitfalls:
            print(f"pitfall    {p.component:<10} {p.name:<40} {p.explanation}")
        for v in track_variations:
            print(f"variation  {v.component:<10} {v.name:<40} {v.explanation}")
        for p in placeholder_rows:
            print(f"placeholder {p.component:<9} {p.name:<40} {p.explanation}")
        return 0
    if args.diagnose_accuracy:
        from transformer_spec.diagnosis import accuracy

        return accuracy.main([] if course.name == profiles.DEFAULT else ["--profile", course.name])
    if args.only:
        unknown = [n for n in args.only if n not in by_name and n not in VARIATIONS_BY_NAME]
        if unknown:
            parser.error(f"unknown pitfall(s) or variation(s): {', '.join(unknown)}; see --list")
        chosen = [by_name.get(n) or VARIATIONS_BY_NAME[n] for n in args.only]
        rows_to_run = [c for c in chosen if isinstance(c, Variation)] + [c for c in chosen if not isinstance(c, Variation)]
    else:
        rows_to_run = [*track_variations, *pitfalls]
    if args.only:  # placeholders named in --only are graded as placeholders
        placeholder_rows = [c for c in rows_to_run if c.name.startswith(placeholders.PREFIX)]
        rows_to_run = [c for c in rows_to_run if c not in placeholder_rows]
    elif not args.placeholders:
        placeholder_rows = []
    n_variations = sum(isinstance(r, Variation) for r in rows_to_run)
    n_pitfalls = len(rows_to_run) - n_variations

    print(f"the {args.track} track: grading the reference, the independent implementation, {n_variations} allowed "
          f"variations, {n_pitfalls} pitfalls and {len(placeholder_rows)} placeholders, {args.jobs} at a time (hypothesis profile {args.hypothesis_profile!r}"
          + (f", course profile {course.name}" if course.name != profiles.DEFAULT else "") + ")",
          flush=True)
    start = time.monotonic()
    rows = run_all(rows_to_run, jobs=max(1, args.jobs), progress=print_row, profile=args.hypothesis_profile,
                   track=args.track, course=course.name, placeholder_rows=placeholder_rows, grouped=not args.no_groups)
    elapsed = time.monotonic() - start

    print()
    for line in format_matrix(rows, args.track):
        print(line)
    print()
    for r in rows:
        if r.must_pass:
            if r.failed:  # correct code that loses points: every failing test, whatever --show-tests says
                print(f"{r.name} (must be clean): " + "; ".join(t for c in registry.names() for t in r.failed.get(c, [])))
            continue
        tests = [t for c in registry.names() for t in r.failed.get(c, [])] if args.show_tests else \
            r.failed.get(r.component, [])[:3]
        if tests:
            print(f"{r.name}: " + "; ".join(tests) + (" ..." if not args.show_tests and
                                                     len(r.failed.get(r.component, [])) > 3 else ""))
    for r in rows:
        if r.uncovered:
            print(f"{r.name}: {len(r.uncovered)} test(s) use names it does not define (not checked for "
                  f"over-specification there), e.g. {r.uncovered[0]}")
    bad = [r for r in rows if not r.ok]
    killed = sum(1 for r in rows if not r.must_pass and r.verdict == "killed")
    unseen = [r for r in rows if r.verdict == "unseen"]
    clean = sum(1 for r in rows if r.must_pass and r.component is not None and r.verdict == "clean")
    same = sum(1 for r in rows if r.same_as_pytest and not r.error)
    for r in rows:
        if r.differs or not r.same_as_pytest:
            print(f"{r.name}: class grade differs from its pytest report (status {r.status}): " + "; ".join(r.differs[:3]))
    for r in rows:
        if r.unreadable:
            print(f"{r.name}: {len(r.unreadable)} failure message(s) a student cannot read: " + "; ".join(r.unreadable[:3]))
    readable = sum(1 for r in rows if not r.unreadable)
    print()
    print(f"class grade equal to the child's pytest report, with status ok, for {same} / {len(rows)} rows")
    print(f"every failure message readable (no hypothesis error; each failing property shows its smallest "
          f"example) for {readable} / {len(rows)} rows")
    if unseen:
        print(f"{len(unseen)} pitfall(s) the course profile cannot see (its catalogue's UNSEEN): "
              + "; ".join(f"{r.name} (needs {r.unseen})" for r in unseen))
    shown = [r for r in rows if r.kept is not None]
    if shown:
        print(placeholders.summary([(r.name, r.kept) for r in shown]))
    killed -= sum(1 for r in shown if r.verdict == "killed")
    print(f"{killed} / {n_pitfalls - len(unseen)} pitfalls killed inside their own component; "
          f"{clean} / {n_variations} allowed variations clean; "
          f"reference: {rows[0].verdict}; independent implementation: {rows[1].verdict}; "
          f"{elapsed:.0f} s wall time ({args.jobs} jobs)")
    if args.json:
        Path(args.json).write_text(matrix_json(rows, elapsed, args.jobs, args.track, course.name))
    for r in bad:
        print(f"FAIL: {r.name}: {r.verdict}" + (f" ({r.error})" if r.error else ""), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    run_main(main)
