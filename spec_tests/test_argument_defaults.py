"""The contract's defaults for every constructor and function argument that has one.

``docs/contract.md`` gives each signature with its defaults. ``test_contract_defaults`` reads them
with ``inspect.signature``, per component; the other two see defaults through behaviour, because
a signature can show defaults that the body does not use (mutmut 3 calls each mutant through a
trampoline that keeps the original signature, so only behaviour shows a mutated default):
``Seq2SeqTransformer(11, 13)`` through its submodules' sizes, ``max_len`` accepted and exceeded,
``pad_id=0`` blocked and dropout active in train(); ``SinusoidalPositionEncoding(d_model)``
through its 5000-position table.
"""

import inspect

import pytest
import torch

from transformer_spec.probes.assertions import assert_close
from transformer_spec.probes.testing import minigpt_parameters, set_parameters

from .argument_names import raises_naming_word as _raises_naming_word
from .generate_checks import assert_generate_defaults

D = 8
F64 = torch.float64


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


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
@pytest.mark.needs('parameters')
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


def _seeded_minigpt(impl, **sizes):
    """MiniGPT with the suite's seeded weights (sharp enough logits for sampling to see the temperature)."""
    model = impl.MiniGPT(11, d_model=D, num_heads=2, num_layers=1, d_ff=16, dropout=0.0, **sizes).double()
    return set_parameters(model, minigpt_parameters(11, D, 1, 16, seed=151)).eval()


@pytest.mark.component("minigpt")
def test_minigpt_default_max_len_is_128_and_return_attn_is_off(impl):
    """MiniGPT(11)'s 128 positions seen through behaviour: 128 tokens run, 129 are refused naming
    ``max_len``; without ``return_attn`` the second output is None."""
    torch.manual_seed(0)
    model = impl.MiniGPT(11, dropout=0.0).eval()
    with torch.no_grad():
        logits, attn_maps = model(torch.full((1, 128), 3))  # max_len=128 positions are allowed
    assert attn_maps is None, (f"MiniGPT(11)(tokens) returned {type(attn_maps).__name__} as attn_maps; "
                               f"without return_attn=True (the default is False) it must be None")
    _raises_naming_word(lambda: model(torch.full((1, 129), 3)), "max_len",
                        "MiniGPT(11) given 129 tokens (default max_len=128)")


@pytest.mark.component("generate")
def test_generate_defaults_are_50_tokens_at_temperature_0_8(impl):
    assert_generate_defaults(_seeded_minigpt(impl), "MiniGPT")
