"""Laws of the Llama block, MiniLlama and its generate (components ``llama_block``, ``minillama``,
``llama_generate``).

The block is pre-norm: ``h = x + attn(ln1(x), mask, positions)``, ``out = h + ffn(ln2(h))``, so with
``attn.output_proj`` and ``ffn.w2`` zero it is the identity, and it is causal under the causal mask.
MiniLlama is ``lm_head(ln_final(layers(token_embeddings(tokens))))`` with the causal mask and the
positions ``0 .. L-1``: a prefix's logits are the full sequence's first logits, future tokens change
no earlier logit, batch items are independent. ``generate`` at temperature 0 takes, step by step, the
argmax of the model's own logits for the window of the last ``max_len`` tokens (with a KV cache or
without); ``top_k=1`` is greedy; a generator's seed fixes the samples; the train/eval mode is
restored. Tiny models (d_model <= 8), float64, weights by the contract's names.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from transformer_spec import profiles
from transformer_spec.probes.assertions import assert_close

from ..strategies import bool_tensors, budget, causal, law_tolerance, sequences, token_batches
from .strategies import accepted, llama_block, llama_configs, minillama, new_future, positions

block_configs = llama_configs(max_heads=2, max_head_dim=4)
vocabs = st.integers(2, 9)


def _tol():
    """The laws' tolerance: float64's, or float32's under a profile lacking float64 (the configs'
    dtype, :func:`properties.modern.strategies.llama_configs`)."""
    return law_tolerance(torch.float32 if profiles.lacks("float64") else torch.float64, deep=True)


def _block_case(data, config, *, optional_positions=True):
    """``x (B, L, d_model)``, a mask (none, causal or drawn ``(L, L)``) and ``(L,)`` positions (or none);
    under a profile whose block is always causal at the positions 0 .. L-1, the causal mask and no
    positions (:mod:`transformer_spec.profiles`)."""
    x = data.draw(sequences(config), label="x")
    n = x.shape[1]
    if profiles.lacks("non_causal") or profiles.lacks("mask"):
        masks = st.just(causal(n))
    else:
        masks = st.none() | st.just(causal(n)) | bool_tensors((n, n))
    mask = data.draw(masks, label="mask")
    pos = st.none() if profiles.lacks("block_positions") else positions((n,))
    return x, mask, data.draw(st.none() | pos if optional_positions else pos, label="positions")


@pytest.mark.component("llama_block")
@given(config=block_configs, data=st.data())
def test_llama_block_with_zero_output_proj_and_w2_is_the_identity(impl, config, data):
    """Both sublayers then add 0 to the residual stream: out = x + 0 + 0 (pre-norm: the norms sit on
    the branches, never on the stream)."""
    x, mask, pos = _block_case(data, config)
    block = llama_block(impl, config)
    with torch.no_grad():
        block.attn.output_proj.weight.zero_()
        block.ffn.w2.weight.zero_()
    out, _ = block(x.clone(), mask=mask, positions=pos)
    assert_close(out, x, **_tol(), what="LlamaBlock with attn.output_proj = 0 and ffn.w2 = 0 vs x (x + 0 + 0)")


@pytest.mark.component("llama_block")
@given(config=block_configs, data=st.data())
@pytest.mark.needs('non_causal')
def test_llama_block_is_its_own_sublayers_composed_pre_norm(impl, config, data):
    """out = h + ffn(ln2(h)) with h = x + attn(ln1(x), mask, positions), from the block's own ln1, attn,
    ln2 and ffn; the weights are attn's."""
    x, mask, pos = _block_case(data, config, optional_positions=False)
    block = llama_block(impl, config)
    out, w = block(x.clone(), mask=mask, positions=pos)
    attn_out, attn_w = block.attn(block.ln1(x), mask=mask, positions=pos)
    h = x + attn_out
    assert_close(w, attn_w, **_tol(), what=f"LlamaBlock weights vs attn(ln1(x), mask, positions={pos.tolist()})'s")
    assert_close(out, h + block.ffn(block.ln2(h)), **_tol(),
                 what=f"LlamaBlock(x, mask, positions={pos.tolist()}) vs h + ffn(ln2(h)), h = x + attn(ln1(x), mask, "
                      f"positions) from its own submodules")


