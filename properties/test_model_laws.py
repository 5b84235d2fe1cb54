"""Laws of MiniGPT, its generate, and Seq2SeqTransformer (components ``minigpt``, ``generate``,
``seq2seq``).

Weight tying (one tensor, logits h W^T, gradient from both uses), batch independence, generate (top_k=1 is
greedy, tokens stay in the vocabulary, sequences longer than max_len use the last max_len
tokens, a generator makes sampling reproducible, the train/eval mode is restored), source
padding does not change Seq2Seq logits. Models are tiny (d_model <= 4, <= 2 layers) with
every parameter seeded (``strategies.build``).
"""

from __future__ import annotations

import re

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from transformer_spec.probes.assertions import assert_close

from .modules import minigpt, seq2seq
from .strategies import budget, configs, law_tolerance, token_batches

gpt_configs = configs(max_dk=2)
vocabs = st.integers(2, 9)


@pytest.mark.component("minigpt")
@budget(0.5)
@given(config=configs(min_dk=2, max_dk=3, dtype=torch.float64), vocab=st.integers(3, 9), data=st.data())
def test_minigpt_weight_tying_shares_one_tensor_and_gets_gradient_from_both_uses(impl, config, vocab, data):
    """lm_head.weight is token_embed.weight, the logits are ``h W^T`` and the gradient of W has both parts.

    Seen from behaviour alone, so a tied head may be the ``lm_head`` module or
    ``F.linear(h, token_embed.weight)`` (the contract leaves it free). Token ``u = vocab - 1`` never
    occurs in the input, so row ``W[u]`` reaches only logit ``u``, linearly: setting it to each unit
    vector reads off the final hidden states ``h``. Then every logit must be ``h . W[v]`` (no bias,
    no other matrix), the gradient of each row absent from the input must be the head's part
    ``sum R[..., v] h``, and rows of input tokens must get more (the embedding's part too)."""
    tokens = data.draw(token_batches(vocab - 1), label="tokens")  # ids 0 .. vocab - 2
    model = minigpt(impl, config, vocab)
    W = model.token_embed.weight
    assert model.lm_head.weight is W or (
        model.lm_head.weight.data_ptr() == W.data_ptr() and model.lm_head.weight.shape == W.shape
    ), "MiniGPT: lm_head.weight must be the same tensor as token_embed.weight (weight tying)"
    u, d_model = vocab - 1, W.shape[1]
    with torch.no_grad():
        saved = W[u].clone()
        W[u] = 0.0
        base = model(tokens)[0][..., u]
        probes = []
        for j in range(d_model):
            W[u] = torch.eye(d_model, dtype=W.dtype)[j]
            probes.append(model(tokens)[0][..., u] - base)
        W[u] = saved
    hidden = torch.stack(probes, dim=-1)  # (B, L, D): the final hidden states the head scores
    logits, _ = model(tokens)
    assert_close(logits, hidden @ W.detach().T, **law_tolerance(config.dtype),
                 what="MiniGPT logits vs h @ token_embed.weight^T, h read off through the unused token "
                      f"{u}'s row (a tied, bias-free head: logits = lm_head(h) with lm_head.weight = W)")
    R = torch.randn(logits.shape, generator=torch.Generator().manual_seed(config.seed), dtype=logits.dtype)
    model.zero_grad()
    (logits * R).sum().backward()
    assert W.grad is not None, "token_embed.weight got no gradient"
    head_part = torch.einsum("blv,bld->vd", R, hidden)
    used = torch.zeros(vocab, dtype=torch.bool)
    used[tokens.reshape(-1)] = True
    assert_close(W.grad[~used], head_part[~used], **law_tolerance(config.dtype),
                 what="gradient of the tied weight's rows of tokens absent from the input vs the output "
                      "projection's part sum R[..., v] h (the head must use token_embed.weight itself)")
    assert (W.grad[used] - head_part[used]).abs().max() > 1e-9, (
        "the rows of the input tokens got only the output projection's gradient: the embedding must use "
        "the same tensor (token_embed.weight) too")


@pytest.mark.component("minigpt")
@budget(0.5)
@given(config=gpt_configs, vocab=vocabs, data=st.data())
def test_minigpt_batch_items_are_independent(impl, config, vocab, data):
    tokens = data.draw(token_batches(vocab, max_batch=3), label="tokens")
    model = minigpt(impl, config, vocab)
    logits, _ = model(tokens)
    for i in range(tokens.shape[0]):
        alone, _ = model(tokens[i : i + 1])
        assert_close(alone, logits[i : i + 1], **law_tolerance(config.dtype, deep=True),
                     what=f"MiniGPT logits of batch item {i} computed alone")


