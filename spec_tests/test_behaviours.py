"""The contract's behaviours, one test each so that a rubric can weigh them.

``True`` = blocked; fully blocked query rows give zero weights, zero output and zero gradients
(never NaN); float64 is computed in float64 and the device follows the input; dropout acts in
``train()`` only; ``generate`` runs in eval mode and restores the caller's mode; and every
``ValueError`` the contract lists, with a message that names the argument. (Output shapes and
dtypes, eval determinism and generate's length are in ``test_contract_basics.py``;
reproducibility with a generator in ``test_snapshots.py``.)
"""

import re

import pytest
import torch

from transformer_spec.contract import inputs
from transformer_spec.probes.assertions import assert_close, assert_equal
from transformer_spec.probes.testing import (
    assert_raises_naming,
    decoder_block_shapes,
    encoder_block_shapes,
    ffn_shapes,
    mha_shapes,
    minigpt_parameters,
    set_parameters,
    small_seq2seq,
)
from transformer_spec.probes.testing import seeded_parameters as seeded
from transformer_spec.submission.loader import SubmissionError

D, H, FF, VOCAB = 8, 2, 16, 11


def randn(*shape, dtype=torch.float64, seed=0, requires_grad=False):
    return inputs.randn(*shape, seed=seed, dtype=dtype).requires_grad_(requires_grad)


# ---------------------------------------------------------------- True = blocked
@pytest.mark.component("attention")
@pytest.mark.needs('weights')
def test_mask_true_means_blocked(impl, dtype):
    """A blocked key gets weight exactly 0 and its value cannot reach the output."""
    q, k, v = randn(2, 4, 3, dtype=dtype, seed=1), randn(2, 5, 3, dtype=dtype, seed=2), randn(2, 5, 2, dtype=dtype, seed=3)
    mask = torch.zeros(4, 5, dtype=torch.bool)
    mask[:, 1] = True  # key 1 blocked for every query
    mask[2, 3] = True  # and key 3 for query 2
    out, weights = impl.scaled_dot_product_attention(q, k, v, mask=mask)
    assert_equal(weights[:, mask], torch.zeros(2, int(mask.sum()), dtype=dtype),
                 what="weights at blocked positions (mask True) must be exactly 0", seed="seed 001 section 8")
    assert_close(weights.sum(-1), torch.ones(2, 4, dtype=dtype), what="each row of weights sums to 1 over the allowed keys")
    v2 = v.clone()
    v2[:, 1] += 100.0  # change only the blocked key's value
    out2, _ = impl.scaled_dot_product_attention(q, k, v2, mask=mask)
    assert_close(out2, out, what="output after changing a blocked key's value (must not change)",
                 seed="seed 001 section 8")


@pytest.mark.component("mha")
def test_multihead_mask_true_means_blocked(impl, dtype):
    mhsa = set_parameters(impl.MultiHeadSelfAttention(D, H, dropout=0.0).to(dtype), seeded(mha_shapes(D), 5)).eval()
    x = randn(2, 4, D, dtype=dtype, seed=6)
    pad = torch.tensor([[False, False, False, True], [False, False, True, True]])[:, None, None, :]  # (B, 1, 1, L)
    _, weights = mhsa(x, mask=pad)
    blocked = pad.expand(2, H, 4, 4)
    assert_equal(weights[blocked], torch.zeros(int(blocked.sum()), dtype=dtype),
                 what="MultiHeadSelfAttention weights at padded keys (mask True)", seed="seed 001 section 8.1")


@pytest.mark.component("masks")
@pytest.mark.track("classic")  # padding_mask: the modern track has causal_mask only
def test_padding_mask_is_true_at_pad_tokens(impl):
    tokens = torch.tensor([[5, 3, 0, 0], [0, 7, 2, 0]])
    expected = torch.tensor([[False, False, True, True], [True, False, False, True]])[:, None, None, :]
    assert_equal(impl.padding_mask(tokens, 0), expected, what="padding_mask(tokens, pad_id=0)",
                 seed="seed 001 section 8.1")
    assert_equal(impl.padding_mask(tokens, 7), (tokens == 7)[:, None, None, :], what="padding_mask(tokens, pad_id=7)")


