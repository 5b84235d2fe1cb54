"""Helpers shared by the golden tests: known weights set by the contract's parameter names.

A test that needs known weights never relies on a submission's initialisation: it builds the
weights itself (:func:`seeded_parameters` from the shapes the contract implies, e.g.
:func:`mha_shapes`) and copies them into the submission's module with :func:`set_parameters`,
which only touches the contract's names (``state_dict`` keys of parameters) and fails with a
readable message when one is missing. The ``torch_*`` builders make PyTorch's own modules with
the same weights, to serve as an independent oracle.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping

import torch
import torch.nn as nn

from transformer_spec.guard import forbidden_ops
from transformer_spec.submission.loader import SubmissionError

Shapes = dict[str, tuple[int, ...]]


# --------------------------------------------------------------------------- contract shapes

def leaves(exc: BaseException) -> list[BaseException]:
    """The innermost exceptions of a (nested) exception group, in order; ``[exc]`` for a plain one."""
    inner = getattr(exc, "exceptions", None)
    if not isinstance(inner, (list, tuple)) or not inner:
        return [exc]
    return [leaf for e in inner for leaf in leaves(e)]

def mha_shapes(d_model: int, prefix: str = "") -> Shapes:
    """``W_Q, W_K, W_V, W_O``: ``nn.Linear(D, D, bias=False)``."""
    return {f"{prefix}{n}.weight": (d_model, d_model) for n in ("W_Q", "W_K", "W_V", "W_O")}


def ffn_shapes(d_model: int, d_ff: int, prefix: str = "") -> Shapes:
    """``linear1: Linear(D, d_ff)``, ``linear2: Linear(d_ff, D)``."""
    return {
        f"{prefix}linear1.weight": (d_ff, d_model), f"{prefix}linear1.bias": (d_ff,),
        f"{prefix}linear2.weight": (d_model, d_ff), f"{prefix}linear2.bias": (d_model,),
    }


def layernorm_shapes(d_model: int, prefix: str) -> Shapes:
    return {f"{prefix}weight": (d_model,), f"{prefix}bias": (d_model,)}


def encoder_block_shapes(d_model: int, d_ff: int, prefix: str = "") -> Shapes:
    """``self_attn``, ``ffn``, ``norm1``, ``norm2`` of ``TransformerEncoderBlock``."""
    return {
        **mha_shapes(d_model, f"{prefix}self_attn."),
        **ffn_shapes(d_model, d_ff, f"{prefix}ffn."),
        **layernorm_shapes(d_model, f"{prefix}norm1."),
        **layernorm_shapes(d_model, f"{prefix}norm2."),
    }


def decoder_block_shapes(d_model: int, d_ff: int, prefix: str = "") -> Shapes:
    """``self_attn``, ``cross_attn``, ``ffn``, ``norm1..3`` of ``TransformerDecoderBlock``."""
    return {
        **mha_shapes(d_model, f"{prefix}self_attn."),
        **mha_shapes(d_model, f"{prefix}cross_attn."),
        **ffn_shapes(d_model, d_ff, f"{prefix}ffn."),
        **layernorm_shapes(d_model, f"{prefix}norm1."),
        **layernorm_shapes(d_model, f"{prefix}norm2."),
        **layernorm_shapes(d_model, f"{prefix}norm3."),
    }


def minigpt_shapes(vocab_size: int, d_model: int, num_layers: int, d_ff: int) -> Shapes:
    """``token_embed``, ``blocks.i.*``, ``final_norm`` (``lm_head.weight`` is tied, see
    :func:`minigpt_parameters`)."""
    shapes: Shapes = {"token_embed.weight": (vocab_size, d_model)}
    for i in range(num_layers):
        shapes.update(encoder_block_shapes(d_model, d_ff, f"blocks.{i}."))
    shapes.update(layernorm_shapes(d_model, "final_norm."))
    return shapes


# --------------------------------------------------------------------------- seeded weights
def seeded_parameters(shapes: Mapping[str, tuple[int, ...]], seed: int,
                      dtype: torch.dtype = torch.float64) -> dict[str, torch.Tensor]:
    """Weights for ``shapes`` drawn from ``torch.Generator().manual_seed(seed)`` in float64.

    Independent of any implementation: names are visited in the order given. LayerNorm weights
    (names containing ``norm``) are ``1 + 0.1 N(0, 1)``, biases ``0.1 N(0, 1)``, embeddings
    ``0.5 N(0, 1)``, other matrices ``N(0, 1) / sqrt(fan_in)``: all far from the defaults, so a
    weight that is not used, or used in the wrong place, shows in the output.
    """
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in shapes.items():
        r = torch.randn(shape, generator=gen, dtype=torch.float64)
        if "norm" in name and name.endswith("weight"):
            t = 1.0 + 0.1 * r
        elif name.endswith("bias"):
            t = 0.1 * r
        elif "embed" in name:
            t = 0.5 * r
        else:
            t = r / math.sqrt(shape[-1])
        out[name] = t.to(dtype)
    return out


def minigpt_parameters(vocab_size: int, d_model: int, num_layers: int, d_ff: int, seed: int,
                       dtype: torch.dtype = torch.float64) -> dict[str, torch.Tensor]:
    """:func:`seeded_parameters` for MiniGPT, with ``lm_head.weight`` = ``token_embed.weight``."""
    params = seeded_parameters(minigpt_shapes(vocab_size, d_model, num_layers, d_ff), seed, dtype)
    params["lm_head.weight"] = params["token_embed.weight"]
    return params


def small_seq2seq(impl, src_vocab_size: int = 11, tgt_vocab_size: int = 11, dropout: float = 0.0) -> nn.Module:
    """A tiny ``Seq2SeqTransformer`` (d_model 8, 2 heads, one block each side, d_ff 16, max_len 8).

    Its weights stay the submission's own: the contract leaves its embedding and output names free.
    """
    return impl.Seq2SeqTransformer(src_vocab_size, tgt_vocab_size, d_model=8, num_heads=2, num_encoder_layers=1,
                                   num_decoder_layers=1, d_ff=16, max_len=8, dropout=dropout)


# --------------------------------------------------------------------------- copying in
def parameter_table(module: nn.Module) -> dict[str, torch.Tensor]:
    """All parameters by ``state_dict`` name, tied ones under each of their names."""
    return dict(module.named_parameters(remove_duplicate=False))


def set_parameters(module: nn.Module, values: Mapping[str, torch.Tensor]) -> nn.Module:
    """Copy ``values`` into ``module``'s parameters of those names (the contract's names).

    Only the names in ``values`` are touched; a submission may have more. A name the module
    lacks, or a shape that differs, fails with a message naming it and the module's own names.
    Values are cast to each parameter's dtype, so move the module to its dtype first
    (``set_parameters(module.to(torch.float64), values)``). Returns ``module``.
    """
    params = parameter_table(module)
    kind = type(module).__name__
    for name, value in values.items():
        if name not in params:
            close = sorted(n for n in params if n.split(".")[-1] == name.split(".")[-1])[:8]
            raise AssertionError(
                f"{kind} has no parameter named {name!r}, which the contract names (the suite sets "
                f"known weights by these names); parameters it has with a similar name: {close or sorted(params)[:8]}"
            )
        p = params[name]
        if tuple(p.shape) != tuple(value.shape):
            raise AssertionError(
                f"{kind} parameter {name!r} has shape {tuple(p.shape)}, expected {tuple(value.shape)} "
                f"(nn.Linear stores weight as (out_features, in_features))"
            )
        with torch.no_grad():
            p.copy_(value.to(device=p.device, dtype=p.dtype))
    return module


# --------------------------------------------------------------------------- torch oracles
# Built inside forbidden_ops.oracle(): the forbidden-API guard refuses torch's attention layers
# elsewhere while it is armed; their forward calls are wrapped by the tests that make them.
def _copy(dst: torch.Tensor, src: torch.Tensor) -> None:
    with torch.no_grad():
        dst.copy_(src.to(dst.dtype))


def _zero(t: torch.Tensor | None) -> None:
    if t is not None:
        with torch.no_grad():
            t.zero_()


def torch_mha(params: Mapping[str, torch.Tensor], d_model: int, num_heads: int, prefix: str = "",
              dtype: torch.dtype = torch.float64) -> nn.MultiheadAttention:
    """``nn.MultiheadAttention(bias=False, batch_first=True)`` with the contract's W_Q/W_K/W_V/W_O:
    ``in_proj_weight = cat(W_Q, W_K, W_V)``, ``out_proj.weight = W_O``. In eval mode."""
    with forbidden_ops.oracle():
        m = nn.MultiheadAttention(d_model, num_heads, dropout=0.0, bias=False, batch_first=True)
    m = m.to(dtype)
    w = [params[f"{prefix}{n}.weight"] for n in ("W_Q", "W_K", "W_V")]
    _copy(m.in_proj_weight, torch.cat(w, dim=0))
    _copy(m.out_proj.weight, params[f"{prefix}W_O.weight"])
    return m.eval()


def _torch_attn_into(m: nn.MultiheadAttention, params, prefix: str) -> None:
    w = [params[f"{prefix}{n}.weight"] for n in ("W_Q", "W_K", "W_V")]
    _copy(m.in_proj_weight, torch.cat(w, dim=0))
    _copy(m.out_proj.weight, params[f"{prefix}W_O.weight"])
    _zero(m.in_proj_bias)
    _zero(m.out_proj.bias)


def _torch_ffn_norms_into(layer, params, prefix: str, norms: int) -> None:
    for n in ("linear1", "linear2"):
        _copy(getattr(layer, n).weight, params[f"{prefix}ffn.{n}.weight"])
        _copy(getattr(layer, n).bias, params[f"{prefix}ffn.{n}.bias"])
    for i in range(1, norms + 1):
        norm = getattr(layer, f"norm{i}")
        _copy(norm.weight, params[f"{prefix}norm{i}.weight"])
        _copy(norm.bias, params[f"{prefix}norm{i}.bias"])


def torch_encoder_layer(params: Mapping[str, torch.Tensor], d_model: int, num_heads: int, d_ff: int,
                        norm_first: bool, prefix: str = "",
                        dtype: torch.dtype = torch.float64) -> nn.TransformerEncoderLayer:
    """``nn.TransformerEncoderLayer(activation="gelu", batch_first=True)`` with the contract
    block's weights (its attention biases zeroed). In eval mode."""
    with forbidden_ops.oracle():
        layer = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=norm_first).to(dtype)
    _torch_attn_into(layer.self_attn, params, f"{prefix}self_attn.")
    _torch_ffn_norms_into(layer, params, prefix, norms=2)
    return layer.eval()


