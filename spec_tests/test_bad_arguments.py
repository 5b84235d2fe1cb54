"""Bad arguments beyond the contract's listed examples.

The contract's rule is general: "Bad arguments raise ``ValueError`` (or ``TypeError``) with a
message that names the argument ... never a bare ``assert``". Each case below passes one bad
argument and expects such an error whose message names that argument, instead of a traceback
from deep inside torch (``mat1 and mat2 shapes cannot be multiplied``, ``index out of range in
self``, ``masked_fill_ only supports boolean masks``).

The tests after ``CASES`` hold the messages to the argument's exact identifier, as a word
(``seq_len``, not ``SEQ_LEN`` or ``XXseq_lenXX``; :mod:`spec_tests.argument_names`): every case
of ``CASES``, ``LearnedPositionEmbedding``'s errors (``d_model``, ``x``), Seq2SeqTransformer's bad
token tensors (``src`` or ``tgt``) and each of its constructor's sizes set to 0.
"""

import pytest
import torch

from transformer_spec.probes.testing import assert_raises_naming, small_seq2seq

from .argument_names import misnamed as _misnamed
from .argument_names import raises_naming_word as _raises_naming_word

pytestmark = pytest.mark.component("errors")

D, H, FF, VOCAB = 8, 2, 16, 11


