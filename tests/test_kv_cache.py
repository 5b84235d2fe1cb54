"""Properties of the reference's KV cache (``MiniGPT.forward_cached``, ``MiniGPT.forward_step``,
``generate(use_cache=...)``).

The cache is outside the contract (a submission's ``generate`` is held only to the contract),
so these are tests of the reference, loaded through the loader, and carry no component marker.
The laws: with the same weights, cached and uncached generation choose the same tokens (greedy,
and sampling with equally seeded generators), and the logits of every step agree within
tolerance, for sequences that stay within ``max_len`` and for ones that outgrow it (the window
slides, and the cache must start again from the window).

Token equality is tested in float64: in float32 the ~1e-7 differences between the cached and the
uncached sums could, rarely, flip an argmax between two nearly equal logits of a random model.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_spec.catalogue.patching import load_patched_reference
from transformer_spec.probes.assertions import assert_close, tolerance
from transformer_spec.probes.testing import assert_property_fails
from transformer_spec.submission import loader


def budget(fraction: float) -> settings:
    """``fraction`` of the active profile's examples (at least 3), so that ``thorough`` scales too."""
    return settings(max_examples=max(3, round(settings.default.max_examples * fraction)))


@pytest.fixture(scope="module")
def ref() -> loader.Submission:
    return loader.load("reference")


@st.composite
def model_configs(draw) -> dict:
    num_heads = draw(st.sampled_from([1, 2, 4]))
    return dict(
        vocab_size=draw(st.integers(2, 17)),
        d_model=num_heads * draw(st.sampled_from([2, 4])),
        num_heads=num_heads,
        num_layers=draw(st.integers(1, 2)),
        d_ff=draw(st.sampled_from([4, 16])),
        max_len=draw(st.integers(1, 10)),
        dropout=0.1,  # generate must switch it off (eval mode) in both paths
    )


@st.composite
def generation_cases(draw, regime: str) -> tuple[dict, list[int], int, int]:
    """``(config, seed_tokens, max_new_tokens, weight_seed)``; ``regime`` is ``within`` (the
    sequence never exceeds ``max_len``) or ``beyond`` (it does, so the window slides)."""
    config = draw(model_configs())
    max_len = config["max_len"]
    if regime == "within":
        config["max_len"] = max_len = max(max_len, 2)  # room for at least one seed and one new token
        seed_len = draw(st.integers(1, max_len - 1))
        new = draw(st.integers(1, max_len - seed_len))
    else:
        seed_len = draw(st.integers(1, max_len + 3))
        new = draw(st.integers(max(1, max_len + 1 - seed_len), max_len + 6))
    seed_tokens = draw(st.lists(st.integers(0, config["vocab_size"] - 1), min_size=seed_len, max_size=seed_len))
    return config, seed_tokens, new, draw(st.integers(0, 2**16))


def build(ref: loader.Submission, config: dict, weight_seed: int, dtype=torch.float64) -> torch.nn.Module:
    torch.manual_seed(weight_seed)
    model = ref.MiniGPT(**config).to(dtype)
    with torch.no_grad():
        # Larger embeddings than the 0.02 init: distinct logits, so a wrong cache changes tokens.
        model.token_embed.weight.normal_(0.0, 1.0)
    return model


def generate_recording(model, seed_tokens, new, use_cache, **sampling) -> tuple[list[int], torch.Tensor]:
    """The generated tokens and the logits of the last position at every step ``(new, vocab)``."""
    steps: list[torch.Tensor] = []

    def record(_module, _inputs, out):
        # uncached: (1, L, vocab), every position of the window; cached: (1, vocab), the last one
        steps.append((out[0, -1] if out.dim() == 3 else out[0]).detach().clone())

    handle = model.lm_head.register_forward_hook(record)
    try:
        tokens = model.generate(seed_tokens, max_new_tokens=new, use_cache=use_cache, **sampling)
    finally:
        handle.remove()
    return tokens, torch.stack(steps)


def describe(config, seed_tokens, new) -> str:
    total = len(seed_tokens) + new
    return (f"MiniGPT({config}), seed of {len(seed_tokens)} token(s) {seed_tokens}, {new} new: "
            f"{total} tokens against max_len={config['max_len']}")


