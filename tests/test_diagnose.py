"""Named diagnoses: a known mistake is named, nothing is named without evidence.

Fast: only the masks and ffn probes (cheap), with a cache folder of the test's own.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from transformer_spec.catalogue.patching import load_patched_reference
from transformer_spec.catalogue.pitfalls import by_name
from transformer_spec.diagnosis import diagnose
from transformer_spec.guard import alarm
from transformer_spec.probes import behaviour
from transformer_spec.submission import loader

BY_NAME = by_name()

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def own_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_SPEC_CACHE", str(tmp_path_factory.getbasetemp() / "diagnose-cache"))


def _broken(tmp_path, *patches):
    impl = load_patched_reference(tmp_path, list(patches))
    assert impl.error is None, impl.error
    return impl


def test_a_catalogue_mistake_is_named(tmp_path):
    impl = _broken(tmp_path, *BY_NAME["causal_mask_blocks_diagonal"].patches)
    d = diagnose.diagnose(impl, ["masks"])["masks"]
    assert d.names == ["causal_mask_blocks_diagonal"]
    assert "a token must see itself" in d.message() and "`causal_mask_blocks_diagonal`" in d.message()


def test_the_same_mistake_written_differently_is_named(tmp_path):
    # ReLU written as clamp, not as the catalogue's F.relu
    impl = _broken(tmp_path, ("feedforward.py", "F.gelu(self.linear1(x))", "self.linear1(x).clamp(min=0)"))
    assert diagnose.diagnose(impl, ["ffn"])["ffn"].names == ["relu_instead_of_gelu"]
    # the blocked diagonal written as the complement of a lower triangle
    impl = _broken(tmp_path, ("masks.py", "torch.triu(ones, diagonal=1)", "~torch.tril(ones, diagonal=-1)"))
    assert diagnose.diagnose(impl, ["masks"])["masks"].names == ["causal_mask_blocks_diagonal"]


def test_the_reference_gets_no_diagnosis():
    found = diagnose.diagnose(loader.load("reference"), ["masks", "ffn", "position"])
    for comp, d in found.items():
        assert not d.matches and not d.partial and not d.differs_from_reference, comp
        assert "no difference" in d.message()



def test_a_component_downstream_of_a_mistake_points_to_it_and_names_nothing_of_its_own(tmp_path):
    """Issue 27: the keys split into heads by ``view`` alone (a mistake in 'mha' the catalogue does
    not hold) once made 'generate' name ``embedding_not_scaled``; a part whose callees behave wrongly
    now names only what their own probes name, and says where its failures come from."""
    impl = _broken(tmp_path, ("multihead.py", "K = self.W_K(key).view(B, Lk, self.num_heads, self.d_k).transpose(1, 2)",
                              "K = self.W_K(key).view(B, self.num_heads, Lk, self.d_k)"))
    found = diagnose.diagnose(impl, ["mha", "generate"])
    assert not found["generate"].matches and not found["generate"].partial
    assert found["generate"].caused_by[0] == "mha", found["generate"].caused_by
    assert "likely caused by a mistake in 'mha'" in found["generate"].message()
    assert not found["mha"].caused_by, "attention, which mha calls, is correct"


def test_an_upstream_mistake_is_named_downstream_only_as_its_parts(tmp_path):
    """A fixed attention dropout behaves in MiniGPT like blocks that keep their default dropout; only
    'mha''s own probes can tell, so MiniGPT names the mha mistake, as a mistake of that part."""
    impl = _broken(tmp_path, *BY_NAME["mha_dropout_argument_ignored"].patches)
    found = diagnose.diagnose(impl, ["mha", "minigpt"])
    assert found["mha"].names == ["mha_dropout_argument_ignored"]
    assert found["minigpt"].names == ["mha_dropout_argument_ignored"]
    assert "(a mistake in the 'mha' part)" in found["minigpt"].message()

def test_an_unknown_mistake_is_not_named(tmp_path):
    impl = _broken(tmp_path, ("masks.py", "torch.triu(ones, diagonal=1)", "torch.triu(ones, diagonal=3)"))
    d = diagnose.diagnose(impl, ["masks"])["masks"]
    assert d.differs_from_reference and not d.matches and not d.partial
    assert "no known mistake" in d.message()


def test_two_mistakes_at_once_give_partial_diagnoses_only(tmp_path):
    impl = _broken(tmp_path, ("feedforward.py", "return self.linear2(self.dropout(F.gelu(self.linear1(x))))",
                              "return self.dropout(self.linear2(F.relu(self.linear1(x))))"))  # two mistakes
    d = diagnose.diagnose(impl, ["ffn"])["ffn"]
    assert not d.matches
    assert {p.name for p in d.partial} == {"relu_instead_of_gelu", "ffn_dropout_after_linear2"}
    assert "(partial)" in d.message()


def test_a_submission_that_raises_is_described_not_crashed(tmp_path):
    impl = _broken(tmp_path, ("feedforward.py", "return self.linear2(self.dropout(F.gelu(self.linear1(x))))",
                              "raise RuntimeError('boom')"))
    f = behaviour.features(impl, ["ffn"])["ffn"]
    assert f["out"] == "raises RuntimeError"


