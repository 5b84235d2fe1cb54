"""The 'seq2seq' component. The encoder-decoder model: source padding, causal target mask, cross-
attention.

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import torch

from transformer_spec.contract import inputs
from transformer_spec.contract.registry import Component, Name, Recheck, pitfall
from transformer_spec.probes import behaviour as bp
from transformer_spec.probes import recheck

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
    # mined from public implementations (issue 27): each cites where the mistake was made
    pitfall('seq2seq_causal_mask_sized_by_batch', 'seq2seq',
            "The target's causal mask is built from tgt.size(0), the batch size, as in seq-first "
            'code: with batch-first tokens it must be causal_mask(tgt.size(1)), the target length '
        "(with batch size 1 the target is not masked at all).",
            ('seq2seq.py', 'tgt_mask = causal_mask(tgt.size(1), device=tgt.device)',
             'tgt_mask = causal_mask(tgt.size(0), device=tgt.device)  # the batch size'),
            source='pytorch/pytorch#115472'),
    pitfall('seq2seq_target_embedded_with_source_embedding', 'seq2seq',
            'The target tokens are embedded with the source embedding: the two vocabularies differ (a '
            'target id >= src_vocab_size fails) and the decoder learns the wrong table. Embed tgt '
        "with its own tgt_embed.",
            ('seq2seq.py', 'x = self.pos_encoding(self.tgt_embed(tgt) * scale)',
             'x = self.pos_encoding(self.src_embed(tgt) * scale)'),
            source='IpsumDominum/Pytorch-Simple-Transformer#1'),
)


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'seq2seq' (transformer_spec/probes/behaviour.py)."""
    def model():
        torch.manual_seed(61)
        return impl.Seq2SeqTransformer(11, 13, d_model=bp.D, num_heads=bp.H, num_encoder_layers=1,
                                       num_decoder_layers=1, d_ff=bp.FF, max_len=bp.MAX_LEN, dropout=0.0).to(bp.DTYPE).eval()

    src, src_padded = torch.tensor([[3, 4, 5]]), torch.tensor([[3, 4, 5, 0, 0]])
    tgt = torch.tensor([[1, 2, 3, 4]])

    def padding_changes(m):
        return not torch.allclose(m(src, tgt), m(src_padded, tgt), rtol=1e-9, atol=1e-9)

    bp.capture(f, "src_padding_changes_logits", lambda: padding_changes(model()))
    def interior_pad_changes(where: str):  # a pad between tokens is invisible: its embedding changes nothing
        m, src_with_pad = model(), torch.tensor([[3, 0, 5, 4]])
        embeddings = [e for e in m.modules() if isinstance(e, torch.nn.Embedding) and e.num_embeddings == 11]
        if len(embeddings) != 1:
            return "no single source embedding of 11 rows"
        seen = []
        m.encoder[-1].register_forward_hook(lambda mod, args, out: seen.append(out[0][:, [0, 2, 3]]))
        before = m(src_with_pad, tgt)
        with torch.no_grad():
            embeddings[0].weight[0] += inputs.randn(bp.D, seed=62)  # the pad's row (pad_id 0); LayerNorm would undo a constant
        after = m(src_with_pad, tgt)
        if where == "encoder":  # the encoder's last block's output at the other positions
            before, after = seen[0], seen[-1]
        return not torch.allclose(before, after, rtol=1e-9, atol=1e-9)

    # behaviours, not logits: the contract leaves the model's embeddings and head free, so no two
    # correct implementations share its logits, and a probe comparing them recognises only copies
    # of the reference (issue 27)
    bp.capture(f, "interior_pad_changes_logits", lambda: interior_pad_changes("logits"))
    bp.capture(f, "interior_pad_changes_encoder_output", lambda: interior_pad_changes("encoder"))

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
    bp.capture(f, "batch_of_two", lambda: f"logits {tuple(model()(torch.cat([src, src]), torch.cat([tgt, tgt])).shape)}")
    # target ids 11 and 12 exist only in the target vocabulary (13 ids; the source has 11)
    bp.capture(f, "target_ids_beyond_the_source_vocabulary",
               lambda: f"logits {tuple(model()(src, torch.tensor([[1, 12, 11]])).shape)}")


# The re-checks. The contract leaves Seq2SeqTransformer's embeddings, final norms and output
# projection free (their names too), so no two correct implementations share its logits: each
# re-check is one of the properties' laws instead, on a model whose every parameter (by its own
# names) is drawn from the secret seed, as the properties draw them. It returns the law's residual,
# the difference of two logit tensors that every correct implementation makes equal (the reference's
# is zero up to float64 rounding, ~1e-15; compare's atol is 1e-8).
LAWS = "properties/"


def _seeded(mod, seed: int, **config):
    """A float64 Seq2SeqTransformer in eval mode (the default dropout kept: it must not act there),
    one encoder and one decoder layer, every parameter drawn from ``seed``."""
    model = mod.Seq2SeqTransformer(num_encoder_layers=1, num_decoder_layers=1, **config).double()
    return recheck.with_weights(model, recheck.own_shapes(model), seed)


def _ints(low: int, high: int, shape, gen) -> torch.Tensor:
    return torch.randint(low, high + 1, tuple(shape), generator=gen)


def _source_padding(mod, seed):
    """test_seq2seq_source_padding_does_not_change_logits: pad tokens appended to the source."""
    g = inputs.generator(seed + 1)
    b, ls, lt, extra = (int(_ints(lo, hi, (), g)) for lo, hi in ((1, 2), (1, 6), (1, 6), (1, 4)))
    src, tgt = _ints(1, 5, (b, ls), g), _ints(0, 6, (b, lt), g)
    model = _seeded(mod, seed, src_vocab_size=6, tgt_vocab_size=7, d_model=4, num_heads=2, d_ff=8, max_len=10)
    padded = torch.cat([src, torch.zeros(b, extra, dtype=torch.long)], dim=1)
    return recheck.as_numpy(padded_minus_unpadded=recheck.law_residual(model(padded, tgt), model(src, tgt)))


