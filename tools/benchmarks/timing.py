"""Side-by-side timing: a row of the table, the alternating timing loop and the Markdown table."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..cli import ToolError

#: seconds each timing of a short kernel lasts at least (it is repeated within the timing)
MIN_TIME = 0.05


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
    #: a target on ``ours`` itself (seconds), for rows whose goal is a rate, not a ratio
    absolute_limit: float | None = None

    @property
    def ratio(self) -> float:
        return self.baseline / self.ours if self.speedup else self.ours / self.baseline

    @property
    def met(self) -> str:
        if self.absolute_limit is not None:
            return "yes" if self.ours <= self.absolute_limit else "NO"
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