# ---------------------------------------------------------------- fully blocked rows
@pytest.mark.component("attention")
@pytest.mark.needs('weights')
def test_fully_blocked_row_gives_zero_weights_output_and_gradients(impl, dtype):
    q = randn(3, 4, dtype=dtype, seed=11, requires_grad=True)
    k = randn(5, 4, dtype=dtype, seed=12, requires_grad=True)
    v = randn(5, 2, dtype=dtype, seed=13, requires_grad=True)
    mask = torch.zeros(3, 5, dtype=torch.bool)
    mask[1] = True  # query 1 may see nothing
    mask[0, 4] = True
    out, weights = impl.scaled_dot_product_attention(q, k, v, mask=mask)
    where = "contract: fully blocked rows"
    assert_equal(weights[1], torch.zeros(5, dtype=dtype), what="weights of a fully blocked query row", seed=where)
    assert_equal(out[1], torch.zeros(2, dtype=dtype), what="output of a fully blocked query row", seed=where)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all(), f"{where}: NaN/inf in output or weights"
    (out.sum() + (weights * torch.arange(5, dtype=dtype)).sum()).backward()
    for name, t in (("q", q), ("k", k), ("v", v)):
        assert t.grad is not None and torch.isfinite(t.grad).all(), f"{where}: gradient of {name} has NaN/inf: {t.grad}"
    assert_equal(q.grad[1], torch.zeros(4, dtype=dtype), what="gradient of the fully blocked query", seed=where)


@pytest.mark.component("mha")
def test_multihead_fully_blocked_row_gives_zero_output(impl, dtype):
    mha = set_parameters(impl.MultiHeadAttention(D, H, dropout=0.0).to(dtype), seeded(mha_shapes(D), 14)).eval()
    query = randn(1, 3, D, dtype=dtype, seed=15, requires_grad=True)
    memory = randn(1, 4, D, dtype=dtype, seed=16)
    mask = torch.zeros(3, 4, dtype=torch.bool)
    mask[2] = True
    out, weights = mha(query, memory, memory, mask=mask)
    where = "contract: fully blocked rows"
    assert_equal(weights[0, :, 2], torch.zeros(H, 4, dtype=dtype), what="MultiHeadAttention weights of a blocked row", seed=where)
    assert_close(out[0, 2], torch.zeros(D, dtype=dtype), what="MultiHeadAttention output of a blocked row", seed=where)
    out.sum().backward()
    assert torch.isfinite(query.grad).all(), f"{where}: NaN/inf in the gradient of query: {query.grad}"
    assert_close(query.grad[0, 2], torch.zeros(D, dtype=dtype), what="gradient of the blocked query row", seed=where)


# ---------------------------------------------------------------- dtype and device
@pytest.mark.component("attention")
@pytest.mark.needs('weights')
def test_float64_is_computed_in_float64(impl):
    """Scores 0 and 1e-9 give weights 1/2 -+ 2.5e-10: lost if anything is rounded through float32."""
    q = torch.tensor([[1.0]], dtype=torch.float64)
    k = torch.tensor([[0.0], [1e-9]], dtype=torch.float64)
    v = torch.tensor([[0.0], [1.0]], dtype=torch.float64)
    out, weights = impl.scaled_dot_product_attention(q, k, v, scale=1.0)
    assert out.dtype == torch.float64 and weights.dtype == torch.float64, (
        f"float64 inputs must give float64 outputs, got output {out.dtype}, weights {weights.dtype}"
    )
    diff = (weights[0, 1] - weights[0, 0]).item()
    assert abs(diff - 5e-10) < 1e-14, (
        f"float64 precision lost: w1 - w0 should be tanh(0.5e-9) = 5e-10, got {diff:.6g} "
        f"(is something computed in float32?)"
    )


@pytest.mark.component("masks")
@pytest.mark.track("classic")  # padding_mask: the modern track has causal_mask only
def test_masks_follow_the_device(impl):
    device = torch.device("cpu")  # the only device here; the argument must be accepted and honoured
    m = impl.causal_mask(3, device=device)
    assert m.device.type == device.type, f"causal_mask(3, device={device}) returned a mask on {m.device}"
    tokens = torch.tensor([[1, 0]], device=device)
    assert impl.padding_mask(tokens, 0).device.type == device.type, "padding_mask must be on the tokens' device"