def _interior_pad(mod, seed):
    """test_seq2seq_pad_positions_are_invisible_wherever_they_are: the same weights with pad_id 0 and
    5, the source's pads (one between real tokens) written 0 and 5."""
    g = inputs.generator(seed + 1)
    b, n, lt = (int(_ints(lo, hi, (), g)) for lo, hi in ((1, 2), (2, 6), (1, 6)))
    src = _ints(1, 4, (b, n), g).masked_fill(_ints(0, 1, (b, n), g).bool(), 0)
    src[0, int(_ints(0, n - 2, (), g))], src[0, -1] = 0, int(_ints(1, 4, (), g))
    tgt = _ints(1, 4, (b, lt), g)
    config = dict(src_vocab_size=6, tgt_vocab_size=7, d_model=8, num_heads=2, d_ff=8, max_len=10)
    with_0 = _seeded(mod, seed, pad_id=0, **config)(src, tgt)
    with_5 = _seeded(mod, seed, pad_id=5, **config)(src.masked_fill(src == 0, 5), tgt)
    return recheck.as_numpy(pad_5_minus_pad_0=recheck.law_residual(with_5, with_0))


def _future_target(mod, seed):
    """test_seq2seq_logits_unaffected_by_future_target_tokens: the target changed after position t."""
    g = inputs.generator(seed + 1)
    b, ls, lt = (int(_ints(lo, hi, (), g)) for lo, hi in ((1, 2), (1, 8), (2, 8)))
    src, tgt = _ints(0, 5, (b, ls), g), _ints(0, 6, (b, lt), g)
    t = int(_ints(0, lt - 2, (), g))  # at least one position after t, and every one of them changed
    tgt2 = tgt.clone()
    tgt2[:, t + 1:] = (tgt[:, t + 1:] + _ints(1, 6, (b, lt - t - 1), g)) % 7
    model = _seeded(mod, seed, src_vocab_size=6, tgt_vocab_size=7, d_model=4, num_heads=2, d_ff=8, max_len=8)
    return recheck.as_numpy(changed_minus_unchanged=recheck.law_residual(model(src, tgt2)[:, : t + 1],
                                                                         model(src, tgt)[:, : t + 1]))


def _reads_its_inputs(mod, seed):
    """test_seq2seq_logits_depend_on_each_real_source_token_and_on_the_target_token: one real source token
    changed, then one target token; how far each target position's logits move, in units of the law's "no
    change" (``tiny``, as the test computes it)."""
    g = inputs.generator(seed + 1)
    b, ls, lt = (int(_ints(lo, hi, (), g)) for lo, hi in ((1, 2), (1, 5), (1, 5)))
    src, tgt = _ints(1, 4, (b, ls), g), _ints(0, 6, (b, lt), g)
    i, t = int(_ints(0, ls - 1, (), g)), int(_ints(0, lt - 1, (), g))
    model = _seeded(mod, seed, src_vocab_size=6, tgt_vocab_size=7, d_model=8, num_heads=2, d_ff=8, max_len=10)
    logits = model(src, tgt)
    other_src, other_tgt = src.clone(), tgt.clone()
    other_src[:, i] = src[:, i] % 4 + 1
    other_tgt[:, t] = (tgt[:, t] + 1) % 7
    tiny = 1e-5 * (1.0 + float(logits.detach().abs().max()))
    return recheck.as_numpy(source_moves=(model(other_src, tgt) - logits).abs().amax(dim=-1) / tiny,
                            target_moves=(model(src, other_tgt) - logits).abs().amax(dim=-1)[:, t] / tiny)


def reads_its_inputs_law(answer: dict, reference: dict) -> str | None:
    """The secret twin judged as its test judges: every move above the law's "no change" (1 here)."""
    for key, what in (("source_moves", "one real source token"), ("target_moves", "target token t")):
        moves = answer.get(key)
        if moves is None:
            return f"{key} missing"
        if not (moves > 1).all():
            return f"changing {what} left logits unchanged (moves {moves.round(3).tolist()}, in units of no change)"
    return None


RECHECKS = (
    Recheck("seq2seq[reads_its_inputs]", "seq2seq",
            (f"{LAWS}test_model_laws.py::test_seq2seq_logits_depend_on_each_real_source_token_and_on_the_target_token",),
            _reads_its_inputs, law=reads_its_inputs_law),
    Recheck("seq2seq[source_padding]", "seq2seq",
            (f"{LAWS}test_model_laws.py::test_seq2seq_source_padding_does_not_change_logits",), _source_padding),
    Recheck("seq2seq[interior_pad]", "seq2seq",
            (f"{LAWS}test_seq2seq_padding.py::test_seq2seq_pad_positions_are_invisible_wherever_they_are",),
            _interior_pad),
    Recheck("seq2seq[future_target]", "seq2seq",
            (f"{LAWS}test_causality.py::test_seq2seq_logits_unaffected_by_future_target_tokens",), _future_target),
)


COMPONENT = Component(
    "seq2seq", label="s2s", points=8, order=10, depends_on=("masks", "encoder", "decoder", "position"),
    values=(  # the tests of what it computes (rubric.VALUES_SHARE of its points)
        "spec_tests/test_snapshots.py::test_seq2seq_logits_snapshot",
        "properties/test_model_laws.py::test_seq2seq_logits_depend_on_each_real_source_token_and_on_the_target_token",
    ),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
