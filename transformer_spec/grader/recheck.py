"""Hidden re-checks, the class grader's side: the re-check child's program and the parent's judgement.

A re-check (:class:`~transformer_spec.contract.registry.Recheck`, declared by its component in
:mod:`transformer_spec.components` with the helpers of :mod:`transformer_spec.probes.recheck`)
computes some of the contract's outputs on inputs drawn from a secret seed. The submission's numbers
come from a fresh child process with no pytest in it (``python -m transformer_spec.grader.recheck``),
over the authenticated pipe of :mod:`transformer_spec.grader.isolation`, as raw little-endian arrays
in JSON (never pickle). The reference's numbers and the comparison (:func:`judge`) are computed in
the parent, where no submission code runs. What a re-check compares, and why an honest pass never
fails one: :mod:`transformer_spec.probes.recheck`.
"""

from __future__ import annotations

import base64
import math
import sys

import numpy as np

from transformer_spec import layout
from transformer_spec.contract import registry
from transformer_spec.guard import alarm
from transformer_spec.probes.recheck import ATOL, RTOL, by_name

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
    rtol, atol = getattr(expected, "rtol", RTOL), getattr(expected, "atol", ATOL)
    first = getattr(expected, "first", {})
    for k, e in expected.items():
        if k in getattr(expected, "unchecked", ()):
            continue
        if k not in actual:
            return f"{k}: missing"
        a = actual[k]
        if a.shape != e.shape:
            return f"{k}: shape {a.shape}, expected {e.shape}"
        if k in first:
            a, e = a[: first[k]], e[: first[k]]
        if e.dtype == np.bool_ or np.issubdtype(e.dtype, np.integer):
            if a.dtype != e.dtype or not np.array_equal(a, e):
                return f"{k}: {a.tolist() if a.size <= 40 else 'values'}, expected {e.tolist() if e.size <= 40 else 'others'}"
            continue
        a = a.astype(np.float64)
        if not np.all(np.isfinite(a)) and np.all(np.isfinite(e)):
            return f"{k}: not finite"
        if not np.allclose(a, e, rtol=rtol, atol=atol):
            return f"{k}: largest difference {float(np.nanmax(np.abs(a - e))):.3g}"
    return None


SECRET, PUBLIC = "secret", "public"  # a re-check's two runs: its twin on secret inputs, its anchor's own inputs


def seed_of(check: registry.Recheck, mode: str, secret: int) -> int:
    """The seed ``check`` runs at in ``mode``: the batch's secret one, or its anchor's own."""
    if mode == PUBLIC:
        if check.public is None:
            raise ValueError(f"{check.name} has no public replay")
        return check.public
    return secret


def judge(check: registry.Recheck, answer: dict[str, np.ndarray], reference: dict[str, np.ndarray],
          mode: str = SECRET) -> str | None:
    """None when the submission's ``answer`` to ``check`` in ``mode`` is right; else what is wrong.
    A public replay is held to the reference's outputs (what its anchor asserts, more loosely); a
    secret twin to the re-check's ``law`` when it has one, else to the reference's outputs."""
    if mode == SECRET and check.law is not None:
        return check.law(answer, reference)
    return compare(answer, reference)


def run_one(check: registry.Recheck, module, seed: int) -> dict[str, np.ndarray]:
    """``check``'s arrays for ``module`` as the re-check child computes them (torch's global seed
    set, no autograd)."""
    import torch

    torch.manual_seed(0)
    with torch.no_grad():
        return check.run(module, seed)


def disagreement(check: registry.Recheck, module, seed: int, expected: dict[str, np.ndarray],
                 mode: str = SECRET) -> str | None:
    """What the class grader would say of ``module``'s answer to ``check`` in ``mode`` (None: it
    agrees): run in this process as the child runs it, sent through the same encoding, judged
    against ``expected`` (the reference's outputs at the same seed)."""
    try:
        answer = encode_arrays(run_one(check, module, seed_of(check, mode, seed)))
    except Exception as exc:  # noqa: BLE001 - the child reports any exception as the re-check failing
        return f"{type(exc).__name__}: {exc}"
    return judge(check, decode_arrays(answer), expected, mode)


def expected_outputs(seed: int, names: list[str] | None = None,
                     mode: str = SECRET) -> dict[str, dict[str, np.ndarray] | str]:
    """The reference's outputs for the re-checks (computed in the calling process): at ``seed``, or
    for ``mode=PUBLIC`` at each re-check's public seed (those that have one)."""
    import importlib

    import torch

    reference = importlib.import_module(layout.REFERENCE_MODULE)
    torch.set_num_threads(1)
    out = {}
    for p in registry.rechecks():
        if (names is None or p.name in names) and (mode == SECRET or p.public is not None):
            out[p.name] = run_one(p, reference, seed_of(p, mode, seed))
    return out