@pytest.mark.component("llama_block")
@given(config=block_configs, data=st.data())
def test_llama_block_causal_outputs_unaffected_by_future(impl, config, data):
    x = data.draw(sequences(config), label="x")
    n = x.shape[1]
    t = data.draw(st.integers(0, n - 1), label="t")
    block = llama_block(impl, config)
    out, _ = block(x.clone(), mask=causal(n))
    out2, _ = block(new_future(data, x, t), mask=causal(n))
    assert_close(out2[:, : t + 1], out[:, : t + 1], **_tol(),
                 what=f"LlamaBlock (causal mask) output at positions <= {t} after changing x at > {t}")


@pytest.mark.component("minillama")
@budget(0.5)
@given(config=block_configs, vocab=vocabs, data=st.data())
def test_minillama_prefix_logits_equal_full_sequence_logits(impl, config, vocab, data):
    tokens = data.draw(token_batches(vocab, max_len=8), label="tokens")
    p = data.draw(st.integers(1, tokens.shape[1]), label="prefix length")
    model = minillama(impl, config, vocab)
    assert_close(model(tokens[:, :p])[0], model(tokens)[0][:, :p], **_tol(),
                 what=f"MiniLlama logits of the first {p} tokens alone vs the first {p} logits of the full sequence")


@pytest.mark.component("minillama")
@budget(0.5)
@given(config=block_configs, vocab=vocabs, data=st.data())
def test_minillama_logits_unaffected_by_future_tokens(impl, config, vocab, data):
    tokens = data.draw(token_batches(vocab, max_len=8), label="tokens")
    t = data.draw(st.integers(0, tokens.shape[1] - 1), label="t")
    tokens2 = tokens.clone()
    tokens2[:, t + 1 :] = (tokens[:, t + 1 :] + 1) % vocab
    model = minillama(impl, config, vocab)
    assert_close(model(tokens2)[0][:, : t + 1], model(tokens)[0][:, : t + 1], **_tol(),
                 what=f"MiniLlama logits at positions <= {t} after changing every token at > {t}")


@pytest.mark.component("minillama")
@budget(0.5)
@given(config=block_configs, vocab=vocabs, data=st.data())
def test_minillama_batch_items_are_independent(impl, config, vocab, data):
    tokens = data.draw(token_batches(vocab, max_batch=3, max_len=8), label="tokens")
    model = minillama(impl, config, vocab)
    logits, _ = model(tokens)
    for i in range(tokens.shape[0]):
        assert_close(model(tokens[i : i + 1])[0], logits[i : i + 1], **_tol(),
                     what=f"MiniLlama logits of batch item {i} computed alone")


@pytest.mark.component("minillama")
@pytest.mark.needs("submodules")
@budget(0.5)
@given(config=block_configs, vocab=vocabs, data=st.data())
def test_minillama_is_its_own_layers_composed(impl, config, vocab, data):
    """logits = lm_head(ln_final(layers(token_embeddings(tokens)))): embeddings not scaled, every layer
    given the causal mask and the positions 0 .. L-1, from the model's own submodules."""
    tokens = data.draw(token_batches(vocab, max_len=8), label="tokens")
    model = minillama(impl, config, vocab, layers=2)
    n = tokens.shape[1]
    x = model.token_embeddings(tokens)
    for layer in model.layers:
        x, _ = layer(x, mask=causal(n), positions=torch.arange(n))
    assert_close(model(tokens)[0], model.lm_head(model.ln_final(x)), **_tol(),
                 what="MiniLlama logits vs lm_head(ln_final(layers(token_embeddings(tokens)))) from its own "
                      f"submodules, each layer with the causal mask and positions 0 .. {n - 1}")


