"""Hidden re-checks: the class grader's own check of what a grading child says passed.

A re-check (:class:`~transformer_spec.registry.Recheck`, declared by its component in
:mod:`transformer_spec.components`) computes some of the contract's outputs on inputs drawn from a
secret seed. The submission's numbers come from a fresh child process with no pytest in it
(``python -m transformer_spec.recheck``), over the authenticated pipe of
:mod:`transformer_spec.isolation`, as raw little-endian arrays in JSON (never pickle). The
reference's numbers and the comparison are computed in the parent, where no submission code runs.

Each re-check mirrors one parameter case of a golden test (its *anchor*): the same shapes, masks,
constructor arguments and dtype (float64), with other random values. A submission that truly
passed the anchor computes the same function, so it passes the re-check too; when the child
claims the anchor passed and the re-check disagrees, the claim is false (``tools.grade`` then
gives the component 0 and the status ``tampering``). A component without re-checks says why in
its declaration (``why_no_rechecks``).
"""

from __future__ import annotations

import base64
import math
import sys

import numpy as np

from . import alarm, inputs, registry, testing

ORACLE = "spec_tests/test_torch_oracle.py::"
RTOL, ATOL = 1e-6, 1e-8  # float64; gross disagreement only, so an honest float64 pass never fails


# --------------------------------------------------------------------------------------------
# Helpers of the components' re-checks
# --------------------------------------------------------------------------------------------
def as_numpy(**arrays) -> dict[str, np.ndarray]:
    return {k: v.detach().cpu().numpy() for k, v in arrays.items()}


def with_weights(module, shapes, seed: int):
    """``module`` in float64 and eval mode, with seeded weights under the contract's names."""
    return testing.set_parameters(module.double(), testing.seeded_parameters(shapes, seed)).eval()


def mha_masks(length: int, seed: int, self_attention: bool) -> dict:
    """The oracle tests' masks of multi-head attention, by name (causal only for self-attention)."""
    s = inputs.ORACLE
    return {"none": None, "lq_lk": inputs.random_mask(s.lq, length, seed=seed + 9),
            "padding": inputs.padding(length, [length, 3]),
            "causal": inputs.causal(s.lq) if self_attention else None}


def by_name() -> dict[str, registry.Recheck]:
    return {r.name: r for r in registry.rechecks()}


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
    """The reference's outputs for the re-checks (computed in the calling process)."""
    import torch

    import reference

    torch.set_num_threads(1)
    out = {}
    for p in registry.rechecks():
        if names is None or p.name in names:
            with torch.no_grad():
                out[p.name] = p.run(reference, seed)
    return out


# --------------------------------------------------------------------------------------------
# The re-check child: python -I -m transformer_spec.recheck --impl TARGET
# --------------------------------------------------------------------------------------------
def child_main(argv: list[str] | None = None) -> int:
    import argparse

    from . import forbidden, isolation, loader

    parser = argparse.ArgumentParser(prog="python -m transformer_spec.recheck")
    parser.add_argument("--impl", required=True)
    args = parser.parse_args(argv)
    channel = isolation.open_child_channel()  # before the submission is imported
    if channel is None:
        print("transformer_spec.recheck: run by tools.grade only (no report channel)", file=sys.stderr)
        return 2
    seed = int(channel.extra["seed"])
    names = list(channel.extra.get("rechecks", []))
    seconds = float(channel.extra.get("seconds_each", 20))

    import torch

    torch.set_num_threads(int(channel.extra.get("threads", 1)))
    guard = forbidden.Guard(channel.extra.get("forbidden", list(forbidden.DEFAULT_FORBIDDEN)),
                            paths=lambda: forbidden.submission_paths(args.impl)).install()
    sub = loader.load(args.impl)
    if sub.error is not None:
        channel.send({"kind": "recheck-import-error", "error": sub.error})
        channel.close()
        return 0
    known = by_name()
    for name in names:
        check = known.get(name)
        if check is None:
            continue
        guard.uses.clear()
        try:
            with alarm.time_limit(seconds, f"the re-check {name}"):
                torch.manual_seed(0)
                with torch.no_grad():
                    arrays = check.run(sub.module, seed)
            if guard.uses:
                raise forbidden.ForbiddenAPIError(guard.uses[0].message)
            message = {"kind": "recheck", "name": name, "arrays": encode_arrays(arrays)}
        except alarm.Expired:
            message = {"kind": "recheck", "name": name, "error": f"did not finish in {seconds:g} s"}
        except (Exception, KeyboardInterrupt, SystemExit) as exc:  # whatever the submission raises fails it
            text = str(exc).strip().splitlines()
            message = {"kind": "recheck", "name": name, "error": f"{type(exc).__name__}: {text[0][:300] if text else ''}"}
        channel.send(message)
    channel.send({"kind": "recheck-done"})
    channel.close()
    return 0


if __name__ == "__main__":
    sys.exit(child_main())