@pytest.mark.component("masks")
@pytest.mark.needs('causal_mask')
def test_causal_mask_is_built_on_the_requested_device(impl):
    """torch's ``meta`` device (shapes without data) exists in every build, GPU or not, so it shows
    whether ``device=`` reaches the tensor even on a CPU-only machine."""
    m = impl.causal_mask(3, device=torch.device("meta"))
    assert isinstance(m, torch.Tensor) and m.device.type == "meta", (
        f"causal_mask(3, device=torch.device('meta')) returned a mask on "
        f"{getattr(m, 'device', type(m).__name__)}: build the mask on the `device` argument "
        f"(e.g. torch.ones(seq_len, seq_len, dtype=torch.bool, device=device))")
    assert m.dtype == torch.bool and tuple(m.shape) == (3, 3), (
        f"causal_mask(3, device=meta) must be a bool (3, 3) mask, got {m.dtype} {tuple(m.shape)}")


# ---------------------------------------------------------------- dropout: train only
def _module_cases():
    return {
        "mha": (lambda impl, p: impl.MultiHeadSelfAttention(D, H, dropout=p), mha_shapes(D),
                lambda m, x: m(x)[0]),
        "ffn": (lambda impl, p: impl.FeedForward(D, FF, dropout=p), ffn_shapes(D, FF), lambda m, x: m(x)),
        "encoder": (lambda impl, p: impl.TransformerEncoderBlock(D, H, FF, dropout=p), encoder_block_shapes(D, FF),
                    lambda m, x: m(x)[0]),
        "decoder": (lambda impl, p: impl.TransformerDecoderBlock(D, H, FF, dropout=p), decoder_block_shapes(D, FF),
                    lambda m, x: m(x, x.flip(1))[0]),
    }


DROPOUT_CASES = [pytest.param(name, marks=pytest.mark.component(name), id=name) for name in _module_cases()]


# Where MultiHeadAttention uses its own `dropout` (on the attention weights, or nowhere: seed 000's
# MultiHeadSelfAttention takes it and never uses it) is a free choice of the contract; the blocks'
# dropout on their sublayers' outputs is not. So "dropout acts in train()" is asked of the FFN and
# the blocks, while MultiHeadAttention must only be dropout-free in eval() and with dropout=0.
@pytest.mark.parametrize("kind", [c for c in DROPOUT_CASES if c.values[0] != "mha"])
def test_dropout_changes_output_in_train_mode(impl, kind):
    build, shapes, run = _module_cases()[kind]
    module = set_parameters(build(impl, 0.5).double(), seeded(shapes, 21))
    x = randn(2, 6, D, seed=22)
    module.eval()
    with torch.no_grad():
        reference_out = run(module, x)
        module.train()
        torch.manual_seed(0)
        train_out = run(module, x)
    assert not torch.allclose(train_out, reference_out), (
        f"{kind} with dropout=0.5 gives the same output in train() mode as in eval() mode: "
        f"dropout must act in train() mode (seed 000 steps 3-5)"
    )


@pytest.mark.parametrize("kind", DROPOUT_CASES)
def test_eval_mode_output_does_not_depend_on_dropout(impl, kind):
    """In eval() mode a module with dropout=0.5 computes exactly what one with dropout=0 does."""
    build, shapes, run = _module_cases()[kind]
    params = seeded(shapes, 23)
    with_dropout = set_parameters(build(impl, 0.5).double(), params).eval()
    without = set_parameters(build(impl, 0.0).double(), params).eval()
    x = randn(2, 6, D, seed=24)
    with torch.no_grad():
        assert_close(run(with_dropout, x), run(without, x),
                     what=f"{kind} in eval() with dropout=0.5 vs dropout=0.0", seed="contract: eval() is deterministic")


@pytest.mark.parametrize("kind", DROPOUT_CASES + [pytest.param(k, marks=pytest.mark.component(k), id=k)
                                                   for k in ("minigpt", "seq2seq")])