@st.composite
def _generation(draw, max_len=8):
    """A two-layer model's sizes, a vocabulary of 2..16, 1..4 seed tokens and 1..8 new ones: the
    sequence often runs past ``max_len = 8``."""
    config = draw(block_configs)
    vocab = draw(st.integers(2, 16))
    seed_tokens = draw(st.lists(st.integers(0, vocab - 1), min_size=1, max_size=4))
    return config, vocab, seed_tokens, draw(st.integers(1, 8)), max_len


def _model(impl, case):
    """The case's MiniLlama, its attention weights (q_proj, k_proj, v_proj, output_proj) tripled: sharper
    attention, whose positions and context move the logits enough that a token generated from the
    wrong window or positions differs from the argmax."""
    config, vocab, _, _, max_len = case
    model = minillama(impl, config, vocab, layers=2, max_len=max_len)
    with torch.no_grad():
        for layer in model.layers:
            for name in ("q_proj", "k_proj", "v_proj", "output_proj"):
                getattr(layer.attn, name).weight.mul_(3.0)
    return model


@pytest.mark.component("llama_generate")
@budget(0.5)
@given(case=_generation())
@pytest.mark.needs('generate')
def test_llama_generate_greedy_is_the_argmax_of_the_models_own_logits(impl, case):
    """temperature=0: each new token is the argmax of the logits at the last position of the window,
    the last max_len tokens at positions 0 .. len(window) - 1, also once the sequence is longer than
    max_len (a KV cache or none: the same tokens). Ties allowed (1e-9)."""
    _, _, seed_tokens, new, max_len = case
    model = _model(impl, case)
    call = f"generate({seed_tokens}, max_new_tokens={new}, temperature=0) with max_len={max_len}"
    out = accepted(lambda: model.generate(list(seed_tokens), max_new_tokens=new, temperature=0), call)
    assert len(out) == len(seed_tokens) + new, f"{call} returned {len(out)} tokens, expected {len(seed_tokens) + new}"
    with torch.no_grad():
        for step in range(new):
            so_far = out[: len(seed_tokens) + step]
            window = so_far[-max_len:]
            logits = model(torch.tensor([window]))[0][0, -1]
            chosen = out[len(seed_tokens) + step]
            assert logits[chosen] >= logits.max() - 1e-9, (
                f"step {step}: after {so_far} greedy generate chose token {chosen} "
                f"(logit {logits[chosen].item():.6g}), "
                f"but the model's logits at the last position of the window (the last {max_len} tokens {window}, at "
                f"positions 0 .. {len(window) - 1}) peak at token {int(logits.argmax())} ({logits.max().item():.6g})"
            )


@pytest.mark.component("llama_generate")
@budget(0.5)
@given(case=_generation(), temperature=st.floats(0.5, 5.0), seed=st.integers(0, 1000))
@pytest.mark.needs('generate')
def test_llama_generate_top_k_1_equals_greedy(impl, case, temperature, seed):
    _, _, seed_tokens, new, _ = case
    model = _model(impl, case)
    greedy = model.generate(list(seed_tokens), max_new_tokens=new, temperature=0)
    top1 = model.generate(list(seed_tokens), max_new_tokens=new, temperature=temperature, top_k=1,
                          generator=torch.Generator().manual_seed(seed))
    assert top1 == greedy, (
        f"generate(top_k=1, temperature={temperature:g}) gave {top1}, greedy (temperature=0) gave {greedy}: "
        f"keeping only the most likely token leaves nothing to sample"
    )


@pytest.mark.component("llama_generate")
@budget(0.5)
@given(case=_generation(), seed=st.integers(0, 1000), training=st.booleans())
@pytest.mark.needs('generate')
def test_llama_generate_is_reproducible_with_a_generator_and_restores_the_mode(impl, case, seed, training):
    _, _, seed_tokens, new, _ = case
    model = _model(impl, case)
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