def test_features_compare_within_tolerance():
    import torch

    a = behaviour.value(torch.tensor([1.0, float("nan")]))
    assert behaviour.same(a, behaviour.value(torch.tensor([1.0 + 1e-9, float("nan")])))
    assert not behaviour.same(a, behaviour.value(torch.tensor([1.1, float("nan")])))
    assert not behaviour.same(a, behaviour.value(torch.tensor([True, False])))
    assert not behaviour.same(a, "raises RuntimeError")


def test_grading_names_the_mistake_in_results_json(tmp_path):
    pkg = load_patched_reference(tmp_path, BY_NAME["padding_mask_inverted"].patches).origin
    out = tmp_path / "results.json"
    env = {k: v for k, v in os.environ.items() if k != diagnose.NO_DIAGNOSE_ENV}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "spec_tests/test_behaviours.py", "spec_tests/test_contract_basics.py",
         "-k", "mask", "-q", "-p", "no:cacheprovider", "--impl", str(Path(pkg).parent),
         "--grade-json", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    results = json.loads(out.read_text())
    failed = [t for t in results["tests"] if t["status"] == "failed" and "[masks]" in t["name"]]
    assert failed, proc.stdout[-2000:]
    # The diagnosis is stated once (the summary and extra_data), not under every failing test.
    assert "`padding_mask_inverted`" in results["extra_data"]["diagnoses"]["masks"]
    assert results["output"].count("Diagnosis for 'masks'") == 1
    assert all("`padding_mask_inverted`" not in t["output"] for t in failed)
    assert all("See the diagnosis for 'masks' above" in t["output"] for t in failed)
    assert proc.stdout.count("Diagnosis for 'masks'") == 1


def test_a_diagnosis_that_hangs_is_stopped():
    import time

    with pytest.raises(alarm.Expired, match="longer than 0.2 s"):
        alarm.call_within(0.2, lambda: time.sleep(5))
    assert alarm.call_within(1.0, lambda: 42) == 42


def test_the_per_component_limit_applies_inside_the_overall_limit():
    import signal
    import time

    def body():
        start = time.monotonic()
        with pytest.raises(alarm.Expired, match="the probes took longer than 1 s") as caught:
            with alarm.time_limit(1, "the probes") as inner:
                time.sleep(5)
        assert caught.value.of(inner), "the inner limit's own expiry"
        assert time.monotonic() - start < 3, "the inner 1 s limit stopped the sleep"
        return signal.getitimer(signal.ITIMER_REAL)[0]

    left = alarm.call_within(10.0, body)
    assert 7 < left < 9.5, "the outer limit is re-armed with the time it had left"


def test_an_outer_limit_that_ends_first_stays_in_charge():
    import time

    with pytest.raises(alarm.Expired) as caught:
        with alarm.time_limit(0.3, "the diagnosis") as outer:
            try:
                with alarm.time_limit(5, "one component") as inner:
                    time.sleep(3)
            except alarm.Expired as exc:
                assert not exc.of(inner)
                raise
    assert caught.value.of(outer)


def test_a_hanging_component_is_noted_and_the_next_one_still_runs(tmp_path, monkeypatch):
    import time

    monkeypatch.setattr(behaviour, "PROBE_TIME_LIMIT", 0.5)
    impl = _broken(tmp_path, ("masks.py", "return torch.triu(ones, diagonal=1)",
                              "import time; time.sleep(30)\n    return torch.triu(ones, diagonal=1)"))
    start = time.monotonic()
    found = behaviour.features(impl, ["masks", "position"])
    assert found["masks"].get("timeout") == "timeout"
    assert "sinusoidal" in found["position"] and time.monotonic() - start < 10


@pytest.mark.parametrize("case", range(2))
def test_a_mistake_no_pitfall_describes_gets_no_name(tmp_path, case):
    # Issue 13: a Post-LN default and a normalised residual stream were both named "dropout
    # applied to the residual sum", from one coincidental yes/no behaviour.
    from transformer_spec.diagnosis.accuracy import UNNAMED

    comp, description, patches = UNNAMED[case]
    d = diagnose.diagnose(_broken(tmp_path, *patches), [comp])[comp]
    assert d.differs_from_reference, description
    assert not d.matches and not d.partial, f"{description}: named {d.names or [p.name for p in d.partial]}"
    assert "no known mistake" in d.message()


# Through a course profile (issue 30): the catalogue runs through the course's API as a student's code does

