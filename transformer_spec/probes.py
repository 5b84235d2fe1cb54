"""Hidden probes: the parent's own re-check of what a grading child says passed.

A probe computes some of the contract's outputs on inputs drawn from a secret seed. The
submission's numbers come from a fresh child process with no pytest in it (``python -m
transformer_spec.probes``), over the authenticated pipe of :mod:`transformer_spec.isolation`,
as raw little-endian arrays in JSON (never pickle). The reference's numbers and the comparison
are computed in the parent, where no submission code runs.

Each probe mirrors one parameter case of a golden test (its *anchor*): the same shapes, masks,
constructor arguments and dtype (float64), with other random values. A submission that truly
passed the anchor computes the same function, so it passes the probe too; when the child
claims the anchor passed and the probe disagrees, the claim is false (``tools.grade`` then
gives the component 0 and the status ``tampering``). Components without a probe (``seq2seq``,
``errors``) are not re-checked.
"""

from __future__ import annotations

import base64
import math
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

ORACLE = "spec_tests/test_torch_oracle.py::"
B, LQ, LK, D, H, FF = 2, 5, 7, 12, 3, 20  # the oracle tests' sizes
RTOL, ATOL = 1e-6, 1e-8  # float64; gross disagreement only, so an honest float64 pass never fails


@dataclass(frozen=True)
class Probe:
    name: str
    component: str
    anchors: tuple[str, ...]  # node ids: if the child claims any of them passed, the probe must pass
    run: Callable  # run(module, seed) -> dict[str, numpy array]


# --------------------------------------------------------------------------------------------
# Inputs (torch is imported lazily: the parent imports this module before any torch use)
# --------------------------------------------------------------------------------------------
def _randn(*shape, seed):
    import torch

    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _random_mask(*shape, seed, p=0.35):
    import torch

    m = torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) < p
    m[..., 0] = False
    return m


def _causal(L):
    import torch

    return torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)


def _padding(Lk, lengths):
    import torch

    return (torch.arange(Lk)[None, :] >= torch.tensor(lengths)[:, None])[:, None, None, :]


def _np(**arrays) -> dict[str, np.ndarray]:
    return {k: v.detach().cpu().numpy() for k, v in arrays.items()}


def _set(module, values):
    from .testing import set_parameters

    return set_parameters(module, values)


def _params(shapes, seed):
    from .testing import seeded_parameters

    return seeded_parameters(shapes, seed)


# --------------------------------------------------------------------------------------------
# The probes
# --------------------------------------------------------------------------------------------
def _sdpa(mask_kind: str, scale):
    def run(mod, seed):
        q, k, v = _randn(B, H, LQ, 4, seed=seed + 1), _randn(B, H, LK, 4, seed=seed + 2), _randn(B, H, LK, 6, seed=seed + 3)
        mask = {"none": lambda: None, "random": lambda: _random_mask(B, H, LQ, LK, seed=seed + 4),
                "broadcast_lq_lk": lambda: _random_mask(LQ, LK, seed=seed + 5),
                "padding": lambda: _padding(LK, [LK, 4])}[mask_kind]()
        out, weights = mod.scaled_dot_product_attention(q, k, v, mask=mask, scale=scale)
        return _np(out=out, weights=weights)
    return run


def _mha_masks(L_k: int, seed: int, self_attention: bool):
    return {"none": None, "lq_lk": _random_mask(LQ, L_k, seed=seed + 9), "padding": _padding(L_k, [L_k, 3]),
            "causal": _causal(LQ) if self_attention else None}


def _mha(mask_kind: str):
    def run(mod, seed):
        from .testing import mha_shapes

        m = _set(mod.MultiHeadAttention(d_model=D, num_heads=H, dropout=0.0).double(), _params(mha_shapes(D), seed)).eval()
        q, k, v = _randn(B, LQ, D, seed=seed + 1), _randn(B, LK, D, seed=seed + 2), _randn(B, LK, D, seed=seed + 3)
        out, weights = m(q, k, v, mask=_mha_masks(LK, seed, False)[mask_kind])
        return _np(out=out, weights=weights)
    return run


def _mhsa(mask_kind: str):
    def run(mod, seed):
        from .testing import mha_shapes

        m = _set(mod.MultiHeadSelfAttention(d_model=D, num_heads=H, dropout=0.0).double(),
                 _params(mha_shapes(D), seed)).eval()
        out, weights = m(_randn(B, LQ, D, seed=seed + 1), mask=_mha_masks(LQ, seed, True)[mask_kind])
        return _np(out=out, weights=weights)
    return run


def _ffn(mod, seed):
    from .testing import ffn_shapes

    m = _set(mod.FeedForward(d_model=D, d_ff=FF, dropout=0.0).double(), _params(ffn_shapes(D, FF), seed)).eval()
    return _np(out=m(_randn(B, LQ, D, seed=seed + 1) * 2))


