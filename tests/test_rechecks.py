"""Every hidden re-check agrees with every correct implementation and disagrees with a known mistake.

A re-check that calls correct code wrong is worse than none (the class grader would void an honest
student's component, or call it ``tampering``), and one that cannot fail counts for nothing. So each
re-check is run in this process as the re-check child runs it (:func:`transformer_spec.grader.recheck.disagreement`:
the loaded submission, the same seeding, the same encoding of the answer, the parent's comparison)
and must agree with the reference's outputs on 20 seeds for the reference itself and for
``tests/independent/`` (written without looking at ``reference/``), agree for every allowed
variation (:mod:`transformer_spec.catalogue.variations`) on one seed (the kill matrix re-checks each on a fresh
secret seed in every run), and disagree with some pitfall of its
own component on each of three seeds. A public replay (the re-check on its anchor's own inputs,
``tests/test_recheck_replays.py``) is held the same way.
"""

from __future__ import annotations

import pytest

from transformer_spec.catalogue import placeholders
from transformer_spec.catalogue.patching import load_patched_reference
from transformer_spec.catalogue.variations import CATALOGUE
from transformer_spec.contract import names as contract
from transformer_spec.contract import registry, tracks
from transformer_spec.layout import ROOT
from transformer_spec.grader import recheck
from transformer_spec.submission import loader

# the module's `expected` (every re-check on the reference, 20 seeds each) takes about 100 s under CI's load,
# counted in the time of whichever test sets it up first
pytestmark = [pytest.mark.filterwarnings("ignore:Initializing zero-element tensors is a no-op"), pytest.mark.timeout(600)]

CHECKS = registry.rechecks()
SEEDS = [90_001 + 7_919 * i for i in range(20)]  # any seeds: the class grader draws a secret one
VARIATION_SEEDS = SEEDS[:1]  # the kill matrix grades every variation on a fresh secret seed in each run too


REPLAYED = [r for r in CHECKS if r.public is not None]


@pytest.fixture(scope="module")
def expected():
    """(re-check name, seed) -> the reference's outputs, as the parent computes them; seed
    ``recheck.PUBLIC``: at the re-check's public seed (its replay of the anchor's own inputs)."""
    secret = {(r.name, s): recheck.expected_outputs(s, [r.name])[r.name] for r in CHECKS for s in SEEDS}
    public = {(name, recheck.PUBLIC): out for name, out in recheck.expected_outputs(0, mode=recheck.PUBLIC).items()}
    return {**secret, **public}


def _disagreements(sub, checks, seeds, expected) -> list[str]:
    """What the class grader would say of ``sub`` (a loaded submission, as the child passes it);
    a seed ``recheck.PUBLIC`` is the public replay."""
    return [f"{r.name} seed {s}: {why}" for r in checks for s in seeds
            if (why := recheck.disagreement(r, sub, 0 if s == recheck.PUBLIC else s, expected[(r.name, s)],
                                            recheck.PUBLIC if s == recheck.PUBLIC else recheck.SECRET)) is not None]


def test_every_component_is_rechecked():
    unchecked = [c.name for c in registry.components() if not c.rechecks]
    assert unchecked == [], "components without re-checks"


@pytest.mark.slow
@pytest.mark.parametrize("who", ["reference", "classic", "modern"])
def test_rechecks_agree_with_correct_implementations_on_many_seeds(who, expected):
    """The reference on every re-check; each track's independent implementation on its track's."""
    if who == "reference":
        sub, checks = loader.load("reference"), CHECKS
    else:
        sub = loader.load(str(ROOT / tracks.get(who).independent))
        # the padding-mask re-check's anchor is classic only (padding_mask is not a modern-track name)
        checks = [r for r in CHECKS if r.component in tracks.component_names(who)
                  and not (who == "modern" and r.name == "padding_mask")]
    assert _disagreements(sub, checks, SEEDS, expected) == []
    assert _disagreements(sub, [r for r in REPLAYED if r in checks], [recheck.PUBLIC], expected) == []


