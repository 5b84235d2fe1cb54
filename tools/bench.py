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
  target <= 8x.
* ``attention``: ``scaled_dot_product_attention`` and ``MultiHeadSelfAttention`` of ``--impl``
  against ``torch.nn.functional.scaled_dot_product_attention`` and ``torch.nn.MultiheadAttention``,
  forward and forward+backward, causal mask, at several lengths (no target; torch's fused kernel
  returns no weights, the contract's function must).
* ``train``: one MiniGPT training step (AdamW, cross-entropy; vocab 65, d_model 128, 4 heads,
  4 layers, d_ff 512, L 128, batch 16) against the same model built from
  ``torch.nn.TransformerEncoderLayer`` (Pre-LN, GELU, causal mask, tied embedding, the same
  parameter count); target <= 1.15x.
* ``generate``: 256 new tokens with ``use_cache=True`` against ``use_cache=False`` (greedy), with
  ``max_len`` = seed + 256 so that the window never slides; target >= 5x faster. A second row
  (``--quick`` skips it) lets the window slide (``max_len`` 128), where the cache cannot help.
* ``xdist`` (only with ``--only ...,xdist``): the graded run with ``pytest -n auto`` against the
  same run in one process.

The implementations come from ``--impl`` through :mod:`transformer_spec.loader`.
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from transformer_spec.loader import Submission, SubmissionError

from ._common import ToolError, add_impl_argument, fail, load_impl

PROG = "python -m tools.bench"
ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ("suite", "attention", "train", "generate", "xdist")
DEFAULT_SECTIONS = ("suite", "attention", "train", "generate")
PROFILE_TARGETS = ("train", "generate", "suite", "attention")
#: seconds each timing of a short kernel lasts at least (it is repeated within the timing)
MIN_TIME = 0.05


# --------------------------------------------------------------------------------------------
# Timing


@dataclass
class Row:
    """One line of the table: ``ours`` against ``baseline`` (median seconds) and their ratio."""

    name: str
    ours: float
    baseline: float
    target: str = ""
    #: ``ratio`` is ours / baseline (a slowdown) unless ``speedup``: then baseline / ours.
    speedup: bool = False
    limit: float | None = None
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.baseline / self.ours if self.speedup else self.ours / self.baseline

    @property
    def met(self) -> str:
        if self.limit is None:
            return ""
        ok = self.ratio >= self.limit if self.speedup else self.ratio <= self.limit
        return "yes" if ok else "NO"


def time_once(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def side_by_side(ours: Callable[[], object], baseline: Callable[[], object], repeats: int,
                 warmup: int = 1, min_time: float = 0.0) -> tuple[float, float]:
    """Median seconds of one call of ``ours`` and of ``baseline``, timed alternately in one loop.

    Even repetitions run ``ours`` first, odd ones ``baseline`` first, so a slow spell of the
    machine (another process starting, a cache gone cold) falls on both about equally. A call
    shorter than ``min_time`` (measured in the warm-up) is repeated within each timing until the
    timing lasts about ``min_time``, so that sub-millisecond kernels are not lost in timer noise.
    """
    if repeats < 1:
        raise ToolError(f"--repeats must be at least 1, got {repeats}")
    number = 1
    for i in range(warmup):
        fastest = min(time_once(ours), time_once(baseline))
        if i == warmup - 1 and min_time > 0:
            number = max(1, math.ceil(min_time / max(fastest, 1e-6)))

    def timed(fn: Callable[[], object]) -> float:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        return (time.perf_counter() - start) / number

    t_ours, t_base = [], []
    for i in range(repeats):
        if i % 2 == 0:
            t_ours.append(timed(ours))
            t_base.append(timed(baseline))
        else:
            t_base.append(timed(baseline))
            t_ours.append(timed(ours))
    return statistics.median(t_ours), statistics.median(t_base)


def format_table(rows: Sequence[Row]) -> str:
    """A Markdown table: what is measured, both medians, the ratio, the target and whether it is met."""
    lines = ["| measurement | ours (median s) | baseline (median s) | ratio | target | met |",
             "|---|---:|---:|---:|---|---|"]
    for r in rows:
        if r.speedup:
            ratio = f"{r.ratio:.2f}x faster" if r.ratio >= 1 else f"{1 / r.ratio:.2f}x slower"
        else:
            ratio = f"{r.ratio:.2f}x"
        lines.append(f"| {r.name} | {r.ours:.4f} | {r.baseline:.4f} | {ratio} | {r.target} | {r.met} |")
    notes = [f"- {r.name}: {r.note}" for r in rows if r.note]
    return "\n".join(lines + ([""] + notes if notes else []))


# --------------------------------------------------------------------------------------------
# (a) the graded run of one submission against a bare torch import


def suite_command(impl_target: str, extra: Sequence[str] = ()) -> list[str]:
    """The graded run: the whole specification, one submission, the ``grading`` profile if it exists."""
    cmd = [sys.executable, "-m", "pytest", "spec_tests", "properties", "--impl", impl_target,
           "-q", "-p", "no:cacheprovider"]
    if grading_profile_exists():
        cmd.append("--hypothesis-profile=grading")
    return cmd + list(extra)


def grading_profile_exists() -> bool:
    try:
        from transformer_spec import hypothesis_profiles
    except ImportError:
        return False
    return "grading" in getattr(hypothesis_profiles, "PROFILES", ())


def _run(cmd: Sequence[str], cwd: Path) -> None:
    # A failing suite still takes real time, but a crash in collection would make the ratio lie.
    proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode not in (0, 1):  # 1 = some tests failed: still a complete graded run
        tail = proc.stdout.strip().splitlines()[-3:]
        raise ToolError(f"`{' '.join(cmd)}` exited with {proc.returncode}: {' / '.join(tail)}")


def bench_xdist(impl_target: str, repeats: int, workers: str = "auto", cwd: Path = ROOT) -> Row:
    """The graded run with pytest-xdist (``-n workers``) against the same run in one process."""
    try:
        import xdist  # noqa: F401
    except ImportError:
        raise ToolError("the xdist row needs pytest-xdist: pip install pytest-xdist") from None
    parallel = suite_command(impl_target, ["-n", workers])
    serial = suite_command(impl_target)
    ours, base = side_by_side(lambda: _run(parallel, cwd), lambda: _run(serial, cwd), repeats, warmup=0)
    row = Row(f"graded run with pytest-xdist `-n {workers}` vs in one process", ours, base, speedup=True)
    if row.ratio < 1:
        row.note = "below 1x: here the workers' start-up (torch, hypothesis) costs more than they save"
    return row


def bench_suite(impl_target: str, repeats: int, cwd: Path = ROOT, extra: Sequence[str] = ()) -> Row:
    cmd = suite_command(impl_target, extra)
    floor = [sys.executable, "-c", "import torch"]
    ours, base = side_by_side(lambda: _run(cmd, cwd), lambda: _run(floor, cwd), repeats, warmup=0)
    return Row("graded run (spec_tests + properties) vs `python -c 'import torch'`", ours, base,
               target="<= 8x", limit=8.0)


# --------------------------------------------------------------------------------------------
# (b) attention against torch's own kernels


def bench_attention(impl: Submission, lengths: Sequence[int], repeats: int, batch: int = 4,
                    d_model: int = 128, num_heads: int = 4, min_time: float = MIN_TIME) -> list[Row]:
    """Forward and forward+backward of the contract's attention and torch's, causal mask."""
    rows = []
    for L in lengths:
        rows += _attention_rows(impl, L, repeats, batch, d_model, num_heads, min_time)
    return rows


def _attention_rows(impl: Submission, L: int, repeats: int, batch: int, d_model: int,
                    num_heads: int, min_time: float) -> list[Row]:
    gen = torch.Generator().manual_seed(L)
    d_k = d_model // num_heads
    q, k, v = (torch.randn(batch, num_heads, L, d_k, generator=gen, requires_grad=True) for _ in range(3))
    x = torch.randn(batch, L, d_model, generator=gen, requires_grad=True)
    blocked = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)  # True = blocked, both APIs
    ours_mha = impl.MultiHeadSelfAttention(d_model=d_model, num_heads=num_heads, dropout=0.0)
    torch_mha = nn.MultiheadAttention(d_model, num_heads, dropout=0.0, bias=False, batch_first=True)

    def sdpa_ours():
        return impl.scaled_dot_product_attention(q, k, v, blocked)[0]

    def sdpa_torch():
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def mha_ours():
        return ours_mha(x, blocked)[0]

    def mha_torch():
        # need_weights with per-head weights: the same outputs as the contract's module.
        return torch_mha(x, x, x, attn_mask=blocked, need_weights=True, average_attn_weights=False)[0]

    def backward(fn):
        def step():
            fn().sum().backward()
        return step

    rows = []
    for what, ours, theirs, baseline in (
        ("sdpa", sdpa_ours, sdpa_torch, "F.scaled_dot_product_attention"),
        ("MHSA", mha_ours, mha_torch, "nn.MultiheadAttention"),
    ):
        with torch.no_grad():
            t = side_by_side(ours, theirs, repeats, min_time=min_time)
            rows.append(Row(f"{what} forward L={L} vs {baseline}", *t))
        rows.append(Row(f"{what} forward+backward L={L} vs {baseline}",
                        *side_by_side(backward(ours), backward(theirs), repeats, min_time=min_time)))
    return rows


# --------------------------------------------------------------------------------------------
# (c) one training step against a torch-native model of the same size


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """``PE[pos, 2i] = sin(pos / 10000^(2i/D))``, ``PE[pos, 2i+1] = cos(...)``, computed here again."""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    freq = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq[: d_model // 2])
    return pe.float()


class TorchGPT(nn.Module):
    """MiniGPT rebuilt from ``nn.TransformerEncoderLayer``: Pre-LN, GELU, causal, tied head.

    The attention projections have no bias, as in the contract (``W_Q`` ... ``W_O`` are
    ``bias=False``), so the parameter count is exactly MiniGPT's.
    """

    def __init__(self, vocab_size=65, d_model=128, num_heads=4, num_layers=4, d_ff=512, max_len=128,
                 dropout=0.1):
        super().__init__()
        self.d_model = d_model
        self.token_embed = nn.Embedding(vocab_size, d_model)
        self.register_buffer("pe", sinusoidal_table(max_len, d_model))
        layers = []
        for _ in range(num_layers):
            layer = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout, activation="gelu",
                                               batch_first=True, norm_first=True)
            layer.self_attn = nn.MultiheadAttention(d_model, num_heads, dropout=dropout, bias=False,
                                                    batch_first=True)
            layers.append(layer)
        self.blocks = nn.ModuleList(layers)
        self.final_norm = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.token_embed.weight
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(max_len).isinf())

    def forward(self, tokens):
        L = tokens.size(1)
        x = self.token_embed(tokens) * math.sqrt(self.d_model) + self.pe[:L]
        mask = self.causal[:L, :L]
        for block in self.blocks:
            x = block(x, src_mask=mask, is_causal=True)
        return self.lm_head(self.final_norm(x))


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # tied weights are counted once


