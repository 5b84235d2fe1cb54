"""A profile of one's own: the worked example of docs/adapters.md ("A profile of one's own").

An imaginary course teaches the classic Transformer of docs/contract.md under names of its own:

| the course's name | the contract's | what differs |
|---|---|---|
| ``attention(query, key, value, attn_mask=None, scale=None)`` | ``scaled_dot_product_attention(q, k, v, mask=None, scale=None)`` | its mask means *may attend* (True = keep); the contract's means *blocked* |
| ``subsequent_mask(size, device=None)`` | ``causal_mask(seq_len, device=None)`` | True on and below the diagonal (keep), not above it (blocked) |
| ``MHA(embed_dim, n_heads, p_drop)``, ``forward(query, key, value, attn_mask=None)`` | ``MultiHeadAttention(d_model, num_heads, dropout)``, ``forward(query, key, value, mask=None)`` | names only (its ``attn_mask`` is the contract's blocked mask, as in its blocks) |
| ``GPT(vocab_size, embed_dim, n_heads, n_layers, d_ff, block_size, p_drop)`` | ``MiniGPT(vocab_size, d_model, num_heads, num_layers, d_ff, max_len, dropout)`` | names only |

Every other name is the contract's: the course kept them. A student hands in one ``.py`` file (or a
package) as for the contract, so the profile has no adapter file: the submission is loaded as any
submission, and :func:`build` maps its names onto the contract's. Use it with

    python -m pytest --profile docs/examples/course_profile.py --impl my_transformer.py
    python -m tools.grade CLASS --out OUT --profile docs/examples/course_profile.py

A name the student did not define is left out, so its component is "not submitted", as under the
contract. The mapping calls the student's code and computes nothing itself.
"""

from __future__ import annotations

from types import ModuleType

import torch

from transformer_spec.profiles import Profile, contract_module


def build(course: ModuleType) -> ModuleType:
    """The contract's names, over the course's ``course`` (a student's submission)."""
    names = {n: getattr(course, n) for n in dir(course) if not n.startswith("_")}  # the names the course kept

    if hasattr(course, "attention"):
        def scaled_dot_product_attention(q, k, v, mask=None, scale=None):
            if isinstance(mask, torch.Tensor) and mask.dtype == torch.bool:
                mask = ~mask  # blocked -> keep; any other value goes on as it is, for the course's own check
            return course.attention(q, k, v, attn_mask=mask, scale=scale)

        names["scaled_dot_product_attention"] = scaled_dot_product_attention

    if hasattr(course, "subsequent_mask"):
        def causal_mask(seq_len, device=None):
            return ~course.subsequent_mask(seq_len, device=device)  # keep -> blocked

        names["causal_mask"] = causal_mask

    if isinstance(getattr(course, "MHA", None), type):
        class MultiHeadAttention(course.MHA):
            def __init__(self, d_model=512, num_heads=8, dropout=0.1):
                super().__init__(embed_dim=d_model, n_heads=num_heads, p_drop=dropout)

            def forward(self, query, key, value, mask=None):
                return super().forward(query, key, value, attn_mask=mask)

        names["MultiHeadAttention"] = MultiHeadAttention

    if isinstance(getattr(course, "GPT", None), type):
        class MiniGPT(course.GPT):
            def __init__(self, vocab_size, d_model=128, num_heads=4, num_layers=4, d_ff=512, max_len=128, dropout=0.1):
                super().__init__(vocab_size, embed_dim=d_model, n_heads=num_heads, n_layers=num_layers, d_ff=d_ff,
                                 block_size=max_len, p_drop=dropout)

        names["MiniGPT"] = MiniGPT

    return contract_module(names, course, "renamed_classic")


PROFILE = Profile(
    "renamed-classic", "the worked example of docs/adapters.md: the classic contract under a course's own names",
    track="classic", lacks=frozenset({"names"}), build=build,
    # an error about a bad argument may name it as the course does
    renamed_arguments={"mask": "attn_mask", "d_model": "embed_dim", "num_heads": "n_heads", "max_len": "block_size",
                       "dropout": "p_drop", "num_layers": "n_layers", "seq_len": "size"},
    functions={"attention": ("attention",), "masks": ("subsequent_mask",), "mha": ("MHA",), "minigpt": ("GPT",)})