def _encoder(norm_first: bool, mask_kind: str):
    def run(mod, seed):
        from .testing import encoder_block_shapes

        block = mod.TransformerEncoderBlock(d_model=D, num_heads=H, d_ff=FF, dropout=0.0, norm_first=norm_first)
        block = _set(block.double(), _params(encoder_block_shapes(D, FF), seed)).eval()
        out, weights = block(_randn(B, LQ, D, seed=seed + 1), _mha_masks(LQ, seed, True)[mask_kind])
        return _np(out=out, weights=weights)
    return run


def _decoder(norm_first: bool, mask_kind: str):
    def run(mod, seed):
        from .testing import decoder_block_shapes

        block = mod.TransformerDecoderBlock(d_model=D, num_heads=H, d_ff=FF, dropout=0.0, norm_first=norm_first)
        block = _set(block.double(), _params(decoder_block_shapes(D, FF), seed)).eval()
        x, memory = _randn(B, LQ, D, seed=seed + 1), _randn(B, LK, D, seed=seed + 2)
        masks = (None, None) if mask_kind == "none" else (_causal(LQ), _padding(LK, [LK, 4]))
        out, self_w, cross_w = block(x, memory, tgt_mask=masks[0], memory_mask=masks[1])
        return _np(out=out, self_weights=self_w, cross_weights=cross_w)
    return run


def _causal_mask(mod, seed):
    n = 3 + seed % 7
    return _np(mask=mod.causal_mask(n))


def _padding_mask(mod, seed):
    import torch

    tokens = torch.randint(0, 4, (3, 6), generator=torch.Generator().manual_seed(seed))
    return _np(mask0=mod.padding_mask(tokens, 0), mask3=mod.padding_mask(tokens, 3))


def _sinusoidal(mod, seed):
    import torch

    d_model, length = 8, 5 + seed % 11
    pe = mod.SinusoidalPositionEncoding(d_model, max_len=128).double()
    return _np(out=pe(torch.zeros(1, length, d_model, dtype=torch.float64)))


def _build() -> list[Probe]:
    probes = []
    for scale, sid in ((None, "scale_none"), (0.3, "scale_0.3")):
        for mask_kind in ("none", "random", "broadcast_lq_lk", "padding"):
            probes.append(Probe(f"sdpa[{sid}-{mask_kind}]", "attention",
                                (f"{ORACLE}test_sdpa_matches_torch[float64-{sid}-{mask_kind}]",),
                                _sdpa(mask_kind, scale)))
    for mask_kind in ("none", "lq_lk", "padding"):
        probes.append(Probe(f"mha[{mask_kind}]", "mha",
                            (f"{ORACLE}test_multihead_attention_matches_torch[float64-{mask_kind}]",), _mha(mask_kind)))
    for mask_kind in ("none", "causal", "padding"):
        probes.append(Probe(f"mhsa[{mask_kind}]", "mha",
                            (f"{ORACLE}test_multihead_self_attention_matches_torch[float64-{mask_kind}]",),
                            _mhsa(mask_kind)))
    probes.append(Probe("ffn", "ffn", (f"{ORACLE}test_feed_forward_matches_torch[float64]",), _ffn))
    for norm_first, nid in ((True, "pre_ln"), (False, "post_ln")):
        for mask_kind in ("none", "causal", "padding"):
            probes.append(Probe(f"encoder[{mask_kind}-{nid}]", "encoder",
                                (f"{ORACLE}test_encoder_block_matches_torch[float64-{mask_kind}-{nid}]",),
                                _encoder(norm_first, mask_kind)))
        for mask_kind in ("none", "causal_and_memory_padding"):
            probes.append(Probe(f"decoder[{mask_kind}-{nid}]", "decoder",
                                (f"{ORACLE}test_decoder_block_matches_torch[float64-{mask_kind}-{nid}]",),
                                _decoder(norm_first, mask_kind)))
    probes.append(Probe("causal_mask", "masks", ("spec_tests/test_seed000_facts.py::test_causal_mask_4_as_printed_in_7_1",),
                        _causal_mask))
    probes.append(Probe("padding_mask", "masks", ("spec_tests/test_behaviours.py::test_padding_mask_is_true_at_pad_tokens",),
                        _padding_mask))
    probes.append(Probe("sinusoidal", "position",
                        ("spec_tests/test_seed000_facts.py::test_sinusoidal_hand_computed_entries[float64]",), _sinusoidal))
    return probes


PROBES: list[Probe] = _build()
BY_NAME = {p.name: p for p in PROBES}


# --------------------------------------------------------------------------------------------
# Arrays over JSON (no pickle)
# --------------------------------------------------------------------------------------------
_DTYPES = {"float64": np.float64, "float32": np.float32, "bool": np.bool_, "int64": np.int64,
           "float16": np.float16, "int32": np.int32, "bfloat16": None}