@st.composite
def _generation(draw, max_len=4):
    config = draw(configs(max_dk=2, dtype=torch.float64))
    vocab = draw(vocabs)
    seed_tokens = draw(st.lists(st.integers(0, vocab - 1), min_size=1, max_size=6))
    new = draw(st.integers(1, 5))
    return config, vocab, seed_tokens, new, max_len


@pytest.mark.component("generate")
@budget(0.5)
@given(case=_generation(), temperature=st.floats(0.5, 5.0), seed=st.integers(0, 1000))
def test_generate_top_k_1_equals_greedy(impl, case, temperature, seed):
    config, vocab, seed_tokens, new, max_len = case
    model = minigpt(impl, config, vocab, max_len=max_len)
    greedy = model.generate(list(seed_tokens), max_new_tokens=new, temperature=0)
    top1 = model.generate(list(seed_tokens), max_new_tokens=new, temperature=temperature, top_k=1,
                          generator=torch.Generator().manual_seed(seed))
    assert top1 == greedy, (
        f"generate(top_k=1, temperature={temperature:g}) gave {top1}, greedy (temperature=0) gave {greedy}: "
        f"keeping only the most likely token leaves nothing to sample"
    )


@pytest.mark.component("generate")
@budget(0.5)
@given(case=_generation(), temperature=st.sampled_from([0, 0.5, 1.0, 3.0]), seed=st.integers(0, 1000),
       data=st.data())
def test_generate_returns_the_seed_then_new_tokens_inside_the_vocabulary(impl, case, temperature, seed, data):
    """``top_k`` above the vocabulary size is a free choice: keep every token, or raise a
    ``ValueError`` naming ``top_k``. Any ``top_k`` up to the vocabulary size (itself included) must work."""
    config, vocab, seed_tokens, new, max_len = case
    top_k = data.draw(st.none() | st.just(vocab) | st.integers(1, vocab + 3), label="top_k")
    model = minigpt(impl, config, vocab, max_len=max_len)
    call = f"generate({seed_tokens}, max_new_tokens={new}, temperature={temperature}, top_k={top_k}) with vocab_size={vocab}"
    try:
        out = model.generate(list(seed_tokens), max_new_tokens=new, temperature=temperature, top_k=top_k,
                             generator=torch.Generator().manual_seed(seed))
    except ValueError as exc:
        if top_k is None or top_k <= vocab:
            raise AssertionError(f"{call} raised ValueError({str(exc)!r}): top_k <= vocab_size must work") from None
        assert re.search(r"(?<![A-Za-z0-9_])top_k(?![A-Za-z0-9_])", str(exc)), (
            f"{call} raised ValueError({str(exc)!r}): rejecting top_k > vocab_size is allowed, but the "
            f"message must name `top_k`")
        return
    assert isinstance(out, list) and all(isinstance(t, int) for t in out), (
        f"generate must return a list of ints, got {type(out).__name__}: {out!r:.200}"
    )
    assert len(out) == len(seed_tokens) + new, f"generate returned {len(out)} tokens, expected seed {len(seed_tokens)} + {new}"
    assert out[: len(seed_tokens)] == list(seed_tokens), f"generate must start with the seed tokens {seed_tokens}, got {out}"
    assert all(0 <= t < vocab for t in out), f"generate returned ids outside [0, {vocab}): {out}"


@pytest.mark.component("generate")
@budget(0.5)
@given(case=_generation())
def test_generate_past_max_len_uses_the_last_max_len_tokens(impl, case):
    """Greedy: each new token is the argmax of the logits at the last position for the last
    max_len tokens (max_len=4 here, so seed + new tokens run past it). Ties allowed (1e-9)."""
    config, vocab, seed_tokens, new, max_len = case
    model = minigpt(impl, config, vocab, max_len=max_len)
    out = model.generate(list(seed_tokens), max_new_tokens=new, temperature=0)
    assert len(out) == len(seed_tokens) + new, f"generate returned {len(out)} tokens, expected {len(seed_tokens) + new}"
    with torch.no_grad():
        for step in range(new):
            so_far = out[: len(seed_tokens) + step]
            window = torch.tensor([so_far[-max_len:]])
            logits = model(window)[0][0, -1]
            chosen = out[len(seed_tokens) + step]
            assert logits[chosen] >= logits.max() - 1e-9, (
                f"step {step}: after {so_far} greedy generate chose token {chosen} (logit {logits[chosen].item():.6g}), "
                f"but the model's logits for the last {max_len} tokens {so_far[-max_len:]} peak at token "
                f"{int(logits.argmax())} ({logits.max().item():.6g})"
            )


