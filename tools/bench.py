"""Benchmark: ratios against the best alternative, each pair measured side by side.

    python -m tools.bench                      # the full table (a few minutes on 2 cores)
    python -m tools.bench --quick              # smaller sizes, 3 repeats (about a minute)
    python -m tools.bench --only train,generate --repeats 7
    python -m tools.bench --profile train      # where one training step spends its time

Times drift on a shared machine, so the bench never compares a time with one taken earlier:
each row times *its own* pair of workloads in one loop, alternating which goes first, and
reports the median of ``--repeats`` runs of each and their ratio. The rows:

* ``suite``: the graded run of one submission (``pytest spec_tests properties`` with the
  ``grading`` hypothesis profile, in a fresh process) against a bare ``python -c "import torch"``;
  target <= 5x (issue 47; <= 8x for issue 16).
* ``attention``: ``scaled_dot_product_attention`` and ``MultiHeadSelfAttention`` of ``--impl``
  against ``torch.nn.functional.scaled_dot_product_attention`` and ``torch.nn.MultiheadAttention``,
  forward and forward+backward, causal mask, at several lengths (no target; torch's fused kernel
  returns no weights, the contract's function must).
* ``train``: one MiniGPT training step (AdamW, cross-entropy; vocab 65, d_model 128, 4 heads,
  4 layers, d_ff 512, L 128, batch 16) against the same model built from
  ``torch.nn.TransformerEncoderLayer`` (Pre-LN, GELU, causal mask, tied embedding, the same
  parameter count); target <= 1.0x.
* ``generate``: 256 new tokens with ``use_cache=True`` against ``use_cache=False`` (greedy), with
  ``max_len`` = seed + 256 so that the window never slides, once at 1 torch thread (target >= 8x
  faster) and once at 2 (target >= 5x faster), each row setting its own thread count and
  restoring ``--threads``. A last row (``--quick`` skips it) lets the window slide (``max_len``
  128, at ``--threads``), where the cache cannot help.
* ``single``: one correct submission (``--impl``, copied as a student hands it in) graded by
  ``python -m tools.grade single`` (sandbox, limits, re-checks) against ``import torch``; target <= 8x (issue 47).
* ``class``: a class folder of the pitfall catalogue's mistakes and the allowed variations graded by
  ``python -m tools.grade`` with its defaults, as submissions a minute; target >= 4 on an idle
  machine. ``--class-sample K`` grades every K-th member only (the full class takes ~30 min).
* ``xdist`` (only with ``--only ...,xdist``): the graded run with ``pytest -n auto`` against the
  same run in one process.

``--track modern`` measures the modern track instead (sections ``suite``, ``train``, ``generate``):
the graded run with ``--track modern`` against ``import torch`` (target <= 5x); one MiniLlama
training step against the same model from ``nn.RMSNorm`` and ``F.scaled_dot_product_attention``
(:mod:`tools.benchmarks.torch_llama`; target <= 1.1x); MiniLlama's cached generation of 256 tokens
against recomputing the window (target >= 5x faster at 1 and at 2 threads).

The implementations come from ``--impl`` through :mod:`transformer_spec.submission.loader`. This module is the
command line; the measurements are importable functions of :mod:`tools.benchmarks`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

import torch

from transformer_spec.contract import tracks
from transformer_spec.submission.loader import Submission, SubmissionError

from .benchmarks.class_grading import bench_class, bench_single
from .benchmarks.graded_run import bench_suite, bench_xdist
from .benchmarks.timing import Row, format_table
from .benchmarks.workloads import (
    GENERATE_LIMITS,
    GENERATE_LIMITS_LLAMA,
    PROFILE_TARGETS,
    bench_attention,
    bench_generate,
    bench_train,
    bench_train_llama,
    profile,
)
from .cli import Parser, ToolError, add_impl_argument, fail, load_impl, run_main

PROG = "python -m tools.bench"
SECTIONS = ("suite", "single", "class", "attention", "train", "generate", "xdist")
DEFAULT_SECTIONS = ("suite", "single", "class", "attention", "train", "generate")
#: the sections of --track modern (the rows of the Llama-style decoder)
MODERN_SECTIONS = ("suite", "train", "generate")


def run_modern(sections: Sequence[str], impl: Submission, repeats: int,
               say: Callable[[str], None] = lambda _msg: None) -> list[Row]:
    """The modern track's rows of ``sections`` (:data:`MODERN_SECTIONS`) in order."""
    rows: list[Row] = []
    for section in sections:
        say(f"measuring {section} (modern track) ...")
        if section == "suite":
            rows.append(bench_suite(impl.target, repeats, extra=["--track", "modern"], name="modern graded run"))
        elif section == "train":
            rows.append(bench_train_llama(impl, repeats))
        elif section == "generate":
            rows += [bench_generate(impl, repeats, threads=n, model_name="MiniLlama") for n in GENERATE_LIMITS_LLAMA]
        else:
            raise ToolError(f"--only {section!r} with --track modern: choose among {', '.join(MODERN_SECTIONS)}")
    return rows


