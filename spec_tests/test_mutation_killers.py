"""Tests added for spec power (issue 6): behaviours a pitfall or a mutant showed to be unpinned.

Each holds for any correct implementation of the contract:

* dropout sits on the sublayer's output only (``linear2(dropout(gelu(linear1(x))))``,
  ``x + drop(sublayer(norm(x)))``): with the sublayers' last linear map zeroed, train() mode
  with dropout 0.5 must give exactly ``linear2.bias`` (FFN) or the input (Pre-LN blocks),
  whatever the random dropout mask. Dropout of the residual sum, or after ``linear2``, fails;
* the errors of ``LearnedPositionEmbedding`` name the argument as a word (``x``, ``d_model``),
  not merely contain its letters; and every case of ``test_bad_arguments.py`` names its argument
  by its exact identifier, as a word (``seq_len``, not ``SEQ_LEN`` or ``XXseq_lenXX``);
* ``LearnedPositionEmbedding`` adds ``embedding.weight[pos]`` (known weights), not minus it.
"""

import inspect
import re

import pytest
import torch

from spec_tests.test_bad_arguments import CASES
from transformer_spec.assertions import assert_close
from transformer_spec.testing import (
    decoder_block_shapes,
    encoder_block_shapes,
    ffn_shapes,
    seeded_parameters,
    set_parameters,
    small_seq2seq,
)

D, H, FF = 8, 2, 16
F64 = torch.float64


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def _zeroed(params, *names):
    return {n: (torch.zeros_like(v) if n in names else v) for n, v in params.items()}


@pytest.mark.component("ffn")
def test_feedforward_dropout_acts_before_linear2(impl):
    params = _zeroed(seeded_parameters(ffn_shapes(D, FF), seed=1), "linear2.weight")
    ffn = set_parameters(impl.FeedForward(d_model=D, d_ff=FF, dropout=0.5).to(F64), params).train()
    torch.manual_seed(0)
    out = ffn(_x(2, 5, D))
    assert_close(out, params["linear2.bias"].expand(2, 5, D),
                 what="FeedForward in train() with linear2.weight = 0 (so linear2(dropout(h)) = linear2.bias "
                      "whatever dropout does; dropout applied after linear2 would zero or scale the bias)")


@pytest.mark.component("encoder")
def test_pre_ln_encoder_block_dropout_leaves_the_residual_stream_alone(impl):
    params = _zeroed(seeded_parameters(encoder_block_shapes(D, FF), seed=2),
                     "self_attn.W_O.weight", "ffn.linear2.weight", "ffn.linear2.bias")
    block = impl.TransformerEncoderBlock(d_model=D, num_heads=H, d_ff=FF, dropout=0.5, norm_first=True)
    block = set_parameters(block.to(F64), params).train()
    x = _x(2, 4, D, seed=3)
    torch.manual_seed(0)
    out = block(x)[0]
    assert_close(out, x, what="Pre-LN encoder block in train() with W_O and linear2 zeroed: x + drop(0) + drop(0) "
                              "must be x exactly (dropout belongs on the sublayer's output, not on the residual sum)")


@pytest.mark.component("decoder")
def test_pre_ln_decoder_block_dropout_leaves_the_residual_stream_alone(impl):
    params = _zeroed(seeded_parameters(decoder_block_shapes(D, FF), seed=4),
                     "self_attn.W_O.weight", "cross_attn.W_O.weight", "ffn.linear2.weight", "ffn.linear2.bias")
    block = impl.TransformerDecoderBlock(d_model=D, num_heads=H, d_ff=FF, dropout=0.5, norm_first=True)
    block = set_parameters(block.to(F64), params).train()
    x, memory = _x(2, 4, D, seed=5), _x(2, 3, D, seed=6)
    torch.manual_seed(0)
    out = block(x, memory)[0]
    assert_close(out, x, what="Pre-LN decoder block in train() with every W_O and linear2 zeroed: the output "
                              "must be x exactly (dropout belongs on the sublayers' outputs only)")


def _raises_naming_word(fn, name, what):
    with pytest.raises((ValueError, TypeError)) as info:
        fn()
    message = str(info.value)
    assert _names_as_word(message, name), (
        f"{what}: the message {message!r} should name the argument `{name}` (as a word)")


@pytest.mark.component("errors")
def test_learned_position_embedding_errors_name_the_argument(impl):
    _raises_naming_word(lambda: impl.LearnedPositionEmbedding(d_model=0, max_len=4), "d_model",
                        "LearnedPositionEmbedding(d_model=0)")
    emb = impl.LearnedPositionEmbedding(d_model=D, max_len=4)
    _raises_naming_word(lambda: emb(torch.zeros(1, 3, D + 1)), "x",
                        "LearnedPositionEmbedding on x with d_model + 1 features")
    _raises_naming_word(lambda: emb(torch.zeros(3, D)), "x", "LearnedPositionEmbedding on a 2-D x")


