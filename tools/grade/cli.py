"""The command line: ``python -m tools.grade SUBMISSIONS_DIR --out OUT_DIR ...``,
``python -m tools.grade merge OUT_DIR ... --out MERGED_DIR`` and
``python -m tools.grade single SUBMISSION --results-json FILE``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from transformer_spec import profiles
from transformer_spec.contract import tracks
from transformer_spec.grader import sandbox
from transformer_spec.grader.batch import grade_class, merge
from transformer_spec.grader.settings import DEFAULT_TESTS, GradeError, Limits, Settings, checked
from transformer_spec.grader.single import grade_single
from transformer_spec.grader.text import one_line
from transformer_spec.results.results_file import format_points


def _shard(text: str) -> tuple[int, int]:
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard takes K/N (e.g. 2/8), got {text!r}") from None
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"--shard K/N needs 1 <= K <= N, got {text!r}")
    return k, n


def profile_name(text: str) -> str:
    """``--profile``: a shipped profile's name, or a profile file (checked now, kept as its absolute path)."""
    try:
        profile = profiles.get(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--profile ")) from None
    return profile.origin or profile.name


def add_settings_arguments(p: argparse.ArgumentParser, coverage: bool = True) -> None:
    """What a grading is run with (the class grader and the single grader share them)."""
    p.add_argument("--rubric", type=Path, default=None,
                   help="rubric TOML (default: the track's, transformer_spec/rubric.toml or rubric_modern.toml)")
    p.add_argument("--track", choices=tracks.names(), default=None,
                   help=f"the track graded (default {tracks.DEFAULT}, or the profile's; modern: the Llama-style decoder, "
                        "docs/contract.md)")
    p.add_argument("--profile", type=profile_name, default=profiles.DEFAULT, metavar="NAME_OR_FILE",
                   help=f"the API the submissions are written to (default {profiles.DEFAULT}: the contract's own names; "
                        "cs336: a Stanford CS336 assignment-1 repository, reached through its tests/adapters.py; "
                        "or a course's own profile, a .py file defining PROFILE; docs/adapters.md); a profile "
                        "implies its track and its rubric")
    if coverage:
        p.add_argument("--coverage", action="store_true",
                       help="HTML coverage of each submission in students/<id>/coverage/")
    p.add_argument("--tests", nargs="+", default=list(DEFAULT_TESTS), metavar="PATH",
                   help="test files or folders of the suite to grade with (default: spec_tests properties)")
    p.add_argument("--time-limit", type=float, default=420.0, help="per submission: start no new test after "
                                                                   "this many seconds (default 420)")
    p.add_argument("--test-timeout", type=float, default=60.0, help="per test, seconds (default 60)")
    p.add_argument("--wall", type=float, default=None, help="per submission, seconds, then the process is killed "
                                                           "(default time-limit + test-timeout + 60)")
    p.add_argument("--memory-mb", type=int, default=4096, help="address-space limit per process (default 4096; 0: none)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per submission (default 1)")
    p.add_argument("--max-output-mb", type=float, default=20.0, help="output a submission may print (default 20)")
    p.add_argument("--no-rechecks", action="store_true", help="trust the child's report (no hidden re-check)")
    p.add_argument("--sandbox", choices=("auto", *sandbox.TIERS[:-1]), default="auto",
                   help="how each child is confined (default auto: the strongest tier that works here; "
                        "see docs/class_grading.md)")
    p.add_argument("--no-sandbox", action="store_true",
                   help="run submissions unconfined, as you (only for code you trust)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tools.grade",
        description="Grade a folder of submissions (one per student), each in its own process; "
                    "`python -m tools.grade merge OUT_DIR... --out DIR` combines shards; "
                    "`python -m tools.grade single SUBMISSION --results-json FILE` grades one.")
    p.add_argument("submissions", type=Path, help="folder with one .py file, notebook (.ipynb), package folder or folder per student")
    p.add_argument("--out", type=Path, required=True, help="output folder (gradebook.csv, students/<id>/...)")
    p.add_argument("--jobs", type=int, default=None, help="submissions graded at once (default: the number of cores)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted grading in --out; finished "
                                                         "students are not graded again")
    p.add_argument("--shard", type=_shard, default=(1, 1), metavar="K/N",
                   help="grade only the K-th of N deterministic slices of the class (1 <= K <= N)")
    add_settings_arguments(p)
    return p


def build_single_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tools.grade single",
        description="Grade one submission as the class grader grades a student (its own process, limits, "
                    "hidden re-checks) and write Gradescope's results.json.")
    p.add_argument("submission", type=Path, help="the submission: a .py file, a notebook (.ipynb), a package folder, or a folder holding one")
    p.add_argument("--results-json", type=Path, required=True, metavar="FILE", help="where to write results.json")
    add_settings_arguments(p, coverage=False)
    return p


def build_merge_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tools.grade merge",
                                description="Combine the outputs of several shards into one gradebook.")
    p.add_argument("outs", type=Path, nargs="+", help="output folders of `python -m tools.grade ... --shard K/N`")
    p.add_argument("--out", type=Path, required=True, help="the merged output folder (new or empty)")
    return p


def settings_of(args: argparse.Namespace, bundle: bool = False) -> Settings:
    """The settings the arguments ask for (:func:`transformer_spec.grader.settings.checked`)."""
    limits = Limits(args.time_limit, args.test_timeout, args.wall, args.memory_mb, args.threads, args.max_output_mb)
    return checked(list(args.tests), args.rubric, limits, coverage=getattr(args, "coverage", False),
                   rechecks=not args.no_rechecks, sandbox="none" if args.no_sandbox else args.sandbox,
                   track=args.track, profile=getattr(args, "profile", None), bundle=bundle)


def sandbox_line(settings: Settings) -> str:
    """The tier the children ran in (and what --no-sandbox loses), for the summary."""
    box = sandbox.choose(settings.sandbox)
    return box.describe() if box.tier != "none" else sandbox.WHAT_NONE_LOSES


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["merge"]:
            args = build_merge_parser().parse_args(argv[1:])
            records = merge(args.outs, args.out)
            print(f"merged {len(records)} students into {one_line(str(args.out / 'gradebook.csv'))}")
            return 0
        if argv[:1] == ["single"]:
            args = build_single_parser().parse_args(argv[1:])
            settings = settings_of(args)
            record = grade_single(args.submission, args.results_json, settings, progress=not args.no_progress)
            print(f"{record.student}: {record.status}, {format_points(record.total)} / "
                  f"{format_points(record.possible)}" + (f" ({one_line(record.detail)})" if record.detail else ""))
            print(f"results.json: {one_line(str(args.results_json))}")
            print(sandbox_line(settings))
            return 0
        args = build_parser().parse_args(argv)
        settings = settings_of(args)
        start = time.monotonic()
        records = grade_class(args.submissions, args.out, settings, jobs=args.jobs, resume=args.resume,
                              shard=args.shard, progress=not args.no_progress)
    except GradeError as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    counts: dict[str, int] = {}
    for r in records.values():
        counts[r.status] = counts.get(r.status, 0) + 1
    minutes = (time.monotonic() - start) / 60
    print(f"graded {len(records)} submissions in {minutes:.1f} min: "
          + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    print(f"gradebook: {one_line(str(args.out / 'gradebook.csv'))}")
    print(sandbox_line(settings))
    return 0