def torch_decoder_layer(params: Mapping[str, torch.Tensor], d_model: int, num_heads: int, d_ff: int,
                        norm_first: bool, prefix: str = "",
                        dtype: torch.dtype = torch.float64) -> nn.TransformerDecoderLayer:
    """``nn.TransformerDecoderLayer(activation="gelu", batch_first=True)`` with the contract
    block's weights: ``self_attn``, ``multihead_attn`` <- ``cross_attn``, ``linear1/2`` <- ``ffn``,
    ``norm1..3``. Its placement of the norms is the contract's (Pre-LN:
    ``x + sa(norm1(x))``, ``x + mha(norm2(x), memory)``, ``x + ff(norm3(x))``; memory not
    normalised). In eval mode."""
    with forbidden_ops.oracle():
        layer = nn.TransformerDecoderLayer(d_model, num_heads, d_ff, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=norm_first).to(dtype)
    _torch_attn_into(layer.self_attn, params, f"{prefix}self_attn.")
    _torch_attn_into(layer.multihead_attn, params, f"{prefix}cross_attn.")
    _torch_ffn_norms_into(layer, params, prefix, norms=3)
    return layer.eval()


# --------------------------------------------------------------------------- laws (properties/)
def assert_attention_weights_valid(weights: torch.Tensor, mask: torch.Tensor | None = None, *,
                                   what: str = "attention weights", score_size: float = 1.0) -> None:
    """The softmax law: finite, in [0, 1], blocked entries (``mask`` True) exactly 0, every row
    with at least one allowed key sums to 1, rows whose keys are all blocked are all 0.

    Sums are compared at 1e-5 in float32 and 1e-12 in float64, or, for scores as large as
    ``score_size``, at 8 * score_size * the dtype's machine epsilon if that is larger: a score
    of 1e4 is itself only known to ~1e-3 in float32, so every correct softmax (``F.softmax``,
    max subtraction, ``exp(s - logsumexp(s))``) may sum to 1 within that much and no closer.
    """
    if not isinstance(weights, torch.Tensor):
        raise AssertionError(f"{what}: expected a torch.Tensor, got {type(weights).__name__}")
    w = weights.detach().cpu()
    bad = ~torch.isfinite(w)
    if bad.any():
        i = tuple(int(j) for j in bad.nonzero()[0])
        raise AssertionError(f"{what}: {w[i].item()} at index {i} ({int(bad.sum())} non-finite value(s)); "
                             f"weights must be finite even for large scores and fully blocked rows")
    if mask is None:
        mask = torch.zeros((), dtype=torch.bool)
    try:
        blocked = torch.broadcast_to(mask.cpu(), w.shape)
    except RuntimeError:
        raise AssertionError(f"{what}: shape {tuple(w.shape)} does not match the mask's {tuple(mask.shape)}") from None
    leak = blocked & (w != 0)
    if leak.any():
        i = tuple(int(j) for j in leak.nonzero()[0])
        raise AssertionError(f"{what}: blocked entry (mask True) at index {i} has weight {w[i].item():.6g}, "
                             f"expected exactly 0 ({int(leak.sum())} blocked entries nonzero)")
    slack = 1e-6 if w.dtype != torch.float64 else 1e-13
    out = (w < 0) | (w > 1 + slack)
    if out.any():
        i = tuple(int(j) for j in out.nonzero()[0])
        raise AssertionError(f"{what}: weight {w[i].item():.6g} at index {i} is outside [0, 1]")
    rows = w.to(torch.float64).sum(-1)
    allowed = (~blocked).any(-1)
    atol = 1e-5 if w.dtype != torch.float64 else 1e-12
    atol = max(atol, 8 * score_size * torch.finfo(w.dtype).eps) if w.is_floating_point() else atol
    wrong = allowed & ((rows - 1).abs() > atol)
    if wrong.any():
        i = tuple(int(j) for j in wrong.nonzero()[0])
        raise AssertionError(f"{what}: row {i} (over the keys, last dimension) sums to {rows[i].item():.8g}, "
                             f"expected 1 within {atol:g} (softmax over the last dimension, the keys)")


