"""The cs336 profile's kill-matrix catalogue: the mistakes a CS336 student makes in the handout's
adapter functions (``tests/adapters.py``), the ways of writing them the handout leaves free, and the
modern track's pitfalls this profile cannot see, each with the capability that hides it.

``python -m tools.mutants --profile cs336`` grades each row as a class through the class grader: a
repository holding a copy of ``reference/`` (patched by a pitfall, or the independent implementation)
and ``tests/adapters.py``, the shared adapter functions over that copy (:data:`ADAPTERS`). A patch
whose file is ``tests/adapters.py`` edits those functions; any other patch edits the copy of the
reference, as in the track's own kill matrix.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType

from transformer_spec.catalogue.patching import PatchError, write_patched_reference
from transformer_spec.catalogue.variations import Variation
from transformer_spec.contract.registry import Pitfall

#: the adapter functions over the contract's modern names, as a student fills them in
ADAPTERS = Path(__file__).resolve().parent.parent / "profiles" / "cs336_adapters.py"
ADAPTER_FILE = "tests/adapters.py"

_MASK = "blocked = None if mask is None else ~mask  # the handout's mask: True = attend"
_ATTN_WEIGHTS = ('{"q_proj.weight": q_proj_weight, "k_proj.weight": k_proj_weight, "v_proj.weight": v_proj_weight,\n'
                 '                     "output_proj.weight": o_proj_weight}')
_SWIGLU = '{"w1.weight": w1_weight, "w2.weight": w2_weight, "w3.weight": w3_weight}'
_ROPE = "return impl.RotaryPositionEmbedding(d_k, max_seq_len, theta)(in_query_or_key, token_positions)"
_LOAD = """    def _load(module, weights):
        module.load_state_dict(weights)
        return module"""
_COPY = """    def _load(module, weights):
        with torch.no_grad():
            for name, value in weights.items():
                module.get_parameter(name).copy_(value)
        return module"""
_NORM = 'return _load(impl.RMSNorm(d_model, eps).to(weights.dtype), {"weight": weights})(in_features)'


def _adapter(*edits: tuple[str, str]) -> tuple[tuple[str, str, str], ...]:
    return tuple((ADAPTER_FILE, old, new) for old, new in edits)


PITFALLS = (
    Pitfall("cs336_keep_mask_read_as_blocked", "attention",
            "The handout's mask means keep (True = attend); passing it on where True means blocked makes each "
            "query attend to exactly the keys it must not see.",
            _adapter((_MASK, "blocked = mask"))),
    Pitfall("cs336_projection_weights_transposed", "gqa",
            "The handout's projection weights are (d_out, d_in) and apply as x @ W.T; loading them transposed "
            "(W stored as (d_in, d_out)) goes unnoticed for square matrices and gives other outputs.",
            _adapter((_ATTN_WEIGHTS, _ATTN_WEIGHTS.replace("_weight,", "_weight.T,").replace("o_proj_weight}",
                                                                                              "o_proj_weight.T}")))),
    Pitfall("cs336_swiglu_w1_w3_swapped", "swiglu",
            "SwiGLU is W2 (SiLU(W1 x) * W3 x): W1 is the gate inside SiLU. Swapping W1 and W3 gates the other "
            "product.",
            _adapter((_SWIGLU, '{"w1.weight": w3_weight, "w2.weight": w2_weight, "w3.weight": w1_weight}'))),
    Pitfall("cs336_rope_token_positions_ignored", "rotary",
            "run_rope must rotate each token by its own position in token_positions; ignoring them rotates "
            "token i by i, which is right only for positions 0 .. L-1.",
            _adapter((_ROPE, _ROPE.replace("(in_query_or_key, token_positions)", "(in_query_or_key, None)")))),
    Pitfall("cs336_rmsnorm_eps_ignored", "rmsnorm",
            "run_rmsnorm's eps must reach the module; a fixed default eps gives other values for small inputs.",
            _adapter((_NORM, _NORM.replace("impl.RMSNorm(d_model, eps)", "impl.RMSNorm(d_model)")))),
)

VARIATIONS = (
    Variation("cs336_keep_mask_by_logical_not", "attention",
              "The keep mask turned into a blocked one by logical_not instead of ~: the same mask.",
              _adapter((_MASK, "blocked = None if mask is None else torch.logical_not(mask)"))),
    Variation("cs336_weights_copied_in_place", "minillama",
              "The given weights copied into the module's parameters one by one under no_grad, instead of "
              "load_state_dict: the same parameters.",
              _adapter((_LOAD, _COPY))),
)

#: the modern track's pitfalls this profile cannot see: the capability that hides each (its tests need it)
UNSEEN: dict[str, str] = {
    "gqa_heads_paired_modulo": "gqa",  # the handout's attention has as many key/value heads as query heads
    "gqa_kv_heads_divisibility_not_checked": "errors",  # the profile builds the modules; no argument to check
    "llama_positions_not_passed": "block_positions",  # run_transformer_block takes no positions
    "minillama_tie_weights_ignored": "parameters",  # run_transformer_lm has no tie_weights
    "minillama_default_d_ff_not_rounded": "parameters",  # run_transformer_lm is always given d_ff
    **{name: "generate" for name in (  # the handout has no generate adapter
        "llama_generate_reads_first_position", "llama_generate_window_ignored", "llama_temperature_multiplied",
        "llama_temperature_zero_samples", "llama_top_k_ignored", "llama_top_k_filled_with_tiny_positive",
        "llama_top_k_keeps_one_extra", "llama_generate_mode_not_restored", "llama_cached_token_rotated_at_0",
        "llama_cached_prefill_without_causal_mask")},
}


#: the track's pitfalls said in the handout's words where the contract's differ (its mask means *keep*, its
#: positions are ``token_positions``, its clipping bound ``max_l2_norm``): what a CS336 student reads
EXPLANATIONS: dict[str, str] = {
    "mask_inverted": "The boolean mask is read the wrong way round: in the handout True means the query may attend "
                     "to the key (keep it) and False means it may not (`masked_fill(~mask, -inf)`).",
    "mask_ignored": "The mask is never applied: keys the mask marks False (the future) still get attention.",
    "rope_positions_ignored": "`token_positions` is ignored (0 .. seq_len-1 always): each token must be rotated at "
                              "the position given.",
    "gqa_positions_not_passed_to_rope": "`token_positions` never reaches the rotation: the queries and keys must be "
                                        "rotated at the positions given.",
    "gqa_batch_positions_not_broadcast_over_heads": "(batch, seq_len) `token_positions` are used as they are against "
                                                    "(batch, heads, seq_len, d_k) queries: they must become (batch, 1, "
                                                    "seq_len), the same positions for every head (the handout's "
                                                    "tests pass batch = heads = 4, which hides it).",
    "gqa_positions_unsqueezed_whatever_their_rank": "`token_positions` is unsqueezed for the heads whatever its rank: "
                                                    "(batch, seq_len) must become (batch, 1, seq_len), but (seq_len,) "
                                                    "positions must stay as they are.",
    "grad_clip_scales_below_the_bound": "Gradients are scaled to max_l2_norm even when their norm is already below it "
                                        "(that enlarges them): clip only when the total norm exceeds max_l2_norm.",
    "grad_clip_eps_inside_the_root": "The norm is sqrt(sum of g**2 + eps): the handout puts eps outside it, "
                                     "max_l2_norm / (norm + eps). Inside, tiny gradients get a norm of about "
                                     "sqrt(eps) = 1e-3 and are cut although they are within the bound.",
}


def write_repository(dest: Path, package: str, patches, independent: Path | None = None) -> Path:
    """A CS336-style repository in ``dest``: the package ``package`` (a copy of ``reference/``, or of the
    single file ``independent``) with the patches of other files than the adapter applied, and
    ``tests/adapters.py``: :data:`ADAPTERS` with the adapter's patches applied, over that package."""
    own = [p for p in patches if p[0] != ADAPTER_FILE]
    if independent is not None:
        if own:
            raise PatchError(f"{package}: the independent implementation takes adapter patches only")
        (dest / package).mkdir(parents=True)
        shutil.copyfile(independent, dest / package / "__init__.py")
    else:
        write_patched_reference(dest, own, package)
    (dest / "tests").mkdir(parents=True, exist_ok=True)
    (dest / ADAPTER_FILE).write_text(
        f"{adapter_text(patches)}\n\nimport {package} as _implementation  # noqa: E402\n\n"
        "globals().update(adapters_for(_implementation))\n")
    return dest


def adapter_text(patches=()) -> str:
    """:data:`ADAPTERS` with the patches of ``tests/adapters.py`` among ``patches`` applied."""
    text = ADAPTERS.read_text()
    for _, old, new in (p for p in patches if p[0] == ADAPTER_FILE):
        if text.count(old) != 1:
            raise PatchError(f"patch for {ADAPTER_FILE}: expected the text once, found it {text.count(old)} times: {old!r}")
        text = text.replace(old, new)
    return text


def course_module(implementation, patches=(), name: str = "cs336_adapters") -> ModuleType:
    """The handout's adapter functions (:data:`ADAPTERS`, with the adapter's patches among ``patches``)
    over ``implementation`` (the contract's modern names), as the module a student's ``tests/adapters.py``
    is: what the diagnosis runs the catalogue through (:mod:`transformer_spec.diagnosis.profiles`)."""
    module = ModuleType(name)
    module.__file__ = str(ADAPTERS)
    exec(compile(adapter_text(patches), module.__file__, "exec"), module.__dict__)  # noqa: S102 - the project's own file
    module.__dict__.update(module.adapters_for(implementation))
    return module