def encode_arrays(arrays: dict[str, np.ndarray]) -> dict:
    out = {}
    for k, a in arrays.items():
        a = np.ascontiguousarray(a)
        out[k] = {"dtype": str(a.dtype), "shape": list(a.shape),
                  "data": base64.b64encode(a.astype(a.dtype.newbyteorder("<")).tobytes()).decode()}
    return out


def decode_arrays(data) -> dict[str, np.ndarray]:
    """Arrays from :func:`encode_arrays`; raises ValueError on anything malformed."""
    if not isinstance(data, dict):
        raise ValueError("not a table of arrays")
    out = {}
    for k, spec in data.items():
        dtype = _DTYPES.get(spec.get("dtype")) if isinstance(spec, dict) else None
        if dtype is None:
            raise ValueError(f"array {k!r}: unsupported dtype")
        shape = tuple(int(s) for s in spec["shape"])
        raw = base64.b64decode(spec["data"], validate=True)
        a = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"))
        if a.size != math.prod(shape):
            raise ValueError(f"array {k!r}: {a.size} values for shape {shape}")
        out[str(k)] = a.reshape(shape)
    return out


def compare(actual: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> str | None:
    """None when ``actual`` matches ``expected``; else what differs, in one line."""
    for k, e in expected.items():
        if k not in actual:
            return f"{k}: missing"
        a = actual[k]
        if a.shape != e.shape:
            return f"{k}: shape {a.shape}, expected {e.shape}"
        if e.dtype == np.bool_:
            if a.dtype != np.bool_ or not np.array_equal(a, e):
                return f"{k}: differs from the reference"
            continue
        a = a.astype(np.float64)
        if not np.all(np.isfinite(a)) and np.all(np.isfinite(e)):
            return f"{k}: not finite"
        if not np.allclose(a, e, rtol=RTOL, atol=ATOL):
            return f"{k}: largest difference {float(np.nanmax(np.abs(a - e))):.3g}"
    return None


def expected_outputs(seed: int, names: list[str] | None = None) -> dict[str, dict[str, np.ndarray] | str]:
    """The reference's outputs for the probes (computed in the calling process)."""
    import torch

    import reference

    torch.set_num_threads(1)
    out = {}
    for p in PROBES:
        if names is None or p.name in names:
            with torch.no_grad():
                out[p.name] = p.run(reference, seed)
    return out


# --------------------------------------------------------------------------------------------
# The probe child: python -I -m transformer_spec.probes --impl TARGET
# --------------------------------------------------------------------------------------------
class _ProbeTimeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _ProbeTimeout()


def child_main(argv: list[str] | None = None) -> int:
    import argparse

    from . import forbidden, isolation, loader

    parser = argparse.ArgumentParser(prog="python -m transformer_spec.probes")
    parser.add_argument("--impl", required=True)
    args = parser.parse_args(argv)
    channel = isolation.open_child_channel()  # before the submission is imported
    if channel is None:
        print("transformer_spec.probes: run by tools.grade only (no report channel)", file=sys.stderr)
        return 2
    seed = int(channel.extra["seed"])
    names = list(channel.extra.get("probes", []))
    per_probe = float(channel.extra.get("per_probe_seconds", 20))

    import torch

    torch.set_num_threads(int(channel.extra.get("threads", 1)))
    guard = forbidden.Guard(channel.extra.get("forbidden", list(forbidden.DEFAULT_FORBIDDEN)),
                            paths=lambda: forbidden.submission_paths(args.impl)).install()
    sub = loader.load(args.impl)
    if sub.error is not None:
        channel.send({"kind": "probe-import-error", "error": sub.error})
        channel.close()
        return 0
    signal.signal(signal.SIGALRM, _alarm)
    for name in names:
        probe = BY_NAME.get(name)
        if probe is None:
            continue
        guard.uses.clear()
        try:
            signal.setitimer(signal.ITIMER_REAL, per_probe)
            try:
                torch.manual_seed(0)
                with torch.no_grad():
                    arrays = probe.run(sub.module, seed)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            if guard.uses:
                raise forbidden.ForbiddenAPIError(guard.uses[0].message)
            message = {"kind": "probe", "probe": name, "arrays": encode_arrays(arrays)}
        except _ProbeTimeout:
            message = {"kind": "probe", "probe": name, "error": f"did not finish in {per_probe:g} s"}
        except (Exception, KeyboardInterrupt, SystemExit) as exc:  # whatever the submission raises fails the probe
            text = str(exc).strip().splitlines()
            message = {"kind": "probe", "probe": name, "error": f"{type(exc).__name__}: {text[0][:300] if text else ''}"}
        channel.send(message)
    channel.send({"kind": "probe-done"})
    channel.close()
    return 0


if __name__ == "__main__":
    sys.exit(child_main())
