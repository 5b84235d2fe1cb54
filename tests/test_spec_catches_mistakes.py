"""The golden tests catch the mistakes seed 001 section 10 warns about, and a missing sqrt(d_k).

Each mistake is a small patch of the reference (:mod:`transformer_spec.catalogue.patching`); the golden
test functions of ``spec_tests/`` are called directly with ``impl=<broken copy>`` and must fail
with an ``AssertionError``. The same functions pass on the unpatched reference (checked here
too, so a failure is the patch's doing). Also: the hand-derived literals of the golden files are
re-derived with plain Python arithmetic (no torch), so a typo in them cannot hide.

* "mask 忘了加" (mask forgotten): in scaled_dot_product_attention, and MiniGPT's causal mask.
* "shape 搞混" (shapes mixed up): heads split with ``view(B, H, L, d_k)`` instead of
  ``view(B, L, H, d_k).transpose(1, 2)``; heads merged without transposing back.
* "softmax 维度写错" (softmax over the wrong dimension): ``dim=-2`` (the queries).
* missing sqrt(d_k): ``scale = 1.0`` when ``scale=None``.
* a finite mask fill, ``masked_fill(mask, -1e9)`` (seed 001 section 11's exercise) or -1e4, where
  the contract's masks mean -inf: an allowed score below the fill loses to the blocked key.
"""

import math

import pytest
import torch

from spec_tests import test_behaviours as behaviours
from spec_tests import test_blocked_keys as blocked_keys
from spec_tests import test_seed000_facts as seed000
from spec_tests import test_seed001_worked_example as seed001
from spec_tests import test_snapshots as snapshots
from spec_tests import test_torch_oracle as oracle
from transformer_spec.catalogue.patching import load_patched_reference
from transformer_spec.catalogue.pitfalls import by_name
from transformer_spec.submission import loader

PITFALLS = by_name()

F32 = torch.float32

MISTAKES = {
    "mask_forgotten_in_attention": [
        ("attention.py", "if mask is not None:", "if False:  # the mask is forgotten"),
    ],
    "causal_mask_forgotten_in_minigpt": [
        ("minigpt.py", "x, weights = block(x, mask)", "x, weights = block(x, None)"),
    ],
    "shapes_mixed_up_when_splitting_heads": [
        ("multihead.py", "self.W_Q(query).view(B, Lq, self.num_heads, self.d_k).transpose(1, 2)",
         "self.W_Q(query).view(B, self.num_heads, Lq, self.d_k)"),
        ("multihead.py", "self.W_K(key).view(B, Lk, self.num_heads, self.d_k).transpose(1, 2)",
         "self.W_K(key).view(B, self.num_heads, Lk, self.d_k)"),
        ("multihead.py", "self.W_V(value).view(B, Lk, self.num_heads, self.d_k).transpose(1, 2)",
         "self.W_V(value).view(B, self.num_heads, Lk, self.d_k)"),
    ],
    "shapes_mixed_up_when_merging_heads": [
        ("multihead.py", "heads.transpose(1, 2).reshape(B, Lq, self.d_model)", "heads.reshape(B, Lq, self.d_model)"),
    ],
    "softmax_over_the_wrong_dim": [
        ("attention.py", "weights = F.softmax(scores, dim=-1)", "weights = F.softmax(scores, dim=-2)"),
    ],
    "missing_sqrt_dk_scaling": [
        ("attention.py", "scale = 1.0 / math.sqrt(q.size(-1))", "scale = 1.0"),
    ],
    # issue 13, as the pitfall catalogue writes them
    "finite_mask_fill_1e9": list(PITFALLS["finite_mask_fill"].patches),
    "finite_mask_fill_1e4": list(PITFALLS["finite_mask_fill_1e4"].patches),
}

# For each mistake, golden test functions (with their non-fixture arguments) that must fail.
CATCHES = {
    "mask_forgotten_in_attention": [
        (seed001.test_exercise_11_2_causal_mask, {"dtype": F32}),
        (seed001.test_weighted_values_9_6, {"dtype": F32}),
        (behaviours.test_mask_true_means_blocked, {"dtype": F32}),
        (oracle.test_sdpa_matches_torch, {"dtype": F32, "mask_kind": "random", "scale": None}),
        (oracle.test_multihead_self_attention_matches_torch, {"dtype": F32, "mask_kind": "causal"}),
        (snapshots.test_minigpt_logits_snapshot, {"dtype": F32}),
    ],
    "causal_mask_forgotten_in_minigpt": [
        (snapshots.test_minigpt_logits_snapshot, {"dtype": F32}),
        (snapshots.test_minigpt_attention_maps_snapshot, {"dtype": F32}),
        (snapshots.test_minigpt_prefix_logits_snapshot, {"dtype": F32}),
    ],
    "shapes_mixed_up_when_splitting_heads": [
        (oracle.test_multihead_attention_matches_torch, {"dtype": F32, "mask_kind": "none"}),
        (oracle.test_multihead_self_attention_matches_torch, {"dtype": F32, "mask_kind": "none"}),
        (oracle.test_encoder_block_matches_torch, {"dtype": F32, "norm_first": True, "mask_kind": "none"}),
        (snapshots.test_minigpt_logits_snapshot, {"dtype": F32}),
    ],
    "shapes_mixed_up_when_merging_heads": [
        (oracle.test_multihead_attention_matches_torch, {"dtype": F32, "mask_kind": "none"}),
        (oracle.test_decoder_block_matches_torch, {"dtype": F32, "norm_first": False, "mask_kind": "none"}),
        (snapshots.test_minigpt_logits_snapshot, {"dtype": F32}),
    ],
    "softmax_over_the_wrong_dim": [
        (seed001.test_softmax_weights_9_5, {"dtype": F32}),
        (seed001.test_unscaled_logits_9_4, {"dtype": F32}),
        (seed001.test_output_9_6, {"dtype": F32}),
        (oracle.test_sdpa_matches_torch, {"dtype": F32, "mask_kind": "none", "scale": None}),
        (behaviours.test_mask_true_means_blocked, {"dtype": F32}),
    ],
    "missing_sqrt_dk_scaling": [
        (seed001.test_exercise_11_1_scaled_by_sqrt_dk, {"dtype": F32}),
        (seed000.test_sqrt_dk_experiment_of_step_8, {}),
        (oracle.test_sdpa_matches_torch, {"dtype": F32, "mask_kind": "none", "scale": None}),
        (oracle.test_multihead_attention_matches_torch, {"dtype": F32, "mask_kind": "none"}),
    ],
    "finite_mask_fill_1e9": [
        (blocked_keys.test_blocked_key_gets_zero_weight_when_the_allowed_score_is_very_low,
         {"dtype": dtype, "allowed_score": -1e12}) for dtype in (F32, torch.float64)
    ],
    "finite_mask_fill_1e4": [
        (blocked_keys.test_blocked_key_gets_zero_weight_when_the_allowed_score_is_very_low,
         {"dtype": dtype, "allowed_score": score}) for dtype in (F32, torch.float64) for score in (-2e4, -1e12)
    ],
}


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    made = {}

    def get(mistake):
        if mistake not in made:
            made[mistake] = load_patched_reference(tmp_path_factory.mktemp(mistake), MISTAKES[mistake], mistake)
            assert made[mistake].error is None, made[mistake].error
        return made[mistake]

    return get