@pytest.mark.parametrize("regime", ["within", "beyond"])
@budget(0.5)
@given(data=st.data())
def test_greedy_cached_generation_equals_recomputation(regime, data, ref):
    config, seed_tokens, new, weight_seed = data.draw(generation_cases(regime))
    model = build(ref, config, weight_seed)
    cached, cached_logits = generate_recording(model, seed_tokens, new, True, temperature=0)
    plain, plain_logits = generate_recording(model, seed_tokens, new, False, temperature=0)
    where = describe(config, seed_tokens, new)
    assert_close(cached_logits, plain_logits, what=f"logits of each step, use_cache=True vs False, {where}")
    assert cached == plain, f"greedy tokens differ with and without the cache, {where}: {cached} vs {plain}"


@pytest.mark.parametrize("regime", ["within", "beyond"])
@budget(0.5)
@given(data=st.data(), temperature=st.sampled_from([0.5, 1.0, 2.0]), top_k=st.sampled_from([None, 1, 3]),
       sample_seed=st.integers(0, 2**16))
def test_sampled_cached_generation_equals_recomputation(regime, data, temperature, top_k, sample_seed, ref):
    config, seed_tokens, new, weight_seed = data.draw(generation_cases(regime))
    model = build(ref, config, weight_seed)
    sampling = dict(temperature=temperature, top_k=top_k)
    cached, cached_logits = generate_recording(model, seed_tokens, new, True, **sampling,
                                               generator=torch.Generator().manual_seed(sample_seed))
    plain, plain_logits = generate_recording(model, seed_tokens, new, False, **sampling,
                                             generator=torch.Generator().manual_seed(sample_seed))
    where = describe(config, seed_tokens, new) + f", temperature={temperature}, top_k={top_k}"
    assert_close(cached_logits, plain_logits, what=f"logits of each step, use_cache=True vs False, {where}")
    assert cached == plain, (f"sampled tokens differ with and without the cache (same generator seed "
                             f"{sample_seed}), {where}: {cached} vs {plain}")


@budget(0.5)
@given(config=model_configs(), prefill=st.integers(1, 10), weight_seed=st.integers(0, 2**16),
       dtype=st.sampled_from([torch.float64, torch.float32]), data=st.data())
def test_forward_cached_logits_match_forward(config, prefill, weight_seed, dtype, data, ref):
    """Prefill the caches with ``prefill`` tokens, then feed one token at a time up to ``max_len``:
    every step's logits equal those of ``forward`` on the whole prefix."""
    max_len = config["max_len"]
    prefill = min(prefill, max_len)
    tokens = torch.tensor([data.draw(st.lists(st.integers(0, config["vocab_size"] - 1),
                                              min_size=max_len, max_size=max_len))])
    model = build(ref, config, weight_seed, dtype).eval()
    caches = [ref.module.kv_cache.KVCache() for _ in model.blocks]
    with torch.no_grad():
        for end in range(prefill, max_len + 1):
            start = 0 if end == prefill else end - 1
            got = model.forward_cached(tokens[:, start:end], caches)
            expected = model(tokens[:, :end])[0][:, -1]
            assert_close(got, expected, **tolerance(dtype),
                         what=f"forward_cached logits at position {end - 1} (prefill {prefill}, "
                              f"max_len {max_len}, {dtype}) vs forward")
            assert all(len(c) == end for c in caches), f"after position {end - 1} the caches hold " \
                f"{[len(c) for c in caches]} positions, expected {end}"


@budget(0.5)
@given(config=model_configs(), prefill=st.integers(1, 10), weight_seed=st.integers(0, 2**16),
       dtype=st.sampled_from([torch.float64, torch.float32]), data=st.data())