def test_a_course_profiles_view_calls_its_functions_in_float32_and_returns_float64():
    import types

    import torch

    from transformer_spec.diagnosis.profiles import float32_view

    seen = []

    def run(x, weights, parameters, n):
        seen.append((x.dtype, {k: v.dtype for k, v in weights.items()}, parameters, n))
        return x * 2

    course = types.ModuleType("course")
    course.run, course.CONSTANT = run, 3
    view = float32_view(course)
    params = [torch.nn.Parameter(torch.ones(2, dtype=torch.float64))]
    out = view.run(torch.ones(2, dtype=torch.float64), {"w": torch.ones(1, dtype=torch.float64)}, params, 5)
    assert seen == [(torch.float32, {"w": torch.float32}, params, 5)]  # the list passes as it is (clipped in place)
    assert out.dtype == torch.float64 and view.CONSTANT == 3
    assert view.run(torch.ones(2, dtype=torch.int64), {}, [], 1).dtype == torch.int64  # nothing cast: nothing back


@pytest.mark.parametrize("name", ["cs336_keep_mask_read_as_blocked", "cs336_rmsnorm_eps_ignored",
                                  "rmsnorm_eps_outside_sqrt"])
def test_a_mistake_is_named_through_the_cs336_profile_and_correct_code_gets_no_name(tmp_path, name):
    from transformer_spec import profiles
    from transformer_spec.catalogue import cs336 as cs336_catalogue
    from transformer_spec.diagnosis import profiles as through

    cs336 = profiles.get("cs336")
    p = through.pitfall(name, cs336)
    cs336_catalogue.write_repository(tmp_path / "mistake", f"mistake_{name}", p.patches)  # a package name each
    sub = loader.load(str(tmp_path / "mistake"), profile=cs336)  # as the grading run loads a repository
    assert sub.error is None, sub.error
    found = diagnose.diagnose(through.submission(sub, cs336), [p.component], profile=cs336)[p.component]
    assert name in found.names, found.message()
    cs336_catalogue.write_repository(tmp_path / "correct", f"correct_{name}", ())
    correct = loader.load(str(tmp_path / "correct"), profile=cs336)
    assert not diagnose.diagnose(through.submission(correct, cs336), [p.component], profile=cs336)[p.component].names


def test_a_profile_of_ones_own_is_not_diagnosed():
    from transformer_spec import profiles
    from transformer_spec.diagnosis import profiles as through

    own = profiles.from_file(str(REPO / "docs" / "examples" / "course_profile.py"))
    assert not through.diagnosable(own) and through.diagnosable("cs336") and through.diagnosable(None)
    assert diagnose.annotate(loader.load("reference"), [], own) == diagnose.Annotations({}, {})


def test_a_part_is_blamed_only_where_its_caller_reaches_its_mistake(tmp_path):
    """Issue 44: a CS336 student's attention crashed only for ``mask=None``, and the diagnosis of their multi-head
    attention (always causal) said "fix attention first"; fixing it changed nothing. The calls a correct gqa makes
    into attention under the profile all carry the causal mask (:mod:`transformer_spec.diagnosis.reach`), so that crash is not
    reached there; an attention wrong for every mask is."""
    from transformer_spec import profiles
    from transformer_spec.diagnosis import catalogue as diagnosis_catalogue
    from transformer_spec.diagnosis import profiles as through
    from transformer_spec.diagnosis import reach

    cs336 = profiles.get("cs336")
    profiles.use(cs336)
    try:
        table = diagnosis_catalogue.catalogue_features(["gqa"], cs336)
        calls = table[reach.TABLE_KEY]["gqa"]["attention"]
        assert calls, "a correct gqa calls attention"
        tol = through.tolerance(cs336)
        for name, reached in (("mask_none_crashes", False), ("mask_inverted", True)):
            impl = through.implementation(cs336, tmp_path, name, BY_NAME[name].patches)
            assert reach.reached(calls, impl, tol) is reached, name
        assert reach.reached(None, impl, tol), "calls that could not be kept: the call graph decides, as before"
    finally:
        profiles.done()


def test_the_table_file_gives_back_the_table_it_was_given(tmp_path):
    """The packed file (one flat tensor per dtype) gives every value back: dtypes, shapes (0-d, empty,
    a transposed view), NaN, and the plain values beside them, tuples staying tuples."""
    import torch

    from transformer_spec.diagnosis import catalogue

    table = {"reference": {"attention": {
        "out": torch.arange(6, dtype=torch.float64).reshape(2, 3).t(), "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 4), "mask": torch.tensor([[True, False]]), "ids": torch.tensor([3, 1], dtype=torch.int64),
        "nan": torch.tensor([float("nan"), 1.0], dtype=torch.float32), "shape": (2, 3), "names": ["a", ("b", 1)],
        "flag": True, "none": None, "text": "\x00tensor"}}, "__free__": {"attention": ["out"]}}
    catalogue.save(table, tmp_path / "table.pt")
    back = catalogue.load(tmp_path / "table.pt")
    got, want = back["reference"]["attention"], table["reference"]["attention"]
    assert set(got) == set(want) and back["__free__"] == {"attention": ["out"]}
    for key, value in want.items():
        if isinstance(value, torch.Tensor):
            assert got[key].dtype == value.dtype and got[key].shape == value.shape, key
            assert torch.equal(torch.nan_to_num(got[key], nan=7.0), torch.nan_to_num(value, nan=7.0)), key
        else:
            assert got[key] == value and type(got[key]) is type(value), key
