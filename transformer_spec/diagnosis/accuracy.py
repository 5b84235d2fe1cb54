"""How often the named diagnoses (:mod:`transformer_spec.diagnosis.diagnose`) are right: recall and precision.

    python -m transformer_spec.diagnosis.accuracy           # or: python -m tools.mutants --diagnose-accuracy

* **recall**: each catalogue pitfall (a freshly loaded patched copy, other RNG state) is named in
  its own component, and so is each of :data:`VARIANTS` (the same mistakes written as another
  student would);
* **precision**: every name a diagnosis gives is right. Wrong names are counted on the rows above,
  in their own component and in every component downstream that the mistake can change (a name
  other than the expected pitfall, or one behaving identically to it there; issue 27), on
  :data:`UNNAMED` (single mistakes no pitfall describes: nothing may be named), on every allowed
  variation of :mod:`transformer_spec.catalogue.variations` (correct code: nothing may be named in the
  components it can change) and on the correct implementations in every component.

A wrong name misleads more than none: the run fails on a single wrong name.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import torch

from transformer_spec import layout
from transformer_spec.catalogue.patching import (
    INDEPENDENT_IMPL,
    load_patched_independent,
    load_patched_reference,
)
from transformer_spec.contract import registry, tracks
from transformer_spec.diagnosis import profiles as through
from transformer_spec.diagnosis.catalogue import catalogue_features
from transformer_spec.diagnosis.diagnose import Diagnosis, diagnose
from transformer_spec.probes.behaviour import EXACT, Tolerance, same
from transformer_spec.submission.loader import load

#: The same mistakes written differently from the catalogue's patches (as another student would):
#: ``(expected pitfall, patches)``. Measures whether a diagnosis generalises beyond the patch text.
VARIANTS: tuple[tuple[str, tuple], ...] = (
    ("no_scaling", (("attention.py", "scores = torch.matmul(q * scale, k.transpose(-2, -1))",
                     "scores = torch.einsum('...qd,...kd->...qk', q, k) * (scale if scale != 1.0 / "
                     "math.sqrt(q.size(-1)) else 1.0)"),)),
    ("softmax_over_queries", (("attention.py", "weights = F.softmax(scores, dim=-1)",
                               "e = (scores - scores.amax(dim=-2, keepdim=True)).exp()  # stable, but over queries\n"
                               "    weights = e / e.sum(dim=-2, keepdim=True)"),)),
    ("masked_with_zero", (("attention.py", 'scores.masked_fill_(mask, float("-inf"))', "scores = scores * ~mask"),)),
    ("causal_mask_blocks_diagonal", (("masks.py", "torch.triu(ones, diagonal=1)", "~torch.tril(ones, diagonal=-1)"),)),
    ("padding_mask_blocks_queries", (("masks.py", "(tokens == pad_id)[:, None, None, :]",
                                      "(tokens == pad_id).unsqueeze(1).unsqueeze(-1)"),)),
    ("heads_merged_without_transpose", (("multihead.py", "heads.transpose(1, 2).reshape(B, Lq, self.d_model)",
                                         "heads.contiguous().view(B, Lq, self.d_model)"),)),
    ("relu_instead_of_gelu", (("feedforward.py", "F.gelu(self.linear1(x))", "self.linear1(x).clamp(min=0)"),)),
    ("tanh_gelu", (("feedforward.py", "F.gelu(self.linear1(x))",
                    "(lambda h: 0.5 * h * (1 + torch.tanh(0.7978845608028654 * (h + 0.044715 * h ** 3))))"
                    "(self.linear1(x))"),
                   ("feedforward.py", "import torch.nn as nn\n", "import torch\nimport torch.nn as nn\n"))),
    ("positions_start_at_1", (("position.py", "return x + self.pe[:, start : start + x.size(1)].to(x.dtype)",
                               "return x + self.pe[:, start + 1 : start + 1 + x.size(1)].to(x.dtype)"),)),
    ("no_weight_tying", (("minigpt.py", "self.lm_head.weight = self.token_embed.weight",
                          "self.lm_head.weight = nn.Parameter(0.02 * torch.randn_like(self.token_embed.weight))"),)),
    ("weight_tying_by_copy", (("minigpt.py", "self.lm_head.weight = self.token_embed.weight",
                               "self.lm_head.weight = nn.Parameter(self.token_embed.weight.detach().clone())"),)),
    ("mode_not_restored", (("minigpt.py", "self.train(was_training)", "self.train(False)"),)),
    ("top_k_ignored", (("minigpt.py", "kth_best = torch.topk(next_logits, top_k).values[-1]",
                        "kth_best = next_logits.min()"),)),
    ("temperature_multiplied", (("minigpt.py", "probs = F.softmax(next_logits, dim=-1)",
                                 "probs = F.softmax(next_logits * temperature * temperature, dim=-1)"),)),
    ("heads_divisibility_not_checked", (("_validation.py", "if d_model % num_heads != 0:",
                                         "if d_model < num_heads:"),)),
)


_ALT = "alt_submission.py"
#: The same mistakes made in the independent implementation (``tests/independent/alt_submission.py``,
#: written from the contract alone in another style: einsum, ``torch.where`` masks, ``unflatten`` and
#: ``permute``): ``(expected pitfall, patches of alt_submission.py)``. A probe that compares raw
#: numbers only a copy of the reference reproduces cannot name these (issue 27).
INDEPENDENT_VARIANTS: tuple[tuple[str, tuple], ...] = (
    ("no_scaling", ((_ALT, "        factor = 1.0 / math.sqrt(d_k)\n", "        factor = 1.0\n"),)),
    ("mask_inverted", ((_ALT, "        blocked = mask.expand(scores.shape)", "        blocked = ~mask.expand(scores.shape)"),)),
    ("softmax_over_queries", ((_ALT, "        weights = torch.where(dead_row, zero, scores.softmax(dim=-1))",
                               "        weights = torch.where(dead_row, zero, scores.softmax(dim=-2))"),
                              (_ALT, "        weights = scores.softmax(dim=-1)", "        weights = scores.softmax(dim=-2)"))),
    ("causal_mask_blocks_diagonal", ((_ALT, "return torch.ones(seq_len, seq_len, device=device).triu(1).bool()",
                                      "return torch.ones(seq_len, seq_len, device=device).triu(0).bool()"),)),
    ("padding_mask_blocks_queries", ((_ALT, "return tokens.eq(int(pad_id))[:, None, None, :]",
                                      "return tokens.eq(int(pad_id))[:, None, :, None]"),)),
    ("heads_merged_without_transpose", ((_ALT, "merged = mixed.permute(0, 2, 1, 3).flatten(2)",
                                         "merged = mixed.reshape(mixed.shape[0], mixed.shape[2], -1)"),)),
    ("relu_instead_of_gelu", ((_ALT, 'hidden = F.gelu(_apply_linear(self.linear1, x), approximate="none")',
                               "hidden = F.relu(_apply_linear(self.linear1, x))"),)),
    ("encoder_post_ln_for_pre_ln", ((_ALT, """            attended, weights = self.self_attn(_apply_norm(self.norm1, x), mask)
            x = x + self.dropout(attended)
            x = x + self.dropout(self.ffn(_apply_norm(self.norm2, x)))""", """            attended, weights = self.self_attn(x, mask)
            x = _apply_norm(self.norm1, x + self.dropout(attended))
            x = _apply_norm(self.norm2, x + self.dropout(self.ffn(x)))"""),)),
    ("positions_start_at_1", ((_ALT, "        position = torch.arange(0, max_len).unsqueeze(1)",
                               "        position = torch.arange(1, max_len + 1).unsqueeze(1)"),)),
    ("no_weight_tying", ((_ALT, "        self.lm_head.weight = self.token_embed.weight\n", ""),)),
    ("embedding_not_scaled", ((_ALT, "hidden = self.pos_encoding(self.token_embed(tokens) * math.sqrt(self.d_model))",
                               "hidden = self.pos_encoding(self.token_embed(tokens))"),)),
    ("temperature_multiplied", ((_ALT, "shifted = (last - last.max()) / temperature",
                                 "shifted = (last - last.max()) * temperature"),)),
    ("seq2seq_no_causal_target_mask", ((_ALT, "y, _, _ = block(y, memory, tgt_mask=future, memory_mask=src_blocked)",
                                        "y, _, _ = block(y, memory, tgt_mask=None, memory_mask=src_blocked)"),)),
    ("seq2seq_cross_attention_unmasked", ((_ALT, "y, _, _ = block(y, memory, tgt_mask=future, memory_mask=src_blocked)",
                                           "y, _, _ = block(y, memory, tgt_mask=future, memory_mask=None)"),)),
)


_ENCODER_INIT = """    def __init__(self, d_model=512, num_heads=8, d_ff=2048, dropout=0.1, norm_first=True):
        super().__init__()
        check_heads(d_model, num_heads)
        check_positive_int("d_ff", d_ff)
        self.d_model = d_model
        self.norm_first = bool(norm_first)
        self.self_attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.ffn"""

#: Single mistakes that no catalogue pitfall describes, written independently of the catalogue
#: (issue 13: the first was once named "dropout applied to the residual sum"; a second, the residual
#: stream normalised in place, is now the mined pitfall ``pre_ln_residual_from_normalized_input``): ``(component,
#: description, patches)``. The diagnosis must name nothing for them, in their component and in
#: every component downstream of it.
UNNAMED: tuple[tuple[str, str, tuple], ...] = (
    ("encoder", "the encoder block's default is Post-LN (norm_first=False)",
     (("blocks.py", _ENCODER_INIT, _ENCODER_INIT.replace("norm_first=True", "norm_first=False", 1)),)),
    # issue 27's findings: mistakes upstream once made components downstream name a pitfall the code
    # does not have (generate named `embedding_not_scaled` for keys split by view alone)
    ("attention", "softmax taken before the mask, the blocked weights then set to 0 (rows no longer sum to 1)",
     (("attention.py", '        scores.masked_fill_(mask, float("-inf"))\n', ""),
      ("attention.py", "    weights = F.softmax(scores, dim=-1)  # over the keys: each row sums to 1\n",
       "    weights = F.softmax(scores, dim=-1)  # over the keys: each row sums to 1\n"
       "    if mask is not None:\n        weights = weights.masked_fill(mask, 0.0)\n"))),
    ("mha", "the keys split into heads by view(B, H, L, d_k) alone (queries and values right)",
     (("multihead.py", "K = self.W_K(key).view(B, Lk, self.num_heads, self.d_k).transpose(1, 2)",
       "K = self.W_K(key).view(B, self.num_heads, Lk, self.d_k)"),)),
)

#: Correct code must get no diagnosis: the reference and the independent implementation.
CORRECT_IMPLEMENTATIONS = {"the reference": "reference", "the independent implementation": str(INDEPENDENT_IMPL)}


def _variations():
    """The allowed variations (correct code in other styles), if the catalogue exists."""
    try:
        from transformer_spec.catalogue.variations import CATALOGUE as VARIATIONS
    except ImportError:
        return ()
    return VARIATIONS


def shown_names(d: Diagnosis) -> list[str]:
    """The pitfalls a diagnosis's message names: its full matches, else its partial matches."""
    return [p.name for p in (d.matches or d.partial)]


