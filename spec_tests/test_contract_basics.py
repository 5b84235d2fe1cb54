"""The contract's basic checks: every name exists, every forward returns the documented shapes
and dtypes, and eval mode is deterministic even with dropout configured.

Shapes come straight from the contract's tables (``docs/contract.md``).
"""

import pytest
import torch

from transformer_spec.contract import names as contract
from transformer_spec.probes.assertions import assert_close

from .generate_checks import SEED_DTYPES, assert_tensor_seed_is_the_list_seed

B, L, LK, D, H, FF, VOCAB = 2, 5, 7, 8, 2, 16, 11


def _component_params(names):
    return [pytest.param(n.name, marks=[pytest.mark.component(n.component), *([pytest.mark.track(*n.tracks)] if n.tracks else [])],
                         id=n.name) for n in names]


@pytest.mark.parametrize("name", _component_params(contract.names()))
@pytest.mark.needs('names')
def test_contract_name_is_defined(impl, name):
    obj = impl.get(name)
    assert callable(obj), f"`{name}` should be callable (a function or a class), got {type(obj).__name__}"


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def _x(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=_gen(seed), dtype=torch.float64).to(dtype)


def _check(t, shape, dtype, what):
    assert isinstance(t, torch.Tensor), f"{what}: expected a torch.Tensor, got {type(t).__name__}"
    assert tuple(t.shape) == shape, f"{what}: expected shape {shape}, got {tuple(t.shape)}"
    assert t.dtype == dtype, f"{what}: expected dtype {dtype}, got {t.dtype}"


@pytest.mark.component("attention")
@pytest.mark.needs('weights')
def test_attention_output_shapes_and_dtype(impl, dtype):
    q, k, v = _x(B, H, L, 4, dtype=dtype), _x(B, H, LK, 4, dtype=dtype, seed=1), _x(B, H, LK, 3, dtype=dtype, seed=2)
    out, weights = impl.scaled_dot_product_attention(q, k, v)
    _check(out, (B, H, L, 3), dtype, "scaled_dot_product_attention output (..., Lq, d_v)")
    _check(weights, (B, H, L, LK), dtype, "scaled_dot_product_attention weights (..., Lq, Lk)")


@pytest.mark.component("masks")
@pytest.mark.track("classic")  # padding_mask: the modern track has causal_mask only
def test_mask_shapes_and_dtype(impl):
    _check(impl.causal_mask(L), (L, L), torch.bool, "causal_mask(5)")
    tokens = torch.tensor([[3, 4, 0, 0], [5, 0, 0, 0]])
    _check(impl.padding_mask(tokens, 0), (2, 1, 1, 4), torch.bool, "padding_mask(tokens (2, 4), 0)")


@pytest.mark.component("mha")
def test_multihead_attention_output_shapes_and_dtype(impl, dtype):
    mha = impl.MultiHeadAttention(d_model=D, num_heads=H, dropout=0.0).to(dtype).eval()
    out, weights = mha(_x(B, L, D, dtype=dtype), _x(B, LK, D, dtype=dtype, seed=1), _x(B, LK, D, dtype=dtype, seed=2))
    _check(out, (B, L, D), dtype, "MultiHeadAttention output (B, Lq, D)")
    _check(weights, (B, H, L, LK), dtype, "MultiHeadAttention weights (B, H, Lq, Lk)")


@pytest.mark.component("mha")
def test_multihead_self_attention_output_shapes_and_dtype(impl, dtype):
    mhsa = impl.MultiHeadSelfAttention(d_model=D, num_heads=H, dropout=0.0).to(dtype).eval()
    out, weights = mhsa(_x(B, L, D, dtype=dtype))
    _check(out, (B, L, D), dtype, "MultiHeadSelfAttention output (B, L, D)")
    _check(weights, (B, H, L, L), dtype, "MultiHeadSelfAttention weights (B, H, L, L)")


@pytest.mark.component("ffn")
def test_feed_forward_output_shape_and_dtype(impl, dtype):
    ffn = impl.FeedForward(d_model=D, d_ff=FF, dropout=0.0).to(dtype).eval()
    _check(ffn(_x(B, L, D, dtype=dtype)), (B, L, D), dtype, "FeedForward output (B, L, D)")