def test_forward_step_logits_match_forward(config, prefill, weight_seed, dtype, data, ref):
    """``forward_step``, the fused one-position path of cached generation: after a prefill of
    ``prefill`` tokens by ``forward_cached``, every step's logits equal ``forward``'s on the prefix."""
    max_len = config["max_len"]
    prefill = min(prefill, max_len)
    tokens = data.draw(st.lists(st.integers(0, config["vocab_size"] - 1), min_size=max_len, max_size=max_len))
    model = build(ref, config, weight_seed, dtype).eval()
    caches = [ref.module.kv_cache.KVCache() for _ in model.blocks]
    weights = [ref.module.kv_cache.step_weights(block) for block in model.blocks]
    with torch.no_grad():
        model.forward_cached(torch.tensor([tokens[:prefill]]), caches)
        for end in range(prefill + 1, max_len + 1):
            got = model.forward_step(tokens[end - 1], caches, weights)
            expected = model(torch.tensor([tokens[:end]]))[0][:, -1]
            assert_close(got, expected, **tolerance(dtype),
                         what=f"forward_step logits at position {end - 1} (prefill {prefill}, "
                              f"max_len {max_len}, {dtype}) vs forward")


@pytest.mark.parametrize("seed_len, new, max_len, expected", [
    (3, 5, 8, [3, 1, 1, 1, 1]),  # prefill the seed, then one position per step
    (3, 4, 4, [3, 1, 4, 4]),     # from the 5th token on, the window slides: each step recomputes it
    (6, 2, 4, [4, 4]),           # a seed longer than max_len: its last max_len tokens
])
def test_cached_generation_feeds_one_position_per_step(seed_len, new, max_len, expected, ref, monkeypatch):
    """Not a law but the point of the cache: after the prefill each step computes the keys and
    values of one position (its one layer's cache grows by one), until the window slides."""
    model = build(ref, dict(vocab_size=5, d_model=8, num_heads=2, num_layers=1, d_ff=8, max_len=max_len), 0)
    lengths: list[int] = []
    cache_class = ref.module.kv_cache.KVCache
    extend = cache_class.extend

    def recording_extend(self, keys, values):
        lengths.append(keys.size(-2))
        return extend(self, keys, values)

    monkeypatch.setattr(cache_class, "extend", recording_extend)
    model.generate([1] * seed_len, max_new_tokens=new, temperature=0)
    assert lengths == expected, f"positions computed per step: expected {expected}, got {lengths}"


# --------------------------------------------------------------------------- the tests can fail

def test_properties_catch_a_cache_that_forgets_earlier_positions(tmp_path):
    # The new position attends only to itself instead of to every cached one.
    broken = load_patched_reference(tmp_path, [("kv_cache.py", "return self.keys, self.values", "return keys, values")])
    assert_property_fails(test_forward_cached_logits_match_forward, ref=broken, match="forward_cached logits")
    assert_property_fails(test_greedy_cached_generation_equals_recomputation, regime="within", ref=broken,
                          match="use_cache=True vs False")


def test_properties_catch_cached_positions_at_the_wrong_offset(tmp_path):
    # Every new token gets position 0's encoding instead of its own.
    broken = load_patched_reference(tmp_path, [("minigpt.py", "D, position = self.d_model, len(caches[0])",
                                                "D, position = self.d_model, 0")])
    assert_property_fails(test_forward_step_logits_match_forward, ref=broken, match="forward_step logits")
    assert_property_fails(test_greedy_cached_generation_equals_recomputation, regime="within", ref=broken)


def test_properties_catch_a_fused_step_without_the_attention_scale(tmp_path):
    # The fused step's stacked W_Q lacks its 1/sqrt(d_k).
    broken = load_patched_reference(tmp_path, [("kv_cache.py", "attn.W_Q.weight / math.sqrt(attn.d_k)",
                                                "attn.W_Q.weight")])
    assert_property_fails(test_forward_step_logits_match_forward, ref=broken, match="forward_step logits")


def test_properties_catch_a_prefill_from_the_wrong_window(tmp_path):
    # When the window slides, refill the caches from the first max_len tokens instead of the last.
    broken = load_patched_reference(tmp_path, [(
        "minigpt.py",
        "window = torch.tensor([tokens[-self.max_len:]], device=device)\n"
        "                        next_logits = self.forward_cached",
        "window = torch.tensor([tokens[:self.max_len]], device=device)\n"
        "                        next_logits = self.forward_cached",
    )])
    assert_property_fails(test_greedy_cached_generation_equals_recomputation, regime="beyond", ref=broken)