@pytest.mark.parametrize("variation", CATALOGUE, ids=lambda v: v.name)
def test_rechecks_agree_with_every_allowed_variation(variation, expected, tmp_path):
    sub = load_patched_reference(tmp_path, variation.patches, f"v_{variation.name}")
    assert _disagreements(sub, CHECKS, VARIATION_SEEDS, expected) == []
    assert _disagreements(sub, REPLAYED, [recheck.PUBLIC], expected) == []


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    """Pitfall name -> the reference with that mistake (every pitfall of a re-checked component, and its
    placeholder: its output replaced by zeros, transformer_spec/catalogue/placeholders.py)."""
    root = tmp_path_factory.mktemp("pitfalls")
    return {p.name: load_patched_reference(root, p.patches, f"p_{p.name}")
            for c in {r.component for r in CHECKS} for p in _mistakes(c)}


def _mistakes(component: str) -> list:
    """The pitfalls of ``component`` and its placeholder (a re-check of a law a constant fails refutes that one)."""
    return [*registry.get(component).pitfalls, *placeholders.rows([component])]


@pytest.mark.parametrize("check", CHECKS, ids=lambda r: r.name)
def test_each_recheck_fails_a_pitfall_of_its_component(check, broken, expected):
    """Some pitfall of the component is caught on each of three seeds (not by one lucky draw)."""
    caught = [p.name for p in _mistakes(check.component)
              if len(_disagreements(broken[p.name], [check], SEEDS[:3], expected)) == 3]
    assert caught, f"re-check {check.name} agrees with every pitfall of {check.component}: it cannot fail"


@pytest.mark.parametrize("check", REPLAYED, ids=lambda r: r.name)
def test_each_public_replay_fails_a_pitfall_of_its_component(check, broken, expected):
    caught = [p.name for p in registry.get(check.component).pitfalls
              if _disagreements(broken[p.name], [check], [recheck.PUBLIC], expected)]
    assert caught, f"the public replay of {check.name} agrees with every pitfall of {check.component}"


def test_a_greedy_twin_is_judged_on_the_submissions_own_logits(broken, expected):
    """A mistake in the model's other parts (ReLU in the FFN) changes the tokens but not whether they
    are the argmax of the model's own logits: it costs generate nothing, as in pytest."""
    greedy = recheck.by_name()["generate[greedy]"]
    assert _disagreements(broken["relu_instead_of_gelu"], [greedy], SEEDS[:3], expected) == []
    assert len(_disagreements(broken["generate_reads_first_position"], [greedy], SEEDS[:3], expected)) == 3


ALWAYS_RAISES = '''"""Every call raises a ValueError naming every argument: argument checks that check nothing."""
import torch

ARGUMENTS = ("q k v mask scale seq_len tokens pad_id d_model num_heads d_ff dropout max_len vocab_size "
             "num_layers x query key value batch memory src tgt seed_tokens vocab max_new_tokens "
             "temperature top_k generator Lk d_k")


def _raise(*args, **kwargs):
    raise ValueError(f"invalid argument: check {ARGUMENTS}")


class _Raises(torch.nn.Module):
    def __init__(self, *args, **kwargs):
        _raise()


for _name in NAMES.split():
    globals()[_name] = type(_name, (_Raises,), {}) if _name[0].isupper() else _raise
'''


def test_every_errors_check_has_a_valid_arguments_control(tmp_path, expected):
    """Code whose every call raises a ValueError naming every argument gets nothing in 'errors':
    each golden errors test first makes the same call with valid arguments (it must not raise), and
    each errors re-check disagrees with it on every seed, as its anchor fails it."""
    from tests.test_grading import by_component, grade_in_subprocess

    path = tmp_path / "always_raises.py"
    path.write_text(f"NAMES = {' '.join(contract.top_level())!r}\n" + ALWAYS_RAISES)
    sub = loader.load(str(path))
    errors = [r for r in CHECKS if r.component == "errors"]
    for check in errors:
        assert len(_disagreements(sub, [check], SEEDS[:3], expected)) == 3, check.name
    results = grade_in_subprocess(tmp_path, "spec_tests/test_bad_arguments.py", "spec_tests/test_behaviours.py",
                                  impl=str(path))
    earned, possible = by_component(results)["errors"]
    assert possible > 0 and earned == 0, f"errors: {earned} / {possible} for code that raises on every call"