# --------------------------------------------------------------------------------------------
# The re-check child: python -I -m transformer_spec.grader.recheck --impl TARGET
# --------------------------------------------------------------------------------------------
def _failed(name: str, mode: str, exc: BaseException) -> dict:
    """The child's message for a re-check that raised ``exc``."""
    from transformer_spec.guard import forbidden
    from transformer_spec.submission import loader

    text = str(exc).strip().splitlines()
    return {"kind": "recheck", "name": name, "mode": mode,
            "error": f"{type(exc).__name__}: {text[0][:300] if text else ''}",
            "missing": isinstance(exc, loader.NotSubmitted),  # a name the submission does not define
            "forbidden": isinstance(exc, forbidden.ForbiddenAPIError)}


def child_main(argv: list[str] | None = None) -> int:
    import argparse

    from transformer_spec import files, profiles
    from transformer_spec.grader import isolation
    from transformer_spec.guard import exits, forbidden, forbidden_ops
    from transformer_spec.pytest_plugin import stubs
    from transformer_spec.submission import loader

    parser = argparse.ArgumentParser(prog="python -m transformer_spec.grader.recheck", allow_abbrev=False)
    parser.add_argument("--impl", required=True)
    args = parser.parse_args(argv)
    channel = isolation.open_child_channel()  # before the submission is imported
    if channel is None:
        print("transformer_spec.grader.recheck: run by tools.grade only (no report channel)", file=sys.stderr)
        return 2
    seed = int(channel.extra["seed"])
    runs = [(str(n), SECRET) for n in channel.extra.get("rechecks", [])] + \
        [(str(n), PUBLIC) for n in channel.extra.get("public", [])]
    seconds = float(channel.extra.get("seconds_each", 20))

    import torch

    torch.set_num_threads(int(channel.extra.get("threads", 1)))
    guard = forbidden.Guard(channel.extra.get("forbidden", list(forbidden.DEFAULT_FORBIDDEN)),
                            paths=lambda: files.submission_paths(args.impl)).install()
    forbidden_ops.seal()  # no oracle here: forbidden.oracle() opened by the submission allows nothing
    seal = guard.seal  # as installed: the submission can reach the guard, not this frame's local
    profile = profiles.get(str(channel.extra.get("profile", profiles.DEFAULT)))  # the course API graded
    profiles.use(profile)
    sub = loader.load(args.impl, profile=profile)
    seal = guard.restore(seal)  # removed by the import: put back (a use costs where it is made)
    if sub.error is not None:
        channel.send({"kind": "recheck-import-error", "error": sub.error})
        channel.close()
        return 0
    if channel.extra.get("stubs"):  # the names that are stubs as loaded (transformer_spec/grader/rechecks.py: a proof)
        try:
            with alarm.time_limit(seconds, "reading the stubs"), exits.no_process_exit():
                found = stubs.loaded_stub_names(sub, [str(p) for p in files.submission_paths(args.impl)], profile)
            channel.send({"kind": "stubs", "names": sorted(found)})
        except (Exception, KeyboardInterrupt, SystemExit):  # noqa: BLE001 - no answer proves nothing
            pass
        guard.uses.clear()
    known = by_name()
    for name, mode in runs:
        check = known.get(name)
        if check is None or (mode == PUBLIC and check.public is None):
            continue
        try:
            with alarm.time_limit(seconds, f"the re-check {name}"), exits.no_process_exit():
                arrays = run_one(check, sub, seed_of(check, mode, seed))  # a missing name raises loader.NotSubmitted
            message = {"kind": "recheck", "name": name, "mode": mode, "arrays": encode_arrays(arrays)}
        except alarm.Expired:
            message = {"kind": "recheck", "name": name, "mode": mode, "error": f"did not finish in {seconds:g} s"}
        except (Exception, KeyboardInterrupt, SystemExit) as exc:  # whatever the submission raises fails it
            message = _failed(name, mode, exc)
        seal = guard.check_seal(seal, f"during the re-check {name}")
        if guard.uses and not message.get("forbidden"):  # a use the submission caught, or the guard removed
            message = _failed(name, mode, forbidden.ForbiddenAPIError(guard.uses[0].message))
        channel.send(message)
        guard.uses.clear()
    channel.send({"kind": "recheck-done"})
    channel.close()
    return 0


if __name__ == "__main__":
    from transformer_spec.guard.fast_exit import exit_now

    # Everything is sent; skip the interpreter's teardown (~1 s of freeing torch) and whatever
    # exit handlers the submission registered: the parent waits for this process to end.
    exit_now(child_main())