def test_dropout_zero_gives_the_eval_output_in_train_mode(impl, kind):
    """``dropout=0.0`` must reach every dropout inside (sublayers built with their own default 0.1 would not)."""
    if kind == "minigpt":
        module = _minigpt(impl, dropout=0.0).double()
        tokens = torch.tensor([[1, 4, 2, 9, 3]])
        run = lambda m: m(tokens)[0]  # noqa: E731
    elif kind == "seq2seq":
        module = small_seq2seq(impl, VOCAB, VOCAB).double()
        inputs = (torch.tensor([[1, 5, 2, 7]]), torch.tensor([[3, 1, 4]]))  # (src, tgt)
        run = lambda m: m(*inputs)  # noqa: E731
    else:
        build, shapes, run_on = _module_cases()[kind]
        module = set_parameters(build(impl, 0.0).double(), seeded(shapes, 25))
        x = randn(2, 6, D, seed=26)
        run = lambda m: run_on(m, x)  # noqa: E731
    with torch.no_grad():
        eval_out = run(module.eval())
        torch.manual_seed(0)
        train_out = run(module.train())
    assert_close(train_out, eval_out, what=f"{kind} built with dropout=0.0: output in train() vs eval() "
                                            f"(any difference means some dropout inside did not get p=0)")


def _ffn_sublayer_only(impl, kind):
    """A Pre-LN block in train() with dropout 0.5 whose attention sublayers output 0 (every W_O
    zeroed) and whose FFN outputs exactly 1 (linear2.weight = 0, linear2.bias = 1), whatever
    dropout does inside them; and its input x."""
    build, shapes, run = _module_cases()[kind]
    params = seeded(shapes, 27)
    for name in params:
        if name.endswith("W_O.weight") or name == "ffn.linear2.weight":
            params[name] = torch.zeros_like(params[name])
    params["ffn.linear2.bias"] = torch.ones_like(params["ffn.linear2.bias"])
    return set_parameters(build(impl, 0.5).double(), params).train(), randn(2, 6, D, seed=28), run


@pytest.mark.parametrize("kind", [pytest.param(k, marks=pytest.mark.component(k), id=k) for k in ("encoder", "decoder")])
def test_block_dropout_acts_on_the_sublayer_output(impl, kind):
    """The block's own dropout: x + drop(ffn(norm(x))) with ffn(...) = 1 gives x + 0 or x + 2 for
    each entry (inverted dropout with p = 0.5), a random mix of both (seed 000 step 5)."""
    block, x, run = _ffn_sublayer_only(impl, kind)
    torch.manual_seed(0)
    with torch.no_grad():
        added = run(block, x) - x
    off = torch.minimum((added - 0).abs(), (added - 2).abs())
    worst = tuple(int(i) for i in torch.nonzero(off == off.max())[0])
    assert off.max() < 1e-9, (
        f"{kind} block (Pre-LN, dropout=0.5, train()) whose FFN outputs exactly 1: expected x + 0 or x + 2 "
        f"in each entry (x + dropout(ffn(norm(x))), the block's own dropout on the sublayer output), "
        f"got x + {added[worst].item():.6g} at index {worst}")
    assert 0 < int((added > 1).sum()) < added.numel(), (
        f"{kind} block (dropout=0.5, train()): every entry got the same x + {added.flatten()[0].item():.6g}; "
        f"the block's own dropout must act on its sublayers' outputs (x + dropout(ffn(norm(x))))")


def _minigpt(impl, dropout=0.5):
    model = impl.MiniGPT(VOCAB, d_model=D, num_heads=H, num_layers=2, d_ff=FF, max_len=6, dropout=dropout)
    return set_parameters(model, minigpt_parameters(VOCAB, D, 2, FF, seed=31))


@pytest.mark.component("minigpt")
def test_minigpt_dropout_changes_logits_in_train_mode_only(impl):
    model = _minigpt(impl)
    tokens = torch.tensor([[1, 4, 2, 9, 3]])
    with torch.no_grad():
        eval_logits = model.eval()(tokens)[0]
        no_dropout = _minigpt(impl, dropout=0.0).eval()(tokens)[0]
        torch.manual_seed(0)
        train_logits = model.train()(tokens)[0]
    assert_close(eval_logits, no_dropout, what="MiniGPT logits in eval() with dropout=0.5 vs dropout=0.0")
    assert not torch.allclose(train_logits, eval_logits), "MiniGPT(dropout=0.5) in train() mode must apply dropout"