@pytest.mark.component("generate")
@budget(0.5)
@given(case=_generation(), seed=st.integers(0, 1000), training=st.booleans())
def test_generate_is_reproducible_with_a_generator_and_restores_the_mode(impl, case, seed, training):
    config, vocab, seed_tokens, new, max_len = case
    model = minigpt(impl, config, vocab, max_len=max_len)
    model.train(training)
    a = model.generate(list(seed_tokens), max_new_tokens=new, temperature=1.0,
                       generator=torch.Generator().manual_seed(seed))
    assert model.training == training, (
        f"generate left the model in {'train' if model.training else 'eval'} mode, it was in "
        f"{'train' if training else 'eval'} mode before"
    )
    b = model.generate(list(seed_tokens), max_new_tokens=new, temperature=1.0,
                       generator=torch.Generator().manual_seed(seed))
    assert a == b, f"two generate calls with generators of the same seed {seed} gave {a} and {b}"


@pytest.mark.component("seq2seq")
@budget(0.5)
@given(config=gpt_configs, extra=st.integers(1, 4), data=st.data())
def test_seq2seq_source_padding_does_not_change_logits(impl, config, extra, data):
    """Appending pad tokens (pad_id=0) to the source changes no logit: padded source keys are
    blocked in the encoder and in cross-attention."""
    src = data.draw(token_batches(5, max_len=6), label="src") + 1  # ids 1..5, no padding
    tgt = data.draw(token_batches(7, batch=src.shape[0], max_len=6), label="tgt")
    model = seq2seq(impl, config)
    padded = torch.cat([src, torch.zeros(src.shape[0], extra, dtype=torch.long)], dim=1)
    assert_close(model(padded, tgt), model(src, tgt), **law_tolerance(config.dtype, deep=True),
                 what=f"Seq2SeqTransformer logits with {extra} pad tokens appended to the source")


@pytest.mark.component("seq2seq")
@budget(0.5)
@given(config=gpt_configs, data=st.data())
def test_seq2seq_batch_items_are_independent(impl, config, data):
    src = data.draw(token_batches(6, max_batch=3, max_len=6), label="src")
    tgt = data.draw(token_batches(7, batch=src.shape[0], max_len=6), label="tgt")
    model = seq2seq(impl, config)
    logits = model(src, tgt)
    for i in range(src.shape[0]):
        assert_close(model(src[i : i + 1], tgt[i : i + 1]), logits[i : i + 1], **law_tolerance(config.dtype, deep=True),
                     what=f"Seq2SeqTransformer logits of batch item {i} computed alone")


@pytest.mark.component("seq2seq")
@budget(0.5)
@given(config=configs(min_dk=3, max_dk=4), data=st.data())
def test_seq2seq_logits_depend_on_each_real_source_token_and_on_the_target_token(impl, config, data):
    """Every target position's logits move when one real source token changes (cross-attention reads every
    unpadded source position, docs/contract.md "Seq2SeqTransformer"), and position ``t``'s logits move when
    target token ``t`` changes (the decoder runs on the target). The laws above hold for a model that returns
    a constant; this one does not (issue 45). ``d_k >= 3``: a LayerNorm of one or two features keeps at most a
    sign, and two tokens could look alike; weights are seeded, so no change vanishes but by a mistake."""
    src = data.draw(token_batches(4, max_len=5), label="src") + 1  # ids 1..4: no pad
    tgt = data.draw(token_batches(7, batch=src.shape[0], max_len=5), label="tgt")
    i = data.draw(st.integers(0, src.shape[1] - 1), label="source position changed")
    t = data.draw(st.integers(0, tgt.shape[1] - 1), label="target position changed")
    model = seq2seq(impl, config)
    logits = model(src, tgt)
    other_src, other_tgt = src.clone(), tgt.clone()
    other_src[:, i] = src[:, i] % 4 + 1  # another real id
    other_tgt[:, t] = (tgt[:, t] + 1) % 7
    tiny = 1e-5 * (1.0 + float(logits.detach().abs().max()))
    moved = (model(other_src, tgt) - logits).abs().amax(dim=-1)  # (B, Lt)
    assert bool((moved > tiny).all()), (
        f"Seq2SeqTransformer logits for src {src.tolist()}, tgt {tgt.tolist()}: changing source position {i} to "
        f"{other_src[:, i].tolist()} must change the logits at every target position; the largest change per position "
        f"was {moved.tolist()} (at most {tiny:.2g} counts as no change): the logits do not read the source")
    moved = (model(src, other_tgt) - logits).abs().amax(dim=-1)[:, t]  # (B,)
    assert bool((moved > tiny).all()), (
        f"Seq2SeqTransformer logits for src {src.tolist()}, tgt {tgt.tolist()}: changing target token {t} to "
        f"{other_tgt[:, t].tolist()} must change the logits at position {t}; the largest change was {moved.tolist()} "
        f"(at most {tiny:.2g} counts as no change): the logits do not read the target")