def _behaves_like(table, a: str, b: str, comp: str, tol: Tolerance = EXACT) -> bool:
    fa, fb = table[a][comp], table[b][comp]
    return all(same(fa.get(k), fb.get(k), tol) for k in set(fa) | set(fb))


def _row(table, label: str, comp: str, d: Diagnosis, expected: str | None, partial_ok: bool = False,
         tol: Tolerance = EXACT) -> dict:
    """One row's outcome; ``partial_ok``: a partial match naming ``expected`` (and nothing wrong) counts
    as named (code not derived from the reference shares a mistake's behaviours, not its numbers)."""
    names = shown_names(d)
    wrong = [n for n in names
             if expected is None or not (n == expected or _behaves_like(table, n, expected, comp, tol))]
    full = [m.name for m in d.matches]
    named = expected is not None and (expected in full or (bool(full) and not wrong and all(
        _behaves_like(table, m, expected, comp, tol) for m in full)) or (partial_ok and expected in names and not wrong))
    return {"row": label, "pitfall": expected, "component": comp, "ok": named if expected else not names,
            "diagnosed_as": full, "partial": [m.name for m in d.partial], "wrong": wrong, "names": len(names)}


def accuracy(progress=None, profile=None) -> dict:
    """Diagnose every row (see the module docstring); returns the rows and the totals. Under a course
    ``profile``: :func:`_through_profile`'s rows."""
    start = time.monotonic()
    rows, variant_rows, precision_rows, independent_rows = [], [], [], []
    elsewhere: list[dict] = []  # the same rows in the components their mistake can change downstream

    def add(into: list, row: dict) -> None:
        into.append(row)
        if progress:
            progress(row)

    if through.profile_of(profile).name != through.DEFAULT:
        _through_profile(through.profile_of(profile), add, rows, precision_rows, elsewhere)
        return _totals(rows, variant_rows, independent_rows, precision_rows, elsewhere, start)
    components = registry.names()
    table = catalogue_features(components)
    with tempfile.TemporaryDirectory(prefix="diagnose-acc-") as tmp:
        for i, p in enumerate(registry.pitfalls()):
            torch.manual_seed(1000 + i)
            impl = load_patched_reference(Path(tmp), p.patches, f"acc_{p.name}")
            found = diagnose(impl, registry.affected_by(p.component), table)
            add(rows, _row(table, p.name, p.component, found[p.component], p.name))
            elsewhere.extend(_row(table, p.name, c, d, p.name) for c, d in found.items() if c != p.component)
        for i, (expected, patches) in enumerate(VARIANTS):
            torch.manual_seed(2000 + i)
            comp = {p.name: p for p in registry.pitfalls()}[expected].component
            impl = load_patched_reference(Path(tmp), patches, f"variant_{expected}")
            found = diagnose(impl, registry.affected_by(comp), table)
            add(variant_rows, _row(table, f"variant of {expected}", comp, found[comp], expected))
            elsewhere.extend(_row(table, f"variant of {expected}", c, d, expected) for c, d in found.items() if c != comp)
        for i, (expected, patches) in enumerate(INDEPENDENT_VARIANTS):
            torch.manual_seed(2500 + i)
            comp = {p.name: p for p in registry.pitfalls()}[expected].component
            impl = load_patched_independent(Path(tmp), patches, f"independent_{expected}")
            found = diagnose(impl, registry.affected_by(comp), table)
            add(independent_rows, _row(table, f"independent with {expected}", comp, found[comp], expected,
                                       partial_ok=True))
            elsewhere.extend(_row(table, f"independent with {expected}", c, d, expected)
                             for c, d in found.items() if c != comp)
        for i, (comp, description, patches) in enumerate(UNNAMED):
            torch.manual_seed(3000 + i)
            impl = load_patched_reference(Path(tmp), patches, f"unnamed_{i}")
            for c, d in diagnose(impl, registry.affected_by(comp), table).items():
                add(precision_rows, _row(table, description, c, d, None))
        for i, v in enumerate(_variations()):
            torch.manual_seed(4000 + i)
            impl = load_patched_reference(Path(tmp), v.patches, f"variation_{v.name}")
            comps = list(registry.affected_by(v.component))
            for comp, d in diagnose(impl, comps, table).items():
                add(precision_rows, _row(table, f"variation {v.name}", comp, d, None))
    for label, target in CORRECT_IMPLEMENTATIONS.items():
        for comp, d in diagnose(load(target), components, table).items():
            add(precision_rows, _row(table, label, comp, d, None))
    return _totals(rows, variant_rows, independent_rows, precision_rows, elsewhere, start)