# ---------------------------------------------------------------- generate and the train/eval mode
@pytest.mark.component("generate")
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_generate_restores_the_callers_mode(impl, mode):
    model = _minigpt(impl).train(mode == "train")
    model.generate([1, 2], max_new_tokens=3, temperature=1.0, generator=torch.Generator().manual_seed(0))
    modes = {name or "MiniGPT": m.training for name, m in model.named_modules()}
    wrong = [name for name, training in modes.items() if training != (mode == "train")]
    assert not wrong, (
        f"after generate() on a model in {mode}() mode, these modules are in the other mode: {wrong[:5]} "
        f"(generate must restore the previous train/eval mode)"
    )


@pytest.mark.component("generate")
def test_generate_runs_in_eval_mode(impl):
    """Called in train() mode with dropout=0.5, greedy generation must still be dropout-free."""
    model = _minigpt(impl)
    expected = model.eval().generate([3, 1], max_new_tokens=6, temperature=0)
    model.train()
    torch.manual_seed(0)
    got = model.generate([3, 1], max_new_tokens=6, temperature=0)
    assert got == expected, (
        f"greedy generate in train() mode gave {got}, in eval() mode {expected}: generate must run in eval mode"
    )



@pytest.mark.component("generate")
@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_generate_top_k_above_the_vocabulary_keeps_every_token_or_names_top_k(impl, temperature):
    """The contract's free choice for ``top_k > vocab_size``: keep every token (then sampling is what
    ``top_k=vocab_size`` or ``top_k=None`` samples with the same generator) or raise a ``ValueError``
    naming ``top_k``. Any other error (``torch.topk``'s own ``RuntimeError``) fails."""
    model = _minigpt(impl).eval()
    call = f"generate([3, 1], max_new_tokens=6, temperature={temperature:g}, top_k={VOCAB + 5}) with vocab_size={VOCAB}"

    def sample(top_k):
        return model.generate([3, 1], max_new_tokens=6, temperature=temperature, top_k=top_k,
                              generator=torch.Generator().manual_seed(0))

    try:
        got = sample(VOCAB + 5)
    except ValueError as exc:
        assert re.search(r"(?<![A-Za-z0-9_])top_k(?![A-Za-z0-9_])", str(exc)), (
            f"{call} raised ValueError({str(exc)!r}): rejecting top_k > vocab_size is allowed, but the message "
            f"must name `top_k`")
        return
    except SubmissionError:
        raise
    except Exception as exc:  # noqa: BLE001 - the student reads which error it was
        raise AssertionError(f"{call} raised {type(exc).__name__}({str(exc)[:200]!r}): keep every token, or raise a "
                             f"ValueError naming `top_k`") from None
    keep_all = {"top_k=vocab_size": sample(VOCAB), "top_k=None": sample(None)}
    assert got in keep_all.values(), (
        f"{call} gave {got}; keeping every token samples what {' or '.join(f'{k} ({v})' for k, v in keep_all.items())} "
        f"samples with the same generator")

# ---------------------------------------------------------------- errors
# d_model=10: num_heads=4 does not divide it (the case), num_heads=2 does (its valid control)
HEADS_CASES = {
    "MultiHeadAttention": lambda impl, num_heads: impl.MultiHeadAttention(d_model=10, num_heads=num_heads),
    "MultiHeadSelfAttention": lambda impl, num_heads: impl.MultiHeadSelfAttention(d_model=10, num_heads=num_heads),
    "TransformerEncoderBlock": lambda impl, num_heads: impl.TransformerEncoderBlock(d_model=10, num_heads=num_heads,
                                                                                    d_ff=16),
    "TransformerDecoderBlock": lambda impl, num_heads: impl.TransformerDecoderBlock(d_model=10, num_heads=num_heads,
                                                                                    d_ff=16),
    "MiniGPT": lambda impl, num_heads: impl.MiniGPT(VOCAB, d_model=10, num_heads=num_heads, num_layers=1, d_ff=16,
                                                    max_len=8),
}