def make_train_step(model: nn.Module, tokens: torch.Tensor, targets: torch.Tensor,
                    returns_tuple: bool) -> Callable[[], float]:
    """One AdamW step on cross-entropy of ``model(tokens)`` against ``targets``."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model.train()

    def step():
        out = model(tokens)
        logits = out[0] if returns_tuple else out
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def bench_train(impl: Submission, repeats: int, vocab_size=65, d_model=128, num_heads=4, num_layers=4,
                d_ff=512, seq_len=128, batch=16) -> Row:
    sizes = dict(vocab_size=vocab_size, d_model=d_model, num_heads=num_heads, num_layers=num_layers,
                 d_ff=d_ff, max_len=seq_len, dropout=0.1)
    torch.manual_seed(0)
    ours = impl.MiniGPT(**sizes)
    theirs = TorchGPT(**sizes)
    n_ours, n_theirs = count_parameters(ours), count_parameters(theirs)
    gen = torch.Generator().manual_seed(0)
    data = torch.randint(0, vocab_size, (batch, seq_len + 1), generator=gen)
    tokens, targets = data[:, :-1], data[:, 1:]
    t = side_by_side(make_train_step(ours, tokens, targets, True),
                     make_train_step(theirs, tokens, targets, False), repeats)
    note = "" if n_ours == n_theirs else f"parameter counts differ: MiniGPT {n_ours}, torch-native {n_theirs}"
    return Row(f"MiniGPT training step (B={batch}, L={seq_len}, {n_ours} params) vs nn.TransformerEncoderLayer",
               *t, target="<= 1.15x", limit=1.15, note=note)


# --------------------------------------------------------------------------------------------
# (d) generation with and without the KV cache


def bench_generate(impl: Submission, repeats: int, new_tokens: int = 256, seed_len: int = 16,
                   max_len: int | None = None, vocab_size: int = 65, **sizes) -> Row:
    """Greedy generation of ``new_tokens`` with ``use_cache=True`` against ``use_cache=False``.

    ``max_len=None`` means ``seed_len + new_tokens``: the window never slides. ``sizes`` go to
    ``MiniGPT`` (default: the contract's defaults, d_model 128, 4 heads, 4 layers, d_ff 512).
    """
    slides = max_len is not None and max_len < seed_len + new_tokens
    max_len = seed_len + new_tokens if max_len is None else max_len
    torch.manual_seed(0)
    model = impl.MiniGPT(vocab_size, max_len=max_len, **sizes)
    seed = [i % vocab_size for i in range(seed_len)]
    try:
        cached = model.generate(seed, max_new_tokens=new_tokens, temperature=0, use_cache=True)
    except TypeError as exc:
        raise ToolError(f"--impl {impl.target}: MiniGPT.generate has no use_cache argument ({exc}); "
                        f"skip this row with --only suite,attention,train") from None
    plain = model.generate(seed, max_new_tokens=new_tokens, temperature=0, use_cache=False)
    t = side_by_side(lambda: model.generate(seed, max_new_tokens=new_tokens, temperature=0, use_cache=True),
                     lambda: model.generate(seed, max_new_tokens=new_tokens, temperature=0, use_cache=False),
                     repeats, warmup=0)
    window = f"window slides (max_len={max_len})" if slides else f"max_len={max_len}, window never slides"
    note = "" if cached == plain else "cached and uncached generation chose different tokens"
    return Row(f"generate {new_tokens} tokens, seed {seed_len}, {window}: use_cache=True vs False",
               *t, target=">= 5x faster" if not slides else "", speedup=True,
               limit=5.0 if not slides else None, note=note)


# --------------------------------------------------------------------------------------------
# Profiles


def profile(what: str, impl: Submission, top: int = 15) -> str:
    """A torch.profiler table (``train``, ``generate``, ``attention``: MHSA forward+backward at
    L=256) or a cProfile listing (``suite``)."""
    if what == "suite":
        return profile_suite(impl.target, top)
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    if what == "train":
        torch.manual_seed(0)
        model = impl.MiniGPT(65)
        data = torch.randint(0, 65, (16, 129), generator=torch.Generator().manual_seed(0))
        step = make_train_step(model, data[:, :-1], data[:, 1:], True)
        step()  # warm-up outside the profile
    elif what == "generate":
        torch.manual_seed(0)
        model = impl.MiniGPT(65, max_len=272)

        def step():
            model.generate(list(range(16)), max_new_tokens=256, temperature=0, use_cache=True)
        step()
    elif what == "attention":
        mha = impl.MultiHeadSelfAttention(d_model=128, num_heads=4, dropout=0.0)
        x = torch.randn(4, 256, 128, requires_grad=True)
        blocked = torch.triu(torch.ones(256, 256, dtype=torch.bool), diagonal=1)

        def step():
            mha(x, blocked)[0].sum().backward()
        step()
    else:
        raise ToolError(f"--profile {what!r}: choose one of {', '.join(PROFILE_TARGETS)}")
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            step()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=top)


def profile_suite(impl_target: str, top: int = 25) -> str:
    """cProfile of the graded run in this process (cumulative time, the top ``top`` entries)."""
    cmd = [sys.executable, "-c",
           "import cProfile, pstats, sys, pytest;"
           "p = cProfile.Profile(); p.enable();"
           f"pytest.main({suite_command(impl_target)[3:]!r});"
           f"p.disable(); pstats.Stats(p).sort_stats('cumulative').print_stats({top})"]
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc.stdout[proc.stdout.find("Ordered by"):] if "Ordered by" in proc.stdout else proc.stdout


# --------------------------------------------------------------------------------------------
# Command line


def run(sections: Sequence[str], impl: Submission, repeats: int, quick: bool,
        lengths: Sequence[int] | None = None, progress: Callable[[str], None] | None = None) -> list[Row]:
    """All rows of ``sections`` in order."""
    say = progress or (lambda _msg: None)
    rows: list[Row] = []
    for section in sections:
        say(f"measuring {section} ...")
        if section == "suite":
            rows.append(bench_suite(impl.target, repeats))
        elif section == "attention":
            rows += bench_attention(impl, lengths or ((64, 256) if quick else (64, 256, 1024)), repeats)
        elif section == "train":
            rows.append(bench_train(impl, repeats))
        elif section == "xdist":
            rows.append(bench_xdist(impl.target, repeats))
        elif section == "generate":
            rows.append(bench_generate(impl, repeats))
            if not quick:
                rows.append(bench_generate(impl, repeats, max_len=128))
        else:
            raise ToolError(f"--only {section!r}: choose among {', '.join(SECTIONS)}")
    return rows


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
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
    p.add_argument("--lengths", default=None, metavar="L,L,...",
                   help="attention lengths (default 64,256,1024; --quick 64,256)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads for the in-process rows (default 1, as the graded run uses)")
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
        sections = [s.strip() for s in args.only.split(",") if s.strip()]
        unknown = [s for s in sections if s not in SECTIONS]
        if unknown or not sections:
            raise ToolError(f"--only {args.only!r}: choose among {', '.join(SECTIONS)}")
        lengths = _parse_ints(args.lengths, "--lengths") if args.lengths else None
        repeats = args.repeats if args.repeats is not None else (3 if args.quick else 7)
        if repeats < 1:
            raise ToolError(f"--repeats must be at least 1, got {repeats}")
        needs = {"train": ("MiniGPT",), "generate": ("MiniGPT",),
                 "attention": ("MultiHeadSelfAttention",)}.get(args.profile, ())
        impl = load_impl(args.impl, *needs)
        if args.profile:
            print(profile(args.profile, impl))
            return 0
        rows = run(sections, impl, repeats, args.quick, lengths,
                   progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    except (ToolError, SubmissionError) as exc:
        fail(parser, exc)
    print(f"impl: {impl.target}; torch {torch.__version__}, {args.threads} thread(s); "
          f"median of {repeats} side-by-side runs each")
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
