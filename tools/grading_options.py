"""The options every grading command shares (``tools.grade``, ``tools.grade single``, the platforms'
bundles, GitHub Classroom and the Slurm tasks): what a grading is run with, parsed once into
:class:`~transformer_spec.grader.settings.Settings`, and given back as arguments for a command that
grades elsewhere (a bundle's ``tools.grade single``, a Slurm task's ``tools.grade --shard``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from transformer_spec import profiles
from transformer_spec.contract import tracks
from transformer_spec.grader import sandbox
from transformer_spec.grader.settings import DEFAULT_TESTS, Limits, Settings, checked
from .cli import Parser


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


def settings_arguments(args: argparse.Namespace, *, coverage: bool = False, rubric: bool = False) -> list[str]:
    """The settings of ``args`` that differ from the defaults, as arguments of a command that grades
    elsewhere: ``tools.grade single`` in a platform's bundle (``coverage=False``, ``rubric=False``: the
    bundle carries the rubric's file) or a Slurm task's ``tools.grade --shard`` (both kept; the rubric as an
    absolute path)."""
    defaults = Parser()
    add_settings_arguments(defaults, coverage=coverage)
    default = vars(defaults.parse_args([]))
    out: list[str] = []
    for dest, value in vars(args).items():
        if dest not in default or dest == "no_progress" or value == default[dest]:
            continue
        if dest == "rubric":
            if rubric:
                out += ["--rubric", str(Path(value).resolve())]
            continue
        flag = "--" + dest.replace("_", "-")
        if value is True:
            out.append(flag)
        elif isinstance(value, list):
            out += [flag, *map(str, value)]
        else:
            out += [flag, str(value)]
    return out
