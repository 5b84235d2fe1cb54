"""Laws of MiniGPT, its generate, and Seq2SeqTransformer (components ``minigpt``, ``generate``,
``seq2seq``).

Weight tying (one tensor, gradient from both uses), batch independence, generate (top_k=1 is
greedy, tokens stay in the vocabulary, sequences longer than max_len use the last max_len
tokens, a generator makes sampling reproducible, the train/eval mode is restored), source
padding does not change Seq2Seq logits. Models are tiny (d_model <= 4, <= 2 layers) with
every parameter seeded (``strategies.build``).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from transformer_spec.assertions import assert_close

from .strategies import budget, build, configs, law_tolerance, token_batches


def _minigpt(impl, config, vocab, layers=1, max_len=8):
    return build(impl.MiniGPT, config, vocab_size=vocab, d_model=config.d_model, num_heads=config.num_heads,
                 num_layers=layers, d_ff=config.d_ff, max_len=max_len)


gpt_configs = configs(max_dk=2)
vocabs = st.integers(2, 9)


@pytest.mark.component("minigpt")
@budget(0.5)
@given(config=configs(min_dk=2, max_dk=3, dtype=torch.float64), vocab=vocabs, data=st.data())
def test_minigpt_weight_tying_shares_one_tensor_and_gets_gradient_from_both_uses(impl, config, vocab, data):
    """lm_head.weight is token_embed.weight, and its gradient is the sum of the embedding's
    (rows of the input tokens) and the output projection's (every row), computed here from
    hooks on the two contract submodules: for loss = sum(logits * R),
    grad = R^T hidden + sum over positions of d loss / d embedding output."""
    tokens = data.draw(token_batches(vocab), label="tokens")
    model = _minigpt(impl, config, vocab)
    W = model.token_embed.weight
    assert model.lm_head.weight is W or (
        model.lm_head.weight.data_ptr() == W.data_ptr() and model.lm_head.weight.shape == W.shape
    ), "MiniGPT: lm_head.weight must be the same tensor as token_embed.weight (weight tying)"
    seen = {}

    def grab_embedding(_module, _inputs, output):
        output.retain_grad()
        seen["embedding"] = output

    def grab_hidden(_module, inputs, _output):
        seen["hidden"] = inputs[0]

    hooks = [model.token_embed.register_forward_hook(grab_embedding),
             model.lm_head.register_forward_hook(grab_hidden)]
    try:
        logits, _ = model(tokens)
    finally:
        for h in hooks:
            h.remove()
    assert set(seen) == {"embedding", "hidden"}, "MiniGPT.forward must call its token_embed and lm_head submodules"
    R = torch.randn(logits.shape, generator=torch.Generator().manual_seed(config.seed), dtype=logits.dtype)
    model.zero_grad()
    (logits * R).sum().backward()
    head_part = torch.einsum("blv,bld->vd", R, seen["hidden"].detach())
    embed_part = torch.zeros_like(W).index_add_(0, tokens.reshape(-1), seen["embedding"].grad.reshape(-1, W.shape[1]))
    assert W.grad is not None, "token_embed.weight got no gradient"
    assert_close(W.grad, head_part + embed_part, **law_tolerance(config.dtype),
                 what="gradient of the tied weight vs. (output projection's part) + (embedding's part)")
    assert head_part.abs().max() > 0 and embed_part.abs().max() > 0, "both uses must contribute a gradient"


@pytest.mark.component("minigpt")
@budget(0.5)
@given(config=gpt_configs, vocab=vocabs, data=st.data())
def test_minigpt_batch_items_are_independent(impl, config, vocab, data):
    tokens = data.draw(token_batches(vocab, max_batch=3), label="tokens")
    model = _minigpt(impl, config, vocab)
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
    model = _minigpt(impl, config, vocab, max_len=max_len)
    greedy = model.generate(list(seed_tokens), max_new_tokens=new, temperature=0)
    top1 = model.generate(list(seed_tokens), max_new_tokens=new, temperature=temperature, top_k=1,
                          generator=torch.Generator().manual_seed(seed))
    assert top1 == greedy, (
        f"generate(top_k=1, temperature={temperature:g}) gave {top1}, greedy (temperature=0) gave {greedy}: "
        f"keeping only the most likely token leaves nothing to sample"
    )


@pytest.mark.component("generate")
@budget(0.5)
@given(case=_generation(), temperature=st.sampled_from([0, 0.5, 1.0, 3.0]),
       top_k=st.none() | st.integers(1, 12), seed=st.integers(0, 1000))
def test_generate_returns_the_seed_then_new_tokens_inside_the_vocabulary(impl, case, temperature, top_k, seed):
    config, vocab, seed_tokens, new, max_len = case
    model = _minigpt(impl, config, vocab, max_len=max_len)
    out = model.generate(list(seed_tokens), max_new_tokens=new, temperature=temperature, top_k=top_k,
                         generator=torch.Generator().manual_seed(seed))
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
    model = _minigpt(impl, config, vocab, max_len=max_len)
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
    model = _minigpt(impl, config, vocab, max_len=max_len)
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


def _seq2seq(impl, config):
    return build(impl.Seq2SeqTransformer, config, src_vocab_size=6, tgt_vocab_size=7, d_model=config.d_model,
                 num_heads=config.num_heads, num_encoder_layers=1, num_decoder_layers=1, d_ff=config.d_ff,
                 max_len=10, pad_id=0)


@pytest.mark.component("seq2seq")
@budget(0.5)
@given(config=gpt_configs, extra=st.integers(1, 4), data=st.data())
def test_seq2seq_source_padding_does_not_change_logits(impl, config, extra, data):
    """Appending pad tokens (pad_id=0) to the source changes no logit: padded source keys are
    blocked in the encoder and in cross-attention."""
    src = data.draw(token_batches(5, max_len=6), label="src") + 1  # ids 1..5, no padding
    tgt = data.draw(token_batches(7, batch=src.shape[0], max_len=6), label="tgt")
    model = _seq2seq(impl, config)
    padded = torch.cat([src, torch.zeros(src.shape[0], extra, dtype=torch.long)], dim=1)
    assert_close(model(padded, tgt), model(src, tgt), **law_tolerance(config.dtype, deep=True),
                 what=f"Seq2SeqTransformer logits with {extra} pad tokens appended to the source")


@pytest.mark.component("seq2seq")
@budget(0.5)
@given(config=gpt_configs, data=st.data())
def test_seq2seq_batch_items_are_independent(impl, config, data):
    src = data.draw(token_batches(6, max_batch=3, max_len=6), label="src")
    tgt = data.draw(token_batches(7, batch=src.shape[0], max_len=6), label="tgt")
    model = _seq2seq(impl, config)
    logits = model(src, tgt)
    for i in range(src.shape[0]):
        assert_close(model(src[i : i + 1], tgt[i : i + 1]), logits[i : i + 1], **law_tolerance(config.dtype, deep=True),
                     what=f"Seq2SeqTransformer logits of batch item {i} computed alone")