def _through_profile(profile, add, rows: list, precision_rows: list, elsewhere: list) -> None:
    """The rows under a course profile, each written in the course's API as a student of it hands it in
    (:func:`transformer_spec.diagnosis.profiles.implementation`): recall on every pitfall the profile can
    see (its track's, less its catalogue's ``UNSEEN``, and the catalogue's own); precision on those, on
    the track's and the catalogue's allowed variations, and on the reference and the track's independent
    implementation in every component of the track."""
    cat = through.catalogue(profile)
    components = list(tracks.component_names(profile.track))
    table = catalogue_features(components, profile)
    tol = through.tolerance(profile)
    pitfalls = [p for p in registry.pitfalls() if tracks.home(p.component) == profile.track
                and p.name not in getattr(cat, "UNSEEN", {})] + list(getattr(cat, "PITFALLS", ()))
    variations = [v for v in _variations() if tracks.home(v.component) == profile.track] \
        + list(getattr(cat, "VARIATIONS", ()))
    with tempfile.TemporaryDirectory(prefix="diagnose-acc-") as tmp:
        for i, p in enumerate(pitfalls):
            torch.manual_seed(1000 + i)
            impl = through.implementation(profile, Path(tmp), p.name, p.patches)
            found = diagnose(impl, [c for c in registry.affected_by(p.component) if c in components], table, profile)
            add(rows, _row(table, p.name, p.component, found[p.component], p.name, tol=tol))
            elsewhere.extend(_row(table, p.name, c, d, p.name, tol=tol) for c, d in found.items() if c != p.component)
        for i, v in enumerate(variations):
            torch.manual_seed(4000 + i)
            impl = through.implementation(profile, Path(tmp), v.name, v.patches)
            for comp, d in diagnose(impl, [c for c in registry.affected_by(v.component) if c in components], table,
                                    profile).items():
                add(precision_rows, _row(table, f"variation {v.name}", comp, d, None, tol=tol))
        correct = {"the reference": "reference",
                   "the independent implementation": str(layout.ROOT / tracks.get(profile.track).independent)}
        for label, target in correct.items():
            impl = through.implementation(profile, Path(tmp), label, (), base=target)
            for comp, d in diagnose(impl, components, table, profile).items():
                add(precision_rows, _row(table, label, comp, d, None, tol=tol))