@pytest.mark.component("encoder")
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre_ln", "post_ln"])
def test_encoder_block_output_shapes_and_dtype(impl, dtype, norm_first):
    block = impl.TransformerEncoderBlock(D, H, FF, 0.0, norm_first=norm_first).to(dtype).eval()
    out, weights = block(_x(B, L, D, dtype=dtype))
    _check(out, (B, L, D), dtype, "TransformerEncoderBlock output (B, L, D)")
    _check(weights, (B, H, L, L), dtype, "TransformerEncoderBlock attn_weights (B, H, L, L)")


@pytest.mark.component("decoder")
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre_ln", "post_ln"])
def test_decoder_block_output_shapes_and_dtype(impl, dtype, norm_first):
    block = impl.TransformerDecoderBlock(D, H, FF, 0.0, norm_first=norm_first).to(dtype).eval()
    out, self_w, cross_w = block(_x(B, L, D, dtype=dtype), _x(B, LK, D, dtype=dtype, seed=1))
    _check(out, (B, L, D), dtype, "TransformerDecoderBlock output (B, Lt, D)")
    _check(self_w, (B, H, L, L), dtype, "TransformerDecoderBlock self_weights (B, H, Lt, Lt)")
    _check(cross_w, (B, H, L, LK), dtype, "TransformerDecoderBlock cross_weights (B, H, Lt, Ls)")


@pytest.mark.component("position")
def test_sinusoidal_encoding_buffer_and_output_shapes(impl, dtype):
    enc = impl.SinusoidalPositionEncoding(D, max_len=16).to(dtype)
    assert hasattr(enc, "pe"), "SinusoidalPositionEncoding must have a buffer `pe` of shape (1, max_len, d_model)"
    assert tuple(enc.pe.shape) == (1, 16, D), f"pe: expected shape (1, 16, {D}), got {tuple(enc.pe.shape)}"
    _check(enc(_x(B, L, D, dtype=dtype)), (B, L, D), dtype, "SinusoidalPositionEncoding output (B, L, D)")


@pytest.mark.component("position")
def test_learned_embedding_output_shape(impl, dtype):
    emb = impl.LearnedPositionEmbedding(D, 16).to(dtype)
    _check(emb(_x(B, L, D, dtype=dtype)), (B, L, D), dtype, "LearnedPositionEmbedding output (B, L, D)")


@pytest.mark.component("minigpt")
@pytest.mark.parametrize("return_attn", [False, True], ids=["logits", "with_attn"])
def test_minigpt_output_shapes(impl, dtype, return_attn):
    torch.manual_seed(0)
    model = impl.MiniGPT(VOCAB, d_model=D, num_heads=H, num_layers=3, d_ff=FF, max_len=16, dropout=0.0)
    model = model.to(dtype).eval()
    tokens = torch.randint(0, VOCAB, (B, L), generator=_gen())
    logits, attn_maps = model(tokens, return_attn=return_attn)
    _check(logits, (B, L, VOCAB), dtype, "MiniGPT logits (B, L, vocab)")
    if not return_attn:
        assert attn_maps is None, f"MiniGPT(tokens) with return_attn=False must return attn_maps=None, got {type(attn_maps).__name__}"
        return
    assert isinstance(attn_maps, (list, tuple)) and len(attn_maps) == 3, (
        f"attn_maps: expected a list of num_layers=3 tensors, got {type(attn_maps).__name__} "
        f"of length {len(attn_maps) if hasattr(attn_maps, '__len__') else '?'}"
    )
    for i, a in enumerate(attn_maps):
        _check(a, (B, H, L, L), dtype, f"attn_maps[{i}] (B, H, L, L)")