def test_the_valid_arguments_control_fails_only_a_rejection_naming_the_argument():
    """The control of an argument check (``testing.assert_accepts``) fails when the valid call is
    rejected as the bad one must be (ValueError or TypeError naming the argument); any other error is
    a mistake elsewhere, charged by that part's own tests (``keys_not_transposed`` once cost 48 tests
    of 'errors' through the RuntimeError of its attention, now the 5 it cost before the control)."""
    from transformer_spec.probes.testing import assert_accepts

    def raising(exc):
        def call():
            raise exc
        return "f(valid)", call

    for exc in (RuntimeError("mat1 and mat2 shapes cannot be multiplied"), IndexError("dim"),
                TypeError("forward() takes 2 positional arguments but 3 were given"), ValueError("too many values")):
        assert_accepts(raising(exc), "f", ("num_heads", "d_model"))
    for exc in (ValueError("num_heads must divide d_model"), TypeError("D_MODEL must be an int")):
        with pytest.raises(AssertionError, match="valid arguments"):
            assert_accepts(raising(exc), "f", ("num_heads", "d_model"))
    assert_accepts(("f()", lambda: None), "f", ("num_heads",))


def test_a_recheck_judged_by_a_law_has_no_public_replay():
    """A public replay is proof only where its anchor compares with the reference's numbers: an anchor
    judged by a law on the submission's own outputs (generate: each token the argmax of its own logits)
    passes honest code whose other parts differ from the reference, so its replay would call it false."""
    both = [r.name for r in registry.rechecks() if r.law is not None and r.public is not None]
    assert both == [], f"re-checks judged by a law but with a public replay: {both}"


EVERY_SECOND_CALL = ALWAYS_RAISES.replace('''def _raise(*args, **kwargs):
    raise ValueError(f"invalid argument: check {ARGUMENTS}")''', '''_CALLS = [0]


def _raise(*args, **kwargs):
    _CALLS[0] += 1
    if _CALLS[0] % 2 == 0:
        raise ValueError(f"invalid argument: check {ARGUMENTS}")''').replace('''class _Raises(torch.nn.Module):
    def __init__(self, *args, **kwargs):
        _raise()''', '''class _Raises(torch.nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        _raise()''')


def test_errors_rechecks_are_not_fooled_by_raising_on_every_second_call(tmp_path, expected):
    """Issue 45, attack 11: constructors that raise a ValueError naming every argument on every second call
    (the bad call came second in every re-check) pass no errors re-check on every seed: the secret seed draws how
    many valid calls come before the bad one, and one comes after it."""
    path = tmp_path / "every_second_call.py"
    path.write_text(f"NAMES = {' '.join(contract.top_level())!r}\n" + EVERY_SECOND_CALL)
    sub = loader.load(str(path))
    errors = [r for r in CHECKS if r.component == "errors"]
    refuted = [check.name for check in errors if _disagreements(sub, [check], SEEDS[:3], expected)]
    assert len(refuted) == len(errors), sorted({c.name for c in errors} - set(refuted))


@pytest.mark.slow
@pytest.mark.parametrize("repo", ["cs336_reference", "cs336_independent"])
def test_the_rechecks_of_the_cs336_tests_agree_with_correct_code_through_the_adapters(repo, expected):
    """Under ``--profile cs336`` the re-check child calls the course's adapters (the profile's loader), as the
    tests do: every re-check anchored to a test the profile collects (its float32 formula tests, the training
    utilities') agrees with correct code behind CS336-style adapters, on secret seeds and on the public replay."""
    from tools import twins
    from transformer_spec import profiles

    anchored = set(twins.collected("modern", "cs336"))
    checks = [r for r in CHECKS if anchored.intersection(r.anchors)]
    assert {r.component for r in checks} >= {"attention", "rmsnorm", "rotary", "gqa", "llama_block", "minillama"}
    profile = profiles.get("cs336")
    profiles.use(profile)
    try:
        sub = loader.load(str(ROOT / "tests" / "profiles" / repo), profile=profile)
        assert sub.error is None, sub.error
        assert _disagreements(sub, checks, SEEDS[:5], expected) == []
        assert _disagreements(sub, [r for r in REPLAYED if r in checks], [recheck.PUBLIC], expected) == []
    finally:
        profiles.done()