def run(sections: Sequence[str], impl: Submission, repeats: int, quick: bool,
        lengths: Sequence[int] | None = None, progress: Callable[[str], None] | None = None,
        class_sample: int = 1, track: str = "classic") -> list[Row]:
    """All rows of ``sections`` in order (of the modern track's rows with ``track="modern"``)."""
    say = progress or (lambda _msg: None)
    if track == "modern":
        return run_modern(sections, impl, repeats, say)
    rows: list[Row] = []
    for section in sections:
        say(f"measuring {section} ...")
        if section == "suite":
            rows.append(bench_suite(impl.target, repeats))
        elif section == "single":
            rows.append(bench_single(impl.target, min(repeats, 5)))
        elif section == "class":
            rows.append(bench_class(1, class_sample))
        elif section == "attention":
            rows += bench_attention(impl, lengths or ((64, 256) if quick else (64, 256, 1024)), repeats)
        elif section == "train":
            rows.append(bench_train(impl, repeats))
        elif section == "xdist":
            rows.append(bench_xdist(impl.target, repeats))
        elif section == "generate":
            rows += [bench_generate(impl, repeats, threads=n) for n in GENERATE_LIMITS]
            if not quick:
                rows.append(bench_generate(impl, repeats, max_len=128))
        else:
            raise ToolError(f"--only {section!r}: choose among {', '.join(SECTIONS)}")
    return rows


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog=PROG, description="Measure the graded run, attention, a training step and generation, "
                               "each against the best alternative, side by side in one run.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Each ratio compares medians of --repeats runs timed alternately in one loop.")
    p.add_argument("--quick", action="store_true",
                   help="smaller sizes (attention L=64,256; no sliding-window row) and 3 repeats")
    p.add_argument("--repeats", type=int, default=None, help="runs of each workload (default 7, --quick 3)")
    p.add_argument("--only", default=",".join(DEFAULT_SECTIONS), metavar="SECTIONS",
                   help=f"comma-separated sections among {','.join(SECTIONS)} "
                        f"(default: {','.join(DEFAULT_SECTIONS)}; xdist times the graded run with -n auto)")
    p.add_argument("--class-sample", type=int, default=1, metavar="K",
                   help="the class row grades every K-th pitfall and variation (default 1: all of them)")
    p.add_argument("--lengths", default=None, metavar="L,L,...",
                   help="attention lengths (default 64,256,1024; --quick 64,256)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads for the in-process rows (default 1, as the graded run uses); "
                        "the window-never-slides generate rows set 1 and 2 themselves")
    p.add_argument("--track", choices=tracks.names(), default=tracks.DEFAULT,
                   help="classic (default: MiniGPT's rows) or modern: the modern track's graded run, MiniLlama's "
                        f"training step and cached generation (sections {','.join(MODERN_SECTIONS)})")
    p.add_argument("--profile", choices=PROFILE_TARGETS, default=None,
                   help="print a profile of one workload instead of the table")
    add_impl_argument(p)
    return p


def _parse_ints(text: str, argument: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ToolError(f"{argument} {text!r}: give comma-separated positive integers, e.g. 64,256") from None
    if not values or min(values) < 1:
        raise ToolError(f"{argument} {text!r}: give comma-separated positive integers, e.g. 64,256")
    return values


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.threads < 1:
            raise ToolError(f"--threads must be at least 1, got {args.threads}")
        torch.set_num_threads(args.threads)
        modern = args.track == "modern"
        known = MODERN_SECTIONS if modern else SECTIONS
        only = ",".join(MODERN_SECTIONS) if modern and args.only == ",".join(DEFAULT_SECTIONS) else args.only
        sections = [s.strip() for s in only.split(",") if s.strip()]
        unknown = [s for s in sections if s not in known]
        if unknown or not sections:
            raise ToolError(f"--only {only!r}{' with --track modern' if modern else ''}: "
                            f"choose among {', '.join(known)}")
        if modern and args.profile:
            raise ToolError("--profile profiles the classic track's workloads; leave out --track modern")
        lengths = _parse_ints(args.lengths, "--lengths") if args.lengths else None
        repeats = args.repeats if args.repeats is not None else (3 if args.quick else 7)
        if repeats < 1:
            raise ToolError(f"--repeats must be at least 1, got {repeats}")
        needs = {"train": ("MiniGPT",), "generate": ("MiniGPT",),
                 "attention": ("MultiHeadSelfAttention",)}.get(args.profile, ())
        if modern:
            needs = ("MiniLlama",)
        impl = load_impl(args.impl, *needs)
        if args.profile:
            print(profile(args.profile, impl))
            return 0
        if args.class_sample < 1:
            raise ToolError(f"--class-sample must be at least 1, got {args.class_sample}")
        rows = run(sections, impl, repeats, args.quick, lengths,
                   progress=lambda msg: print(msg, file=sys.stderr, flush=True), class_sample=args.class_sample,
                   track=args.track)
    except (ToolError, SubmissionError) as exc:
        fail(parser, exc)
    print(f"impl: {impl.target} ({args.track} track); torch {torch.__version__}, {args.threads} thread(s); "
          f"median of {repeats} side-by-side runs each")
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    run_main(main)
