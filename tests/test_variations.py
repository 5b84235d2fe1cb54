"""The allowed-variation catalogue is well-formed and every patch still applies to the reference.

Whether each variation keeps full marks is what ``python -m tools.mutants`` checks (rows that
must be clean); here, only that the catalogue is sound and each patched copy imports.
"""

import pytest

from transformer_spec.catalogue import pitfalls, variations
from transformer_spec.catalogue.patching import load_patched_reference
from transformer_spec.catalogue.variations import BY_NAME, CATALOGUE
from transformer_spec.contract import registry


def test_catalogue_is_well_formed():
    assert len(CATALOGUE) >= 20
    assert len(BY_NAME) == len(CATALOGUE), "variation names must be unique"
    for v in CATALOGUE:
        assert isinstance(v, variations.Variation), v
        assert v.component in registry.names(), v.name
        assert v.name.isidentifier(), v.name
        assert v.explanation.strip() and "\n" not in v.explanation, v.name
        assert v.patches and all(old != new for _, old, new in v.patches), v.name


def test_variation_names_are_not_pitfall_names():
    """tools.mutants --only takes both kinds of name: they must not collide."""
    assert not set(BY_NAME) & set(pitfalls.by_name())


def test_no_variation_applies_the_same_patches_as_a_pitfall():
    pitfall_patches = {tuple(sorted(p.patches)): p.name for p in pitfalls.catalogue()}
    for v in CATALOGUE:
        assert tuple(sorted(v.patches)) not in pitfall_patches, (
            f"variation {v.name} is pitfall {pitfall_patches.get(tuple(sorted(v.patches)))}")


def test_the_free_choices_the_issue_names_are_covered():
    """dropout placement and returned weights, top_k capped or rejected, tied head via F.linear, KV cache,
    no_grad vs inference_mode, hand-written softmax and LayerNorm, einsum/bmm, tril/comparison masks."""
    for name in ("no_dropout_inside_attention", "weights_returned_after_dropout", "top_k_above_vocabulary_rejected",
                 "tied_head_with_functional_linear", "generate_without_kv_cache", "generate_under_no_grad",
                 "handwritten_softmax", "handwritten_layernorm", "scores_with_einsum", "output_with_bmm",
                 "causal_mask_from_tril", "causal_mask_by_comparison", "pytorch_default_initialisation",
                 "scores_scaled_after_the_matmul"):
        assert name in BY_NAME, name


@pytest.mark.parametrize("variation", CATALOGUE, ids=lambda v: v.name)
def test_every_patch_applies_and_the_copy_imports(tmp_path, variation):
    copy = load_patched_reference(tmp_path, variation.patches, variation.name)
    assert copy.error is None, copy.error


def test_a_variation_row_must_be_clean():
    from tools import mutants

    clean = mutants.Row("handwritten_softmax", "attention", must_pass=True)
    assert clean.verdict == "clean" and clean.ok
    failing = mutants.Row("handwritten_softmax", "attention", must_pass=True, failed={"mha": ["t"]})
    assert failing.verdict == "CORRECT CODE FAILS" and not failing.ok
    # a failure in its own component is no kill: it is correct code losing a point
    own = mutants.Row("handwritten_softmax", "attention", must_pass=True, failed={"attention": ["t"]})
    assert not own.ok
    line = mutants.format_matrix([clean, own])[-1]
    assert "[" not in line and line.rstrip().endswith("CORRECT CODE FAILS")


def test_only_accepts_variation_names(capsys):
    from tools import mutants

    with pytest.raises(SystemExit):
        mutants.main(["--only", "handwritten_softmax", "no_such_row"])
    err = capsys.readouterr().err
    assert "no_such_row" in err and "handwritten_softmax" not in err.split("unknown", 1)[1]
