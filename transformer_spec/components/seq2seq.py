"""The 'seq2seq' component. The encoder-decoder model: source padding, causal target mask, cross-
attention.

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/registry.py)."""

from __future__ import annotations

import torch

from .. import behaviour as bp
from ..registry import Component, Name, pitfall

NAMES = (
    Name("Seq2SeqTransformer", "seq2seq", "module",
         "Seq2SeqTransformer(src_vocab_size, tgt_vocab_size, d_model=128, num_heads=4, "
         "num_encoder_layers=2, num_decoder_layers=2, d_ff=512, max_len=128, dropout=0.1, pad_id=0) "
         "with encoder, decoder; forward(src, tgt) -> logits (B, Lt, tgt_vocab_size)"),
)

PITFALLS = (
    pitfall("seq2seq_no_source_padding_mask", "seq2seq",
            "Seq2SeqTransformer never blocks the source padding (pad_id): padded tokens leak into the "
            "encoder and the cross-attention.",
            ("seq2seq.py", "src_mask = padding_mask(src, self.pad_id)", "src_mask = None")),
    pitfall("seq2seq_no_causal_target_mask", "seq2seq",
            "Seq2SeqTransformer's target self-attention is not causal: each target token sees the future.",
            ("seq2seq.py", "tgt_mask = causal_mask(tgt.size(1), device=tgt.device)", "tgt_mask = None")),
    pitfall("seq2seq_cross_attention_unmasked", "seq2seq",
            "Seq2SeqTransformer's cross-attention does not block the source padding (memory_mask).",
            ("seq2seq.py", "x, _, _ = block(x, memory, tgt_mask, src_mask)", "x, _, _ = block(x, memory, tgt_mask, None)")),
    pitfall("seq2seq_encoder_unmasked", "seq2seq",
            "Seq2SeqTransformer's encoder self-attention does not block the source padding.",
            ("seq2seq.py", "memory, _ = block(memory, src_mask)", "memory, _ = block(memory, None)")),
    pitfall("source_padding_from_lengths", "seq2seq",
            "Seq2SeqTransformer blocks the last n source positions, n the number of pads (a mask from lengths): "
            "a pad between real tokens is attended and the real tokens after it are blocked. Block by token, "
            "src == pad_id (padding_mask, seed 001 section 8.1).",
            ("seq2seq.py", "import torch.nn as nn\n", "import torch\nimport torch.nn as nn\n"),
            ("seq2seq.py", "src_mask = padding_mask(src, self.pad_id)  # (B, 1, 1, Ls): padded source keys blocked",
             "lengths = (src != self.pad_id).sum(1)  # real tokens per row, as if every pad were at the end\n"
             "        src_mask = (torch.arange(src.size(1), device=src.device)[None, :] >= lengths[:, None])[:, None, None, :]")),
)


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'seq2seq' (transformer_spec/behaviour.py)."""
    def model():
        torch.manual_seed(61)
        return impl.Seq2SeqTransformer(11, 13, d_model=bp.D, num_heads=bp.H, num_encoder_layers=1,
                                       num_decoder_layers=1, d_ff=bp.FF, max_len=bp.MAX_LEN, dropout=0.0).to(bp.DTYPE).eval()

    src, src_padded = torch.tensor([[3, 4, 5]]), torch.tensor([[3, 4, 5, 0, 0]])
    tgt = torch.tensor([[1, 2, 3, 4]])

    def padding_changes(m):
        return not torch.allclose(m(src, tgt), m(src_padded, tgt), rtol=1e-9, atol=1e-9)

    bp.capture(f, "src_padding_changes_logits", lambda: padding_changes(model()))
    bp.capture(f, "interior_pad_logits", lambda: model()(torch.tensor([[3, 0, 5, 4]]), tgt))  # a pad between tokens

    def without_encoder_attention():  # encoder self-attention contributes nothing: only cross-attention sees padding
        m = model()
        with torch.no_grad():
            for block in m.encoder:
                block.self_attn.W_O.weight.zero_()
        return padding_changes(m)

    bp.capture(f, "src_padding_changes_logits_without_encoder_attention", without_encoder_attention)

    def future_changes_past():
        m = model()
        other = torch.tensor([[1, 2, 9, 9]])
        return not torch.allclose(m(src, tgt)[:, :2], m(src, other)[:, :2], rtol=1e-9, atol=1e-9)

    bp.capture(f, "future_target_changes_earlier_logits", future_changes_past)


COMPONENT = Component(
    "seq2seq", label="s2s", points=8, order=10, depends_on=("masks", "encoder", "decoder", "position"),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour,
    why_no_rechecks=(
        "the contract leaves the embedding, final-norm and output-projection names free, so known "
        "weights cannot be set"
    ),
)
