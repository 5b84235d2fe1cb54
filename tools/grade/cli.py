"""The command line: ``python -m tools.grade SUBMISSIONS_DIR --out OUT_DIR ...``,
``python -m tools.grade merge OUT_DIR ... --out MERGED_DIR`` and
``python -m tools.grade single SUBMISSION --results-json FILE``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from transformer_spec.grader import slurm
from transformer_spec.grader.batch import grade_class, merge
from transformer_spec.grader.settings import GradeError
from transformer_spec.grader.single import grade_single
from transformer_spec.grader.text import one_line
from transformer_spec.results.results_file import component_rows, format_points, table_lines

from ..cli import Parser, ToolError, check_target, closest
from ..grading_options import add_settings_arguments, sandbox_line, settings_arguments, settings_of


SUBCOMMANDS = ("single", "merge")  # the first word that is not a class folder


def _shard(text: str) -> tuple[int, int]:
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard takes K/N (e.g. 2/8), got {text!r}") from None
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"--shard K/N needs 1 <= K <= N, got {text!r}")
    return k, n


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
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
    cluster = p.add_argument_group("on a Slurm cluster (docs/class_grading.md)")
    cluster.add_argument("--slurm", action="store_true",
                         help="grade through a Slurm job array (a shard a task) and merge into --out; with --resume, "
                              "re-attach to the jobs of --out")
    cluster.add_argument("--slurm-tasks", type=_positive, default=4, metavar="N", help="the array's width (default 4)")
    cluster.add_argument("--slurm-partition", default=None, metavar="NAME", help="the partition (default: the cluster's)")
    cluster.add_argument("--slurm-time", default=None, metavar="TIME",
                         help="sbatch --time per task (default: every submission of a shard at its --wall)")
    cluster.add_argument("--slurm-mem", default="4G", metavar="SIZE", help="sbatch --mem per task (default 4G)")
    cluster.add_argument("--slurm-arg", action="append", default=[], metavar="ARG",
                         help="one more sbatch argument, e.g. --slurm-arg=--account=cs336 (repeat for more)")
    cluster.add_argument("--slurm-template", type=Path, default=None, metavar="FILE",
                         help="the task's script, with $OPTIONS (the #SBATCH lines) and $COMMAND (e.g. to load a module)")
    return p


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"takes a whole number >= 1, got {text!r}")
    return int(text)


def build_single_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="python -m tools.grade single",
        description="Grade one submission as the class grader grades a student (its own process, limits, "
                    "hidden re-checks) and write Gradescope's results.json.")
    p.add_argument("submission", type=Path, help="the submission: a .py file, a notebook (.ipynb), a package folder, or a folder holding one")
    p.add_argument("--results-json", type=Path, required=True, metavar="FILE", help="where to write results.json")
    add_settings_arguments(p, coverage=False)
    return p


def build_merge_parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m tools.grade merge",
                                description="Combine the outputs of several shards into one gradebook.")
    p.add_argument("outs", type=Path, nargs="+", help="output folders of `python -m tools.grade ... --shard K/N`")
    p.add_argument("--out", type=Path, required=True, help="the merged output folder (new or empty)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["merge"]:
            args = build_merge_parser().parse_args(argv[1:])
            check_target(args.out, "--out", folder=True)
            records = merge(args.outs, args.out)
            print(f"merged {len(records)} students into {one_line(str(args.out / 'gradebook.csv'))}")
            return 0
        if argv[:1] == ["single"]:
            args = build_single_parser().parse_args(argv[1:])
            check_target(args.results_json, "--results-json", folder=False)
            settings = settings_of(args)
            record = grade_single(args.submission, args.results_json, settings, progress=not args.no_progress)
            for line in table_lines(component_rows(record.tests)) if record.tests else ():
                print(line)
            print(f"{record.student}: {record.status}, {format_points(record.total)} / "
                  f"{format_points(record.possible)}" + (f" ({one_line(record.detail)})" if record.detail else ""))
            print(f"results.json: {one_line(str(args.results_json))}")
            print(sandbox_line(settings))
            return 0
        parser = build_parser()
        if argv and not argv[0].startswith("-") and not Path(argv[0]).exists():
            close = closest(argv[0], SUBCOMMANDS)
            if close:  # a misspelt subcommand, not a class folder
                parser.error(f"{argv[0]}: no such folder; did you mean the subcommand {close!r}?")
        args = parser.parse_args(argv)
        settings = settings_of(args)
        check_target(args.out, "--out", folder=True)  # nothing written before the grading starts
        start = time.monotonic()
        if args.slurm:
            records = _on_slurm(args, settings)
        else:
            records = grade_class(args.submissions, args.out, settings, jobs=args.jobs, resume=args.resume,
                                  shard=args.shard, progress=not args.no_progress)
    except (GradeError, ToolError) as exc:
        print(f"python -m tools.grade: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # what was saved is kept (every file is written whole)
        if "--slurm" not in argv:  # the Slurm waiter said what keeps running
            print("\ninterrupted: run the same command with --resume to go on", file=sys.stderr)
        return 130
    counts: dict[str, int] = {}
    for r in records.values():
        counts[r.status] = counts.get(r.status, 0) + 1
    minutes = (time.monotonic() - start) / 60
    kept = getattr(records, "kept", 0)  # --resume on one machine: the students graded before, not again
    print(f"graded {len(records) - kept} submission(s) in {minutes:.1f} min"
          + (f", kept {kept} graded before (--resume)" if kept else "") + ": "
          + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    print(f"gradebook: {one_line(str(args.out / 'gradebook.csv'))}")
    print(sandbox_line(settings) if not args.slurm else "\n".join(slurm.tiers(args.out / slurm.SLURM_DIR)))
    return 0


def _on_slurm(args: argparse.Namespace, settings):
    if args.shard != (1, 1) or args.jobs is not None:
        raise GradeError("--slurm shards the class itself (--slurm-tasks) and grades as many submissions at once "
                         "as a task has cores: leave out --shard and --jobs")
    options = slurm.SlurmOptions(args.slurm_tasks, args.slurm_partition, args.slurm_time, args.slurm_mem,
                                 args.slurm_arg, args.slurm_template)
    return slurm.grade_on_slurm(args.submissions, args.out, settings, settings_arguments(args, coverage=True, rubric=True),
                                options, resume=args.resume, progress=not args.no_progress)