@contextlib.contextmanager
def quick_settings(test, *, min_examples: int = 50):
    """Run the hypothesis property ``test`` without shrinking, derandomised, without an example
    database, with at least ``min_examples`` examples, for the duration of the ``with`` block.

    For showing that a property fails on a broken implementation: the first failing example is
    enough, and nothing is stored in (or replayed from) the example database. Swaps the settings
    that ``@given`` reads when the test is called, and restores them afterwards.
    """
    from hypothesis import Phase, settings

    old = test._hypothesis_internal_use_settings
    test._hypothesis_internal_use_settings = settings(
        old, phases=[Phase.explicit, Phase.generate], database=None, derandomize=True,
        max_examples=max(old.max_examples, min_examples), report_multiple_bugs=False,
    )
    try:
        yield test
    finally:
        test._hypothesis_internal_use_settings = old


def assert_property_fails(test, *, match: str | None = None, shrink: bool = False, **kwargs) -> str:
    """Run a hypothesis property ``test(**kwargs)`` (e.g. ``impl=broken``) and assert it fails
    with an ``AssertionError`` (several distinct failures may come as an exception group).

    ``match``, if given, must occur in the failure message (so the property fails for the
    intended reason, not a crash). Without ``shrink``, runs under :func:`quick_settings`.
    Returns the message.
    """
    try:
        if shrink:
            test(**kwargs)
        else:
            with quick_settings(test):
                test(**kwargs)
    except AssertionError as exc:
        message = str(exc)
    except Exception as exc:
        # hypothesis reports distinct bugs together in an (Base)ExceptionGroup (the backport on 3.10)
        found = leaves(exc)
        if not all(isinstance(e, AssertionError) for e in found):
            raise
        message = "\n".join(str(e) for e in found)
    else:
        raise AssertionError(f"{getattr(test, '__name__', test)} passed on a broken implementation {kwargs}")
    if match is not None and match not in message:
        raise AssertionError(f"{test.__name__} failed, but without {match!r} in its message:\n{message}")
    return message


