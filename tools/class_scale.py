"""How grading a class scales (:mod:`tools.benchmarks.class_scale`), on a class of CS336 repositories made
from the cs336 profile's catalogue:

    python -m tools.class_scale curve [--sizes 16,64,128]     # one machine: cost a submission, the grader's memory
    python -m tools.class_scale slurm [--size 16] [--tasks 1,2,3]   # one machine vs a running Slurm's tasks

``curve`` gives docs/performance.md's table, ``slurm`` docs/class_grading.md's (it needs a Slurm that runs jobs
here, e.g. ``.ci/slurm-single-node start`` as root, and checks that every gradebook is the one-machine one).
"""

from __future__ import annotations

import argparse
import os

from .benchmarks.class_scale import curve, measure, table
from .cli import Parser, ToolError, fail, run_main

PROG = "python -m tools.class_scale"


def _numbers(text: str, option: str) -> list[int]:
    try:
        values = [int(t) for t in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise ToolError(f"{option} {text!r}: give comma-separated whole numbers >= 1, e.g. 1,2,3")
    return values


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog=PROG, allow_abbrev=False,
                                description="Time a class graded at several sizes, or on one machine and through Slurm.")
    sub = p.add_subparsers(dest="what", required=True, metavar="curve|slurm")
    c = sub.add_parser("curve", allow_abbrev=False, help="one machine, classes of several sizes")
    c.add_argument("--sizes", default="16,64,128", metavar="N,N,...", help="class sizes (default 16,64,128)")
    s = sub.add_parser("slurm", allow_abbrev=False, help="one machine, then Slurm with 1, 2, 3 tasks")
    s.add_argument("--size", default="16", metavar="N", help="submissions in the class (default 16)")
    s.add_argument("--tasks", default="1,2,3", metavar="N,N,...", help="array widths to time (default 1,2,3)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.what == "curve":
            print(curve(_numbers(args.sizes, "--sizes")))
        else:
            runs, _names = measure(_numbers(args.size, "--size")[0], _numbers(args.tasks, "--tasks"))
            print(table(runs, os.cpu_count() or 1))
    except ToolError as exc:
        fail(parser, exc)
    return 0


if __name__ == "__main__":
    run_main(main)