@pytest.mark.component("errors")
@pytest.mark.parametrize("name", list(HEADS_CASES))
def test_d_model_not_divisible_by_num_heads(impl, name):
    assert_raises_naming(lambda: HEADS_CASES[name](impl, num_heads=4), "num_heads", "d_model",
                         what=f"{name}(d_model=10, num_heads=4)",
                         valid=(f"{name}(d_model=10, num_heads=2)", lambda: HEADS_CASES[name](impl, num_heads=2)))


# max_len=4: five positions are too many (the case), four are allowed (its valid control)
MAX_LEN_CASES = {
    "SinusoidalPositionEncoding": lambda impl, n: impl.SinusoidalPositionEncoding(D, max_len=4)(randn(1, n, D)),
    "LearnedPositionEmbedding": lambda impl, n: impl.LearnedPositionEmbedding(D, 4)(randn(1, n, D)),
    "MiniGPT": lambda impl, n: impl.MiniGPT(VOCAB, d_model=D, num_heads=H, num_layers=1, d_ff=FF, max_len=4)(
        torch.arange(1, n + 1)[None]),
    "Seq2SeqTransformer_src": lambda impl, n: impl.Seq2SeqTransformer(
        VOCAB, VOCAB, d_model=D, num_heads=H, num_encoder_layers=1, num_decoder_layers=1, d_ff=FF, max_len=4)(
        torch.arange(1, n + 1)[None], torch.tensor([[1, 2]])),
    "Seq2SeqTransformer_tgt": lambda impl, n: impl.Seq2SeqTransformer(
        VOCAB, VOCAB, d_model=D, num_heads=H, num_encoder_layers=1, num_decoder_layers=1, d_ff=FF, max_len=4)(
        torch.tensor([[1, 2]]), torch.arange(1, n + 1)[None]),
}


@pytest.mark.component("errors")
@pytest.mark.parametrize("name", list(MAX_LEN_CASES))
def test_sequence_longer_than_max_len(impl, name):
    assert_raises_naming(lambda: MAX_LEN_CASES[name](impl, 5), "max_len", what=f"{name} with max_len=4 given 5 positions",
                         valid=(f"{name} with max_len=4 given 4 positions", lambda: MAX_LEN_CASES[name](impl, 4)))


@pytest.mark.component("errors")
def test_sdpa_mask_that_does_not_broadcast(impl):
    q, k, v = randn(2, 5, 4), randn(2, 7, 4), randn(2, 7, 3)
    bad = torch.zeros(3, 4, dtype=torch.bool)  # scores are (2, 5, 7)
    good = torch.zeros(5, 7, dtype=torch.bool)
    assert_raises_naming(lambda: impl.scaled_dot_product_attention(q, k, v, mask=bad), "mask",
                         what="scaled_dot_product_attention with a (3, 4) mask for (2, 5, 7) scores",
                         valid=("the same call with a (5, 7) mask",
                                lambda: impl.scaled_dot_product_attention(q, k, v, mask=good)))


@pytest.mark.component("errors")
def test_multihead_mask_that_does_not_broadcast(impl):
    mhsa = impl.MultiHeadSelfAttention(D, H, dropout=0.0).double().eval()
    bad = torch.zeros(2, 1, 3, 3, dtype=torch.bool)  # scores are (2, H, 5, 5)
    good = torch.zeros(2, 1, 5, 5, dtype=torch.bool)
    assert_raises_naming(lambda: mhsa(randn(2, 5, D), mask=bad), "mask",
                         what="MultiHeadSelfAttention with a (2, 1, 3, 3) mask for length-5 inputs",
                         valid=("the same call with a (2, 1, 5, 5) mask", lambda: mhsa(randn(2, 5, D), mask=good)))


@pytest.mark.component("errors")
@pytest.mark.parametrize("max_new_tokens", [0, -1])
def test_non_positive_max_new_tokens(impl, max_new_tokens):
    model = _minigpt(impl)
    assert_raises_naming(lambda: model.generate([1, 2], max_new_tokens=max_new_tokens), "max_new_tokens",
                         what=f"generate([1, 2], max_new_tokens={max_new_tokens})",
                         valid=("generate([1, 2], max_new_tokens=1)", lambda: model.generate([1, 2], max_new_tokens=1)))
