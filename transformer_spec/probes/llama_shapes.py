"""The modern track's parameters by contract name (``docs/contract.md``, "The modern track").

Shapes for :func:`transformer_spec.probes.testing.seeded_parameters`, which the golden tests, the
properties, the diagnosis probes and the hidden re-checks use to give a submission's modules known
weights (:func:`transformer_spec.probes.testing.set_parameters`), and :func:`minillama_parameters` for a
whole model (the head shares the embedding's tensor when tied).
"""

from __future__ import annotations

import torch

from transformer_spec.probes.testing import Shapes, seeded_parameters, set_parameters


def rmsnorm_shapes(d_model: int, prefix: str = "") -> Shapes:
    """``weight (d_model,)``."""
    return {f"{prefix}weight": (d_model,)}


def swiglu_shapes(d_model: int, d_ff: int, prefix: str = "") -> Shapes:
    """``w1 (d_ff, d_model)``, ``w2 (d_model, d_ff)``, ``w3 (d_ff, d_model)``, bias-free."""
    return {f"{prefix}w1.weight": (d_ff, d_model), f"{prefix}w2.weight": (d_model, d_ff),
            f"{prefix}w3.weight": (d_ff, d_model)}


def gqa_shapes(d_model: int, num_heads: int, num_kv_heads: int | None = None, prefix: str = "") -> Shapes:
    """``q_proj``, ``k_proj``, ``v_proj`` (``num_kv_heads * head_dim`` rows), ``output_proj``."""
    kv_dim = (num_kv_heads or num_heads) * (d_model // num_heads)
    return {f"{prefix}q_proj.weight": (d_model, d_model), f"{prefix}k_proj.weight": (kv_dim, d_model),
            f"{prefix}v_proj.weight": (kv_dim, d_model), f"{prefix}output_proj.weight": (d_model, d_model)}


def llama_block_shapes(d_model: int, num_heads: int, d_ff: int, num_kv_heads: int | None = None,
                       prefix: str = "") -> Shapes:
    """``ln1``, ``attn``, ``ln2``, ``ffn``."""
    return {**rmsnorm_shapes(d_model, f"{prefix}ln1."), **gqa_shapes(d_model, num_heads, num_kv_heads, f"{prefix}attn."),
            **rmsnorm_shapes(d_model, f"{prefix}ln2."), **swiglu_shapes(d_model, d_ff, f"{prefix}ffn.")}


def minillama_shapes(vocab_size: int, d_model: int, num_layers: int, num_heads: int, d_ff: int,
                     num_kv_heads: int | None = None, tied: bool = False) -> Shapes:
    """``token_embeddings``, ``layers.i.*``, ``ln_final`` and, untied, ``lm_head``."""
    shapes: Shapes = {"token_embeddings.weight": (vocab_size, d_model)}
    for i in range(num_layers):
        shapes.update(llama_block_shapes(d_model, num_heads, d_ff, num_kv_heads, f"layers.{i}."))
    shapes.update(rmsnorm_shapes(d_model, "ln_final."))
    if not tied:
        shapes["lm_head.weight"] = (vocab_size, d_model)
    return shapes


def minillama_parameters(vocab_size: int, d_model: int, num_layers: int, num_heads: int, d_ff: int, seed: int,
                         num_kv_heads: int | None = None, tied: bool = False,
                         dtype: torch.dtype = torch.float64) -> dict[str, torch.Tensor]:
    """:func:`seeded_parameters` for MiniLlama; tied, ``lm_head.weight`` is ``token_embeddings.weight``."""
    params = seeded_parameters(minillama_shapes(vocab_size, d_model, num_layers, num_heads, d_ff, num_kv_heads, tied),
                               seed, dtype)
    if tied:
        params["lm_head.weight"] = params["token_embeddings.weight"]
    return params


#: the small MiniLlama of the generate tests, the diagnosis probes and the hidden re-checks
SMALL = {"vocab_size": 13, "d_model": 8, "num_layers": 2, "num_heads": 2, "num_kv_heads": 1, "d_ff": 12, "max_len": 8}


def small_minillama(impl, seed: int, *, tied: bool = False, sharp: bool = False, num_kv_heads: int | None = None):
    """``impl.MiniLlama`` of :data:`SMALL`'s sizes with weights from ``seed``, in float64 and eval mode.
    ``sharp``: larger embeddings and q, k projections, so positions decide the attention (a cached token
    rotated at the wrong position changes what is generated). ``num_kv_heads``: instead of SMALL's."""
    s = SMALL if num_kv_heads is None else {**SMALL, "num_kv_heads": num_kv_heads}
    params = minillama_parameters(s["vocab_size"], s["d_model"], s["num_layers"], s["num_heads"], s["d_ff"], seed,
                                  num_kv_heads=s["num_kv_heads"], tied=tied)
    if sharp:
        params = {k: v * (3 if "embed" in k else 4 if "q_proj" in k or "k_proj" in k else 1) for k, v in params.items()}
    model = impl.MiniLlama(s["vocab_size"], d_model=s["d_model"], num_layers=s["num_layers"], num_heads=s["num_heads"],
                           num_kv_heads=s["num_kv_heads"], d_ff=s["d_ff"], max_len=s["max_len"],
                           **({"tie_weights": True} if tied else {}))
    return set_parameters(model.double(), params).eval()
