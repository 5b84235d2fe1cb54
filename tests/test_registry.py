"""The component registry: every component is complete, and a new one needs only its declaration.

``test_a_new_component_reaches_rubric_kill_matrix_and_diagnosis`` registers a throwaway component
in memory and runs the rubric, the kill matrix's table and verdicts, and the diagnosis over it,
without touching their code: what ``docs/architecture.md``'s "add a component" checklist promises.
"""

from __future__ import annotations

import pytest
from transformer_spec.contract.registry import Component, Recheck, pitfall

from tools import mutants
from transformer_spec.catalogue.patching import load_patched_reference
from transformer_spec.contract import inputs, registry, tracks
from transformer_spec.contract import names as contract
from transformer_spec.diagnosis import diagnose
from transformer_spec.probes import behaviour
from transformer_spec.scoring import rubric
from transformer_spec.results import results_file


@pytest.mark.parametrize("component", registry.components(), ids=lambda c: c.name)
def test_every_component_is_complete(component):
    assert tracks.missing_pieces(component) == []


def test_a_missing_piece_is_named_with_its_component():
    bare = Component("rotary", label="", points=1, order=99, depends_on=("atention",))
    problems = "\n".join(tracks.missing_pieces(bare))
    for piece in ("short label", "unknown component 'atention'", "no diagnosis behaviour probes",
                  "has no names, and no why_no_names", "has no pitfalls, and no why_no_pitfalls",
                  "has no rechecks, and no why_no_rechecks", "has no values, and no why_no_values"):
        assert "component 'rotary': " in problems and piece in problems, piece


def test_every_component_has_graded_tests_and_its_rechecks_name_real_tests(pytestconfig):
    collected = _collect(pytestconfig)
    components = {c for c in collected.values()}
    assert components == set(registry.names()), "a component without any @pytest.mark.component test"
    for check in registry.rechecks():
        for anchor in check.anchors:
            assert collected.get(anchor) == check.component, f"re-check {check.name}: anchor {anchor}"
    for c in registry.components():  # each test of what it computes is a collected test of its own
        for key in c.values:
            matched = {collected[n] for n in collected if rubric.matches(key, n)}
            assert matched == {c.name}, f"component {c.name}: values names {key!r}, which matches tests of {matched}"


def _collect(config) -> dict[str, str]:
    """Node id -> component of every graded test (an in-process collection of the suite)."""
    found: dict[str, str] = {}

    class Collector:
        def pytest_collection_finish(self, session):
            for item in session.items:
                marker = item.get_closest_marker("component")
                if marker is not None:
                    found[item.nodeid] = marker.args[0]

    root = str(config.rootpath)
    assert pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "--track", "all", f"{root}/spec_tests",
                        f"{root}/properties"],
                       plugins=[Collector()]) == 0
    return found


def test_which_components_a_mistake_breaks_follows_from_depends_on():
    assert registry.affected_by("attention") == ("attention", "mha", "encoder", "decoder", "minigpt", "generate",
                                                 "seq2seq", "gqa", "llama_block", "minillama", "llama_generate")
    assert registry.affected_by("rotary") == ("rotary", "gqa", "llama_block", "minillama", "llama_generate")
    assert registry.affected_by("masks") == ("masks", "seq2seq")
    assert registry.affected_by("errors") == ("errors",)


def test_the_contract_names_come_from_the_components():
    assert [n.name for n in contract.names()] == [n.name for c in registry.components() for n in c.names]
    assert "MiniGPT.generate" in contract.by_name() and "MiniGPT.generate" not in contract.top_level()


# --------------------------------------------------------------------------------------------
# A throwaway component, registered in memory only
# --------------------------------------------------------------------------------------------
def _saturation(impl, f) -> None:
    """Behaviour probe: attention weights on large scores (they saturate without 1/sqrt(d_k))."""
    q, k, v = inputs.randn(1, 3, 16, seed=1) * 3, inputs.randn(1, 4, 16, seed=2) * 3, inputs.randn(1, 4, 2, seed=3)
    behaviour.capture(f, "weights", lambda: impl.scaled_dot_product_attention(q, k, v)[1])


def _recheck_weights(mod, seed):
    q, k, v = (inputs.randn(1, 3, 16, seed=seed + i) for i in range(3))
    return {"weights": mod.scaled_dot_product_attention(q, k, v)[1].numpy()}


UNSCALED = pitfall("throwaway_unscaled", "throwaway",
                   "The scores are not divided by sqrt(d_k) (a throwaway component's own copy of the mistake).",
                   ("attention.py", "scale = 1.0 / math.sqrt(q.size(-1))", "scale = 1.0"))
THROWAWAY = Component(
    "throwaway", label="thr", points=5, order=max(c.order for c in registry.components()) + 1, depends_on=("attention",),
    pitfalls=(UNSCALED,), behaviour=_saturation,
    rechecks=(Recheck("throwaway_weights", "throwaway", ("spec_tests/test_throwaway.py::test_weights",),
                      _recheck_weights),),
    why_no_names="it grades scaled_dot_product_attention, a name of the 'attention' component",
    values=("spec_tests/test_throwaway.py::test_weights",),
)


def test_a_new_component_reaches_rubric_kill_matrix_and_diagnosis(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_SPEC_CACHE", str(tmp_path / "cache"))
    with registry.registered(THROWAWAY):
        assert tracks.missing_pieces(THROWAWAY) == []
        assert registry.names()[-1] == "throwaway"
        # The rubric: default points, a marker naming it, points shared among its tests.
        default = rubric.load_rubric()
        assert default.components["throwaway"] == 5 and default.total == 105
        points, _ = rubric.assign_points(default, {"spec_tests/test_throwaway.py::test_a": "throwaway",
                                                   "spec_tests/test_throwaway.py::test_b": "throwaway"})
        assert set(points.values()) == {2.5}
        # The score table and results.json.
        entries = [results_file.test_entry(n, "throwaway", "12.1", p, 0.0, False, "wrong", False, "assertion")
                   for n, p in points.items()]
        assert results_file.table_lines(results_file.component_rows(entries))[1].startswith("throwaway")
        # The kill matrix: its column, and its pitfall killed in its own component.
        row = mutants.Row(UNSCALED.name, "throwaway", failed={"throwaway": ["t"], "attention": ["u", "v"]})
        assert row.verdict == "killed"
        head, _, line = mutants.format_matrix([row])
        assert head.split()[-3:] == ["thr", "kept", "verdict"] and line.split()[-2:] == ["[1]", "killed"]
        assert mutants.Row("x", "throwaway", failed={"attention": ["u"]}).verdict == "KILLED ONLY ELSEWHERE"
        # A mistake in attention also shows in the throwaway component (depends_on).
        assert "throwaway" in registry.affected_by("attention")
        # The diagnosis: the mistake is in the code of 'attention', which the new component calls and
        # whose own probes name it: the new component names that (issue 27), not its own copy.
        broken = load_patched_reference(tmp_path, UNSCALED.patches, "throwaway_broken")
        found = diagnose.diagnose(broken, ["throwaway"])["throwaway"]
        assert found.names == ["no_scaling"] and found.caused_by == ("attention",), found.message()
        assert not diagnose.diagnose(load_patched_reference(tmp_path, (), "correct"), ["throwaway"])["throwaway"].names
        # The hidden re-check is found with the others.
        assert "throwaway_weights" in {r.name for r in registry.rechecks()}
    assert "throwaway" not in registry.names() and rubric.load_rubric().total == 100


def test_a_component_is_registered_once():
    with pytest.raises(ValueError, match="already registered"):
        with registry.registered(registry.get("attention")):
            pass

