"""The kill matrix grades the allowed variations in groups (tools/mutants_groups.py): a clean group spares
each member, a group that is not clean is graded again one member at a time."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tools import mutants, mutants_groups
from transformer_spec.catalogue.variations import Variation
from transformer_spec.contract import registry
from transformer_spec.contract.registry import Pitfall


def _v(name: str, *files: str) -> Variation:
    return Variation(name, "attention", name, tuple((f, f"old {name}", f"new {name}") for f in files))


def test_variations_whose_patches_fit_share_a_group_of_at_most_max_members():
    vs = [_v(f"v{i}", f"f{i}.py") for i in range(mutants_groups.MAX_MEMBERS + 2)] + [_v("alone", "g.py")]
    # "alone" fits nowhere (its group would not write); the others rewrite other files: MAX_MEMBERS at most a group
    rows, members = mutants_groups.group(vs, lambda g: "alone" not in g.explanation.split("; "))
    assert [len(m) for m in members.values()] == [mutants_groups.MAX_MEMBERS, 2]
    assert rows[-1] is vs[-1]  # a lone variation is graded as itself
    assert all(mutants_groups.is_group(r) for r in rows[:-1])
    assert sorted(v.name for m in members.values() for v in m) == sorted(v.name for v in vs[:-1])


def test_variations_that_rewrite_one_file_are_graded_apart():
    rows, members = mutants_groups.group([_v("a", "x.py"), _v("b", "x.py", "y.py"), _v("c", "z.py")], lambda g: True)
    assert [[v.name for v in m] for m in members.values()] == [["a", "c"]] and rows[1].name == "b"


def test_a_patch_every_member_carries_is_applied_once():
    shared = ("m.py", "use_cache=True", "use_cache=False")
    a, b = (Variation(n, "attention", n, (shared, (f"{n}.py", n, n + "!"))) for n in ("x", "y"))
    _, members = mutants_groups.group([a, b], lambda g: len(g.patches) == len(set(g.patches)) == 3)
    assert list(members.values()) == [[a, b]]


@pytest.mark.parametrize("track, course", [("classic", "contract"), ("modern", "contract"), ("modern", "cs336")])
def test_every_catalogue_variation_is_in_one_writable_row(tmp_path, track, course):
    variations, _ = mutants.rows_of_track(track, course)
    write = lambda item, folder: mutants.write_row(item, folder, track, course)  # noqa: E731
    rows, members = mutants_groups.group(variations, mutants_groups.writable(write))
    graded = [v.name for r in rows for v in members.get(r.name, [r])]
    assert sorted(graded) == sorted(v.name for v in variations)
    assert len(rows) < len(variations) / 2
    for r in rows:
        write(r, tmp_path)  # every group writes as a student's folder


def _record(tests_failed: int = 0):
    tests = [{"name": "[attention] spec_tests/t.py::test_a", "tags": ["attention"], "status": "passed", "kind": "passed"}]
    tests += [{"name": f"[attention] spec_tests/t.py::test_f{i}", "tags": ["attention"], "status": "failed",
               "kind": "assertion", "output": "AssertionError"} for i in range(tests_failed)]
    return SimpleNamespace(status="ok", total=1.0, seconds=8.0, tests=tests, detail="")


def test_a_group_that_is_not_clean_is_graded_again_one_member_at_a_time(monkeypatch):
    a, b, c = _v("a", "a.py"), _v("b", "b.py"), _v("c", "c.py")
    monkeypatch.setattr(mutants_groups, "writable", lambda write: lambda g: True)
    monkeypatch.setattr(mutants_groups, "MAX_MEMBERS", 2)  # groups: (a, b) and c alone
    calls = []

    def graded(items, *args):
        calls.append([i if isinstance(i, str) else i.name for i in items])
        # b fails a test, alone or in its group; everything else is clean
        return {n: _record(1 if n in ("b", "(variations_1)") else 0) for n in calls[-1]}

    monkeypatch.setattr(mutants, "_graded", graded)
    rows = {r.name: r for r in mutants.run_all([a, b, c])}
    assert calls == [[*mutants.CORRECT, "(variations_1)", "c"], ["a", "b"]]
    assert rows["a"].verdict == "clean" and rows["a"].group == ""
    assert rows["b"].verdict == "CORRECT CODE FAILS" and rows["b"].failed == {"attention": ["spec_tests/t.py::test_f0"]}
    assert rows["c"].verdict == "clean"


def test_a_clean_group_gives_each_member_its_row(monkeypatch):
    a, b = _v("a", "a.py"), _v("b", "b.py")
    monkeypatch.setattr(mutants_groups, "writable", lambda write: lambda g: True)
    monkeypatch.setattr(mutants, "_graded", lambda items, *args: {
        (i if isinstance(i, str) else i.name): _record() for i in items})
    rows = mutants.run_all([a, b])
    assert [r.name for r in rows] == [*mutants.CORRECT, "a", "b"]
    assert all(r.verdict == "clean" and r.group == "(variations_1)" and r.seconds == 4.0 for r in rows[2:])


def _p(name: str, component: str) -> Pitfall:
    return Pitfall(name, component, name, ((f"{name}.py", f"old {name}", f"new {name}"),))


def _reach(extra: dict[str, set[str]] = {}):
    """affects() over placeholder rows that break their own component (and ``extra``'s); errors has none."""
    rows = {c: [SimpleNamespace(error=None, failed={c: ["t"], **{e: ["t"] for e in extra.get(c, ())}})]
            for c in ("attention", "masks", "mha", "ffn", "encoder", "decoder", "position", "minigpt", "softmax")}
    return mutants_groups.affects(rows)


def test_pitfalls_share_a_group_only_when_no_member_can_change_another_members_tests():
    ps = [_p("att", "attention"), _p("mha", "mha"), _p("ffn", "ffn"), _p("enc", "encoder"), _p("err", "errors"),
          _p("pos", "position"), _p("att2", "attention"), _p("mask", "masks"), _p("dec", "decoder")]
    rows, members = mutants_groups.group_pitfalls(ps, lambda g: True, _reach())
    groups = [[p.name for p in m] for m in members.values()]
    # attention reaches mha, encoder and decoder (the composition); ffn reaches encoder; errors has no placeholder
    assert groups == [["att", "ffn", "pos", "mask"], ["enc", "dec"]]
    assert [r.name for r in rows] == ["(pitfalls_1)", "mha", "(pitfalls_3)", "err", "att2"]
    for m in members.values():
        comps = [p.component for p in m]
        assert len(set(comps)) == len(comps) <= mutants_groups.MAX_PITFALLS
        for a in comps:
            assert not any(b in registry.affected_by(a) for b in comps if b != a)
    assert "err" in [r.name for r in rows]  # alone: errors' tests construct every class


def test_a_dependency_only_a_placeholder_shows_keeps_two_pitfalls_apart():
    ps = [_p("soft", "softmax"), _p("att", "attention")]
    _, members = mutants_groups.group_pitfalls(ps, lambda g: True, _reach())
    assert list(members.values()) == [ps]  # the composition declares nothing between them
    _, members = mutants_groups.group_pitfalls(ps, lambda g: True, _reach({"softmax": {"attention"}}))
    assert members == {}  # its placeholder broke attention's tests: a course's attention calls its softmax


def _pitfall_record(failed_components: list[str], status: str = "ok"):
    tests = [{"name": f"[{c}] spec_tests/t.py::test_{c}", "tags": [c], "status": "failed", "kind": "assertion",
              "output": "AssertionError"} for c in failed_components]
    return SimpleNamespace(status=status, total=1.0, seconds=8.0, tests=tests, detail="")


def test_a_pitfall_group_gives_each_member_its_own_components_failures_or_is_graded_again(monkeypatch):
    a, f, pos = _p("a", "attention"), _p("f", "ffn"), _p("pos", "position")
    holders = [_p(f"placeholder_zeros_{c}", c) for c in ("attention", "ffn", "position")]
    monkeypatch.setattr(mutants_groups, "writable", lambda write: lambda g: True)
    calls, tests_run = [], {}

    def graded(items, profile, track, course, jobs, tests=None):
        calls.append([i if isinstance(i, str) else i.name for i in items])
        tests_run.update(dict.fromkeys(calls[-1], tests))
        out = {}
        for n in calls[-1]:
            if n.startswith("placeholder_zeros_"):
                c = n.removeprefix("placeholder_zeros_")
                out[n] = _pitfall_record([c] + (["mha", "encoder"] if c == "attention" else []))
            elif n.startswith("(pitfalls_"):
                out[n] = _pitfall_record(["attention", "mha", "ffn"])  # pos survives in the group
            else:
                out[n] = _pitfall_record({"a": ["attention"], "f": ["ffn", "encoder"], "pos": []}.get(n, []))
        return out

    monkeypatch.setattr(mutants, "_graded", graded)
    monkeypatch.setattr(mutants, "_rubric_tests", lambda *args: {"spec_tests/r.py::test_the_rubric_names"})
    rows = {r.name: r for r in mutants.run_all([a, f, pos], placeholder_rows=holders)}
    assert calls[0] == [h.name for h in holders]  # the placeholders first: what each breaks
    assert calls[1:3] == [[*mutants.CORRECT], ["(pitfalls_1)"]]  # the group: the tests its members can change
    # a member not killed in its own component: every member alone, each with the tests it can change
    assert sorted(calls[3:]) == [["a"], ["f"], ["pos"]]
    assert tests_run["(pitfalls_1)"] == ("spec_tests/r.py::test_the_rubric_names", "spec_tests/t.py::test_attention",
                                         "spec_tests/t.py::test_encoder", "spec_tests/t.py::test_ffn",
                                         "spec_tests/t.py::test_mha", "spec_tests/t.py::test_position")
    assert tests_run["pos"] == ("spec_tests/r.py::test_the_rubric_names", "spec_tests/t.py::test_position")
    assert tests_run["(reference)"] is None  # correct code runs the whole suite
    assert rows["pos"].verdict == "SURVIVED" and rows["f"].failed == {"ffn": ["spec_tests/t.py::test_ffn"],
                                                                         "encoder": ["spec_tests/t.py::test_encoder"]}

    calls.clear()
    monkeypatch.setattr(mutants, "_graded", lambda items, *args: {
        **graded(items, *args), **({"(pitfalls_1)": _pitfall_record(["attention", "ffn", "encoder"])} if
                            "(pitfalls_1)" in [getattr(i, "name", i) for i in items] else {})})
    rows = {r.name: r for r in mutants.run_all([a, f], placeholder_rows=holders)}
    assert rows["a"].verdict == rows["f"].verdict == "killed" and rows["f"].group == "(pitfalls_1)"
    assert rows["a"].failed == {"attention": ["spec_tests/t.py::test_attention"]}  # its own component's only
    assert rows["a"].seconds == 4.0