@pytest.mark.component("generate")
def test_generate_returns_seed_plus_new_ids(impl):
    torch.manual_seed(0)
    model = impl.MiniGPT(VOCAB, d_model=D, num_heads=H, num_layers=1, d_ff=FF, max_len=16, dropout=0.0)
    out = model.generate([1, 2, 3], max_new_tokens=4, temperature=1.0, generator=_gen())
    assert isinstance(out, list), f"generate must return a list of ints, got {type(out).__name__}"
    assert len(out) == 7, f"generate([1, 2, 3], max_new_tokens=4) must return 3 + 4 = 7 ids, got {len(out)}: {out}"
    assert out[:3] == [1, 2, 3], f"generate must start with the seed tokens [1, 2, 3], got {out[:3]}"
    assert all(isinstance(t, int) and 0 <= t < VOCAB for t in out), f"every id must be an int in [0, {VOCAB}), got {out}"


@pytest.mark.component("generate")
@pytest.mark.parametrize("seed_dtype", SEED_DTYPES.values(), ids=SEED_DTYPES.keys())
def test_generate_takes_a_one_dimensional_integer_tensor_seed(impl, seed_dtype):
    torch.manual_seed(0)
    model = impl.MiniGPT(VOCAB, d_model=D, num_heads=H, num_layers=1, d_ff=FF, max_len=16, dropout=0.0)
    assert_tensor_seed_is_the_list_seed(model, seed_dtype, "MiniGPT")


@pytest.mark.component("seq2seq")
def test_seq2seq_logits_shape(impl, dtype):
    torch.manual_seed(0)
    model = impl.Seq2SeqTransformer(VOCAB, 13, d_model=D, num_heads=H, num_encoder_layers=1,
                                    num_decoder_layers=1, d_ff=FF, max_len=16, dropout=0.0).to(dtype).eval()
    src = torch.randint(1, VOCAB, (B, LK), generator=_gen())
    tgt = torch.randint(1, 13, (B, L), generator=_gen(1))
    _check(model(src, tgt), (B, L, 13), dtype, "Seq2SeqTransformer logits (B, Lt, tgt_vocab_size)")


def _eval_twice(module, *inputs):
    module.eval()
    with torch.no_grad():
        first, second = module(*inputs), module(*inputs)
    first = first[0] if isinstance(first, tuple) else first
    second = second[0] if isinstance(second, tuple) else second
    return first, second


EVAL_CASES = [
    pytest.param("mha", lambda impl: (impl.MultiHeadSelfAttention(D, H, dropout=0.5), (_x(B, L, D),)), id="MultiHeadSelfAttention",
                 marks=pytest.mark.component("mha")),
    pytest.param("ffn", lambda impl: (impl.FeedForward(D, FF, dropout=0.5), (_x(B, L, D),)), id="FeedForward",
                 marks=pytest.mark.component("ffn")),
    pytest.param("encoder", lambda impl: (impl.TransformerEncoderBlock(D, H, FF, dropout=0.5), (_x(B, L, D),)),
                 id="TransformerEncoderBlock", marks=pytest.mark.component("encoder")),
    pytest.param("decoder", lambda impl: (impl.TransformerDecoderBlock(D, H, FF, dropout=0.5), (_x(B, L, D), _x(B, LK, D, seed=1))),
                 id="TransformerDecoderBlock", marks=pytest.mark.component("decoder")),
    pytest.param("minigpt", lambda impl: (impl.MiniGPT(VOCAB, D, H, 2, FF, 16, dropout=0.5), (torch.randint(0, VOCAB, (B, L), generator=_gen()),)),
                 id="MiniGPT", marks=pytest.mark.component("minigpt")),
    pytest.param("seq2seq", lambda impl: (impl.Seq2SeqTransformer(VOCAB, 13, D, H, 1, 1, FF, 16, dropout=0.5),
                                          (torch.randint(1, VOCAB, (B, LK), generator=_gen()), torch.randint(1, 13, (B, L), generator=_gen(1)))),
                 id="Seq2SeqTransformer", marks=pytest.mark.component("seq2seq")),
]


@pytest.mark.parametrize("component, build", EVAL_CASES)
def test_eval_mode_is_deterministic_with_dropout_configured(impl, component, build):
    torch.manual_seed(0)
    module, inputs = build(impl)
    first, second = _eval_twice(module, *inputs)
    assert_close(second, first, rtol=0, atol=0, what=f"{type(module).__name__} in eval() with dropout=0.5, second call vs first")