def x(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def minigpt(impl):
    return impl.MiniGPT(VOCAB, d_model=D, num_heads=H, num_layers=1, d_ff=FF, max_len=8, dropout=0.0)


def sdpa(impl, **kwargs):
    args = {"q": x(2, 3, 4), "k": x(2, 5, 4), "v": x(2, 5, 6)}
    args.update(kwargs)
    return impl.scaled_dot_product_attention(args.pop("q"), args.pop("k"), args.pop("v"), **args)


def _double(module):
    return module.double().eval()


# The control of each case: the same call with valid arguments, which must not raise (an argument
# check earns its points only where valid arguments are accepted). key -> (description, call).
VALID = {
    "MHA()": ("MultiHeadAttention(d_model=8, num_heads=2)", lambda impl: impl.MultiHeadAttention(d_model=D, num_heads=H)),
    "FFN()": ("FeedForward(8, 16, dropout=0.5)", lambda impl: impl.FeedForward(D, FF, dropout=0.5)),
    "Enc()": ("TransformerEncoderBlock(8, 2, 16)", lambda impl: impl.TransformerEncoderBlock(D, H, FF)),
    "Dec()": ("TransformerDecoderBlock(8, 2, 16)", lambda impl: impl.TransformerDecoderBlock(D, H, FF)),
    "PE()": ("SinusoidalPositionEncoding(8, 16)", lambda impl: impl.SinusoidalPositionEncoding(D, 16)),
    "LPE()": ("LearnedPositionEmbedding(8, 16)", lambda impl: impl.LearnedPositionEmbedding(D, 16)),
    "MiniGPT()": ("MiniGPT(11, d_model=8, num_heads=2, num_layers=1)",
                  lambda impl: impl.MiniGPT(VOCAB, d_model=D, num_heads=H, num_layers=1)),
    "Seq2Seq()": ("Seq2SeqTransformer(11, 11, d_model=8, num_heads=2, pad_id=0)",
                  lambda impl: impl.Seq2SeqTransformer(VOCAB, VOCAB, d_model=D, num_heads=H, pad_id=0)),
    "causal_mask": ("causal_mask(3)", lambda impl: impl.causal_mask(3)),
    "sdpa": ("scaled_dot_product_attention(q (2, 3, 4), k (2, 5, 4), v (2, 5, 6))", lambda impl: sdpa(impl)),
    "sdpa_scale": ("scaled_dot_product_attention(q, k, v, scale=0.5)", lambda impl: sdpa(impl, scale=0.5)),
    "sdpa_mask": ("scaled_dot_product_attention(q, k, v, mask) with a bool (3, 5) mask",
                  lambda impl: sdpa(impl, mask=torch.zeros(3, 5, dtype=torch.bool))),
    "MHSA(x)": ("MultiHeadSelfAttention(8, 2) on x (2, 3, 8)",
                lambda impl: _double(impl.MultiHeadSelfAttention(D, H))(x(2, 3, D))),
    "MHA(x)": ("MultiHeadAttention(8, 2) on query (2, 3, 8), key and value (2, 5, 8)",
               lambda impl: _double(impl.MultiHeadAttention(D, H))(x(2, 3, D), x(2, 5, D), x(2, 5, D))),
    "FFN(x)": ("FeedForward(8, 16) on x (2, 3, 8)", lambda impl: _double(impl.FeedForward(D, FF))(x(2, 3, D))),
    "Enc(x)": ("TransformerEncoderBlock(8, 2, 16) on x (2, 3, 8)",
               lambda impl: _double(impl.TransformerEncoderBlock(D, H, FF))(x(2, 3, D))),
    "Dec(x)": ("TransformerDecoderBlock(8, 2, 16) on x (2, 3, 8), memory (2, 4, 8)",
               lambda impl: _double(impl.TransformerDecoderBlock(D, H, FF))(x(2, 3, D), x(2, 4, D))),
    "PE(x)": ("SinusoidalPositionEncoding(8, 16) on x (2, 3, 8)",
              lambda impl: impl.SinusoidalPositionEncoding(D, 16)(x(2, 3, D))),
    "padding_mask": ("padding_mask(tensor([[1, 2, 0]]), 0)", lambda impl: impl.padding_mask(torch.tensor([[1, 2, 0]]), 0)),
    "MiniGPT(x)": ("MiniGPT on tokens tensor([[1, 2]])", lambda impl: minigpt(impl)(torch.tensor([[1, 2]]))),
    "Seq2Seq(x)": ("Seq2SeqTransformer on src tensor([[1, 2]]), tgt tensor([[1]])",
                   lambda impl: small_seq2seq(impl, VOCAB, VOCAB)(torch.tensor([[1, 2]]), torch.tensor([[1]]))),
    "generate": ("generate([1, 2], max_new_tokens=2, temperature=0.5, top_k=3, generator=torch.Generator())",
                 lambda impl: minigpt(impl).generate([1, 2], max_new_tokens=2, temperature=0.5, top_k=3,
                                                     generator=torch.Generator().manual_seed(0))),
}


def valid(impl, key):
    """``VALID[key]`` for :func:`transformer_spec.probes.testing.assert_accepts`, bound to ``impl``."""
    description, call = VALID[key]
    return description, lambda: call(impl)


# (id, call, names any of which the message must contain, the key of its VALID control)
CASES = [
    # constructors
    ("MultiHeadAttention_num_heads_zero", lambda impl: impl.MultiHeadAttention(d_model=D, num_heads=0), ("num_heads",), "MHA()"),
    ("MultiHeadAttention_d_model_float", lambda impl: impl.MultiHeadAttention(d_model=8.5, num_heads=2), ("d_model",), "MHA()"),
    ("MultiHeadAttention_d_model_negative", lambda impl: impl.MultiHeadAttention(d_model=-8, num_heads=2), ("d_model",), "MHA()"),
    ("FeedForward_dropout_above_one", lambda impl: impl.FeedForward(D, FF, dropout=1.5), ("dropout",), "FFN()"),
    ("FeedForward_dropout_string", lambda impl: impl.FeedForward(D, FF, dropout="0.1"), ("dropout",), "FFN()"),
    ("FeedForward_d_ff_zero", lambda impl: impl.FeedForward(D, 0), ("d_ff",), "FFN()"),
    ("FeedForward_d_ff_string", lambda impl: impl.FeedForward(D, "16"), ("d_ff",), "FFN()"),
    ("FeedForward_d_model_zero", lambda impl: impl.FeedForward(0, FF), ("d_model",), "FFN()"),
    ("TransformerEncoderBlock_d_ff_zero", lambda impl: impl.TransformerEncoderBlock(D, H, 0), ("d_ff",), "Enc()"),
    ("TransformerDecoderBlock_d_ff_zero", lambda impl: impl.TransformerDecoderBlock(D, H, 0), ("d_ff",), "Dec()"),
    ("SinusoidalPositionEncoding_max_len_zero", lambda impl: impl.SinusoidalPositionEncoding(D, 0), ("max_len",), "PE()"),
    ("SinusoidalPositionEncoding_d_model_zero", lambda impl: impl.SinusoidalPositionEncoding(0, 16), ("d_model",), "PE()"),
    ("LearnedPositionEmbedding_max_len_zero", lambda impl: impl.LearnedPositionEmbedding(D, 0), ("max_len",), "LPE()"),
    ("MiniGPT_vocab_size_zero", lambda impl: impl.MiniGPT(0, d_model=D, num_heads=H), ("vocab_size",), "MiniGPT()"),
    ("MiniGPT_num_layers_zero", lambda impl: impl.MiniGPT(VOCAB, d_model=D, num_heads=H, num_layers=0), ("num_layers",), "MiniGPT()"),
    ("MiniGPT_d_ff_zero", lambda impl: impl.MiniGPT(VOCAB, d_model=D, num_heads=H, d_ff=0), ("d_ff",), "MiniGPT()"),
    ("MiniGPT_max_len_zero", lambda impl: impl.MiniGPT(VOCAB, d_model=D, num_heads=H, max_len=0), ("max_len",), "MiniGPT()"),
    ("Seq2SeqTransformer_pad_id_string", lambda impl: impl.Seq2SeqTransformer(VOCAB, VOCAB, d_model=D, num_heads=H, pad_id="<pad>"), ("pad_id",), "Seq2Seq()"),
    ("causal_mask_zero_length", lambda impl: impl.causal_mask(0), ("seq_len",), "causal_mask"),
    # scaled_dot_product_attention
    ("sdpa_q_not_a_tensor", lambda impl: sdpa(impl, q=[[1.0, 2.0, 3.0, 4.0]]), ("q",), "sdpa"),
    ("sdpa_q_one_dimensional", lambda impl: sdpa(impl, q=x(4)), ("q",), "sdpa"),
    ("sdpa_k_one_dimensional", lambda impl: sdpa(impl, k=x(4)), ("k",), "sdpa"),
    ("sdpa_v_one_dimensional", lambda impl: sdpa(impl, v=x(5)), ("v",), "sdpa"),
    ("sdpa_v_not_a_tensor", lambda impl: sdpa(impl, v=[[1.0] * 6] * 5), ("v",), "sdpa"),
    ("sdpa_q_k_different_d_k", lambda impl: sdpa(impl, k=x(2, 5, 3)), ("d_k", "q", "k"), "sdpa"),
    ("sdpa_k_v_different_lengths", lambda impl: sdpa(impl, v=x(2, 4, 6)), ("v", "k", "Lk"), "sdpa"),
    ("sdpa_scale_string", lambda impl: sdpa(impl, scale="0.5"), ("scale",), "sdpa_scale"),
    ("sdpa_mask_not_a_tensor", lambda impl: sdpa(impl, mask=[[True] * 5] * 3), ("mask",), "sdpa_mask"),
    ("sdpa_mask_not_bool", lambda impl: sdpa(impl, mask=torch.zeros(3, 5)), ("mask",), "sdpa_mask"),
    # module inputs
    ("MultiHeadSelfAttention_x_wrong_features", lambda impl: impl.MultiHeadSelfAttention(D, H)(x(2, 3, D + 2)), ("x", "d_model"), "MHSA(x)"),
    ("MultiHeadSelfAttention_x_two_dimensional", lambda impl: impl.MultiHeadSelfAttention(D, H)(x(3, D)), ("x",), "MHSA(x)"),
    ("MultiHeadAttention_batch_mismatch", lambda impl: impl.MultiHeadAttention(D, H)(x(2, 3, D), x(3, 5, D), x(3, 5, D)), ("query", "key", "batch"), "MHA(x)"),
    ("MultiHeadAttention_key_value_lengths", lambda impl: impl.MultiHeadAttention(D, H)(x(2, 3, D), x(2, 5, D), x(2, 4, D)), ("key", "value"), "MHA(x)"),
    ("MultiHeadAttention_query_two_dimensional", lambda impl: impl.MultiHeadAttention(D, H)(x(3, D), x(2, 5, D), x(2, 5, D)), ("query",), "MHA(x)"),
    ("MultiHeadAttention_key_two_dimensional", lambda impl: impl.MultiHeadAttention(D, H)(x(2, 3, D), x(5, D), x(2, 5, D)), ("key",), "MHA(x)"),
    ("MultiHeadAttention_value_two_dimensional", lambda impl: impl.MultiHeadAttention(D, H)(x(2, 3, D), x(2, 5, D), x(5, D)), ("value",), "MHA(x)"),
    ("FeedForward_x_wrong_features", lambda impl: impl.FeedForward(D, FF)(x(2, 3, D + 1)), ("x", "d_model"), "FFN(x)"),
    ("FeedForward_x_not_a_tensor", lambda impl: impl.FeedForward(D, FF)([[0.0] * D]), ("x",), "FFN(x)"),
    ("FeedForward_x_zero_dimensional", lambda impl: impl.FeedForward(D, FF)(torch.tensor(1.0, dtype=torch.float64)), ("x",), "FFN(x)"),
    ("TransformerEncoderBlock_x_two_dimensional", lambda impl: impl.TransformerEncoderBlock(D, H, FF)(x(3, D)), ("x",), "Enc(x)"),
    ("TransformerDecoderBlock_x_two_dimensional", lambda impl: impl.TransformerDecoderBlock(D, H, FF)(x(3, D), x(2, 4, D)), ("x",), "Dec(x)"),
    ("SinusoidalPositionEncoding_x_two_dimensional", lambda impl: impl.SinusoidalPositionEncoding(D, 16)(x(3, D)), ("x",), "PE(x)"),
    ("TransformerDecoderBlock_memory_wrong_features", lambda impl: impl.TransformerDecoderBlock(D, H, FF)(x(2, 3, D), x(2, 4, D + 2)), ("memory",), "Dec(x)"),
    ("padding_mask_tokens_one_dimensional", lambda impl: impl.padding_mask(torch.tensor([1, 2, 0]), 0), ("tokens",), "padding_mask"),
    ("padding_mask_pad_id_string", lambda impl: impl.padding_mask(torch.tensor([[1, 2, 0]]), "<pad>"), ("pad_id",), "padding_mask"),
    ("MiniGPT_tokens_float", lambda impl: minigpt(impl)(torch.tensor([[1.0, 2.0]])), ("tokens",), "MiniGPT(x)"),
    ("MiniGPT_tokens_bool", lambda impl: minigpt(impl)(torch.tensor([[True, False]])), ("tokens",), "MiniGPT(x)"),
    ("MiniGPT_tokens_out_of_vocabulary", lambda impl: minigpt(impl)(torch.tensor([[1, VOCAB]])), ("tokens", "vocab"), "MiniGPT(x)"),
    ("MiniGPT_tokens_negative", lambda impl: minigpt(impl)(torch.tensor([[-1, 2]])), ("tokens", "vocab"), "MiniGPT(x)"),
    ("MiniGPT_tokens_one_dimensional", lambda impl: minigpt(impl)(torch.tensor([1, 2])), ("tokens",), "MiniGPT(x)"),
    ("MiniGPT_tokens_empty", lambda impl: minigpt(impl)(torch.zeros(1, 0, dtype=torch.long)), ("tokens",), "MiniGPT(x)"),
    ("Seq2SeqTransformer_batch_mismatch", lambda impl: small_seq2seq(impl, VOCAB, VOCAB)(torch.tensor([[1, 2]]), torch.tensor([[1], [2]])), ("src", "tgt", "batch"), "Seq2Seq(x)"),
    # generate
    ("generate_empty_seed", lambda impl: minigpt(impl).generate([], max_new_tokens=2), ("seed_tokens",), "generate"),
    ("generate_seed_out_of_vocabulary", lambda impl: minigpt(impl).generate([1, VOCAB], max_new_tokens=2), ("seed_tokens", "vocab"), "generate"),
    ("generate_seed_not_ints", lambda impl: minigpt(impl).generate([1.5, 2.0], max_new_tokens=2), ("seed_tokens",), "generate"),
    ("generate_seed_a_string", lambda impl: minigpt(impl).generate("hello", max_new_tokens=2), ("seed_tokens",), "generate"),
    # two sequences: generate continues one (a (1, L) tensor may be read as that one sequence)
    ("generate_seed_two_sequences", lambda impl: minigpt(impl).generate(torch.tensor([[1, 2], [3, 4]]), max_new_tokens=2), ("seed_tokens",), "generate"),
    ("generate_max_new_tokens_zero", lambda impl: minigpt(impl).generate([1, 2], max_new_tokens=0), ("max_new_tokens",), "generate"),
    ("generate_temperature_string", lambda impl: minigpt(impl).generate([1, 2], max_new_tokens=2, temperature="hot"), ("temperature",), "generate"),
    ("generate_negative_temperature", lambda impl: minigpt(impl).generate([1, 2], max_new_tokens=2, temperature=-1.0), ("temperature",), "generate"),
    ("generate_top_k_zero", lambda impl: minigpt(impl).generate([1, 2], max_new_tokens=2, top_k=0), ("top_k",), "generate"),
    ("generate_generator_not_a_generator", lambda impl: minigpt(impl).generate([1, 2], max_new_tokens=2, generator=42), ("generator",), "generate"),
]


@pytest.mark.parametrize("call, names, control", [pytest.param(c, n, v, id=i) for i, c, n, v in CASES])
def test_bad_argument_raises_an_error_naming_it(impl, call, names, control, request):
    case = request.node.callspec.id
    assert_raises_naming(lambda: call(impl), *names, what=case.replace("_", " ", 1), valid=valid(impl, control))


@pytest.mark.component("errors")
def test_learned_position_embedding_errors_name_the_argument(impl):
    _raises_naming_word(lambda: impl.LearnedPositionEmbedding(d_model=0, max_len=4), "d_model",
                        "LearnedPositionEmbedding(d_model=0)", valid=valid(impl, "LPE()"))
    emb = impl.LearnedPositionEmbedding(d_model=D, max_len=4)
    on_x = ("LearnedPositionEmbedding(8, 4) on x (1, 3, 8)", lambda: emb(torch.zeros(1, 3, D)))
    _raises_naming_word(lambda: emb(torch.zeros(1, 3, D + 1)), "x",
                        "LearnedPositionEmbedding on x with d_model + 1 features", valid=on_x)
    _raises_naming_word(lambda: emb(torch.zeros(3, D)), "x", "LearnedPositionEmbedding on a 2-D x", valid=on_x)


@pytest.mark.component("errors")
def test_bad_argument_errors_name_the_argument_by_its_identifier(impl):
    wrong = _misnamed((case, lambda call=call: call(impl), names, valid(impl, control))
                      for case, call, names, control in CASES)
    assert not wrong, ("error messages must name the argument by its exact identifier, as a word:\n  "
                       + "\n  ".join(wrong))


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
    _raises_naming_word(lambda: model(src, tgt), names[0], f"Seq2SeqTransformer with {which} {kind.replace('_', ' ')}",
                        valid=("the same model on src [[1, 2, 3]], tgt [[1, 2]]", lambda: model(good_src, good_tgt)))


@pytest.mark.component("errors")
@pytest.mark.parametrize("arg", ["src_vocab_size", "tgt_vocab_size", "d_model", "num_heads", "num_encoder_layers",
                                 "num_decoder_layers", "d_ff", "max_len"])
def test_seq2seq_constructor_errors_name_the_argument(impl, arg):
    kwargs = dict(src_vocab_size=11, tgt_vocab_size=13, d_model=D, num_heads=H, num_encoder_layers=1,
                  num_decoder_layers=1, d_ff=FF, max_len=8, dropout=0.0)
    good = dict(kwargs)
    kwargs[arg] = 0
    _raises_naming_word(lambda: impl.Seq2SeqTransformer(**kwargs), arg, f"Seq2SeqTransformer({arg}=0)",
                        valid=(f"Seq2SeqTransformer({arg}={good[arg]})", lambda: impl.Seq2SeqTransformer(**good)))