def _totals(rows, variant_rows, independent_rows, precision_rows, elsewhere, start: float) -> dict:
    every = rows + variant_rows + independent_rows + precision_rows + elsewhere
    given = sum(r["names"] for r in every)
    wrong = [(r["row"], r["component"], n) for r in every for n in r["wrong"]]
    return {"rows": rows, "correct": sum(r["ok"] for r in rows), "total": len(rows),
            "variants": variant_rows, "variants_correct": sum(r["ok"] for r in variant_rows),
            "independent": independent_rows, "independent_correct": sum(r["ok"] for r in independent_rows),
            "precision_rows": precision_rows, "elsewhere": elsewhere, "names_given": given, "wrong_names": wrong,
            "precision": (given - len(wrong)) / given if given else 1.0,
            "false_positives": {f"{r['row']}: {r['component']}": r["wrong"] for r in precision_rows if r["wrong"]},
            "seconds": round(time.monotonic() - start, 1)}


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m transformer_spec.diagnosis.accuracy", allow_abbrev=False,
                                     description="Recall and precision of the named diagnoses.")
    parser.add_argument("--min-rate", type=float, default=0.9, help="exit 1 below this recall (default 0.9)")
    parser.add_argument("--profile", default=None, metavar="NAME",
                        help="a shipped course profile (cs336): its rows written in the course's API, diagnosed "
                             "through it (default: the contract's own names)")
    args = parser.parse_args(argv)
    if args.profile is not None:
        try:
            chosen = through.profile_of(args.profile)
        except ValueError as exc:
            parser.error(str(exc))
        if not through.diagnosable(chosen):
            parser.error(f"--profile {args.profile}: the diagnosis names nothing under it (no catalogue of the "
                         "project's writes its mistakes in the course's API)")

    def show(r):
        if r["pitfall"] is None and r["ok"]:
            return  # a correct "nothing named": one line per row would drown the rest
        mark = "ok  " if r["ok"] and not r["wrong"] else ("WRONG" if r["wrong"] else "MISS")
        got = r["diagnosed_as"] or r["partial"] or "nothing"
        extra = "" if r["diagnosed_as"] == [r["pitfall"]] else f" -> {got}"
        print(f"  {mark:<5} {r['component']:<10} {r['row']}{extra}", flush=True)

    result = accuracy(progress=show, profile=args.profile)
    rate = result["correct"] / result["total"]
    print(f"\nrecall: diagnosed as itself (or an identically behaving pitfall): {result['correct']} / "
          f"{result['total']} = {rate:.1%}; {result['seconds']} s")
    vc, vt = result["variants_correct"], len(result["variants"])
    print(f"the same mistakes written differently (VARIANTS): {vc} / {vt} named correctly")
    ic, it = result["independent_correct"], len(result["independent"])
    print(f"the same mistakes in the independent implementation (INDEPENDENT_VARIANTS): {ic} / {it} named correctly")
    groups = {}
    for r in result["rows"]:
        if len(r["diagnosed_as"]) > 1:
            groups[tuple(sorted(r["diagnosed_as"]))] = r["component"]
    for names, comp in groups.items():
        print(f"  indistinguishable on the '{comp}' probes: {', '.join(names)}")
    clean = sum(1 for r in result["precision_rows"] if r["ok"])
    which = (f"{len(UNNAMED)} unnamed mistakes, {len(_variations())} allowed variations in the components they can "
             f"change, {' and '.join(CORRECT_IMPLEMENTATIONS)} in every component") if args.profile is None else (
        f"the allowed variations of the {chosen.track} track and of the profile in the components they can change, the "
        f"reference and the independent implementation in every component, all through the {chosen.name} profile")
    print(f"precision: {result['names_given'] - len(result['wrong_names'])} of {result['names_given']} names given "
          f"are right ({result['precision']:.1%}); nothing named on {clean} / {len(result['precision_rows'])} "
          f"rows that must get no name ({which})")
    named_elsewhere = sum(1 for r in result["elsewhere"] if r["names"])
    print(f"downstream: {len(result['elsewhere'])} (mistake, component it can change) pairs diagnosed, "
          f"{named_elsewhere} with a name, {sum(1 for r in result['elsewhere'] if r['wrong'])} with a wrong one")
    for row, comp, name in result["wrong_names"]:
        print(f"  WRONG NAME: {row} ({comp}) named `{name}`")
    return 0 if rate >= args.min_rate and not result["wrong_names"] else 1


if __name__ == "__main__":
    sys.exit(main())
