"""The class report (``transformer_spec/grader/report.py``): what it shows, and that a real browser renders it.

The browser is Debian's headless Chromium (``.ci/run`` installs it): it loads the page from the
file, the page's own check marks on ``<body>`` how many figures it holds and how many were
decoded and drawn, and any script error; a screenshot must show something.
"""

from __future__ import annotations

import re

import pytest

from tests.tools_helpers import NO_CHROMIUM, assert_renders_in_chromium
from transformer_spec.contract import registry, tracks
from transformer_spec.grader import report
from transformer_spec.grader.record import Record


def _record(student: str, status: str, share: float, mistakes: dict | None = None,
            components: tuple[str, ...] | None = None) -> Record:
    tests, comps = [], {}
    for c in components or tracks.component_names("classic"):
        tests.append({"name": f"[{c}] t.py::test_{c}", "tags": [c], "max_score": 10.0, "score": 10.0 * share})
        comps[c] = 10.0 * share
    total = sum(comps.values())
    return Record(student, status, total, 10.0 * len(comps), comps, "stopped at the wall-clock limit" if status != "ok" else "",
                  f"/class/{student}", "x", tests, mistakes=mistakes or {})


RECORDS = {
    "ada": _record("ada", "ok", 1.0),
    "bob": _record("bob", "ok", 0.5, {"attention": ["no_scaling"], "mha": ["no_scaling"]}),
    "cy": _record("cy", "ok", 0.25, {"attention": ["no_scaling", "softmax_over_queries"]}),
    "dee": _record("dee", "timeout", 0.0),
}


def test_the_page_holds_the_four_figures_the_mistakes_by_name_and_the_statuses_apart():
    page = report.render(RECORDS)
    assert len(re.findall(r'<img alt="[^"]+" src="data:image/png;base64,', page)) == 4
    assert "4 students graded" in page and "3 ok, 1 timeout" in page
    assert report.common_mistakes(RECORDS.values()) == [("no_scaling", ["bob", "cy"]), ("softmax_over_queries", ["cy"])]
    row = page.split("<code>no_scaling</code>")[1].split("</tr>")[0]
    explanation = next(p.explanation for p in registry.pitfalls() if p.name == "no_scaling")
    assert explanation in row and "<td class=n>2</td>" in row and "bob, cy" in row
    not_ok = page.split("<h2>Not graded normally</h2>")[1]
    assert "<td>dee</td><td>timeout</td>" in not_ok and "<td>ada</td>" not in not_ok
    assert "<script src" not in page and "http" not in page.replace("http-equiv", ""), "the page needs nothing beside it"


def test_a_modern_class_shows_its_own_components_and_mistakes():
    """Records of a class graded with ``--track modern``: the modern components, in report order, and
    the modern mistakes with their catalogue explanations."""
    modern = tracks.component_names("modern")
    records = {"eve": _record("eve", "ok", 1.0, components=modern),
               "fay": _record("fay", "ok", 0.5, {"gqa": ["gqa_heads_paired_modulo"]}, components=modern)}
    page = report.render(records)
    assert len(re.findall(r'<img alt="[^"]+" src="data:image/png;base64,', page)) == 4
    table = page.split("<h2>Components</h2>")[1].split("</table>")[0]
    assert all(f"<td>{c}</td>" in table for c in modern) and "<td>mha</td>" not in table
    explanation = next(p.explanation for p in registry.pitfalls() if p.name == "gqa_heads_paired_modulo")
    assert "<code>gqa_heads_paired_modulo</code>" in page and explanation in page


def test_an_empty_class_says_so():
    assert "No submission has been graded yet." in report.render({})


def test_refresher_writes_at_most_every_interval_unless_forced(tmp_path):
    writes = []
    refresh = report.Refresher(tmp_path, lambda path, text: writes.append(path), every=3600)
    refresh(RECORDS)
    refresh(RECORDS)
    refresh(RECORDS, force=True)
    assert writes == [tmp_path / "report.html"] * 2


@pytest.mark.slow
@pytest.mark.skipif(NO_CHROMIUM, reason="Chromium is not installed (.ci/run installs it)")
def test_headless_chromium_renders_every_figure_without_script_errors(tmp_path):
    page = tmp_path / "report.html"
    page.write_text(report.render(RECORDS))
    assert_renders_in_chromium(page, 4, tmp_path / "shot.png")