# --------------------------------------------------------------------------- argument errors
def rejects_naming(exc: BaseException, names) -> bool:
    """``exc`` is an argument check's answer: a ``ValueError`` or ``TypeError`` whose message names one of
    ``names`` (in any case; any ValueError or TypeError when ``names`` is empty)."""
    if not isinstance(exc, (ValueError, TypeError)):
        return False
    message = str(exc).lower()
    return not names or any(n.lower() in message for n in names)


def assert_accepts(valid, what: str, names=()) -> None:
    """``valid = (description, call)``: the call a bad-argument test varies, with valid arguments,
    must not be rejected as the bad one must be (a ``ValueError`` or ``TypeError`` naming one of
    ``names``). An argument check earns its points only where valid arguments are accepted: code that
    raises such an error on every call checks nothing. Any other error of the valid call is a mistake
    elsewhere (a wrong shape inside attention raises a RuntimeError here too), which that part's own
    tests charge, not this argument check. A name not submitted (or a refused call) is reported as
    such, not as this test's failure."""
    description, call = valid
    try:
        call()
    except SubmissionError:
        raise
    except Exception as exc:  # noqa: BLE001 - only a rejection of the valid arguments fails the control
        if rejects_naming(exc, names):
            raise AssertionError(
                f"{what}: the same call with valid arguments, {description}, raised {type(exc).__name__}: {exc}; "
                f"an argument check counts only when valid arguments are accepted"
            ) from None


def assert_raises_naming(fn, *names, what, valid):
    """``fn()`` must raise ValueError (or TypeError) whose message mentions one of ``names``, and
    ``valid`` (see :func:`assert_accepts`), the same call with valid arguments, must not. Under a
    profile that renames arguments, the course's name of an argument counts as naming it."""
    from transformer_spec import profiles

    names = profiles.current().argument_names_of(names)
    assert_accepts(valid, what, names)
    try:
        fn()
    except (ValueError, TypeError) as exc:
        message = str(exc)
        assert any(n.lower() in message.lower() for n in names), (
            f"{what}: raised {type(exc).__name__}({message!r}), but the message should name "
            f"{' or '.join(repr(n) for n in names)} so the caller knows which argument to fix"
        )
        return
    except Exception as exc:  # noqa: BLE001 - reported as the wrong kind of error
        raise AssertionError(
            f"{what}: expected ValueError naming {' or '.join(names)}, got {type(exc).__name__}: {exc}"
        ) from None
    raise AssertionError(f"{what}: expected ValueError naming {' or '.join(names)}, but nothing was raised")
