"""The class report: ``OUT/report.html``, one self-contained page an instructor opens after (or
while) a class is graded.

It shows the distribution of the totals, each component's mean and share of full marks, a
students x components heatmap, the mistakes the diagnosis named most often (the catalogue's
pitfalls by name, with the students who made them) and, apart, every submission whose status is
not ``ok`` (timeouts, import errors, tampering, ...). The figures are drawn with matplotlib and
embedded as PNG data, so the file needs nothing beside it. ``tools.grade`` rewrites it as
students finish (at most every :data:`REFRESH_SECONDS`) and at the end; ``tools.grade merge``
writes it for the merged class.

The named mistakes come from each grading child's diagnosis: a submission could misname its own
mistakes (never its points), so the counts describe what the diagnosis reported.
"""

from __future__ import annotations

import base64
import html
import io
import math
import statistics
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from transformer_spec.contract import registry
from transformer_spec.grader.record import Record
from transformer_spec.results.results_file import format_points

NAME = "report.html"
REFRESH_SECONDS = 60.0  # a render of 40 students takes ~0.7 s of the parent
#: the heatmap draws at most this many students (the lowest totals first: who needs help)
HEATMAP_ROWS = 200

_STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}
th{background:#f3f3f3}td.n{text-align:right}img{max-width:100%;display:block;margin:.5em 0}
h2{margin-top:1.6em;border-bottom:1px solid #ddd}.small{color:#666;font-size:.9em}"""
# Marks on <body> what loaded, for a browser test: the number of figures drawn and any script error.
_CHECK = """<script>
window.addEventListener("error", e => { document.body.dataset.errors = (document.body.dataset.errors || "") + e.message + ";"; });
window.addEventListener("load", () => { const imgs = [...document.images];
  document.body.dataset.figures = imgs.length;
  document.body.dataset.drawn = imgs.filter(i => i.complete && i.naturalWidth > 0).length; });
</script>"""


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _figure(width: float, height: float):
    import matplotlib

    matplotlib.use("Agg")  # no display: the report is a file (tools.figures chooses the same backend)
    import matplotlib.pyplot as plt

    return plt.figure(figsize=(width, height), dpi=100)


def component_maxima(records: Iterable[Record]) -> dict[str, float]:
    """Each component's full marks, from the tests of the records (every record lists every test)."""
    out: dict[str, float] = {}
    for r in records:
        for t in r.tests:
            out[t["tags"][0]] = out.get(t["tags"][0], 0.0) + t["max_score"]
        if out:
            break
    return {c: out[c] for c in registry.names() if c in out}


def _distribution(records: list[Record]) -> str:
    shares = [100 * r.total / r.possible if r.possible else 0.0 for r in records]
    fig = _figure(9, 3.6)
    ax = fig.add_subplot(1, 1, 1)
    ax.hist(shares, bins=[i * 5 for i in range(21)], color="tab:blue", edgecolor="white")
    ax.set_xlabel("total (% of full marks)")
    ax.set_ylabel("students")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_xlim(0, 100)
    ax.set_title(f"score distribution ({len(records)} students, median {statistics.median(shares):.1f} %)")
    fig.tight_layout()
    return _png(fig)


def _components(records: list[Record], maxima: dict[str, float]) -> str:
    comps = list(maxima)
    share = [100 * statistics.mean(r.components.get(c, 0.0) for r in records) / maxima[c] for c in comps]
    fig = _figure(9, 3.6)
    ax = fig.add_subplot(1, 1, 1)
    bars = ax.bar(comps, share, color="tab:green")
    ax.bar_label(bars, fmt="%.0f%%", fontsize=8)
    ax.set_ylim(0, 105)
    ax.set_ylabel("mean share of full marks (%)")
    ax.set_title("each component: the class's mean, as a share of its points")
    ax.tick_params(axis="x", labelrotation=30)
    fig.tight_layout()
    return _png(fig)


def _heatmap(records: list[Record], maxima: dict[str, float]) -> str:
    comps = list(maxima)
    shown = sorted(records, key=lambda r: (r.total, r.student))[:HEATMAP_ROWS]
    grid = [[r.components.get(c, 0.0) / maxima[c] for c in comps] for r in shown]
    fig = _figure(9, max(2.5, 1.3 + 0.22 * len(shown)))
    ax = fig.add_subplot(1, 1, 1)
    image = ax.imshow(grid, cmap="RdYlGn", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(comps)), comps, rotation=30, fontsize=8)
    ax.set_yticks(range(len(shown)), [_label(r.student) for r in shown], fontsize=7 if len(shown) > 30 else 8)
    more = f", the {HEATMAP_ROWS} lowest totals of {len(records)}" if len(records) > len(shown) else ""
    ax.set_title(f"students x components: share of each component's points{more}")
    fig.colorbar(image, ax=ax, fraction=0.03).set_label("share of the component's points")
    fig.tight_layout()
    return _png(fig)


def _label(text: str) -> str:
    """A student's id as matplotlib text: ``$`` would start mathtext (a drawn formula, or an error)."""
    return text.replace("$", r"\$")


def common_mistakes(records: Iterable[Record]) -> list[tuple[str, list[str]]]:
    """``(pitfall name, students)`` for every pitfall of the catalogue a diagnosis named, the most
    common first (a name the child reported that the catalogue lacks is not a mistake to count; a course
    profile's own pitfalls count as well)."""
    from transformer_spec.diagnosis.profiles import every_pitfall

    known = every_pitfall()
    who: dict[str, set[str]] = {}
    for r in records:
        for names in r.mistakes.values():
            for name in names:
                if name in known:
                    who.setdefault(name, set()).add(r.student)
    return sorted(((n, sorted(s)) for n, s in who.items()), key=lambda t: (-len(t[1]), t[0]))


def _mistakes(found: list[tuple[str, list[str]]]) -> str:
    top = found[:15]
    fig = _figure(9, max(2.0, 0.9 + 0.32 * len(top)))
    ax = fig.add_subplot(1, 1, 1)
    if top:
        ax.barh([n for n, _ in top][::-1], [len(s) for _, s in top][::-1], color="tab:red")
        ax.set_xlabel("students")
        ax.xaxis.get_major_locator().set_params(integer=True)
    else:
        ax.text(0.5, 0.5, "no known mistake was named", ha="center", va="center")
        ax.set_axis_off()
    ax.set_title("the mistakes the diagnosis named most often")
    fig.tight_layout()
    return _png(fig)


def render(records: dict[str, Record], title: str = "class report") -> str:
    """The page for ``records`` (student -> record)."""
    rs = sorted(records.values(), key=lambda r: r.student)
    e = html.escape
    parts = [f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{e(title)}</title>"
             f"<style>{_STYLE}</style>{_CHECK}</head><body>", f"<h1>{e(title)}</h1>"]
    if not rs:
        parts.append("<p>No submission has been graded yet.</p></body></html>")
        return "".join(parts)
    maxima = component_maxima(rs)
    totals = [r.total for r in rs]
    statuses: dict[str, int] = {}
    for r in rs:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    parts.append(f"<p>{len(rs)} students graded at {e(time.strftime('%Y-%m-%d %H:%M'))}: mean "
                 f"{statistics.mean(totals):.1f}, median {statistics.median(totals):.1f} of "
                 f"{format_points(rs[0].possible)} points; statuses: "
                 + ", ".join(f"{n} {e(s)}" for s, n in sorted(statuses.items())) + ".</p>")
    parts += ["<h2>Scores</h2>", f'<img alt="score distribution" src="{_distribution(rs)}">']
    parts += ["<h2>Components</h2>", f'<img alt="components" src="{_components(rs, maxima)}">',
              "<table><tr><th>component</th><th>points</th><th>class mean</th><th>share</th><th>full marks</th></tr>"]
    for c, full in maxima.items():
        mean = statistics.mean(r.components.get(c, 0.0) for r in rs)
        complete = sum(1 for r in rs if math.isclose(r.components.get(c, 0.0), full))
        parts.append(f"<tr><td>{e(c)}</td><td class=n>{format_points(full)}</td><td class=n>{mean:.2f}</td>"
                     f"<td class=n>{100 * mean / full:.0f} %</td><td class=n>{complete} of {len(rs)}</td></tr>")
    parts += ["</table>", "<h2>Students x components</h2>", f'<img alt="heatmap" src="{_heatmap(rs, maxima)}">']
    found = common_mistakes(rs)
    from transformer_spec.diagnosis.profiles import every_pitfall

    catalogue = every_pitfall()
    parts += ["<h2>Most common mistakes</h2>", f'<img alt="mistakes" src="{_mistakes(found)}">']
    if found:
        parts.append("<table><tr><th>mistake</th><th>component</th><th>students</th><th>who</th></tr>")
        for name, who in found:
            p = catalogue.get(name)
            parts.append(f"<tr><td><code>{e(name)}</code><br><span class=small>{e(p.explanation if p else '')}"
                         f"</span></td><td>{e(p.component if p else '')}</td><td class=n>{len(who)}</td>"
                         f"<td>{e(', '.join(who))}</td></tr>")
        parts.append("</table>")
    else:
        parts.append("<p>No known mistake was named.</p>")
    others = [r for r in rs if r.status != "ok"]
    parts.append("<h2>Not graded normally</h2>")
    if others:
        parts.append("<table><tr><th>student</th><th>status</th><th>points</th><th>detail</th></tr>")
        parts += [f"<tr><td>{e(r.student)}</td><td>{e(r.status)}</td><td class=n>{format_points(r.total)}</td>"
                  f"<td>{e(r.detail)}</td></tr>" for r in others]
        parts.append("</table>")
    else:
        parts.append("<p>Every submission was graded normally (status ok).</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


class Refresher:
    """Writes ``out/report.html`` through ``write`` (the output folder's writer, which the sweep
    trusts) at most every ``every`` seconds, and always when forced."""

    def __init__(self, out: Path, write: Callable[[Path, str], None], every: float = REFRESH_SECONDS):
        self.path = Path(out) / NAME
        self.write = write
        self.every = every
        self.last = -math.inf

    def __call__(self, records: dict[str, Record], force: bool = False) -> None:
        if force or time.monotonic() - self.last >= self.every:
            self.write(self.path, render(records))
            self.last = time.monotonic()
