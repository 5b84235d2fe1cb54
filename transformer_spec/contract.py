"""The contract (``docs/contract.md``) in machine-readable form.

Every name a submission defines, the component it is graded under, and the row of the
contract that describes it (quoted in "not submitted" failures so a student knows what to write).
The loader, the tests and the grading harness all read this one table.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The graded components, in the order reports list them. ``errors`` collects the
#: argument-validation tests; it has no name of its own.
COMPONENTS: tuple[str, ...] = (
    "attention", "masks", "mha", "ffn", "encoder", "decoder",
    "position", "minigpt", "generate", "seq2seq", "errors",
)


@dataclass(frozen=True)
class Name:
    """One name of the contract."""

    name: str
    component: str
    kind: str  # "function", "module" or "method"
    row: str  # the contract row, in short


NAMES: tuple[Name, ...] = (
    Name("scaled_dot_product_attention", "attention", "function",
         "scaled_dot_product_attention(q, k, v, mask=None, scale=None) -> (output (..., Lq, d_v), "
         "weights (..., Lq, Lk)); scale=None means 1/sqrt(d_k)"),
    Name("causal_mask", "masks", "function",
         "causal_mask(seq_len, device=None) -> bool (seq_len, seq_len), True strictly above the diagonal"),
    Name("padding_mask", "masks", "function",
         "padding_mask(tokens, pad_id) -> bool (B, 1, 1, L), True where tokens == pad_id"),
    Name("MultiHeadAttention", "mha", "module",
         "MultiHeadAttention(d_model=512, num_heads=8, dropout=0.1) with W_Q, W_K, W_V, W_O "
         "(Linear(D, D, bias=False)); forward(query, key, value, mask=None) -> (output (B, Lq, D), "
         "weights (B, H, Lq, Lk))"),
    Name("MultiHeadSelfAttention", "mha", "module",
         "MultiHeadSelfAttention(d_model=512, num_heads=8, dropout=0.1); forward(x, mask=None) -> "
         "(output, weights (B, H, L, L)), same as MultiHeadAttention(x, x, x, mask); where (or whether) dropout "
         "acts inside is free"),
    Name("FeedForward", "ffn", "module",
         "FeedForward(d_model=512, d_ff=2048, dropout=0.1) with linear1, linear2, dropout; "
         "forward(x) = linear2(dropout(gelu(linear1(x)))) with exact erf GELU"),
    Name("TransformerEncoderBlock", "encoder", "module",
         "TransformerEncoderBlock(d_model=512, num_heads=8, d_ff=2048, dropout=0.1, norm_first=True) "
         "with self_attn, ffn, norm1, norm2, dropout; forward(x, mask=None) -> (x, attn_weights)"),
    Name("TransformerDecoderBlock", "decoder", "module",
         "TransformerDecoderBlock(d_model=512, num_heads=8, d_ff=2048, dropout=0.1, norm_first=True) "
         "with self_attn, cross_attn, ffn, norm1, norm2, norm3, dropout; forward(x, memory, "
         "tgt_mask=None, memory_mask=None) -> (x, self_weights, cross_weights)"),
    Name("SinusoidalPositionEncoding", "position", "module",
         "SinusoidalPositionEncoding(d_model, max_len=5000) with buffer pe (1, max_len, D); "
         "forward(x) = x + pe[:, :L]"),
    Name("LearnedPositionEmbedding", "position", "module",
         "LearnedPositionEmbedding(d_model, max_len) with embedding; forward(x) = x + embedding(arange(L))"),
    Name("MiniGPT", "minigpt", "module",
         "MiniGPT(vocab_size, d_model=128, num_heads=4, num_layers=4, d_ff=512, max_len=128, dropout=0.1) "
         "with token_embed, pos_encoding, blocks, final_norm, lm_head (Linear(D, vocab, bias=False), tied to "
         "token_embed.weight); "
         "forward(tokens, return_attn=False) -> (logits (B, L, vocab), attn_maps)"),
    Name("MiniGPT.generate", "generate", "method",
         "MiniGPT.generate(seed_tokens, max_new_tokens=50, temperature=0.8, top_k=None, generator=None) "
         "-> list of ints: the seed followed by max_new_tokens new ids; temperature=0 is greedy, top_k keeps "
         "the k most likely (top_k > vocab_size: keep all or raise ValueError naming top_k)"),
    Name("Seq2SeqTransformer", "seq2seq", "module",
         "Seq2SeqTransformer(src_vocab_size, tgt_vocab_size, d_model=128, num_heads=4, "
         "num_encoder_layers=2, num_decoder_layers=2, d_ff=512, max_len=128, dropout=0.1, pad_id=0) "
         "with encoder, decoder; forward(src, tgt) -> logits (B, Lt, tgt_vocab_size)"),
)

#: The top-level names a complete submission defines (``MiniGPT.generate`` is a method).
TOP_LEVEL: tuple[str, ...] = tuple(n.name for n in NAMES if n.kind != "method")

BY_NAME: dict[str, Name] = {n.name: n for n in NAMES}


def component_of(name: str) -> str:
    """The component a contract name is graded under."""
    return BY_NAME[name].component
