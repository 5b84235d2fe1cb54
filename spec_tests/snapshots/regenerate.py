"""Regenerate the snapshot files of ``spec_tests/test_snapshots.py`` from the reference.

    python -m spec_tests.snapshots.regenerate            # rewrite minigpt.pt and seq2seq.pt
    python -m spec_tests.snapshots.regenerate --check    # recompute and compare, write nothing

Snapshots cover what PyTorch has no twin for (MiniGPT logits, attention maps and greedy
generation; Seq2SeqTransformer logits). The weights and inputs are generated here, independently
of any implementation: seeded ``torch.Generator`` draws assigned by the contract's parameter
names (:mod:`transformer_spec.probes.testing`), stored in float64 in the files so the tests do not depend
on the generator's stream staying the same across torch versions. Only the expected outputs come
from the reference, computed in float64 in eval mode. Regenerate only when the contract changes
(and review the diff of the printed summary): a snapshot that follows a reference bug hides it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from transformer_spec.probes.testing import minigpt_parameters, seeded_parameters, set_parameters

HERE = Path(__file__).resolve().parent
MINIGPT_FILE = HERE / "minigpt.pt"
SEQ2SEQ_FILE = HERE / "seq2seq.pt"

MINIGPT_CONFIG = dict(vocab_size=13, d_model=16, num_heads=4, num_layers=2, d_ff=32, max_len=8, dropout=0.1)
SEQ2SEQ_CONFIG = dict(src_vocab_size=11, tgt_vocab_size=13, d_model=16, num_heads=4, num_encoder_layers=2,
                      num_decoder_layers=2, d_ff=32, max_len=10, dropout=0.1, pad_id=0)
WEIGHT_SEED = 29  # chosen (with BLOCK_GAIN) so that greedy decoding is not a constant token
BLOCK_GAIN = 8.0  # W_O and ffn.linear2 scaled up so that the blocks, not the tied embedding, decide
SEQ2SEQ_SEED = 2024
GREEDY_SEED, GREEDY_NEW = [1, 2, 3], 7  # 3 + 7 = 10 tokens > max_len = 8: the window slides
WINDOW_SEED, WINDOW_NEW = [5, 1, 7, 2, 9, 3, 11, 4, 0, 6, 8], 4  # the seed alone is longer than max_len
SAMPLE_SEED = [4, 2]  # the first-step distribution of sampling is checked from this seed's logits


def _reference():
    import reference

    return reference


def _greedy_margins(model, seed, new, max_len):
    """Run greedy decoding by hand; return the tokens and the smallest top-1/top-2 logit gap."""
    tokens, gaps = list(seed), []
    with torch.no_grad():
        for _ in range(new):
            logits, _ = model(torch.tensor([tokens[-max_len:]]))
            top2 = torch.topk(logits[0, -1].float(), 2).values
            gaps.append(float(top2[0] - top2[1]))
            tokens.append(int(logits[0, -1].argmax()))
    return tokens, min(gaps)


def build_minigpt() -> dict:
    ref = _reference()
    c = MINIGPT_CONFIG
    params = minigpt_parameters(c["vocab_size"], c["d_model"], c["num_layers"], c["d_ff"], seed=WEIGHT_SEED)
    for name in params:
        if name.endswith(("W_O.weight", "linear2.weight")):
            params[name] = params[name] * BLOCK_GAIN
    model = set_parameters(ref.MiniGPT(**c).to(torch.float64), params).eval()
    gen = torch.Generator().manual_seed(WEIGHT_SEED + 1)
    tokens = torch.randint(0, c["vocab_size"], (2, c["max_len"]), generator=gen)
    with torch.no_grad():
        logits, attn_maps = model(tokens, return_attn=True)
        sample_logits = model(torch.tensor([SAMPLE_SEED]))[0][0, -1]
    greedy, greedy_gap = _greedy_margins(model, GREEDY_SEED, GREEDY_NEW, c["max_len"])
    window, window_gap = _greedy_margins(model, WINDOW_SEED, WINDOW_NEW, c["max_len"])
    # The reference's own generate must agree with the hand-run greedy decoding above.
    assert model.generate(GREEDY_SEED, GREEDY_NEW, temperature=0) == greedy
    assert model.generate(WINDOW_SEED, WINDOW_NEW, temperature=0) == window
    assert min(greedy_gap, window_gap) > 0.05, "greedy choices too close to call; change WEIGHT_SEED"
    return {
        "config": dict(c),
        "weight_seed": WEIGHT_SEED,
        "block_gain": BLOCK_GAIN,
        "parameters": params,
        "tokens": tokens,
        "logits": logits,
        "attn_maps": torch.stack(attn_maps),  # (num_layers, B, H, L, L)
        "greedy": {"seed": GREEDY_SEED, "max_new_tokens": GREEDY_NEW, "expected": greedy, "min_gap": greedy_gap},
        "window": {"seed": WINDOW_SEED, "max_new_tokens": WINDOW_NEW, "expected": window, "min_gap": window_gap},
        "sample": {"seed": SAMPLE_SEED, "next_logits": sample_logits},
    }


def build_seq2seq() -> dict:
    ref = _reference()
    c = SEQ2SEQ_CONFIG
    model = ref.Seq2SeqTransformer(**c).to(torch.float64)
    # The contract fixes only `encoder` and `decoder`; the other names are the reference's.
    shapes = {n: tuple(p.shape) for n, p in model.named_parameters()}
    params = seeded_parameters(shapes, seed=SEQ2SEQ_SEED)
    set_parameters(model, params).eval()
    gen = torch.Generator().manual_seed(SEQ2SEQ_SEED + 1)
    src = torch.randint(1, c["src_vocab_size"], (2, 7), generator=gen)
    src[1, 4:] = c["pad_id"]  # the second source is padded
    tgt = torch.randint(1, c["tgt_vocab_size"], (2, 5), generator=gen)
    with torch.no_grad():
        logits = model(src, tgt)
    return {"config": dict(c), "weight_seed": SEQ2SEQ_SEED, "parameters": params, "src": src, "tgt": tgt,
            "logits": logits}


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b, rtol=1e-12, atol=1e-12)
    return a == b


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="recompute and compare with the files, write nothing")
    args = parser.parse_args(argv)
    status = 0
    for path, build in ((MINIGPT_FILE, build_minigpt), (SEQ2SEQ_FILE, build_seq2seq)):
        data = build()
        if args.check:
            old = torch.load(path, weights_only=True) if path.exists() else None
            same = old is not None and _same(data, old)
            print(f"{path.name}: {'up to date' if same else 'DIFFERS from the reference'}")
            status |= not same
        else:
            torch.save(data, path)
            print(f"wrote {path.relative_to(HERE.parent.parent)} ({path.stat().st_size:,} bytes)")
        if "greedy" in data:
            print(f"  greedy {data['greedy']['expected']} (min gap {data['greedy']['min_gap']:.3g}), "
                  f"window {data['window']['expected']} (min gap {data['window']['min_gap']:.3g})")
    return status


if __name__ == "__main__":
    sys.exit(main())