def _cases():
    for mistake, catches in CATCHES.items():
        for fn, kwargs in catches:
            args = ",".join(f"{k}={'f32' if v is F32 else v}" for k, v in kwargs.items())
            yield pytest.param(mistake, fn, kwargs, id=f"{mistake}-{fn.__name__}[{args}]")


def test_every_mistake_has_catches():
    assert set(CATCHES) == set(MISTAKES)
    assert all(len(c) >= 1 for c in CATCHES.values())


@pytest.mark.parametrize(("mistake", "fn", "kwargs"), list(_cases()))
def test_golden_test_fails_on_the_mistake(broken, mistake, fn, kwargs):
    with pytest.raises(AssertionError):
        fn(impl=broken(mistake), **kwargs)


@pytest.mark.parametrize(("mistake", "fn", "kwargs"), list(_cases()))
def test_golden_test_passes_on_the_reference(mistake, fn, kwargs):
    fn(impl=loader.load("reference"), **kwargs)


# ---------------------------------------------------------------- the literals, re-derived
def _matmul(a, b):
    return [[sum(a[i][t] * b[t][j] for t in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]


def _softmax(row):
    m = max(row)
    e = [math.exp(x - m) for x in row]
    return [x / sum(e) for x in e]


def _close(actual, expected, rel=1e-11, abs_=1e-14):
    flat_a = list(_flatten(actual))
    flat_e = list(_flatten(expected))
    assert len(flat_a) == len(flat_e)
    for a, e in zip(flat_a, flat_e, strict=True):
        assert a == pytest.approx(e, rel=rel, abs=abs_), (a, e)


def _flatten(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _flatten(y)
    else:
        yield x


def test_seed001_literals_rederived_by_plain_arithmetic():
    s = seed001
    assert _matmul(s.X, s.W_KEY) == s.KEYS
    assert _matmul(s.X, s.W_QUERY) == s.QUERIES
    assert _matmul(s.X, s.W_VALUE) == s.VALUES
    keys_t = [list(c) for c in zip(*s.KEYS, strict=True)]
    assert _matmul(s.QUERIES, keys_t) == s.LOGITS
    weights = [_softmax(r) for r in s.LOGITS]
    _close(s.WEIGHTS, weights)
    _close(s.OUTPUT, _matmul(weights, s.VALUES))
    scaled = [_softmax([x / math.sqrt(3) for x in r]) for r in s.LOGITS]
    _close(s.SCALED_WEIGHTS, scaled)
    _close(s.SCALED_OUTPUT, _matmul(scaled, s.VALUES))
    causal = [_softmax([x if not s.CAUSAL_MASK_3[i][j] else -1e9 for j, x in enumerate(r)])
              for i, r in enumerate(s.LOGITS)]
    _close(s.CAUSAL_WEIGHTS, causal)
    _close(s.CAUSAL_OUTPUT, _matmul(causal, s.VALUES))
    simple = s.ATTN_WEIGHTS_SIMPLE
    wv = [[[simple[i][j] * c for c in s.VALUES[j]] for i in range(3)] for j in range(3)]
    _close(s.WEIGHTED_VALUES, wv)
    _close(s.WEIGHTED_SUM, [[sum(wv[j][i][c] for j in range(3)) for c in range(3)] for i in range(3)])
    _close(s.WEIGHTED_SUM, _matmul(simple, s.VALUES))


def test_seed000_literals_rederived_by_plain_arithmetic():
    for pos, feature, value in seed000.PE_ENTRIES:
        angle = pos / 10000 ** ((feature // 2 * 2) / 8)
        assert value == pytest.approx(math.sin(angle) if feature % 2 == 0 else math.cos(angle), rel=1e-12, abs=1e-15)
    import torch.nn as nn

    assert seed000.MHA_COUNT == sum(p.numel() for p in nn.Linear(512, 512, bias=False).parameters()) * 4
    ffn = nn.Sequential(nn.Linear(512, 2048), nn.Linear(2048, 512))
    assert seed000.FFN_COUNT == sum(p.numel() for p in ffn.parameters())