def _names_as_word(message: str, name: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", message) is not None


@pytest.mark.component("errors")
def test_bad_argument_errors_name_the_argument_by_its_identifier(impl):
    wrong = []
    for case, call, names in CASES:
        try:
            call(impl)
        except (ValueError, TypeError) as exc:
            if not any(_names_as_word(str(exc), n) for n in names):
                wrong.append(f"{case}: {type(exc).__name__}({str(exc)!r}) does not name {' or '.join(names)}")
        except Exception as exc:  # noqa: BLE001 - the wrong kind of error
            wrong.append(f"{case}: expected ValueError/TypeError, got {type(exc).__name__}: {exc}")
        else:
            wrong.append(f"{case}: nothing was raised")
    assert not wrong, ("error messages must name the argument by its exact identifier, as a word:\n  "
                       + "\n  ".join(wrong))


@pytest.mark.component("position")
def test_learned_position_embedding_adds_the_row_of_each_position(impl):
    weight = _x(6, D, seed=7)
    emb = set_parameters(impl.LearnedPositionEmbedding(d_model=D, max_len=6).to(F64), {"embedding.weight": weight})
    x = _x(2, 4, D, seed=8)
    assert_close(emb(x), x + weight[:4], what="LearnedPositionEmbedding(x) with known embedding.weight: "
                                              "x + embedding.weight[:L]")


@pytest.mark.component("errors")
@pytest.mark.parametrize(("case", "names"), [
    ("src_float", ("src",)), ("tgt_float", ("tgt",)), ("src_out_of_vocabulary", ("src",)),
    ("tgt_out_of_vocabulary", ("tgt",)), ("src_one_dimensional", ("src",)), ("tgt_one_dimensional", ("tgt",)),
])
def test_seq2seq_bad_tokens_name_src_or_tgt(impl, case, names):
    good_src, good_tgt = torch.tensor([[1, 2, 3]]), torch.tensor([[1, 2]])
    bad = {"float": lambda t: t.double(), "out_of_vocabulary": lambda t: t + 20, "one_dimensional": lambda t: t[0]}
    which, kind = case.split("_", 1)
    src = bad[kind](good_src) if which == "src" else good_src
    tgt = bad[kind](good_tgt) if which == "tgt" else good_tgt
    model = small_seq2seq(impl, 11, 13)
    _raises_naming_word(lambda: model(src, tgt), names[0], f"Seq2SeqTransformer with {which} {kind.replace('_', ' ')}")


# The contract's constructor and function defaults (docs/contract.md), per component.
DEFAULTS = [
    ("attention", "scaled_dot_product_attention", {"mask": None, "scale": None}),
    ("masks", "causal_mask", {"device": None}),
    ("mha", "MultiHeadAttention", {"d_model": 512, "num_heads": 8, "dropout": 0.1}),
    ("mha", "MultiHeadSelfAttention", {"d_model": 512, "num_heads": 8, "dropout": 0.1}),
    ("ffn", "FeedForward", {"d_model": 512, "d_ff": 2048, "dropout": 0.1}),
    ("encoder", "TransformerEncoderBlock",
     {"d_model": 512, "num_heads": 8, "d_ff": 2048, "dropout": 0.1, "norm_first": True}),
    ("decoder", "TransformerDecoderBlock",
     {"d_model": 512, "num_heads": 8, "d_ff": 2048, "dropout": 0.1, "norm_first": True}),
    ("position", "SinusoidalPositionEncoding", {"max_len": 5000}),
    ("minigpt", "MiniGPT", {"d_model": 128, "num_heads": 4, "num_layers": 4, "d_ff": 512, "max_len": 128,
                            "dropout": 0.1}),
    ("generate", "MiniGPT.generate", {"max_new_tokens": 50, "temperature": 0.8, "top_k": None, "generator": None}),
    ("seq2seq", "Seq2SeqTransformer", {"d_model": 128, "num_heads": 4, "num_encoder_layers": 2,
                                       "num_decoder_layers": 2, "d_ff": 512, "max_len": 128, "dropout": 0.1,
                                       "pad_id": 0}),
]


@pytest.mark.parametrize(("name", "defaults"), [
    pytest.param(n, d, id=n, marks=pytest.mark.component(c)) for c, n, d in DEFAULTS])
def test_contract_defaults(impl, name, defaults):
    obj = impl
    for part in name.split("."):
        obj = getattr(obj, part)
    params = inspect.signature(obj).parameters
    wrong = [f"{k}: expected default {v!r}, got "
             + ("no such parameter" if k not in params else
                "no default" if params[k].default is inspect.Parameter.empty else repr(params[k].default))
             for k, v in defaults.items()
             if k not in params or params[k].default is inspect.Parameter.empty or params[k].default != v
             or type(params[k].default) is not type(v)]
    assert not wrong, f"{name}: the contract's defaults differ: " + "; ".join(wrong)


@pytest.mark.component("seq2seq")
def test_seq2seq_defaults_are_the_contracts(impl):
    """``Seq2SeqTransformer(11, 13)`` with no other argument: d_model=128, num_heads=4, two encoder and
    two decoder blocks, d_ff=512, max_len=128, dropout=0.1, pad_id=0, seen through the contract's
    submodule names and behaviour (a signature can show defaults that the body does not use)."""
    torch.manual_seed(0)
    model = impl.Seq2SeqTransformer(11, 13).double().eval()
    sizes = {"len(encoder)": len(model.encoder), "len(decoder)": len(model.decoder),
             "encoder[0].self_attn.W_Q.weight": tuple(model.encoder[0].self_attn.W_Q.weight.shape),
             "encoder[0].ffn.linear1.weight": tuple(model.encoder[0].ffn.linear1.weight.shape),
             "decoder[1].ffn.linear1.weight": tuple(model.decoder[1].ffn.linear1.weight.shape)}
    expected = {"len(encoder)": 2, "len(decoder)": 2, "encoder[0].self_attn.W_Q.weight": (128, 128),
                "encoder[0].ffn.linear1.weight": (512, 128), "decoder[1].ffn.linear1.weight": (512, 128)}
    assert sizes == expected, f"Seq2SeqTransformer(11, 13): expected {expected}, got {sizes}"
    with torch.no_grad():
        weights = model.encoder[0](_x(1, 3, 128))[1]
    assert tuple(weights.shape) == (1, 4, 3, 3), (
        f"encoder[0] of Seq2SeqTransformer(11, 13) gave attention weights {tuple(weights.shape)}: "
        f"the default num_heads=4 means (B, 4, L, L) = (1, 4, 3, 3)")
    tgt = torch.tensor([[1, 2]])
    with torch.no_grad():
        model(torch.full((1, 128), 3), tgt)  # max_len=128 positions are allowed
        _raises_naming_word(lambda: model(torch.full((1, 129), 3), tgt), "max_len",
                            "Seq2SeqTransformer(11, 13) given 129 source tokens (default max_len=128)")
        short = model(torch.tensor([[5, 6, 7]]), tgt)
        padded = model(torch.tensor([[5, 6, 7, 0, 0]]), tgt)  # default pad_id=0: the two 0s are blocked
    assert_close(padded, short, what="Seq2SeqTransformer(11, 13) logits for src [5, 6, 7, 0, 0] vs [5, 6, 7] "
                                     "(the default pad_id=0 blocks the padding)")
    model.train()
    torch.manual_seed(1)
    with torch.no_grad():
        a, b = model(torch.tensor([[5, 6, 7]]), tgt), model(torch.tensor([[5, 6, 7]]), tgt)
    assert not torch.allclose(a, b), "Seq2SeqTransformer(11, 13) in train(): the default dropout=0.1 must act"


@pytest.mark.component("position")
def test_sinusoidal_default_max_len_is_5000(impl):
    pe = impl.SinusoidalPositionEncoding(D)
    assert tuple(pe.pe.shape) == (1, 5000, D), (
        f"SinusoidalPositionEncoding({D}).pe has shape {tuple(pe.pe.shape)}, expected (1, 5000, {D}) "
        f"(the default max_len=5000)")
    assert tuple(pe(torch.zeros(1, 5000, D)).shape) == (1, 5000, D)
    _raises_naming_word(lambda: pe(torch.zeros(1, 5001, D)), "max_len",
                        f"SinusoidalPositionEncoding({D}) given 5001 positions (default max_len=5000)")


@pytest.mark.component("errors")
@pytest.mark.parametrize("arg", ["src_vocab_size", "tgt_vocab_size", "d_model", "num_heads", "num_encoder_layers",
                                 "num_decoder_layers", "d_ff", "max_len"])
def test_seq2seq_constructor_errors_name_the_argument(impl, arg):
    kwargs = dict(src_vocab_size=11, tgt_vocab_size=13, d_model=D, num_heads=H, num_encoder_layers=1,
                  num_decoder_layers=1, d_ff=FF, max_len=8, dropout=0.0)
    kwargs[arg] = 0
    _raises_naming_word(lambda: impl.Seq2SeqTransformer(**kwargs), arg, f"Seq2SeqTransformer({arg}=0)")
